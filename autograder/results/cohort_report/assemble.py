"""One assignment's report, gathered from what ``grade`` left in DIR (graded.py): the
statistics, mistakes, measurements and similar pairs its page shows (page.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .graded import Exercise, GradedCohort, exercises_of, instructor_cells, score
from .measured import MeasuredTest, measured_tests, measurements_in
from .mistakes import MistakeGroup, failures_in, group_failures
from .similarity import SimilarPair, answer_code, release_code, similar_pairs
from .statistics import ExerciseStats, exercise_stats, totals_of


@dataclass
class AssignmentReport:
    """Everything one assignment's page shows."""

    assignment: str
    rows: list[dict[str, str]]
    exercises: list[Exercise]
    stats: list[ExerciseStats]
    mistakes: list[MistakeGroup]
    measured: list[MeasuredTest]
    pairs: list[SimilarPair]
    codes: dict[str, str]
    links: dict[tuple[str, str], str]   # (student, notebook) → link to the feedback page
    problems: list[str] = field(default_factory=list)

    @property
    def graded(self) -> list[dict[str, str]]:
        return [row for row in self.rows if row["status"] == "graded"]

    def link(self, student: str, notebook: str) -> str:
        return self.links.get((student, notebook), "")


def assignment_report(cohort: GradedCohort, assignment: str) -> AssignmentReport:
    """Gather one assignment's statistics, mistakes, measurements and similar pairs."""
    rows = cohort.rows_of(assignment)
    graded = [row for row in rows if row["status"] == "graded"]
    exercises = exercises_of(assignment, rows)
    table = {row["student"]: {e.grade_id: score(row.get(e.grade_id)) for e in exercises}
             for row in graded}
    totals = totals_of(table)
    stats = [exercise_stats(e.grade_id, e.name, e.points,
                            {s: table[s][e.grade_id] for s in table}, totals)
             for e in exercises]
    failures, measured, codes, links = [], {}, {}, {}
    before = len(cohort.unread)
    for row in graded:
        student = row["student"]
        for name, notebook in cohort.notebooks("autograded", student, assignment).items():
            failures += failures_in(notebook, student, name)
            measured.setdefault(student, {}).update(measurements_in(notebook))
            links[student, name] = cohort.feedback_link(student, assignment, name)
        handed_in = cohort.notebooks("submitted", student, assignment)
        codes[student] = "\n\n".join(answer_code(nb) for _, nb in sorted(handed_in.items()))
    boilerplate = "\n\n".join(release_code(nb) for _, nb in
                              sorted(cohort.released(assignment).items()))
    instructor = instructor_cells(assignment)
    return AssignmentReport(
        assignment=assignment, rows=rows, exercises=exercises, stats=stats,
        mistakes=group_failures(failures, [e.grade_id for e in exercises]),
        measured=measured_tests(measured, instructor),
        pairs=similar_pairs(codes, boilerplate), codes=codes, links=links,
        problems=_problems_of(cohort, assignment, rows) + cohort.unread[before:])


def _problems_of(cohort: GradedCohort, assignment: str, rows: list[dict[str, str]]
                 ) -> list[str]:
    """problems.txt's lines about this assignment (its students' rows, or naming it)."""
    keys = tuple(f"{row['student']}/{assignment}:" for row in rows)
    return [line for line in cohort.problems if line.startswith(keys) or assignment in line]
