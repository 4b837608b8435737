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


def _sleep_2ms():
    time.sleep(2e-3)


def _work():
    """About half a millisecond of pure-Python arithmetic: CPU-bound, single-threaded."""
    total = 0
    for i in range(20_000):
        total += i * i
    return total


def test_the_cpu_clock_does_not_count_a_sleep_and_the_wall_clock_does():
    cpu = ab_test(_sleep_2ms, _work, rounds=9, loops=1, clock="cpu")
    wall = ab_test(_sleep_2ms, _work, rounds=9, loops=1, clock="wall")
    assert (cpu.clock, wall.clock) == ("cpu", "wall")
    assert cpu.baseline.median < 0.2e-3, (
        "a 2 ms sleep should cost almost no CPU time (the call itself), got "
        f"{cpu.baseline.median:.2e} s")
    assert 2e-3 <= wall.baseline.median < 4e-3, (
        f"by the wall clock a 2 ms sleep takes 2 ms and a little, got {wall.baseline.median:.2e} s")
    assert "cpu clock" in str(cpu) and "wall clock" in str(wall)


def test_both_clocks_agree_on_cpu_bound_work():
    cpu = ab_test(_work, _work, rounds=15, clock="cpu")
    wall = ab_test(_work, _work, rounds=15, clock="wall")
    ratio = wall.baseline.median / cpu.baseline.median
    assert 0.8 < ratio < 1.2, (
        f"a single-threaded busy loop should take about as long by either clock: wall "
        f"{wall.baseline.median:.2e} s against CPU {cpu.baseline.median:.2e} s a call")


def test_a_sleep_timed_by_cpu_time_calibrates_to_few_calls():
    """Calibration grows the calls per block until a block lasts 200 µs: by the block's own
    reading, or by the wall clock for a call that waits (a sleep's CPU time never reaches it)."""
    from tinyprof.timing.harness import calibrate_loops, make_block

    started = time.perf_counter()
    loops = calibrate_loops(make_block(_sleep_2ms, (), {}, "cpu"), 200e-6)
    took = time.perf_counter() - started
    assert loops == 1 and took < 1.0, f"calibrated to {loops} calls in {took:.2f} s"


@pytest.mark.parametrize("clock, error", [("CPU", ValueError), ("process_time", ValueError),
                                          (time.process_time, TypeError), (None, TypeError)])
def test_a_bad_clock_names_the_argument_and_the_choices(clock, error):
    with pytest.raises(error, match=r"ab_test: clock must be .*'wall', 'cpu'"):
        ab_test(_work, _work, rounds=9, clock=clock)
    with pytest.raises(error, match=r"ABResult.from_samples: clock must be"):
        same = LatencyStats.from_samples([1.0] * 9)
        ABResult.from_samples(same, same, clock=clock)


def test_too_few_rounds_print_no_verdict_beside_their_interval():
    base = LatencyStats.from_samples([2e-3, 2.1e-3, 1.9e-3, 2.05e-3, 1.95e-3], name="slow")
    cand = LatencyStats.from_samples([1e-3, 1.05e-3, 0.95e-3, 1.02e-3, 0.98e-3], name="fast")
    few = ABResult.from_samples(base, cand)
    assert few.ci[0] > 1.5                       # an interval far from 1 ...
    assert few.verdict == "no change" and not few.judged   # ... the vocabulary kept for its users
    line = str(few).splitlines()[0]
    assert line.endswith("→ too few rounds for a verdict (5 < 9)"), line
    assert "no change" not in str(few) and "p = " in line, str(few)
    enough = ABResult.from_samples(LatencyStats.from_samples(base.samples * 3, name="slow"),
                                   LatencyStats.from_samples(cand.samples * 3, name="fast"))
    first = str(enough).splitlines()[0]
    assert enough.judged and first.endswith("wall clock) → faster"), first
    assert f"p = {enough.p_value:.2g}" in str(enough)
