"""``python -m autograder release``: regenerate notebooks/ from solutions/ with nbgrader.

First every course link in the sources is pointed at the course's home, the repository set in
``_config.yml`` (:mod:`autograder.release.home`). The result is byte-for-byte reproducible. A
throwaway gradebook is used, so nothing else is written outside notebooks/. Afterwards every
autograded test cell is tagged ``hide-input`` (the book folds it away behind a "show" toggle; a
notebook shows it as always), and every student notebook is checked for solution code and hidden
tests; the release is refused, naming the cell, if any leaked through.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import nbformat

from .. import course
from ..cells import grade_id, marked_lines
from .home import apply_home

#: The tag that folds a cell's code in the book (myst-nb): the visible tests with their hint
#: tables are for the student running the notebook, not for a reader of the book.
BOOK_FOLD_TAG = "hide-input"

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
           "BEGIN MARK SCHEME", "END MARK SCHEME")


class LeakError(RuntimeError):
    """A student notebook would contain solution text or hidden tests."""


def release(assignment_ids: list[str] | None = None, release_dir: Path | None = None) -> list[Path]:
    """Generate the student notebooks of ``assignment_ids`` (default: all) into ``release_dir``
    (default: notebooks/) and return their paths."""
    ids = assignment_ids or course.assignments()
    apply_home(course.REPO_ROOT)
    target = Path(release_dir) if release_dir else course.NOTEBOOKS
    with tempfile.TemporaryDirectory(prefix="tinyprof-release-") as scratch:
        config = course.load_config(
            release_directory=str(target.resolve()),
            db_url=f"sqlite:///{scratch}/gradebook.db",
        )
        nbgrader = course.api(config)
        for aid in ids:
            result = nbgrader.generate_assignment(aid, force=True, create=True)
            if not result["success"]:
                raise RuntimeError(f"nbgrader could not generate {aid}:\n{result['error']}"
                                   f"\n{result['log']}")
    written = sorted(p for aid in ids for p in (target / aid).glob("*.ipynb"))
    for path in written:
        fold_tests_in_the_book(path)
        check_no_leaks(path, course.SOLUTIONS / path.parent.name / path.name)
    return written


def is_test_cell(cell) -> bool:
    """An autograded test cell: graded by nbgrader, not a solution the student writes."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def fold_tests_in_the_book(student_notebook: Path) -> None:
    """Tag every test cell of ``student_notebook`` :data:`BOOK_FOLD_TAG` (written back in
    nbformat's own layout, as nbgrader wrote it, so a release stays byte-for-byte the same)."""
    notebook = nbformat.read(student_notebook, as_version=nbformat.NO_CONVERT)
    changed = False
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if is_test_cell(cell) and BOOK_FOLD_TAG not in tags:
            cell.metadata["tags"] = [*tags, BOOK_FOLD_TAG]
            changed = True
    if changed:
        nbformat.write(notebook, student_notebook)


def solution_lines(source_notebook: Path) -> set[str]:
    """Distinctive lines (25+ characters) from the solution and hidden-test regions of an
    instructor notebook."""
    return marked_lines(source_notebook, "SOLUTION|HIDDEN TESTS", 25)


def check_no_leaks(student_notebook: Path, source_notebook: Path | None = None) -> None:
    """Raise LeakError naming the cell if a marker or a solution line is in the student copy."""
    secret = set()
    if source_notebook is not None and source_notebook.exists():
        secret = solution_lines(source_notebook)
    for index, cell in enumerate(json.loads(student_notebook.read_text())["cells"]):
        text = "".join(cell["source"])
        cell_id = grade_id(cell) or cell.get("id")
        found = [m for m in MARKERS if m in text]
        found += [line for line in text.splitlines() if line.strip() in secret]
        if found:
            raise LeakError(f"{student_notebook}: cell {index} ({cell_id}) would show students "
                            f"{found[0]!r}; fix the markers in solutions/ and release again")
