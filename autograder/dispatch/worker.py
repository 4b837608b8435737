"""Grade one submission with real nbgrader in a private course folder and gradebook shard.

A task (a JSON object) names the student, the assignment, the notebook files, a fresh work
folder and the template gradebook (the cohort's gradebook with the assignments registered and no
submissions). The work folder becomes a one-submission nbgrader course: its gradebook starts as
a copy of the template, so its assignment and cell rows carry the same ids as the cohort's and
the parent can merge the result (see gradebook.merge). Nothing here writes outside the work
folder, so any number of workers can run at once.

``python -m autograder.dispatch.worker PARENT_PID`` reads tasks from stdin and answers each
with one line of JSON on stdout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import time
import traceback
import warnings
from dataclasses import replace
from pathlib import Path

from .. import course
from ..intake.collect import read_notebook
from ..intake.repair import repair
from ..kernel import caches, isolation, zmqpoll
from ..kernel.launcher import die_with_parent
from ..records import Result, Task
from ..results.exercises import name_summary
from ..results.feedback import configure_feedback, defang_links, redactor
from ..results.report import cell_notes


def configure(work: Path, timeout: int, memory_mb: int, isolate: bool = True,
              wall_timeout: int | None = None):
    """The course config pointed at ``work``, with the hardened (and, when ``isolate``,
    sandboxed) Execute in the pipeline: ``timeout`` CPU seconds per cell, ``wall_timeout``
    wall-clock seconds as the backstop."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        CheckCellMetadata,
        IgnorePattern,
        LimitOutput,
        SaveAutoGrades,
    )

    from ..run.execute import GraderExecute

    config = course.load_config(root=str(work), source_directory=str(course.SOLUTIONS),
                                db_url=f"sqlite:///{work / 'gradebook.db'}")
    config.Execute.timeout = wall_timeout or 3 * timeout + 30
    config.GraderExecute.cpu_limit = float(timeout)
    config.GraderExecute.memory_mb = memory_mb
    config.GraderExecute.isolate = isolate
    config.GraderExecute.instructor_root = str(course.SOLUTIONS)
    if isolate:
        config.SandboxedKernelManager.font_cache = [
            str(path) for path in caches.matplotlib_cache(work.parent / "cache" / "matplotlib")]
    config.Autograde.autograde_preprocessors = [
        GraderExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
        AssignLatePenalties, CheckCellMetadata]
    return config


def grade_task(task: Task) -> Result:
    """Autograde and write feedback for one submission; return scores, notes and status."""
    work, student, assignment = Path(task.work), task.student, task.assignment
    shutil.rmtree(work, ignore_errors=True)
    submitted = work / "submitted" / student / assignment
    submitted.mkdir(parents=True)
    shutil.copy(task.template, work / "gradebook.db")
    notes = list(task.notes)
    for name, path in task.notebooks.items():
        notebook, why = read_notebook(Path(path))
        if notebook is None:
            notes.append(f"{name}: {why}; it counts as not handed in")
            continue
        release = _load(Path(task.release) / assignment / name)
        fixed, fixes = repair(notebook, release, _load(course.SOLUTIONS / assignment / name))
        notes += fixes
        (submitted / name).write_text(json.dumps(fixed, ensure_ascii=False), encoding="utf-8")
    with course.preserve_cwd():
        config = configure(work, task.timeout, task.memory_mb, task.sandbox, task.wall_timeout)
        configure_feedback(config, [course.SOLUTIONS / assignment / n for n in task.notebooks],
                           submitted)
        nbgrader = course.api(config)
        graded = nbgrader.autograde(assignment, student, force=True, create=True)
        if not graded["success"]:
            trouble = _trouble(graded)
            why = (f"not graded, and not the student's score: {trouble}" if trouble
                   else f"nbgrader could not grade it: {_cause(graded)}")
            return Result(str(work), "not graded", notes + [why])
        feedback = nbgrader.generate_feedback(assignment, student, force=True)
    if not feedback["success"]:
        notes.append(f"no feedback page: {_cause(feedback)}")
    for page in sorted((work / "feedback" / student / assignment).glob("*.html")):
        defang_links(page)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{work / 'gradebook.db'}", course.COURSE_ID) as gradebook:
        found = scores(gradebook, student, assignment)
    for path in sorted((work / "autograded" / student / assignment).glob("*.ipynb")):
        notes += cell_notes(_load(path), found["questions"], task.timeout, task.memory_mb)
    _name_summaries(work / "feedback" / student / assignment,
                    work / "autograded" / student / assignment, assignment, found["questions"])
    return Result(str(work), "graded", notes, **found)


def _name_summaries(pages: Path, autograded: Path, assignment: str,
                    questions: dict[str, float | None]) -> None:
    """Each page's summary names the exercises and shows the grader's messages (exercises.py),
    redacted as the page is."""
    for page in sorted(pages.glob("*.html")):
        instructor = course.SOLUTIONS / assignment / f"{page.stem}.ipynb"
        name_summary(page, autograded / f"{page.stem}.ipynb", instructor, questions,
                     clean=redactor(instructor))


def scores(gradebook, student: str, assignment: str) -> dict:
    """A submission's totals and per-question points (None: awaiting a manual grade)."""
    submission = gradebook.find_submission(assignment, student)
    questions = {grade.name: None if grade.needs_manual_grade else grade.score
                 for notebook in submission.notebooks for grade in notebook.grades}
    return {"score": submission.score, "max_score": submission.max_score,
            "auto_score": submission.code_score, "max_auto_score": submission.max_code_score,
            "needs_manual_grade": bool(submission.needs_manual_grade), "questions": questions}


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _cause(result: dict) -> str:
    """The exception behind a failed nbgrader call (its own wrapper exceptions skipped)."""
    text = "\n".join(filter(None, (result.get("log"), result.get("error"))))
    return _last_line(text, r"^\s*[\w.]*(Error|Exception|Exit|Interrupt)\b(?<!NbGraderException)")


def _trouble(result: dict) -> str | None:
    """The reason of a GraderTrouble (execute.py) behind a failed nbgrader call, if any."""
    text = "\n".join(filter(None, (result.get("log"), result.get("error"))))
    found = re.findall(r"GraderTrouble: (.+)", text)
    return found[-1].strip() if found else None


def _last_line(text: str | None, pattern: str = "") -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    chosen = [line for line in lines if re.search(pattern, line)] if pattern else lines
    return (chosen or lines or ["unknown error"])[-1]


def serve(parent_pid: int) -> None:
    """Answer tasks from stdin, one JSON line each, until stdin closes."""
    die_with_parent(parent_pid)
    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy 2 noise, grades unaffected
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever nbgrader or a library prints goes to the log, not to the parent
    course.ensure_tools_on_path()
    zmqpoll.install()
    isolation.private_mounts()   # each kernel's socket folder becomes a small tmpfs of ours
    for line in sys.stdin:
        task = Task.from_line(line)
        start = time.perf_counter()
        try:
            result = grade_task(task)
        except Exception:  # noqa: BLE001 - reported to the parent, which carries on
            result = Result(task.work, "not graded", [
                f"the grader failed on it: {_last_line(traceback.format_exc())}"])
            traceback.print_exc()
        result = replace(result, seconds=round(time.perf_counter() - start, 3))
        answers.write(result.to_line() + "\n")
        answers.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
