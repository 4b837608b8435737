"""Sample submissions for chapter 01, built from the chapter itself whenever they are needed.

Every sample is a recipe applied to the released student notebook (and, for code that works,
to the instructor's solution code), never a stored copy: a stored "correct" submission would be
a second copy of the solutions that drifts from the chapter, and a stored broken one would
drift too (its test cells would no longer match the release, and the grader would rightly
report them as tampered). ``write_zip`` lays the cohort out as an LMS download: Canvas-style
file names at the top, one Moodle-style folder, and a file whose owner cannot be known.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import course

CHAPTER = "01_parameters"
NOTEBOOK = "parameters.ipynb"


@dataclass(frozen=True)
class Sample:
    """One file of the sample cohort: its name in the LMS download, what it shows, its bytes."""

    filename: str
    shows: str
    build: Callable[[], bytes]


def release(chapter: str = CHAPTER, name: str = NOTEBOOK) -> dict:
    """The student notebook of a chapter (01 unless named), as released."""
    return json.loads((course.NOTEBOOKS / chapter / name).read_text(encoding="utf-8"))


def solutions(chapter: str = CHAPTER, name: str = NOTEBOOK) -> dict[str, str]:
    """The instructor's answer for every answer cell of a chapter (01 unless named), solution
    marker lines removed."""
    answers = {}
    source = json.loads((course.SOLUTIONS / chapter / name).read_text(encoding="utf-8"))
    for cell in source["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            lines = "".join(cell["source"]).splitlines()
            answers[meta["grade_id"]] = "\n".join(line for line in lines if "### " not in line)
    return answers


def in_body(code: str, lines: str) -> str:
    """Insert ``lines`` (indented 4) at the top of the function body, after its docstring."""
    head, found, tail = code.partition('"""\n')
    if not found:
        raise ValueError(f"sample recipe: no docstring to insert after in {code[:60]!r}")
    body = "".join(f"    {line}\n" for line in lines.splitlines())
    return head + found + body + tail


def notebook(answers: dict[str, str], edit: Callable[[list[dict]], None] | None = None,
             chapter: str = CHAPTER, name: str = NOTEBOOK) -> bytes:
    """The release of a chapter (01 unless named) with ``answers`` put into their cells, then
    ``edit`` applied to the cells."""
    nb = release(chapter, name)
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    if edit:
        edit(nb["cells"])
    return json.dumps(nb, indent=1, ensure_ascii=False).encode()


def _solved(**changes: str) -> dict[str, str]:
    answers = solutions()
    for grade_id, code in changes.items():
        if grade_id not in answers:
            raise KeyError(f"sample recipe: chapter {CHAPTER} has no answer cell {grade_id}")
        answers[grade_id] = code
    return answers


def _swap(code: str, old: str, new: str) -> str:
    if old not in code:
        raise ValueError(f"sample recipe: {old!r} is no longer in the solution {code[:60]!r}")
    return code.replace(old, new, 1)


