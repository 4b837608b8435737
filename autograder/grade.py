"""``python -m autograder grade SUBMISSIONS --out DIR``: autograde a cohort with real nbgrader.

1. intake.collect maps SUBMISSIONS (a folder or an LMS zip) to students and assignments; every
   file it cannot map is a problem in the summary.
2. gradebook.prepare registers the assignments in DIR/gradebook.db and writes a template.
3. Each submission is graded by a worker process (``--jobs`` of them) in its own nbgrader
   course folder and gradebook shard (worker.py), with a per-cell timeout, a kernel memory
   limit and recovery from dead kernels (sandbox.py); with ``--scheduler``, by the same
   worker process on a Dask worker, ``--jobs`` at once on each, the files shipped there and
   back (cluster.py).
4. Here, one at a time: the shard is merged into DIR/gradebook.db, the autograded notebook and
   feedback page are moved into DIR (a regular nbgrader course folder: ``autograded/``,
   ``submitted/``, ``feedback/``), and a line is appended to DIR/journal.jsonl.

A re-run with the same arguments skips every submission whose journal line matches the file,
the chapter and the settings (those that failed or timed out are tried again), so a grader
killed mid-run finishes the job without losing or duplicating grades. Out come DIR/grades.csv
(scores read back from the gradebook, so manual grades given since are included),
DIR/feedback/STUDENT/ASSIGNMENT/NOTEBOOK.html, DIR/problems.txt (one problem per line) and
DIR/summary.txt; DIR also gets a ``.gitignore`` of ``*`` and an ``nbgrader_config.py``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterator

from . import course, records
from .dispatch.contract import Dispatcher, Done, Started
from .dispatch.pool import Pool, Progress
from .intake.collect import Submission, collect, unpacking
from .kernel import isolation, resources
from .results.flags import flag_notes, submission_flags
from .results.gradebook import merge, prepare
from .results.report import GradeRow, add_notes, failure_page, summary, write_grades

__all__ = ["GradeRow", "GradingInterrupted", "Settings", "grade"]

VERSION = 5  # bump when grading itself changes, so that a re-run regrades everything
#: Outcomes a re-run keeps; "not graded" and "timed out" are tried again.
FINAL = ("graded", "unreadable")
MIN_MEMORY_MB = 384
NO_SANDBOX = isolation.NO_SANDBOX


@dataclass(frozen=True)
class Settings:
    """Limits for every submission: ``timeout`` seconds of CPU time per cell (all the kernel's
    processes), ``wall_timeout`` seconds of wall-clock time per cell as a backstop (default
    three times the CPU limit plus 30 s, so a busy machine never counts against a student),
    kernel MB, and the wall-clock limit of one whole submission (default: 20 cells' worth of
    backstops plus five minutes)."""

    timeout: int = 60
    memory_mb: int = 2048
    submission_limit_s: float | None = None
    sandbox: bool = True
    wall_timeout: int | None = None

    def __post_init__(self) -> None:
        if self.timeout < 1:
            raise ValueError(f"--timeout must be at least 1 s, got {self.timeout}")
        if self.wall_timeout is not None and self.wall_timeout < self.timeout:
            raise ValueError(f"--wall-timeout ({self.wall_timeout} s) must be at least "
                             f"--timeout ({self.timeout} s of CPU time)")
        if self.memory_mb < 0 or 0 < self.memory_mb < MIN_MEMORY_MB:
            raise ValueError(f"--memory must be 0 (no limit) or at least {MIN_MEMORY_MB} MB: an "
                             f"idle kernel with numpy takes about 250 MB; got {self.memory_mb}")

    def describe(self) -> str:
        memory = f"{self.memory_mb} MB" if self.memory_mb else "no memory limit"
        return (f"{self.timeout} s of CPU time per cell (wall-clock backstop {self.wall_s} s), "
                f"{memory} per kernel")

    @property
    def wall_s(self) -> int:
        return self.wall_timeout or 3 * self.timeout + 30

    @property
    def limit_s(self) -> float:
        # a notebook may be run twice with doubled limits when the machine was busy
        return self.submission_limit_s or 2 * (20 * self.wall_s) + 300


class GradingInterrupted(RuntimeError):
    """SIGINT or SIGTERM arrived: what was finished is kept; re-run to finish the rest."""


@dataclass
class StudentWork:
    """Everything graded for one student and assignment: the files handed in for it (the
    worker's own task, one line on its pipe, is records.Task)."""

    student: str
    assignment: str
    files: list[Submission]

    @property
    def key(self) -> str:
        return f"{self.student}/{self.assignment}"


def grade(submissions: Path, out: Path, *, jobs: int = 1, timeout: int | None = None,
          memory_mb: int | None = None, progress: bool = True,
          settings: Settings | None = None, students: list[str] | None = None,
          scheduler: str | None = None) -> tuple[list[GradeRow], list[str]]:
    """Grade every submission under ``submissions`` into ``out``; return the rows and problems.

    ``timeout`` (CPU s per cell) and ``memory_mb`` override the defaults; or pass ``settings``.
    ``students``: grade only these (again, even when an earlier run graded them), keeping
    everyone else's row as it is. ``scheduler``: grade on a Dask cluster (``tcp://HOST:PORT``,
    or ``local:N`` for N local Dask workers; cluster.py), ``jobs`` submissions at once on each
    worker; this process still writes everything in ``out``."""
    if settings is None:
        given = {"timeout": timeout, "memory_mb": memory_mb}
        settings = Settings(**{k: v for k, v in given.items() if v is not None})
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if scheduler is not None:
        from .dispatch.cluster import parse_scheduler

        parse_scheduler(scheduler)   # a mistyped address fails before any work
    # Graded here, the sandbox must start here; on a cluster, each worker checks its own.
    isolation_used = isolation.in_use(settings.sandbox) if scheduler is None else ""
    isolation.sweep_orphan_sockets()   # left by a grader that was killed outright
    resources.sweep_orphans()
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    _mark_private(out)
    with _exclusive(out), _signals_interrupt(), unpacking(out / "work"):
        intake = collect(Path(submissions), out / "work", skip=out)
        tasks = _tasks(intake.submissions)
        template = (prepare(out, sorted({t.assignment for t in tasks}), cache=settings.sandbox)
                    if tasks else None)
        journal = Journal(out / "journal.jsonl")
        specs = {(s.assignment, s.name): s for s in course.notebook_specs()}
        if students:
            unknown = sorted(set(students) - {t.student for t in tasks})
            if unknown:
                raise ValueError(f"--student {', '.join(unknown)}: no such student among the "
                                 f"submissions (there are {len(tasks)} tasks)")
        rows, todo = _plan(tasks, journal, settings, specs, out, set(students or ()))
        bar = Progress(len(tasks), len(tasks) - len(todo), stream=None if progress else _Null())
        cluster_problems: list[str] = []
        try:
            _run(todo, jobs, settings, out, template, journal, rows, bar, isolation_used,
                 scheduler, cluster_problems)
        finally:
            bar.close()
            isolation.sweep_orphan_sockets()   # of workers replaced or killed in this run
            resources.sweep_orphans()
        _refresh_scores(out, rows)
        problems = intake.problems + cluster_problems + [
            f"{key}: {note}" for key in sorted(rows) for note in rows[key].notes]
        _write_reports(out, list(rows.values()), problems, specs)
    return sorted(rows.values(), key=lambda r: (r.assignment, r.student)), problems


def _plan(tasks: list[StudentWork], journal: Journal, settings: Settings, specs: dict,
          out: Path, again: set[str] = frozenset()
          ) -> tuple[dict[str, GradeRow], list[tuple[StudentWork, str]]]:
    """Rows already settled (graded in an earlier run, or files that are not notebooks), and
    the tasks left to grade with their fingerprints. When ``again`` names students, only they
    are graded (again); the others keep their journal rows."""
    rows, todo = {}, []
    for task in tasks:
        fingerprint = _submission_fingerprint(task, settings)
        entry = journal.get(task.key)
        if again and task.student not in again:
            if entry:
                rows[task.key] = GradeRow.from_dict(entry["row"])
            continue
        kept = GradeRow.from_dict(entry["row"]) if entry else None
        if not again and kept and entry["fingerprint"] == fingerprint and kept.status in FINAL:
            rows[task.key] = kept
        elif not any(f.unreadable is None for f in task.files):
            rows[task.key] = _unreadable(task, specs, out)
        else:
            todo.append((task, fingerprint))
    return rows, todo


def _write_reports(out: Path, rows: list[GradeRow], problems: list[str], specs: dict) -> None:
    order = [gid for spec in specs.values() for gid in spec.points]
    write_grades(rows, out / "grades.csv", order)
    (out / "problems.txt").write_text("".join(f"{p}\n" for p in problems), encoding="utf-8")
    (out / "summary.txt").write_text(summary(rows, problems, out), encoding="utf-8")


def _mark_private(out: Path) -> None:
    """Keep DIR out of git wherever it is, and make it an nbgrader course folder (formgrader)."""
    (out / ".gitignore").write_text("# grades and submissions never enter git\n*\n")
    (out / "nbgrader_config.py").write_text(
        "# written by python -m autograder grade: this folder is the cohort's nbgrader course\n"
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {course.COURSE_ID!r}\n"
        f"c.CourseDirectory.root = {str(out)!r}\n"
        f"c.CourseDirectory.source_directory = {str(course.SOLUTIONS)!r}\n"
        'c.CourseDirectory.release_directory = "release"\n'
        f"c.CourseDirectory.db_url = {'sqlite:///' + str(out / 'gradebook.db')!r}\n",
        encoding="utf-8")


def _refresh_scores(out: Path, rows: dict[str, GradeRow]) -> None:
    """Scores from DIR/gradebook.db, so grades.csv includes manual grades given since."""
    graded = [row for row in rows.values() if row.status == "graded"]
    if not graded:
        return
    course.ensure_tools_on_path()
    from nbgrader.api import Gradebook

    from .dispatch.worker import scores

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}", course.COURSE_ID) as gradebook:
        for row in graded:
            for name, value in scores(gradebook, row.student, row.assignment).items():
                setattr(row, name, value)


