"""Delegation past the switch (issue 33), graded through the real ``python -m autograder grade
--jobs 2`` beside an honest classmate: an answer that reaches a switched-off implementation by a
route other than its name (a reference taken before the hidden tests opened the switch, the same
numpy function held by another of numpy's modules, a copy of a tinyprof function made by
reflection, a tinyprof function with a closure captured before the switch, which only the
profile hook sees run) scores 0 on the test it delegates; the classmate keeps full marks; the
copy, which needs reflection, is also flagged."""

from __future__ import annotations

import json

import pytest
from chapters import grade_cli
from test_autograde import _notebook_name, _solution_answers, _with_answers, test_points

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.cohort]

PERCENTILE = {
    "early": "def percentile(samples, q: float, _p=np.percentile) -> float:\n"
             "    return float(_p(samples, q))\n",
    "elsewhere": "import numpy.lib._function_base_impl as _impl\n"
                 "def percentile(samples, q: float) -> float:\n"
                 "    return float(_impl.percentile(samples, q))\n",
}
#: median_latency's median taken by tinyprof: LatencyStats's dataclass __init__ has a closure
#: (its code cannot be swapped), captured before the hidden tests open the switch.
MEDIAN = {
    "captor": "_stats_init = tp.LatencyStats.__init__\n"
              "def median_latency(fn, warmup: int = 5, iterations: int = 20,\n"
              "                   clock=time.perf_counter) -> float:\n"
              "    for _ in range(warmup):\n"
              "        fn()\n"
              "    times = []\n"
              "    for _ in range(iterations):\n"
              "        start = clock()\n"
              "        fn()\n"
              "        times.append(clock() - start)\n"
              "    stats = object.__new__(tp.LatencyStats)\n"
              "    _stats_init(stats, tuple(times))\n"
              "    return stats.median\n",
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
#: chapter → student → (the delegated test, the exercise, the student's answer to it)
COHORT = {"04_latency": {**{s: ("test_percentile", "percentile", c) for s, c in PERCENTILE.items()},
                         **{s: ("test_median_latency", "median_latency", c)
                            for s, c in MEDIAN.items()}},
          "06_benchmarking": {s: ("test_ab_verdict", "ab_verdict", c) for s, c in VERDICT.items()}}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    submissions = tmp_path_factory.mktemp("submissions")
    for chapter, students in COHORT.items():
        solved = _solution_answers(chapter)
        for student, answer in {"ada": {}, **{s: {e: c} for s, (_, e, c) in students.items()}
                                }.items():
            folder = submissions / student / chapter
            folder.mkdir(parents=True)
            notebook = _with_answers(chapter, {**solved, **answer})
            (folder / _notebook_name(chapter)).write_text(json.dumps(notebook))
    rows, _ = grade_cli(submissions, tmp_path_factory.mktemp("graded"), timeout=1200)
    return {(row["student"], row["assignment"]): row for row in rows}


@pytest.mark.parametrize("chapter", sorted(COHORT))
def test_each_route_scores_0_on_its_test_and_the_classmate_keeps_full_marks(graded, chapter):
    points = test_points(chapter)
    for student in ["ada", *COHORT[chapter]]:
        delegated = COHORT[chapter][student][0] if student != "ada" else None
        row = graded[student, chapter]
        assert row["status"] == "graded", (student, row["notes"])
        want = {test: 0.0 if test == delegated else value for test, value in points.items()}
        assert {test: float(row[test]) for test in points} == want, student
    assert graded["ada", chapter]["flagged"] == ""


def test_the_copy_made_by_reflection_is_flagged_and_the_plain_routes_are_not(graded):
    assert "uses .__code__" in graded["copier", "06_benchmarking"]["flagged"]
    for student, chapter in [("early", "04_latency"), ("elsewhere", "04_latency"),
                             ("captor", "04_latency"), ("holder", "06_benchmarking")]:
        assert graded[student, chapter]["flagged"] == "", student
