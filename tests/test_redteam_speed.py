"""The red team's cheats and honest alternatives (tests/redteam_speed.py), graded for real.

Each cheat's answer cell runs in the grader's sandboxed kernel (the Execute preprocessor of
``python -m autograder grade``: bubblewrap, a control group, the baseline in a clean kernel of
its own) followed by the chapter's own speed test cell, hidden tests included, decided by the
judge; and the notebook of chapter 08 with that answer cell is put through the static review
the grading parent runs. A cheat scores 0 when the speed test fails or the review flags the
submission; the test names which. Every honest alternative must pass its speed test unflagged;
they share one kernel (each under a name of its own, with the chapter's test cell renamed to
match), so that the file costs one grading for all of them.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from chapters import SOLUTIONS
from nbformat.v4 import new_code_cell, new_notebook
from redteam_speed import CHEATS, HONEST, SETUP, answer, target
from traitlets.config import Config

from autograder import samples
from autograder.intake.review import review
from autograder.run.execute import GraderExecute

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")]

CHAPTER, NOTEBOOK = "08_faster", "faster.ipynb"
#: The chapter's speed test cell each graded function faces (fast_step: its hardest tier).
SPEED_CELL = {"gelu_with_grad": "speed_gelu_with_grad", "fast_step": "speed_fast_step_6x"}
#: What the chapter's set-up cell imports for its tests (the judge's prelude has np, tp and
#: expect only).
TEST_IMPORTS = ("from tinyprof.faster import pipeline\n"
                "from tinyprof.testing import expect, expect_faster, reference_unavailable, "
                "which\n")
#: Wall-clock backstop per cell: a speed test of fast_step at its 6× tier times 25 rounds of a
#: 0.1 s baseline on a machine shared with other graders.
CELL_TIMEOUT_S = 600


def chapter_test(function: str, renamed: str | None = None) -> str:
    """The source of the chapter's speed test cell for ``function`` (hidden tests included),
    with the function renamed to ``renamed`` when given."""
    source = json.loads((SOLUTIONS / CHAPTER / NOTEBOOK).read_text(encoding="utf-8"))
    cell = next(c for c in source["cells"]
                if c["metadata"].get("nbgrader", {}).get("grade_id") == SPEED_CELL[function])
    text = TEST_IMPORTS + "".join(cell["source"])
    return re.sub(rf"\b{function}\b", renamed, text) if renamed else text


def grade(answer_source: str, tests: list[str], folder: Path) -> list[dict]:
    """The grader's record of each test cell of a notebook made of ``answer_source`` then
    ``tests``, run once by the grader's Execute preprocessor in one sandboxed kernel."""
    cells = [new_code_cell(answer_source)]
    for number, test in enumerate(tests):
        cell = new_code_cell(test)
        cell.metadata["nbgrader"] = {"grade": True, "solution": False,
                                     "grade_id": f"speed_{number}", "points": 2,
                                     "locked": True, "schema_version": 3}
        cells.append(cell)
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    GraderExecute(config=Config(), timeout=CELL_TIMEOUT_S).preprocess(
        nb, {"metadata": {"path": str(folder)}})
    return [{**cell.metadata.get("tinyprof", {}),
             "outputs": [nbformat.from_dict(o) for o in cell.outputs]} for cell in nb.cells[1:]]


def review_flags(name: str) -> list[str]:
    """What the static review of the grading parent says of chapter 08 with cheat ``name``'s
    code in the answer cell of the function it targets."""
    answers = {**samples.solutions(CHAPTER, NOTEBOOK), target(name): CHEATS[name]}
    submitted = json.loads(samples.notebook(answers, chapter=CHAPTER, name=NOTEBOOK))
    release = samples.release(CHAPTER, NOTEBOOK)
    source = json.loads((SOLUTIONS / CHAPTER / NOTEBOOK).read_text(encoding="utf-8"))
    return [str(found) for found in review(submitted, release, source)]


def printed(record: dict) -> str:
    """What the test cell printed (the grader's tier line), on one line."""
    text = "".join(o.get("text", "") for o in record["outputs"] if o.get("output_type") == "stream")
    return " ".join(text.split())


def verdict(record: dict) -> dict:
    return record.get("verdict", {"passed": False, "message": "no verdict recorded"})


def describe(name: str, record: dict, flags: list[str]) -> str:
    """One paragraph for the report: the verdict, the grader's message and numbers, the flags."""
    found = verdict(record)
    lines = [f"[{name}] speed test {'PASSED' if found['passed'] else 'failed'}"
             f" ({found.get('ename', '')})",
             f"  printed: {printed(record)[:600]}",
             f"  message: {' '.join(str(found.get('message', '')).split())[:600]}",
             f"  review:  {flags if flags else 'not flagged'}"]
    return "\n".join(lines)


#: Cheats the check does not stop yet, and what it misses (each an xfail, strict: when the check
#: closes the gap, the test says so). The two that kept the points at the first try moved half a
#: slow GELU's work to a different part of each round (per-part medians did not move); the
#: candidate is now also charged the median of each round's summed excess.
MISSED: dict[str, str] = {
}


def _cheats() -> list:
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, raises=AssertionError,
                                                      reason=MISSED[name]))
            if name in MISSED else name for name in sorted(CHEATS)]


@pytest.mark.parametrize("name", _cheats())
def test_no_cheat_keeps_the_speed_points(name, tmp_path):
    """A cheat scores 0: its speed test fails (the grader's measurement, or the runtime check's
    TamperingDetected), or the static review flags the submission."""
    [record] = grade(answer(name), [chapter_test(target(name))], tmp_path)
    flags = review_flags(name)
    report = describe(name, record, flags)
    print(report)
    assert not verdict(record)["passed"] or flags, (
        f"expected the cheat to lose {SPEED_CELL[target(name)]}'s points (a failed speed test or "
        f"a flag of the review), because its speed is not the work of its function:\n{report}")


def test_every_honest_alternative_keeps_the_speed_points(tmp_path):
    """Each honest alternative passes the chapter's speed test for its function, in one kernel
    (each under a name of its own), and the review has nothing to say about it."""
    names = sorted(HONEST)
    renamed = {name: f"honest_{number}" for number, name in enumerate(names)}
    code, tests = [SETUP], []
    for name in names:
        function = target(name)
        body = answer(name)[len(SETUP):]
        code.append(re.sub(rf"\b{function}\b", renamed[name], body))
        tests.append(chapter_test(function, renamed[name]))
    records = grade("\n\n".join(code), tests, tmp_path)
    failed = []
    for name, record in zip(names, records):
        answers = {**samples.solutions(CHAPTER, NOTEBOOK), target(name): answer(name)[len(SETUP):]}
        submitted = json.loads(samples.notebook(answers, chapter=CHAPTER, name=NOTEBOOK))
        flags = [str(f) for f in review(submitted, samples.release(CHAPTER, NOTEBOOK),
                                        json.loads((SOLUTIONS / CHAPTER / NOTEBOOK).read_text(
                                            encoding="utf-8")))]
        report = describe(name, record, flags)
        print(report)
        if not verdict(record)["passed"] or flags:
            failed.append(report)
    assert not failed, ("expected every honest alternative to keep its speed points, unflagged "
                        "(different correct code that is faster):\n" + "\n".join(failed))