def _tasks(found: list[Submission]) -> list[StudentWork]:
    groups: dict[tuple[str, str], list[Submission]] = defaultdict(list)
    for sub in found:
        groups[sub.student, sub.assignment].append(sub)
    return [StudentWork(student, assignment, files)
            for (student, assignment), files in sorted(groups.items())]


def _run(todo: list, jobs: int, settings: Settings, out: Path, template: Path | None,
         journal: Journal, rows: dict[str, GradeRow], bar: Progress, isolation_used: str,
         scheduler: str | None = None, problems: list[str] | None = None) -> None:
    by_key = {task.key: (task, fingerprint) for task, fingerprint in todo}

    def finished(payload: records.Task, result: records.Result, worker: str,
                 sandbox: str) -> None:
        task, fingerprint = by_key[payload.key]
        row = _finish(task, result, out)
        # The isolation is the grading machine's own; the limits are this run's, on every worker.
        row.sandbox = f"{sandbox}; {settings.describe()}" if sandbox else ""
        row.worker = worker
        journal.add(task.key, fingerprint, row, result.seconds)
        rows[task.key] = row
        bar.end(task.key, f"{row.status}, {row.auto_score:g}/{row.max_auto_score:g}")

    payloads = [_payload(task, settings, out, template) for task, _ in todo]
    (out / "work").mkdir(parents=True, exist_ok=True)
    for payload in payloads:   # the review reads the worker's repaired copy from here: never
        shutil.rmtree(payload.work, ignore_errors=True)   # one a killed earlier run left
    dispatcher = _dispatcher(scheduler, jobs, settings, out, finished,
                             lambda payload: bar.begin(payload.key), isolation_used)
    found = dispatcher.run(payloads)
    if problems is not None:
        problems += found


