"""``python -m autograder publish OUT``: the student-facing repository an instructor pushes.

OUT receives what students need to run the chapters on Binder, Colab or their own machine, and
nothing else:

* ``notebooks/`` (released from solutions/ first, so they are current), ``tinyprof/`` (with its
  data) and a ``pyproject.toml`` without the instructors' pytest, nbval and ruff settings;
* the book's sources and configuration (``book/`` without the instructors' page,
  ``_config.yml``, ``_toc.yml``), and ``book/requirements.txt`` for whoever builds the site;
* a lean environment for Binder: ``requirements.txt`` (the chapters' packages, not
  jupyter-book, nbgrader, pytest or ruff) and ``runtime.txt`` (the Python version);
* a README for students, whose local set-up is the *How to run a chapter* page's, word for word,
  and a ``.gitignore`` for what a student's machine and the chapters write.

Never ``solutions/``, ``autograder/``, ``tests/``, ``benchmarks/``, gradebooks or submissions.
Before it finishes, every file in OUT is searched for the text of every solution line and
hidden-test line (as a substring of the whole file, so a one-line ``searchindex.js`` is
searched too) and for the nbgrader markers; publishing is refused, naming the file, on a match.
A ``.git`` folder already in OUT is kept, so publishing again updates a checkout to commit.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from .. import course
from ..cells import marked_lines, source
from .home import point_at, read_home
from .notebooks import MARKERS, release

#: Packages a student needs to run every chapter (Binder installs these; versions as the
#: course's own requirements.txt). The digits of chapter 6 ship inside tinyprof. Chapter 7 runs
#: a torch.nn model, so torch is here too (Colab has it already; tinyprof itself never needs
#: it: it is the optional extra tinyprof[torch]). Chapter 10 runs memray (not on Windows) and
#: objgraph where they are installed.
STUDENT_PACKAGES = ("numpy>=1.23", "matplotlib>=3.5", "ipywidgets>=7.7", "ipykernel>=6",
                    "jupyterlab>=4,<5", "torch==2.13.0", 'memray>=1.11; sys_platform != "win32"',
                    "objgraph>=3.5")
#: Where pip finds torch's CPU-only build. On Linux the torch wheel on PyPI depends on several
#: GB of CUDA libraries that Binder, which has no GPU, would download and store on every build;
#: the CPU build of the same version (2.13.0+cpu, which ``torch==2.13.0`` admits and pip
#: prefers) is about 200 MB. Named in the student requirements only: this repository's
#: machines install torch from their own wheel cache.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: Packages only instructors and developers need: never in the published environment.
INSTRUCTOR_PACKAGES = ("jupyter-book", "nbgrader", "nbval", "pytest", "ruff", "nbclient", "dask",
                       "distributed", "transformers")
INSTRUCTOR_PAGE = "book/instructors"
#: The mark every page of the cohort report carries (``python -m autograder report``: grades
#: and students' code); publishing refuses any file that holds it.
PRIVATE_MARK = "tinyprof cohort report: private to the instructors, never published"
#: Files the chapters write next to themselves (05 and 07: a Chrome trace; 06: its benchmark
#: records and report; 09: its data set and two traces); the student repository's git ignores
#: them, as this repository's does.
CHAPTER_OUTPUTS = ("gpt_step_trace.json", "baseline.json", "current.json", "benchmark_report.md",
                   "gpt_torch_trace.json", "digits_png/", "pipeline_trace.json",
                   "profiler_trace.json")
#: What git ignores in the student repository: environments, caches, builds, chapter outputs.
STUDENT_GITIGNORE = (".venv/", "__pycache__/", "*.egg-info/", ".ipynb_checkpoints/", "build/",
                     "dist/", "_build/") + CHAPTER_OUTPUTS
#: pyproject.toml tables that configure the instructors' tools (the tests, nbval over
#: solutions/, ruff): left out of the student repository, which has none of them.
INSTRUCTOR_TABLES = ("tool.pytest", "tool.ruff")
#: The page whose "On your own machine" section is also the student README's.
HOW_TO_RUN = "book/how_to_run.md"
#: Lines shorter than this are too common to mean a leak (as in the release check).
SHORTEST_SECRET = 25
STAMP = ".tinyprof-published"


class PublishLeakError(RuntimeError):
    """A file that would be published holds solution or hidden-test text."""


def publish(out: Path, root: Path = course.REPO_ROOT, *, release_first: bool = True
            ) -> list[Path]:
    """Write the student repository of the course at ``root`` into ``out``; returns the files
    written. ``release_first`` regenerates notebooks/ from solutions/ before copying them."""
    out = Path(out).resolve()
    if out == root.resolve() or root.resolve() in out.parents:
        raise ValueError(f"publish into a folder outside the course, not {out}")
    _prepare(out)
    if release_first:
        release()
    written = []
    for original in _student_files(root):
        target = out / original.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(original, target)
        written.append(target)
    written += _write_generated(out, root)
    (out / STAMP).write_text("written by python -m autograder publish\n", encoding="utf-8")
    check_no_leaks(out, root)
    return sorted(written)


def _prepare(out: Path) -> None:
    """An empty OUT, or one written by an earlier publish (kept: .git; cleared: the rest)."""
    if out.exists():
        existing = [p for p in out.iterdir() if p.name != ".git"]
        if existing and not (out / STAMP).exists():
            raise FileExistsError(f"{out} is not empty and was not written by publish: choose "
                                  "an empty folder (or a checkout of the student repository)")
        for path in existing:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _student_files(root: Path) -> list[Path]:
    files = sorted(root.glob("notebooks/*/*.ipynb"))
    files += sorted(p for p in (root / "tinyprof").rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    files += [p for p in sorted((root / "book").rglob("*.md"))
              if p.with_suffix("").relative_to(root).as_posix() != INSTRUCTOR_PAGE]
    files += sorted((root / "book" / "_ext").glob("*.py"))
    files += sorted((root / "book" / "_static").glob("*"))
    return files + [root / "runtime.txt", root / "_config.yml"]


def _write_generated(out: Path, root: Path) -> list[Path]:
    """The student README, the lean requirements, the table of contents without the
    instructors' page, and book pages without links to it."""
    files = {
        "requirements.txt": "# What a student needs to run the chapters (Binder installs this).\n"
                            "# torch: the CPU build, from its own index (no GPU on Binder).\n"
                            f"--extra-index-url {TORCH_CPU_INDEX}\n"
                            + "\n".join((".",) + STUDENT_PACKAGES) + "\n",
        "book/requirements.txt": "# To build the course site from this repository.\n"
                                 "-r ../requirements.txt\njupyter-book>=1.0.4,<2\n",
        "_toc.yml": _student_toc(root),
        "README.md": _student_readme(root),
        "pyproject.toml": student_pyproject(root),
        ".gitignore": "\n".join(STUDENT_GITIGNORE) + "\n",
    }
    for page in (out / "book").rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        kept = "\n".join(line for line in text.splitlines() if "{doc}`instructors`" not in line)
        page.write_text(kept + "\n", encoding="utf-8")
    written = []
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def _student_toc(root: Path) -> str:
    lines = (root / "_toc.yml").read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if INSTRUCTOR_PAGE not in line) + "\n"


