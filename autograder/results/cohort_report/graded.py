"""What ``grade`` left in DIR, read for the report: grades.csv, problems.txt, and each student's
graded (``autograded/``), handed-in (``submitted/``: the copy the grader repaired and ran) and
released notebooks, and the feedback pages the report links to. Nothing is run again.

A folder that is missing or was never graded is a :class:`ReportError` naming it; a notebook
that cannot be read is a problem naming the student (:attr:`GradedCohort.unread`), and the
rest of the report goes on without it.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ... import course
from ...cells import grade_id, nbgrader_meta
from ..exercises import exercise_names
from ..report import BASE_COLUMNS, EXTRA_COLUMNS

#: The folder the report is written into, inside DIR.
REPORT_FOLDER = "report"


class ReportError(ValueError):
    """DIR cannot give a report: it does not exist, or ``grade`` never wrote it."""


@dataclass(frozen=True)
class Exercise:
    """A graded cell of an assignment, named as the feedback names it."""

    grade_id: str
    name: str
    points: float
    auto: bool
    notebook: str   # the notebook's file name


@dataclass
class GradedCohort:
    """DIR as ``grade`` left it: grades.csv's rows, the problems it listed, and the notebooks
    that could not be read (one sentence each, naming the student)."""

    out: Path
    rows: list[dict[str, str]]
    problems: list[str]
    unread: list[str] = field(default_factory=list)

    def assignments(self) -> list[str]:
        return sorted({row["assignment"] for row in self.rows})

    def rows_of(self, assignment: str) -> list[dict[str, str]]:
        return [row for row in self.rows if row["assignment"] == assignment]

    def notebooks(self, step: str, student: str, assignment: str) -> dict[str, dict]:
        """Notebook name → its JSON in DIR/``step``/STUDENT/ASSIGNMENT; one that cannot be read
        is left out and noted in :attr:`unread`."""
        found = {}
        for path in sorted((self.out / step / student / assignment).glob("*.ipynb")):
            try:
                found[path.name] = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(found[path.name].get("cells"), list):
                    raise ValueError("it has no list of cells")
            except (OSError, ValueError) as err:
                found.pop(path.name, None)
                self.unread.append(f"{student}/{assignment}: the {step} notebook {path.name} "
                                   f"could not be read ({type(err).__name__}: {err}); left out "
                                   "of the report")
        return found

    def feedback_link(self, student: str, assignment: str, notebook: str) -> str:
        """The relative link from a report page to the student's feedback page."""
        page = Path("feedback") / student / assignment / (Path(notebook).stem + ".html")
        return "../" + quote(page.as_posix())

    def released(self, assignment: str) -> dict[str, dict]:
        """The released (student) notebooks of ``assignment``: DIR/release, else notebooks/."""
        for folder in (self.out / "release" / assignment, course.NOTEBOOKS / assignment):
            paths = sorted(folder.glob("*.ipynb"))
            if paths:
                return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in paths}
        return {}


def read_graded(out: Path) -> GradedCohort:
    """DIR's grades and problems; ReportError when DIR is missing or was not graded."""
    out = Path(out)
    if not out.is_dir():
        raise ReportError(f"{out}: no such folder (give the folder `python -m autograder grade "
                          "... --out DIR` wrote)")
    grades = out / "grades.csv"
    if not grades.is_file():
        raise ReportError(f"{out} has not been graded: it holds no grades.csv (run `python -m "
                          f"autograder grade SUBMISSIONS --out {out}` first)")
    try:
        with open(grades, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            columns = reader.fieldnames or []
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ReportError(f"{grades}: cannot be read ({err})") from None
    missing = [c for c in ("student", "assignment", "status", "needs_manual_grade")
               if c not in columns]
    if missing:
        raise ReportError(f"{grades} is not a grades.csv that grade wrote: no column "
                          f"{', '.join(missing)}")
    problems_file = out / "problems.txt"
    problems = problems_file.read_text(encoding="utf-8").splitlines() \
        if problems_file.is_file() else []
    return GradedCohort(out.resolve(), rows, problems)


def exercises_of(assignment: str, rows: list[dict[str, str]]) -> list[Exercise]:
    """The graded cells of ``assignment`` in course order, named from the instructor's
    notebooks; for an assignment the course does not know, grades.csv's question columns
    that hold a score in ``rows``, their points unknown (the highest score seen)."""
    found = []
    for spec in course.notebook_specs():
        if spec.assignment != assignment:
            continue
        names = exercise_names(json.loads(spec.source.read_text(encoding="utf-8")))
        found += [Exercise(gid, names.get(gid, gid), points, gid in spec.auto, spec.name)
                  for gid, points in spec.points.items()]
    if found:
        return found
    fixed = set(BASE_COLUMNS) | set(EXTRA_COLUMNS)
    columns = [c for c in (rows[0] if rows else {}) if c not in fixed
               and any(score(row.get(c)) is not None for row in rows)]
    return [Exercise(c, c, max(score(row.get(c)) or 0.0 for row in rows), True, "")
            for c in columns]


def instructor_cells(assignment: str) -> dict[str, dict]:
    """Grade id → the instructor's cell (its hidden tests included), for every notebook of the
    assignment in solutions/."""
    cells = {}
    for path in sorted((course.SOLUTIONS / assignment).glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
            if grade_id(cell) and nbgrader_meta(cell).get("grade"):
                cells[grade_id(cell)] = cell
    return cells


def score(text: str | None) -> float | None:
    """A grades.csv score: None when empty (awaiting a manual grade, or not scored)."""
    if text is None or not str(text).strip():
        return None
    try:
        return float(str(text).lstrip("'"))
    except ValueError:
        return None
