"""Where the chapters live, for the notebook, autograder and book tests."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"


def solution_notebooks() -> list[Path]:
    return sorted(SOLUTIONS.glob("*/*.ipynb"))


def student_notebook(solution: Path) -> Path:
    return NOTEBOOKS / solution.parent.name / solution.name


def chapter_id(path: Path) -> str:
    return path.parent.name


def build_book(source: Path, output: Path):
    """A real ``jupyter-book build`` of ``source`` into ``output/_build/html`` (every chapter
    executed); returns the finished process."""
    import os
    import subprocess
    import sys

    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([str(bindir / "jupyter-book"), "build", str(source), "--builder",
                           "html", "--path-output", str(output)],
                          capture_output=True, text=True, env=env, timeout=1200)


def grade_cli(submissions: Path, out: Path, timeout: int = 900) -> tuple[list[dict], str]:
    """A real ``python -m autograder grade SUBMISSIONS --out OUT --jobs 2 --timeout 30``: the
    rows of its grades.csv, and what it printed (the summary)."""
    import csv
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions),
                          "--out", str(out), "--jobs", "2", "--timeout", "30"],
                         cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle)), run.stdout


def execute_apart(notebook, folder: Path, timeout: int = 600) -> None:
    """Execute ``notebook`` (a NotebookNode, changed in place) in a real kernel whose working
    folder is a private copy of ``folder``, removed afterwards. pytest-xdist runs nbval's
    execution of a solution beside the claims tests' execution of the same one: in the chapter's
    own folder, the two kernels would write, read and remove the same files (chapter 10's memray
    capture, chapter 09's traces) under each other."""
    import shutil
    import tempfile

    from nbclient import NotebookClient

    with tempfile.TemporaryDirectory(prefix=f"{folder.name}-") as scratch:
        copy = Path(scratch) / folder.name
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(copy)}}).execute()


def probed_values(notebook_path: Path, probe: str) -> dict:
    """Execute an instructor notebook in a real kernel (in a copy of its folder, see
    :func:`execute_apart`) with ``probe`` appended, a cell that prints "PROBE" and then the
    values the chapter's sentences are about as JSON; those values."""
    import json

    import nbformat

    notebook = nbformat.read(notebook_path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(probe))
    execute_apart(notebook, notebook_path.parent)
    printed = "".join(o["text"] for o in notebook.cells[-1].get("outputs", [])
                      if o.get("output_type") == "stream")
    return json.loads(printed[printed.index("PROBE") + 5:])