def _cell(cells: list[dict], grade_id: str) -> int:
    return next(i for i, c in enumerate(cells)
                if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def _tamper(cells: list[dict]) -> None:
    cells[_cell(cells, "test_linear_params")]["source"] = "pass  # all good"
    del cells[_cell(cells, "test_conv2d_params")]


def _delete_answer(cells: list[dict]) -> None:
    del cells[_cell(cells, "attention_params")]


def _partial() -> dict[str, str]:
    sol = solutions()
    return _solved(
        linear_params=_swap(sol["linear_params"], " + (out_features if bias else 0)", ""),
        parameter_memory_bytes=_swap(sol["parameter_memory_bytes"], "itemsize", "itemsize * 8"))


def _warnings() -> dict[str, str]:
    answers = {gid: "import warnings\n" + in_body(
        code, 'warnings.warn("float16 is slow on CPUs", RuntimeWarning)')
        for gid, code in solutions().items() if "def " in code}
    answers["linear_params"] = "import sys\n" + in_body(
        solutions()["linear_params"], 'print("debug: counting", file=sys.stderr)')
    return _solved(**answers)


def _loop(grade_id: str, loop: str) -> Callable[[], bytes]:
    return lambda: notebook(_solved(**{grade_id: in_body(solutions()[grade_id], loop)}))


def _after(grade_id: str, code: str) -> Callable[[], bytes]:
    return lambda: notebook(_solved(**{grade_id: solutions()[grade_id] + "\n" + code}))


STUBBORN = """import time
while True:
    try:
        time.sleep(0.1)
    except KeyboardInterrupt:
        pass"""
BOMB = "_blocks = [np.ones(2**24) for _ in range(24)]  # 24 x 128 MiB = 3 GiB, touched"

SAMPLES = [
    Sample("lovelaceada_1001_5001_parameters.ipynb", "every exercise solved",
           lambda: notebook(solutions())),
    Sample("turingalan_1002_5002_parameters.ipynb", "first hand-in, superseded by the next",
           lambda: notebook({})),
    Sample("turingalan_LATE_1002_5102_parameters-1.ipynb",
           "late re-submission: two classic mistakes (no bias; bits for bytes)",
           lambda: notebook(_partial())),
    Sample("hoppergrace_1003_5003_parameters.ipynb", "the untouched student notebook",
           lambda: notebook({})),
    Sample("babbagecharles_1004_5004_parameters.ipynb", "endless loop in conv2d_params",
           _loop("conv2d_params", "while True:\n    pass")),
    Sample("knuthdonald_1005_5005_parameters.ipynb",
           "endless loop in attention_params that swallows the interrupt",
           _loop("attention_params", STUBBORN)),
    Sample("liskovbarbara_1006_5006_parameters.ipynb",
           "memory bomb in parameter_memory_bytes (3 GiB)",
           _loop("parameter_memory_bytes", BOMB)),
    Sample("ritchiedennis_1007_5007_parameters.ipynb", "os._exit(3) left in an answer cell",
           _after("linear_params", "import os\nos._exit(3)")),
    Sample("thompsonken_1008_5008_parameters.ipynb", "sys.exit() at the end of an answer cell",
           _after("count_model_parameters", "import sys\nsys.exit('done')")),
    Sample("kernighanbrian_1009_5009_parameters.ipynb", "a segfault in conv2d_params",
           _loop("conv2d_params", "import ctypes\nctypes.string_at(0)")),
    Sample("hamiltonmargaret_1010_5010_parameters.ipynb",
           "a test cell replaced by `pass` (and a wrong answer), another test cell deleted",
           lambda: notebook(_solved(linear_params=_swap(
               solutions()["linear_params"], "return ", "return 0 * ")), _tamper)),
    Sample("perlmanradia_1011_5011_parameters.ipynb", "the attention_params answer cell deleted",
           lambda: notebook(solutions(), _delete_answer)),
    Sample("dijkstraedsger_1012_5012_parameters.ipynb", "an answer cell printing 5 MB",
           _after("count_model_parameters", 'print("spam " * 1_000_000)')),
    Sample("allenfrances_1013_5013_parameters.ipynb",
           "library warnings on stderr in four tests, a debug print to stderr in the fifth "
           "(full marks: the grader decides each test, whatever the student's code prints)",
           lambda: notebook(_warnings())),
    Sample("bernerslee_1015_5015_parameters.ipynb", "corrupt JSON (cut short)",
           lambda: notebook(solutions())[:5000]),
    Sample("goldbergadele_1016_5016_parameters.ipynb", "an empty file", lambda: b""),
    Sample("mccarthyjohn_1017_5017_parameters.ipynb", "a Python script, not a notebook",
           lambda: (solutions()["linear_params"] + "\n").encode()),
    Sample("李雷_1018_5018_Untitled1.ipynb", "a renamed notebook, and a non-ASCII name",
           lambda: notebook(_partial())),
    Sample("Zoë Ñúñez_2001_assignsubmission_file_/parameters.ipynb",
           "a Moodle folder with a non-ASCII name", lambda: notebook(solutions())),
    Sample("wozniaksteve_1021_5021_parameters.ipynb",
           "count_model_parameters calls tinyprof's own count_parameters",
           lambda: notebook(_solved(count_model_parameters=(
               "import tinyprof\n\ndef count_model_parameters(model):\n"
               "    return tinyprof.count_parameters(model)")))),
    Sample("wozniaksteve_1021_5021_report.pdf", "a PDF handed in with the notebook",
           lambda: b"%PDF-1.4\n% not a notebook\n"),
    Sample("parameters.ipynb", "a notebook whose owner the file name does not say",
           lambda: notebook({})),
]


def mixed_cohort(root: Path, size: int) -> Path:
    """``size`` chapter-01 submissions under ``root``, one folder per student, solved, partly
    solved and untouched in turn (the cohort the grading benchmarks time); return ``root``."""
    kinds = {"solved": notebook(solutions()), "partial": notebook(_partial()),
             "blank": notebook({})}
    for i in range(size):
        kind = list(kinds)[i % len(kinds)]
        folder = root / f"student{i:03d}_{kind}" / CHAPTER
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_bytes(kinds[kind])
    return root


def write_zip(path: Path) -> Path:
    """Write the sample cohort as an LMS zip at ``path``; return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for sample in SAMPLES:
            archive.writestr(sample.filename, sample.build())
    return path


def write_canvas_gradebook(path: Path) -> Path:
    """A Canvas gradebook export for the sample cohort (Canvas's layout: UTF-8 with a byte-order
    mark, CRLF, a "Points Possible" row), with a row for every Canvas user who handed something
    in and one who never did; the demo exports into it. Returns ``path``."""
    from ..intake.collect import CANVAS

    users = {}
    for sample in SAMPLES:
        found = CANVAS.match(sample.filename)
        if found:
            users.setdefault(found["uid"], found["name"])
    users["1099"] = "Never, Submitted"
    lines = ["Student,ID,SIS User ID,SIS Login ID,Section,Parameters (48213),Current Score,"
             "Final Score", "    Points Possible,,,,,12.00,(read only),(read only)"]
    lines += [f'"{name}",{uid},S{uid},{name.split(",")[0].lower()}@uni.example,Section A,,,'
              for uid, name in sorted(users.items())]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))
    return path
