"""A/B comparison: Mann–Whitney U and the ratio's bootstrap interval against known values, the
verdict rule, and real interleaved runs (A/A gives "no change", a 2× difference is found)."""

import time

import numpy as np
import pytest

from tinyprof.abtest import ABResult, ab_test, bootstrap_ratio_ci, mann_whitney_u, verdict
from tinyprof.timing import LatencyStats

# (a, b, U, p) recorded from scipy.stats.mannwhitneyu(a, b, alternative="two-sided",
# method="asymptotic", use_continuity=True), scipy 1.17, installed outside the project.
SCIPY_CASES = [
    ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 0.0, 0.012185780355344813),
    ([1.1, 2.2, 2.2, 3.3, 5.0, 6.1], [2.2, 3.3, 4.4, 4.4, 7.0], 10.5, 0.4590186329613657),
    ([5.1, 5.2, 5.0, 5.3, 50.0, 5.4, 5.2, 5.1, 5.0], [4.9, 5.0, 5.1, 4.8, 5.2, 4.9, 5.0, 4.7, 4.9],
     71.0, 0.007369728124850576),
    ([3, 3, 3], [3, 3, 3], 4.5, 1.0),
]


@pytest.mark.parametrize("a, b, u, p", SCIPY_CASES)
def test_mann_whitney_matches_scipy(a, b, u, p):
    got_u, got_p = mann_whitney_u(a, b)
    assert got_u == u
    assert got_p == pytest.approx(p, rel=1e-12)


def test_mann_whitney_refuses_an_empty_side():
    with pytest.raises(ValueError, match="both sides"):
        mann_whitney_u([], [1.0])


def test_bootstrap_ratio_interval_is_seeded_and_covers_the_ratio():
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(np.log(2.0), 0.05, 40), rng.lognormal(np.log(1.0), 0.05, 40)
    low, high = bootstrap_ratio_ci(a, b)
    assert (low, high) == bootstrap_ratio_ci(a, b)
    assert low < np.median(a) / np.median(b) < high
    assert 1.9 < low < high < 2.1
    # the same samples on both sides: the interval straddles 1
    low, high = bootstrap_ratio_ci(a, a)
    assert low < 1.0 < high


@pytest.mark.parametrize("ci, p, rounds, want", [
    ((1.3, 1.5), 1e-6, 30, "faster"),
    ((0.6, 0.7), 1e-6, 30, "slower"),
    ((1.02, 1.04), 1e-6, 30, "no change"),   # significant, but inside the ±5 % band
    ((1.3, 1.5), 0.02, 30, "no change"),     # big, but not significant at 0.01
    ((1.3, 1.5), 1e-6, 8, "no change"),      # too few rounds
    ((0.97, 1.4), 1e-6, 30, "no change"),    # the interval reaches into the band
])
def test_verdict_needs_significance_and_an_interval_outside_the_band(ci, p, rounds, want):
    assert verdict(ci, p, rounds) == want


def test_result_from_known_samples():
    base = LatencyStats.from_samples([2e-3] * 5 + [2.1e-3] * 5 + [1.9e-3] * 5, name="fp32")
    cand = LatencyStats.from_samples([1e-3] * 5 + [1.05e-3] * 5 + [0.95e-3] * 5, name="fused")
    result = ABResult.from_samples(base, cand)
    assert result.speedup == pytest.approx(2.0)
    assert result.verdict == "faster" and result.u_statistic == 225.0
    assert "fused vs fp32: 2.000× as fast" in str(result) and "faster" in str(result)
    few = ABResult.from_samples(LatencyStats.from_samples(base.samples[:5]),
                                LatencyStats.from_samples(cand.samples[:5]))
    assert few.verdict == "no change" and "only 5 rounds" in few.warnings[0]


def _spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_ab_test_interleaved_a_a_and_a_clear_difference():
    def fast():
        _spin(100e-6)

    def slow():
        _spin(200e-6)

    same = ab_test(fast, fast, rounds=20)
    assert same.verdict == "no change" and same.interleaved
    assert (same.baseline.name, same.candidate.name) == ("A", "B")
    faster = ab_test(slow, fast, rounds=20)
    assert faster.verdict == "faster" and faster.speedup > 1.5
    assert ab_test(fast, slow, rounds=20).verdict == "slower"
    assert len(faster.baseline.samples) == len(faster.candidate.samples) == 20


def test_ab_test_checks_its_arguments():
    with pytest.raises(ValueError, match="rounds"):
        ab_test(print, print, rounds=0)
    with pytest.raises(TypeError, match="two callables"):
        ab_test(print, 3)
    sequential = ab_test(lambda: None, lambda: None, rounds=10, interleave=False)
    assert not sequential.interleaved and "sequential blocks" in " ".join(sequential.warnings)


def test_ab_explorer_rejudges_one_run_without_retiming():
    from tinyprof.widgets import ab_explorer

    calls = []

    def fast():
        calls.append("a")
        _spin(50e-6)

    def slow():
        calls.append("b")
        _spin(100e-6)

    widget = ab_explorer(slow, fast, rounds=20)
    timed = len(calls)
    assert widget.result.verdict == "faster" and widget.result.rounds == 20
    used, band = widget.children[0], widget.children[1]
    used.value = 5                       # too few rounds to call anything
    assert widget.result.rounds == 5 and widget.result.verdict == "no change"
    used.value, band.value = 20, 0.3     # a wide band still sees a 2× change
    assert widget.result.verdict == "faster" and widget.result.noise_band == 0.3
    assert len(calls) == timed           # the sliders never re-run the functions
    assert "faster" in widget.text and len(widget.figures) == 1


def test_plot_ab_labels_its_log_time_axis_with_plain_numbers():
    import matplotlib.pyplot as plt

    from tinyprof.plots import plot_ab

    rng = np.random.default_rng(4)
    slow = LatencyStats.from_samples(rng.lognormal(np.log(150e-6), 0.1, 20), name="twice")
    fast = LatencyStats.from_samples(rng.lognormal(np.log(70e-6), 0.1, 20), name="work")
    fig = plot_ab(ABResult.from_samples(slow, fast))
    fig.canvas.draw()
    axis = fig.axes[0]
    assert axis.get_yscale() == "log" and "µs" in axis.get_ylabel()
    labels = [t.get_text() for t in axis.get_yticklabels() + axis.get_yticklabels(minor=True)
              if t.get_text()]
    assert "100" in labels and not any("times" in t or "^" in t for t in labels), labels
    plt.close(fig)
