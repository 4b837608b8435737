"""The cohort's SQLite gradebook: registered once, then filled one merged submission at a time.

Only the grading parent writes DIR/gradebook.db; workers grade into private copies of a
template (the gradebook with the assignments registered and no submissions), so there is no
SQLite write concurrency at all. Merging a submission replaces whatever the gradebook held for
that student and assignment in one transaction, which makes a re-run after a kill idempotent.
Student code runs in a sandbox that cannot reach any gradebook (isolation.py); the merge takes
only what autograding writes all the same (no manual scores, extra credit or comments), so a
grader run with --no-sandbox cannot be handed more either.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

from .. import course

#: Tables holding submissions, children first (the order rows are deleted in).
SUBMISSION_TABLES = ("comment", "grade", "submitted_notebook", "submitted_assignment", "student")


class GradebookError(RuntimeError):
    """The cohort gradebook cannot take these assignments."""


def cache_folder() -> Path:
    """Where fresh gradebooks are kept between grade commands: $XDG_CACHE_HOME/tinyprof or
    ~/.cache/tinyprof (private to the user)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tinyprof" / "gradebooks"


def _cache_key(assignment_ids: list[str]) -> str:
    """Changes with nbgrader's version and with every instructor notebook of the assignments."""
    import nbgrader

    digest = hashlib.sha256(nbgrader.__version__.encode())
    for aid in sorted(assignment_ids):
        digest.update(aid.encode())
        for notebook in sorted((course.SOLUTIONS / aid).glob("*.ipynb")):
            digest.update(notebook.name.encode())
            digest.update(notebook.read_bytes())
    return digest.hexdigest()[:32]


def prepare(out: Path, assignment_ids: list[str], cache: bool = True) -> Path:
    """Register ``assignment_ids`` in ``out``/gradebook.db (again, harmlessly, on a re-run),
    release them into ``out``/release, and write the template gradebook; return its path.

    Creating a gradebook costs nbgrader about 6 s (its schema migrations); with ``cache``, a new
    ``out`` starts from a copy of a fresh gradebook kept in :func:`cache_folder` for exactly
    these instructor notebooks, and the first grade command of a course leaves one there. Only
    the grading process writes the cache: kernels never see it (with --no-sandbox the grader
    passes ``cache=False``, so unsandboxed code cannot leave a gradebook for later cohorts)."""
    database = out / "gradebook.db"
    cached = cache_folder() / f"{_cache_key(assignment_ids)}.db" if cache else None
    fresh = not database.exists()
    if fresh and cached is not None and cached.exists():
        shutil.copyfile(cached, database)
        fresh = False
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
    if fresh and cached is not None:
        _store(database, cached)
    template = out / "work" / "template.db"
    template.parent.mkdir(parents=True, exist_ok=True)
    template.unlink(missing_ok=True)
    with closing(sqlite3.connect(database)) as source, closing(sqlite3.connect(template)) as copy:
        source.backup(copy)
        for table in SUBMISSION_TABLES:
            copy.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed table names
        copy.commit()
    return template


def _store(database: Path, cached: Path) -> None:
    """Keep a copy of a just-created gradebook (assignments registered, no submissions)."""
    cached.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cached.parent, suffix=".db", delete=False) as handle:
        temporary = Path(handle.name)
    with closing(sqlite3.connect(database)) as source, closing(sqlite3.connect(temporary)) as copy:
        source.backup(copy)
    os.replace(temporary, cached)  # atomic: a concurrent grader sees the old file or the new


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
