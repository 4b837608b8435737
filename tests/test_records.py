"""The records that cross the worker pipe (autograder/records.py): what goes in comes out, and
a line of another shape is refused with the field named."""

from __future__ import annotations

import json

import pytest

from autograder.records import MAX_LINE_CHARS, RecordError, Result, Task

TASK = Task(key="ada/01_parameters", student="ada", assignment="01_parameters",
            notebooks={"parameters.ipynb": "/in/ada.ipynb"}, work="/out/work/1",
            template="/out/work/template.db", release="/out/release", timeout=60,
            wall_timeout=210, memory_mb=2048, notes=["handed in late"])


def test_a_task_and_a_result_survive_the_pipe():
    assert Task.from_line(TASK.to_line()) == TASK
    result = Result("/out/work/1", "graded", ["a note"], 3.5, 10.0, 12.0, 10.0, 10.0, True,
                    {"test_a": 2.0, "written": None})
    assert Result.from_line(result.to_line()) == result


@pytest.mark.parametrize("change, named", [
    ({"timeout": "60"}, "Task.timeout is a str"),
    ({"timeout": True}, "Task.timeout is a bool"),
    ({"notes": [1]}, "Task.notes holds something other than text"),
    ({"version": 0}, "another version"),
    ({"surprise": 1}, "no field surprise"),
])
def test_a_malformed_task_is_refused_naming_the_field(change, named):
    data = json.loads(TASK.to_line())
    data.update(change)
    with pytest.raises(RecordError, match=named):
        Task.from_line(json.dumps(data))


def test_a_missing_field_an_unknown_status_and_a_huge_line_are_refused():
    data = json.loads(TASK.to_line())
    del data["work"]
    with pytest.raises(RecordError, match="work"):
        Task.from_line(json.dumps(data))
    with pytest.raises(RecordError, match="status 'fine'"):
        Result("/w", "fine")
    with pytest.raises(RecordError, match="too long"):
        Result.from_line(" " * (MAX_LINE_CHARS + 1))
    with pytest.raises(RecordError, match="not JSON"):
        Result.from_line('{"version": 1, "work": ')


def test_a_grade_row_holds_the_workers_result_instead_of_restating_it():
    """report.GradeRow keeps a records.Result (its outcome fields read and write through it),
    and a journal written before rows held one (outcome fields flat in the row) still loads."""
    from dataclasses import asdict, fields

    from autograder.results.report import OUTCOME, GradeRow

    assert not {f.name for f in fields(GradeRow)} & {f.name for f in fields(Result)}
    assert set(OUTCOME) <= {f.name for f in fields(Result)}
    result = Result(work="/w", status="graded", notes=["n"], score=7.0, max_score=10.0,
                    questions={"q1": 7.0})
    row = GradeRow("ada", "01_parameters", result, lms_id="1001")
    assert (row.score, row.max_score, row.questions, row.notes) == (7.0, 10.0, {"q1": 7.0},
                                                                     ["n"])
    row.score = 9.0   # a manual grade read back later
    assert row.result.score == 9.0 and result.score == 7.0   # the worker's record unchanged
    assert GradeRow.from_dict(asdict(row)) == row
    flat = {"student": "ada", "assignment": "01_parameters", "score": 9.0, "max_score": 10.0,
            "auto_score": 0.0, "max_auto_score": 0.0, "needs_manual_grade": False,
            "status": "graded", "questions": {"q1": 7.0}, "lms_id": "1001", "late": False,
            "submitted": "", "notes": ["n"], "flags": [], "sandbox": "", "worker": ""}
    old = GradeRow.from_dict(flat)
    assert (old.score, old.status, old.questions, old.lms_id) == (9.0, "graded", {"q1": 7.0},
                                                                  "1001")
    with pytest.raises(RecordError):
        GradeRow.from_dict({**flat, "status": "perfect"})
