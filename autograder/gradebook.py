"""The cohort's SQLite gradebook: registered once, then filled one merged submission at a time.

Only the grading parent writes DIR/gradebook.db; workers grade into private copies of a
template (the gradebook with the assignments registered and no submissions), so there is no
SQLite write concurrency at all. Merging a submission replaces whatever the gradebook held for
that student and assignment in one transaction, which makes a re-run after a kill idempotent.
Student code runs with the grader's file permissions and could write to its shard; the merge
therefore takes only what autograding writes (no manual scores, extra credit or comments).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from . import course

#: Tables holding submissions, children first (the order rows are deleted in).
SUBMISSION_TABLES = ("comment", "grade", "submitted_notebook", "submitted_assignment", "student")


class GradebookError(RuntimeError):
    """The cohort gradebook cannot take these assignments."""


def prepare(out: Path, assignment_ids: list[str]) -> Path:
    """Register ``assignment_ids`` in ``out``/gradebook.db (again, harmlessly, on a re-run),
    release them into ``out``/release, and write the template gradebook; return its path."""
    database = out / "gradebook.db"
    config = course.load_config(root=str(out), source_directory=str(course.SOLUTIONS),
                                release_directory=str(out / "release"),
                                db_url=f"sqlite:///{database}")
    with course.preserve_cwd():
        nbgrader = course.api(config)
        for aid in assignment_ids:
            result = nbgrader.generate_assignment(aid, force=True, create=True)
            if not result["success"]:
                last = (result.get("error") or result.get("log") or "").strip().splitlines()
                raise GradebookError(
                    f"cannot register {aid} in {database}: {last[-1] if last else '?'} (a "
                    "gradebook started with another version of the chapter cannot take it: "
                    "grade into a new --out folder)")
    template = out / "work" / "template.db"
    template.parent.mkdir(parents=True, exist_ok=True)
    template.unlink(missing_ok=True)
    with closing(sqlite3.connect(database)) as source, closing(sqlite3.connect(template)) as copy:
        source.backup(copy)
        for table in SUBMISSION_TABLES:
            copy.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
        copy.commit()
    return template


def merge(database: Path, shard: Path, student: str, assignment: str,
          lms_id: str = "") -> None:
    """Copy one graded submission from ``shard`` into ``database``, replacing any earlier one."""
    with closing(sqlite3.connect(database, timeout=60, isolation_level=None)) as db:
        db.execute("ATTACH DATABASE ? AS shard", (str(shard),))
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                _move(db, student, assignment)
                if lms_id:
                    db.execute("UPDATE main.student SET lms_user_id = ? WHERE id = ?",
                               (lms_id, student))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        finally:
            db.execute("DETACH DATABASE shard")


def _queries(schema: str) -> tuple[str, str]:
    """Sub-queries for the ids of one submission's assignment and notebook rows in ``schema``."""
    assignments = (f"SELECT id FROM {schema}.submitted_assignment "
                   "WHERE assignment_id = ? AND student_id = ?")
    notebooks = f"SELECT id FROM {schema}.submitted_notebook WHERE assignment_id IN ({assignments})"
    return assignments, notebooks


def _move(db: sqlite3.Connection, student: str, assignment: str) -> None:
    ids = {schema: db.execute(f"SELECT id FROM {schema}.assignment WHERE name = ?",
                              (assignment,)).fetchone() for schema in ("main", "shard")}
    if ids["main"] is None or ids["main"] != ids["shard"]:
        raise GradebookError(f"{assignment}: the worker's gradebook does not match the cohort's")
    key = (ids["main"][0], student)
    assignments, notebooks = _queries("main")
    for table in ("comment", "grade"):
        db.execute(f"DELETE FROM main.{table} WHERE notebook_id IN ({notebooks})", key)
    db.execute(f"DELETE FROM main.submitted_notebook WHERE id IN ({notebooks})", key)
    db.execute(f"DELETE FROM main.submitted_assignment WHERE id IN ({assignments})", key)
    assignments, notebooks = _queries("shard")
    db.execute("INSERT OR IGNORE INTO main.student SELECT * FROM shard.student WHERE id = ?",
               (student,))
    db.execute("INSERT INTO main.submitted_assignment SELECT * FROM shard.submitted_assignment "
               f"WHERE id IN ({assignments})", key)
    db.execute("INSERT INTO main.submitted_notebook SELECT * FROM shard.submitted_notebook "
               f"WHERE id IN ({notebooks})", key)
    for table in ("grade", "comment"):
        db.execute(f"INSERT INTO main.{table} SELECT * FROM shard.{table} "
                   f"WHERE notebook_id IN ({notebooks})", key)
    # Autograding never sets these; a notebook that wrote them into its shard does not count.
    assignments, notebooks = _queries("main")
    db.execute("UPDATE main.grade SET manual_score = NULL, extra_credit = NULL "
               f"WHERE notebook_id IN ({notebooks})", key)
    db.execute(f"UPDATE main.comment SET manual_comment = NULL WHERE notebook_id IN ({notebooks})",
               key)
