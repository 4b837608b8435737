"""What every autograder module knows about a notebook cell (nbgrader's metadata, its source, what
kind of cell it is) and the names of the outcomes the grader writes into outputs.

Standard library only, so that modules that merely read notebooks (and ``python -m autograder
--help``) never load nbgrader.
"""

from __future__ import annotations

import re

#: ``ename`` of the error output that stands for a cell stopped at the time limit.
TIMEOUT_ENAME = "CellTimeoutError"
#: ``ename`` of the error output that stands for a kernel that died in a cell.
DIED_ENAME = "KernelDied"
#: ``ename`` of cells the grader did not run after too many lost kernels.
NOT_RUN_ENAME = "NotRun"
#: Printed outputs the grader adds when it cut a cell's output start with this.
DROPPED_MARK = "[grader: "


def nbgrader_meta(cell: dict) -> dict:
    """The cell's ``metadata.nbgrader`` dictionary ({} when absent or malformed)."""
    meta = cell.get("metadata")
    found = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return found if isinstance(found, dict) else {}


def grade_id(cell: dict) -> str | None:
    """The cell's nbgrader grade id, when it has a string one."""
    found = nbgrader_meta(cell).get("grade_id")
    return found if isinstance(found, str) else None


def source(cell: dict) -> str:
    """The cell's source as one string (notebooks store a string or a list of lines)."""
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def is_test(cell: dict) -> bool:
    """An autograded test cell: graded, not an answer."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_answer(cell: dict) -> bool:
    """A cell the student writes in (code or written answer)."""
    return bool(nbgrader_meta(cell).get("solution"))


def kind(cell: dict) -> str:
    """What a released nbgrader cell is, in the words the feedback uses."""
    meta = nbgrader_meta(cell)
    if meta.get("grade") and meta.get("solution"):
        return "written answer" if cell.get("cell_type") == "markdown" else "hand-graded answer"
    if meta.get("solution"):
        return "answer"
    if meta.get("grade"):
        return "test"
    return "task" if meta.get("task") else "read-only"


def marked_lines(notebook_path, regions: str, shortest: int) -> set[str]:
    """Stripped lines of at least ``shortest`` characters inside the marked regions of a
    notebook, ``regions`` a regex of the marker names ("SOLUTION|HIDDEN TESTS" for the lines
    between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` and the hidden-test markers)."""
    import json
    from pathlib import Path

    lines: set[str] = set()
    for cell in json.loads(Path(notebook_path).read_text(encoding="utf-8"))["cells"]:
        inside = False
        for line in source(cell).splitlines():
            if re.search(rf"BEGIN ({regions})", line):
                inside = True
            elif re.search(rf"END ({regions})", line):
                inside = False
            elif inside and len(line.strip()) >= shortest:
                lines.add(line.strip())
    return lines


__all__ = ["DIED_ENAME", "DROPPED_MARK", "NOT_RUN_ENAME", "TIMEOUT_ENAME", "grade_id", "is_answer",
           "is_test", "kind", "marked_lines", "nbgrader_meta", "source"]