def _dispatcher(scheduler: str | None, jobs: int, settings: Settings, out: Path, done: Done,
                started: Started, isolation_used: str) -> Dispatcher:
    """Worker processes of this machine, or with ``scheduler`` the Dask cluster there."""
    if scheduler is not None:
        from .dispatch.cluster import Cluster

        return Cluster(None, scheduler, jobs, settings.limit_s, done, started)
    return Pool(jobs=jobs, logs=out / "work", limit_s=settings.limit_s, done=done,
                started=started, sandbox=isolation_used, font_cache=settings.sandbox)


def _payload(task: StudentWork, settings: Settings, out: Path, template: Path | None
             ) -> records.Task:
    digest = hashlib.sha1(task.key.encode()).hexdigest()[:12]
    return records.Task(
        key=task.key, student=task.student, assignment=task.assignment,
        notebooks={f.notebook: str(f.path) for f in task.files},
        notes=[n for f in task.files for n in f.notes], work=str(out / "work" / digest),
        template=str(template), release=str(out / "release"), timeout=settings.timeout,
        wall_timeout=settings.wall_s, memory_mb=settings.memory_mb, sandbox=settings.sandbox)


def _finish(task: StudentWork, result: records.Result, out: Path) -> GradeRow:
    """Merge a worker's result into the cohort: gradebook, files, feedback notes."""
    work = Path(result.work)
    row = _base_row(task, out, result)
    row.flags = submission_flags(task.files, task.assignment,
                                 work / "submitted" / task.student / task.assignment,
                                 work / "autograded" / task.student / task.assignment)
    if result.status == "graded":
        merge(out / "gradebook.db", work / "gradebook.db", task.student, task.assignment,
              row.lms_id)
        for step in ("submitted", "autograded", "feedback"):
            _replace_tree(work / step / task.student / task.assignment,
                          out / step / task.student / task.assignment)
        for page in (out / "feedback" / task.student / task.assignment).glob("*.html"):
            add_notes(page, flag_notes(row.flags) + row.notes)
    else:
        specs = {(s.assignment, s.name): s for s in course.notebook_specs()}
        row.max_score = sum(specs[task.assignment, f.notebook].max_score for f in task.files)
        row.max_auto_score = sum(specs[task.assignment, f.notebook].max_auto_score
                                 for f in task.files)
        for f in task.files:
            failure_page(_page(out, task, f.notebook), row, f.notebook,
                         flag_notes(row.flags) + row.notes)
    shutil.rmtree(work, ignore_errors=True)
    return row


