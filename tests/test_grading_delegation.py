"""Delegation past the switch (issue 33), graded through the real ``python -m autograder grade
--jobs 2`` beside an honest classmate: an answer that reaches a switched-off implementation by a
route other than its name (a reference taken before the hidden tests opened the switch, the same
numpy function held by another of numpy's modules, a copy of a tinyprof function made by
reflection) scores 0 on the test it delegates; the classmate keeps full marks; the copy, which
needs reflection, is also flagged."""

from __future__ import annotations

import json

import pytest
from chapters import grade_cli
from test_autograde import _notebook_name, _solution_answers, _with_answers, test_points

PERCENTILE = {
    "early": "def percentile(samples, q: float, _p=np.percentile) -> float:\n"
             "    return float(_p(samples, q))\n",
    "elsewhere": "import numpy.lib._function_base_impl as _impl\n"
                 "def percentile(samples, q: float) -> float:\n"
                 "    return float(_impl.percentile(samples, q))\n",
}
VERDICT = {
    "copier": "import types\n"
              "_v = types.FunctionType(tp.abtest.verdict.__code__, tp.abtest.verdict.__globals__)\n"
              "def ab_verdict(low, high, p_value, noise_band=0.05, alpha=0.01):\n"
              "    return _v((low, high), p_value, 30, noise_band, alpha)\n",
    "holder": "_held = {'v': tp.abtest.verdict}\n"
              "def ab_verdict(low, high, p_value, noise_band=0.05, alpha=0.01):\n"
              "    return _held['v']((low, high), p_value, 30, noise_band, alpha)\n",
}
#: chapter → the delegated test, and each delegator's answer to its exercise
COHORT = {"04_latency": ("test_percentile", "percentile", PERCENTILE),
          "06_benchmarking": ("test_ab_verdict", "ab_verdict", VERDICT)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    submissions = tmp_path_factory.mktemp("submissions")
    for chapter, (_, exercise, answers) in COHORT.items():
        solved = _solution_answers(chapter)
        for student, code in {"ada": solved[exercise], **answers}.items():
            folder = submissions / student / chapter
            folder.mkdir(parents=True)
            notebook = _with_answers(chapter, {**solved, exercise: code})
            (folder / _notebook_name(chapter)).write_text(json.dumps(notebook))
    rows, _ = grade_cli(submissions, tmp_path_factory.mktemp("graded"), timeout=1200)
    return {(row["student"], row["assignment"]): row for row in rows}


@pytest.mark.parametrize("chapter", sorted(COHORT))
def test_each_route_scores_0_on_its_test_and_the_classmate_keeps_full_marks(graded, chapter):
    delegated, _, answers = COHORT[chapter]
    points = test_points(chapter)
    for student in ["ada", *answers]:
        row = graded[student, chapter]
        assert row["status"] == "graded", (student, row["notes"])
        want = {test: 0.0 if student != "ada" and test == delegated else value
                for test, value in points.items()}
        assert {test: float(row[test]) for test in points} == want, student
    assert graded["ada", chapter]["flagged"] == ""


def test_the_copy_made_by_reflection_is_flagged_and_the_plain_routes_are_not(graded):
    assert "uses .__code__" in graded["copier", "06_benchmarking"]["flagged"]
    for student, chapter in [("early", "04_latency"), ("elsewhere", "04_latency"),
                             ("holder", "06_benchmarking")]:
        assert graded[student, chapter]["flagged"] == "", student