def _student_readme(root: Path) -> str:
    home = read_home(root)
    chapters = sorted(root.glob("notebooks/*/*.ipynb"))
    rows = "\n".join(
        f"| {_title(p)} | [Binder]({home.binder(_rel(p, root))}) | "
        f"[Colab]({home.colab(_rel(p, root))}) |" for p in chapters)
    return f"""# tinyprof: profiling ML systems, measured

The chapters of the tinyprof course. Each one is a Jupyter notebook: read, run the cells, and fill
in every cell that says `YOUR CODE HERE`; the test cell after it tells you whether you are done.

| chapter | run on Binder | run on Colab |
|---|---|---|
{rows}

Binder gives you 1 GB of memory guaranteed (2 GB at most) and forgets your work when the session
ends: download your notebook (*File → Download*) before you close the tab. Colab opens only the
notebook; its first cell installs tinyprof.

{local_setup(root)}"""


def local_setup(root: Path = course.REPO_ROOT) -> str:
    """The "On your own machine" section of *How to run a chapter*, with its links at the
    course's home: the student README repeats it, so the two can never disagree."""
    page = (root / HOW_TO_RUN).read_text(encoding="utf-8")
    found = re.search(r"^## On your own machine\n(.*?)(?=^## |\Z)", page, re.S | re.M)
    if not found:
        raise ValueError(f"{root / HOW_TO_RUN}: no '## On your own machine' section to put "
                         "in the student README")
    return "## On your own machine\n" + point_at(found.group(1), read_home(root))


