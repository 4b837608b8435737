"""Check a submitted notebook against the released one before nbgrader sees it.

nbgrader restores edited test cells by itself (OverwriteCells), but silently, and it neither
restores deleted test cells nor repairs test cells whose nbgrader metadata was changed (it then
fails with "Inconsistent checksums"). Here every graded cell of the release is matched by grade
id in the submission:

- a test or read-only cell whose text differs from the release (or from the instructor's own
  version) is put back and the edit reported; its metadata is always put back;
- a deleted test cell is re-inserted after the cell that precedes it in the release;
- a deleted written answer is re-inserted empty (nbgrader then scores it 0 without a human);
- a deleted code answer is reported but not re-inserted: the tests run against whatever the
  rest of the notebook defines (re-inserting the stub could overwrite code the student moved).
"""

from __future__ import annotations

import copy

from ..cells import grade_id as _grade_id
from ..cells import kind
from ..cells import source as _source


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def repair(submitted: dict, release: dict, source: dict | None = None) -> tuple[dict, list[str]]:
    """The notebook nbgrader should grade, and a note for every change made to get it."""
    notebook = copy.deepcopy(submitted)
    cells = notebook["cells"]
    instructor = {_grade_id(c): c for c in (source or {}).get("cells", []) if _grade_id(c)}
    notes = []
    for position, released in enumerate(release["cells"]):
        grade_id = _grade_id(released)
        if grade_id is None:
            continue
        what = kind(released)
        index = next((i for i, c in enumerate(cells) if _grade_id(c) == grade_id), None)
        if index is None:
            note = _restore_deleted(cells, release["cells"], position, what)
            notes.append(f"{what} cell {grade_id} had been deleted: {note}")
            continue
        cell = cells[index]
        if what in ("test", "read-only", "task"):
            allowed = {_normal(_source(released)), _normal(_source(instructor.get(grade_id, {})))}
            if _normal(_source(cell)) not in allowed:
                notes.append(f"{what} cell {grade_id} had been edited: the original (with its "
                             "hidden tests) was restored from the gradebook before grading")
            cell["source"] = copy.deepcopy(released["source"])
            cell["cell_type"] = released["cell_type"]
        metadata = cell.setdefault("metadata", {})
        metadata["nbgrader"] = copy.deepcopy(released["metadata"]["nbgrader"])
        if cell["cell_type"] == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
    return notebook, notes


def _restore_deleted(cells: list[dict], released: list[dict], position: int, what: str) -> str:
    if what == "answer":
        return "its tests ran against whatever the rest of the notebook defines"
    restored = copy.deepcopy(released[position])
    cells.insert(_insertion_point(cells, released, position), restored)
    if what in ("written answer", "hand-graded answer"):
        return "an empty one was put back, which scores 0"
    return "it was restored from the gradebook and graded"


def _insertion_point(cells: list[dict], released: list[dict], position: int) -> int:
    """Just after the submitted cell matching the nearest earlier released cell (by grade id or
    cell id); else just before the nearest later one; else at the end."""
    def find(cell: dict) -> int | None:
        keys = {("g", _grade_id(cell)), ("i", cell.get("id"))} - {("g", None), ("i", None)}
        for i, mine in enumerate(cells):
            if keys & {("g", _grade_id(mine)), ("i", mine.get("id"))}:
                return i
        return None

    for earlier in reversed(released[:position]):
        found = find(earlier)
        if found is not None:
            return found + 1
    for later in released[position + 1:]:
        found = find(later)
        if found is not None:
            return found
    return len(cells)
