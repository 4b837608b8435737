"""The autograde round trip through real nbgrader and its SQLite gradebook, for every chapter.

One cohort is graded once (module fixture). For each chapter: the instructor solution submitted
as a student ("sol"), the untouched student notebook ("blank"), a submission that hard-codes the
visible tests' answers ("hard"), one classic mistake per exercise ("oops") and, where the corpus
has them, answers delegated to tinyprof ("deleg"), from the corpus in tests/corpus/. For chapter 01
also a correct submission whose functions print a warning to stderr inside the test cells
("warn"). None of them tampers with the tests, so none may be flagged.
"""

from __future__ import annotations

import csv
import html
import importlib
import json
import sqlite3
from pathlib import Path

import pytest
from chapters import NOTEBOOKS, SOLUTIONS

from autograder.grade import grade

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.cohort]

CORPUS = {module.CHAPTER: module for module in (
    importlib.import_module(f"corpus.{path.stem}")
    for path in sorted((Path(__file__).parent / "corpus").glob("*.py")))}
CHAPTERS = sorted(CORPUS)


def _notebook_name(chapter: str) -> str:
    return next((SOLUTIONS / chapter).glob("*.ipynb")).name


def _cells(chapter: str) -> list[dict]:
    return json.loads((SOLUTIONS / chapter / _notebook_name(chapter)).read_text())["cells"]


def _with_answers(chapter: str, answers: dict[str, str]) -> dict:
    notebook = json.loads((NOTEBOOKS / chapter / _notebook_name(chapter)).read_text())
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id].strip()
    return notebook


def _solution_answers(chapter: str) -> dict[str, str]:
    """The solution's exercise cells with the solution marker lines removed."""
    answers = {}
    for cell in _cells(chapter):
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code":
            lines = "".join(cell["source"]).splitlines()
            answers[meta["grade_id"]] = "\n".join(line for line in lines if "### " not in line)
    return answers


def _warning_answers(chapter: str) -> dict[str, str]:
    """Correct answers that also print a library-style warning to stderr when called."""
    return {gid: "import warnings\n" + code.replace(
        '"""\n', '"""\n    warnings.warn("float16 is slow on CPUs", RuntimeWarning)\n', 1)
        for gid, code in _solution_answers(chapter).items()}


def test_points(chapter: str) -> dict[str, float]:
    return {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]["points"]
            for c in _cells(chapter) if c["metadata"].get("nbgrader", {}).get("grade")
            and not c["metadata"]["nbgrader"].get("solution")}


test_points.__test__ = False  # a helper, not a test


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    submissions = tmp_path_factory.mktemp("submissions")
    cohort: dict[tuple[str, str], dict] = {}
    for chapter in CHAPTERS:
        corpus = CORPUS[chapter]
        cohort["sol", chapter] = json.loads(
            (SOLUTIONS / chapter / _notebook_name(chapter)).read_text())
        cohort["blank", chapter] = _with_answers(chapter, {})
        cohort["hard", chapter] = _with_answers(chapter, corpus.HARD_CODED)
        cohort["oops", chapter] = _with_answers(
            chapter, {gid: code for gid, (code, _) in corpus.MISTAKES.items()})
        if getattr(corpus, "DELEGATED", None):
            cohort["deleg", chapter] = _with_answers(
                chapter, {gid: code for gid, (code, _) in corpus.DELEGATED.items()})
    cohort["warn", CHAPTERS[0]] = _with_answers(CHAPTERS[0], _warning_answers(CHAPTERS[0]))
    for (student, chapter), notebook in cohort.items():
        folder = submissions / student / chapter
        folder.mkdir(parents=True)
        (folder / _notebook_name(chapter)).write_text(json.dumps(notebook))
    out = tmp_path_factory.mktemp("grading")
    _, problems = grade(submissions, out)
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        table = {(row["student"], row["assignment"]): row for row in csv.DictReader(handle)}
    return out, table, problems


def _feedback(out: Path, student: str, chapter: str) -> str:
    page = out / "feedback" / student / chapter / _notebook_name(chapter).replace(".ipynb", ".html")
    return html.unescape(page.read_text(encoding="utf-8"))


def test_every_submission_was_graded(graded):
    _, table, problems = graded
    delegated = [p for p in problems if p.startswith("deleg/")]
    assert [p for p in problems if p not in delegated] == []
    assert all("called tinyprof's own implementation" in p for p in delegated)
    assert all(row["status"] == "graded" for row in table.values())


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_solution_scores_full_marks_on_autograded_cells(graded, chapter):
    _, table, _ = graded
    row, points = table["sol", chapter], test_points(chapter)
    assert float(row["auto_score"]) == sum(points.values()) == float(row["max_auto_score"])
    for grade_id, value in points.items():
        assert float(row[grade_id]) == value, grade_id
    assert row["needs_manual_grade"] == "yes", "the written reflection awaits a human"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_untouched_student_notebook_scores_zero(graded, chapter):
    _, table, _ = graded
    assert float(table["blank", chapter]["score"]) == 0
    assert "NotImplementedError" in _feedback(graded[0], "blank", chapter)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_hard_coding_the_visible_answers_loses_the_hidden_tests(graded, chapter):
    _, table, _ = graded
    row = table["hard", chapter]
    for grade_id in CORPUS[chapter].HARD_CODED:
        test_id = f"test_{grade_id}"
        if test_id in row:
            assert float(row[test_id]) == 0, f"{test_id}: hard-coded answers kept their points"
    assert float(row["auto_score"]) < float(row["max_auto_score"])


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_classic_mistake_gets_its_hint_in_the_feedback(graded, chapter):
    _, table, _ = graded
    page = _feedback(graded[0], "oops", chapter)
    for grade_id, (_, hint) in CORPUS[chapter].MISTAKES.items():
        assert hint in page, f"{chapter}/{grade_id}: feedback lacks the hint {hint!r}"
    assert float(table["oops", chapter]["auto_score"]) == 0


@pytest.mark.parametrize("chapter", [c for c in CHAPTERS if getattr(CORPUS[c], "DELEGATED", None)])
def test_delegating_to_tinyprof_loses_the_points_with_a_reason(graded, chapter):
    _, table, _ = graded
    page = _feedback(graded[0], "deleg", chapter)
    for grade_id, (_, hint) in CORPUS[chapter].DELEGATED.items():
        assert hint in page, f"{chapter}/{grade_id}: feedback lacks the hint {hint!r}"
        assert float(table["deleg", chapter][f"test_{grade_id}"]) == 0, grade_id


def test_no_submission_of_the_corpus_is_flagged(graded):
    _, table, _ = graded
    assert {key: row["flagged"] for key, row in table.items() if row["flagged"]} == {}


def test_warnings_on_stderr_do_not_zero_passing_cells(graded):
    _, table, _ = graded
    chapter = CHAPTERS[0]
    assert float(table["warn", chapter]["auto_score"]) == sum(test_points(chapter).values())


def test_the_gradebook_is_real_sqlite(graded):
    out, table, _ = graded
    with sqlite3.connect(out / "gradebook.db") as db:
        students = {row[0] for row in db.execute("select id from student")}
        submitted = db.execute("select count(*) from submitted_assignment").fetchone()[0]
    assert students == {"sol", "blank", "hard", "oops", "warn", "deleg"}
    assert submitted == len(table)