def student_pyproject(root: Path = course.REPO_ROOT) -> str:
    """The course's pyproject.toml without the tables of INSTRUCTOR_TABLES (each ``[table]``
    header and every line up to the next one)."""
    kept, keep = [], True
    for line in (root / "pyproject.toml").read_text(encoding="utf-8").splitlines():
        header = re.match(r"\[+([^\]]+)\]+\s*$", line)
        if header:
            keep = not header.group(1).strip().startswith(INSTRUCTOR_TABLES)
        if keep:
            kept.append(line)
    return "\n".join(kept).rstrip() + "\n"


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _title(notebook: Path) -> str:
    first = json.loads(notebook.read_text(encoding="utf-8"))["cells"][0]
    heading = source(first).splitlines()[0]
    return heading.lstrip("# ").strip()


def secret_lines(root: Path = course.REPO_ROOT) -> tuple[set[str], set[str]]:
    """(lines to look for, lines left out): every solution and hidden-test line of at least
    25 characters, minus those that are public anyway because the student notebooks or the
    library's own source contain them (generic lines such as ``x = np.asarray(...)``)."""
    lines = set().union(*(marked_lines(p, "SOLUTION|HIDDEN TESTS", SHORTEST_SECRET)
                          for p in sorted(root.glob("solutions/*/*.ipynb"))))
    public = "\n".join(p.read_text(encoding="utf-8") for p in (root / "tinyprof").rglob("*.py"))
    public += "\n".join(_notebook_text(p) for p in root.glob("notebooks/*/*.ipynb"))
    generic = {line for line in lines if line in public}
    return lines - generic, generic


def _notebook_text(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join(source(cell) for cell in cells)


def _searchable(path: Path) -> str:
    """A file's text as a reader or a script would see it: raw, with string escapes undone (a
    quote inside a JSON or JavaScript string is escaped in the raw file), with HTML tags
    removed, and a notebook's cell sources decoded."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    unescaped = raw.replace('\\"', '"').replace("\\'", "'").replace("\\n", "\n")
    text = "\n".join((raw, unescaped, re.sub(r"<[^>]+>", "", raw)))
    if path.suffix == ".ipynb":
        try:
            text += "\n" + _notebook_text(path)
        except (ValueError, KeyError, TypeError):
            pass  # not a notebook after all: its raw text is searched
    return text


def check_no_leaks(out: Path, root: Path = course.REPO_ROOT) -> None:
    """Raise PublishLeakError naming the file and the line if anything in ``out`` holds a
    solution line, a hidden-test line or an nbgrader marker."""
    secrets, _ = secret_lines(root)
    for path in sorted(p for p in out.rglob("*") if p.is_file() and ".git" not in p.parts):
        text = _searchable(path)
        if PRIVATE_MARK in text:
            raise PublishLeakError(f"{path}: would publish a cohort report (grades and "
                                   "students' code); nothing was pushed. Remove it and publish "
                                   "again")
        found = [m for m in MARKERS if m in text] or [s for s in secrets if s in text]
        if found:
            raise PublishLeakError(f"{path}: would publish {found[0]!r} (solution or hidden-test "
                                   "text); nothing was pushed. Remove it and publish again")


__all__ = ["CHAPTER_OUTPUTS", "INSTRUCTOR_PACKAGES", "PRIVATE_MARK", "PublishLeakError",
           "STUDENT_PACKAGES", "check_no_leaks", "local_setup", "publish", "secret_lines",
           "student_pyproject"]