def _unreadable(task: StudentWork, specs: dict, out: Path) -> GradeRow:
    row = _base_row(task, out, records.Result(
        work="", status="unreadable",
        notes=[n for f in task.files for n in f.notes] + [f.unreadable for f in task.files]))
    row.max_score = sum(specs[task.assignment, f.notebook].max_score for f in task.files)
    row.max_auto_score = sum(specs[task.assignment, f.notebook].max_auto_score
                             for f in task.files)
    for f in task.files:
        failure_page(_page(out, task, f.notebook), row, f.notebook, row.notes)
    return row


def _base_row(task: StudentWork, out: Path, result: records.Result) -> GradeRow:
    """A row holding ``result`` (its work folder, removed once merged, left out)."""
    first = task.files[0]
    result = replace(result, work="", notes=list(result.notes),
                     questions=dict(result.questions))
    if result.status != "graded":   # a failure's scores are the chapter's maxima, set later
        result = replace(result, score=0.0, auto_score=0.0, needs_manual_grade=False,
                         questions={})
    return GradeRow(task.student, task.assignment, result, lms_id=first.lms_id,
                    late=any(f.late for f in task.files),
                    submitted=", ".join(f.origin for f in task.files))


def _page(out: Path, task: StudentWork, notebook: str) -> Path:
    return out / "feedback" / task.student / task.assignment / (Path(notebook).stem + ".html")


def _replace_tree(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    if source.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(source), str(target))


def _submission_fingerprint(task: StudentWork, settings: Settings) -> str:
    """The journal's key for a submission's grade (a re-run keeps a grade whose key is
    unchanged): changes when a file, the chapter's instructor notebook or a setting changes."""
    digest = hashlib.sha256(json.dumps([VERSION, settings.timeout, settings.wall_s,
                                        settings.memory_mb, settings.sandbox]).encode())
    for f in sorted(task.files, key=lambda f: f.notebook):
        digest.update(f.notebook.encode())
        digest.update(f.path.read_bytes())
        digest.update((course.SOLUTIONS / task.assignment / f.notebook).read_bytes())
    return digest.hexdigest()


class Journal:
    """DIR/journal.jsonl: one line per finished submission, flushed to disk before the next
    starts; the last line for a student and assignment wins."""

    def __init__(self, path: Path):
        self.path = path
        self.entries: dict[str, dict] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a kill
                self.entries[entry["key"]] = entry

    def get(self, key: str) -> dict | None:
        return self.entries.get(key)

    def add(self, key: str, fingerprint: str, row: GradeRow, seconds: float | None) -> None:
        entry = {"key": key, "fingerprint": fingerprint, "seconds": seconds, "row": asdict(row)}
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.entries[key] = entry


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """One grader per output folder at a time (the lock dies with the process)."""
    with open(out / ".grading.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"{out} is being graded by another process") from None
        yield


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Turn SIGTERM (and SIGINT) into GradingInterrupted, so workers are stopped cleanly."""
    def stop(signum: int, frame: object) -> None:
        raise GradingInterrupted(f"stopped by {signal.Signals(signum).name}; finished "
                                 "submissions are kept: run the same command again to finish")

    try:
        saved = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread: leave signals alone
        saved = {}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


class _Null:
    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass
