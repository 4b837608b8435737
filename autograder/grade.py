"""``python -m autograder grade SUBMISSIONS --out DIR``: autograde a cohort with real nbgrader.

SUBMISSIONS holds ``student/assignment/notebook.ipynb``. Each submission is copied into an
nbgrader course folder under DIR, autograded into DIR/gradebook.db, and given a feedback page.
Out come DIR/grades.csv (a row per student and assignment, a column per graded question) and
DIR/feedback/student/assignment/notebook.html. A broken submission is reported in
DIR/problems.txt and in the grades (status column); it never stops the others.
"""

from __future__ import annotations

import csv
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from . import course


@dataclass
class Submission:
    student: str
    assignment: str
    notebook: Path


@dataclass
class GradeRow:
    student: str
    assignment: str
    score: float = 0.0
    max_score: float = 0.0
    auto_score: float = 0.0
    max_auto_score: float = 0.0
    needs_manual_grade: bool = False
    status: str = "graded"
    questions: dict[str, float] = field(default_factory=dict)


def find_submissions(root: Path) -> tuple[list[Submission], list[str]]:
    """``student/assignment/notebook.ipynb`` files under ``root``, and what could not be mapped."""
    known = set(course.assignments())
    found, problems = [], []
    for path in sorted(Path(root).rglob("*")):
        if path.is_dir() or ".ipynb_checkpoints" in path.parts:
            continue
        parts = path.relative_to(root).parts
        if len(parts) == 3 and parts[1] in known and path.suffix == ".ipynb":
            found.append(Submission(parts[0], parts[1], path))
        else:
            problems.append(f"{path.relative_to(root)}: not of the form student/assignment/"
                            f"notebook.ipynb with an assignment in {sorted(known)}")
    return found, problems


class Grader:
    """One nbgrader course folder and gradebook under ``out``."""

    def __init__(self, out: Path):
        self.out = Path(out).resolve()
        self.work = self.out / "nbgrader"
        self.work.mkdir(parents=True, exist_ok=True)
        self.db_url = f"sqlite:///{self.out / 'gradebook.db'}"
        config = course.load_config(root=str(self.work),
                                    source_directory=str(course.SOLUTIONS),
                                    db_url=self.db_url)
        self.nbgrader = course.api(config)
        self._registered: set[str] = set()

    def register(self, assignment: str) -> None:
        """Put the assignment (cells, points, hidden tests) into the gradebook once."""
        if assignment in self._registered:
            return
        result = self.nbgrader.generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"cannot register {assignment} in the gradebook:\n{result['error']}")
        self._registered.add(assignment)

    def grade(self, sub: Submission) -> tuple[GradeRow, list[str]]:
        """Autograde one submission and write its feedback; problems are returned, not raised."""
        self.register(sub.assignment)
        source = course.SOLUTIONS / sub.assignment
        expected = sorted(p.name for p in source.glob("*.ipynb"))
        row, problems = GradeRow(sub.student, sub.assignment), []
        target = self.work / "submitted" / sub.student / sub.assignment
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        name = sub.notebook.name if sub.notebook.name in expected else expected[0]
        if sub.notebook.name not in expected:
            problems.append(f"{sub.student}/{sub.assignment}: notebook named {sub.notebook.name}, "
                            f"expected {expected[0]}; graded as {expected[0]}")
        shutil.copy(sub.notebook, target / name)
        result = self.nbgrader.autograde(sub.assignment, sub.student, force=True, create=True)
        if not result["success"]:
            row.status = "not graded"
            problems.append(f"{sub.student}/{sub.assignment}: nbgrader could not grade it: "
                            f"{_last_line(result['error'] or result['log'])}")
            return row, problems
        feedback = self.nbgrader.generate_feedback(sub.assignment, sub.student, force=True)
        if not feedback["success"]:
            problems.append(f"{sub.student}/{sub.assignment}: no feedback page: "
                            f"{_last_line(feedback['error'])}")
        self._copy_feedback(sub)
        self._fill_scores(row)
        return row, problems

    def _copy_feedback(self, sub: Submission) -> None:
        produced = self.work / "feedback" / sub.student / sub.assignment
        target = self.out / "feedback" / sub.student / sub.assignment
        shutil.rmtree(target, ignore_errors=True)
        if produced.exists():
            shutil.copytree(produced, target, ignore=shutil.ignore_patterns("*.ipynb"))

    def _fill_scores(self, row: GradeRow) -> None:
        from nbgrader.api import Gradebook

        with Gradebook(self.db_url, "tinyprof") as gradebook:
            submission = gradebook.find_submission(row.assignment, row.student)
            row.score, row.max_score = submission.score, submission.max_score
            row.auto_score, row.max_auto_score = submission.code_score, submission.max_code_score
            row.needs_manual_grade = submission.needs_manual_grade
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    row.questions[grade.name] = grade.score


def _last_line(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"


def write_grades(rows: list[GradeRow], path: Path) -> None:
    """grades.csv: student, assignment, total and autograded scores, whether a manual grade is
    still needed, status, then one column per graded question (its nbgrader grade id)."""
    questions = sorted({q for row in rows for q in row.questions})
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "assignment", "score", "max_score", "auto_score",
                         "max_auto_score", "needs_manual_grade", "status", *questions])
        for row in sorted(rows, key=lambda r: (r.assignment, r.student)):
            writer.writerow([row.student, row.assignment, _fmt(row.score), _fmt(row.max_score),
                             _fmt(row.auto_score), _fmt(row.max_auto_score),
                             "yes" if row.needs_manual_grade else "no", row.status,
                             *(_fmt(row.questions.get(q)) for q in questions)])


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def grade(submissions: Path, out: Path) -> tuple[list[GradeRow], list[str]]:
    """Grade every submission under ``submissions`` into ``out``; return the rows and problems."""
    found, problems = find_submissions(Path(submissions))
    grader = Grader(out)
    rows = []
    for i, sub in enumerate(found, 1):
        print(f"[{i}/{len(found)}] grading {sub.student}/{sub.assignment}", flush=True)
        row, sub_problems = grader.grade(sub)
        rows.append(row)
        problems += sub_problems
    write_grades(rows, grader.out / "grades.csv")
    (grader.out / "problems.txt").write_text("".join(f"{p}\n" for p in problems), encoding="utf-8")
    return rows, problems
