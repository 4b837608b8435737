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


# --- how a block is made (issue 46): calibrated blocks against the speed tests' --------------

class _Counted:
    """A function whose outputs tell how many of its earlier outputs were still alive when each
    call ran, and which inputs it saw."""

    def __init__(self):
        import weakref

        self.alive, self.seen, self._outputs = [], [], weakref.WeakSet()

    def __call__(self, x):
        self.alive.append(len(self._outputs))
        self.seen.append(id(x))
        out = _Output()
        self._outputs.add(out)
        return out


class _Output:
    pass


def _slow_sum(x):
    _spin(1e-3)
    return _Output()


def test_calibrated_blocks_drop_each_output_and_speed_test_blocks_keep_them():
    """The default drops each output before the next call (the allocator gets its memory back);
    "speed test" keeps every output of a block until the block is timed, as the grader does,
    with the calls chosen from the baseline alone and the same for both sides."""
    from tinyprof.timing.blocks import MAX_CALLS

    calibrated = _Counted()
    result = ab_test(_slow_sum, calibrated, 1.0, rounds=9, clock="cpu")
    assert result.blocks == "calibrated" and max(calibrated.alive) <= 1, calibrated.alive
    kept = _Counted()
    speed = ab_test(_slow_sum, kept, 1.0, rounds=9, clock="cpu", blocks="speed test")
    calls = speed.baseline.loops
    assert speed.candidate.loops == calls and 1 < calls <= MAX_CALLS
    # 0.1 s of a 1 ms baseline: about 100 calls (more on a loaded machine, where a busy wait of
    # 1 ms of wall time is less CPU time); chosen from the candidate's µs, it would be 2048
    assert 50 <= calls <= 500, calls
    assert max(kept.alive) == calls - 1, (max(kept.alive), calls)   # the whole block kept
    assert "the speed test's: " in str(speed) and "every output kept" in str(speed)
    assert "each output dropped before the next call" in str(result)


def test_speed_test_blocks_feed_fresh_inputs_from_make_inputs():
    seeds = []

    def make(seed):
        seeds.append(seed)
        return (np.full(3, float(seed)),)

    fed = _Counted()
    result = ab_test(_slow_sum, fed, make_inputs=make, blocks="speed test", rounds=9, loops=4,
                     clock="cpu")
    assert result.fresh_inputs and "fresh inputs every call" in result.describe_blocks()
    # one input to see where it lives (a GPU?), 3 warm-up calls, then 9 blocks of 4 calls
    assert len(set(seeds)) == len(seeds) == 1 + 3 + 9 * 4
    reused = _Counted()
    one = ab_test(_slow_sum, reused, 1.0, blocks="speed test", rounds=9, loops=4, clock="cpu")
    assert not one.fresh_inputs and len(set(reused.seen)) == 1
    assert "one input reused" in one.describe_blocks()


def test_block_choices_are_checked():
    with pytest.raises(ValueError, match="blocks must be one of 'calibrated', 'speed test'"):
        ab_test(_work, _work, rounds=9, blocks="long")
    with pytest.raises(ValueError, match='pass blocks="speed test"'):
        ab_test(_work, _work, rounds=9, make_inputs=lambda seed: ())
    with pytest.raises(TypeError, match="either arguments .* or make_inputs"):
        ab_test(print, print, 1, rounds=9, blocks="speed test", make_inputs=lambda seed: (1,))
    with pytest.raises(ValueError, match="always interleaved"):
        ab_test(_work, _work, rounds=9, blocks="speed test", interleave=False)


def _fresh_pages(pages=256):
    """An anonymous mapping of ``pages`` pages, each written once: fresh pages at every call,
    whatever the allocator holds (the mapping is the output, so it lives as long as it is kept)."""
    import mmap

    area = mmap.mmap(-1, pages * mmap.PAGESIZE)
    for page in range(pages):
        area[page * mmap.PAGESIZE] = 1
    return area


def _no_pages():
    return sum(range(2000))


def test_the_page_faults_a_call_are_counted_on_each_side():
    pytest.importorskip("resource")
    for blocks in ("calibrated", "speed test"):
        result = ab_test(_no_pages, _fresh_pages, rounds=9, loops=8, clock="cpu", blocks=blocks)
        base, cand = result.faults
        assert cand >= 200 and base < 20, (blocks, result.faults)   # 256 pages touched a call
        assert f"page faults a call {base:,.1f} and {cand:,.1f}" in str(result)


def _result(base_ms, cand_ms, faults=(None, None), spread=0.01, names=("slow", "fast")):
    factors = 1 + spread * np.linspace(-1, 1, 9)
    return ABResult.from_samples(
        LatencyStats.from_samples(base_ms * 1e-3 * factors, name=names[0]),
        LatencyStats.from_samples(cand_ms * 1e-3 * factors, name=names[1]), clock="cpu",
        faults=faults)


def test_two_measurements_that_overlap_agree():
    from tinyprof.timing.agreement import AGREE, Agreement

    both = Agreement(_result(3.6, 0.53, (0, 0)), _result(3.6, 0.54, (0, 1)),
                     ("the A/B", "the test"))
    assert both.agree and both.cause == AGREE
    assert str(both) == "the A/B and the test agree within their intervals (6.8× and 6.7×)."


def test_a_gap_from_page_faults_on_the_side_that_moved_is_named():
    """Issue 46's loader: 6.8× in short blocks, 5.0× in the speed test's, the fast side 0.53 →
    0.72 ms a call with 123 more page faults, the slow side 3.60 → 3.70 ms with 122 more."""
    from tinyprof.timing.agreement import PAGE_FAULTS, Agreement

    apart = Agreement(_result(3.60, 0.53, (0.0, 0.0)), _result(3.70, 0.72, (122.0, 123.0)),
                      ("the A/B", "the speed test's way"))
    assert not apart.agree and apart.cause == PAGE_FAULTS and apart.mover == 1
    said = str(apart)
    assert said.startswith("the A/B and the speed test's way do NOT agree within their "
                           "intervals (6.8× and 5.1×)"), said
    assert "fast 530 µs and 720 µs (1.36×)" in said and "slow 3.6 ms and 3.7 ms (1.03×)" in said
    assert ("The speed test's way touched more fresh pages a call than the A/B: 123 more page "
            "faults for fast (190 µs more a call), 122 for slow.") in said, said


def test_a_gap_without_faults_names_the_machine_or_the_feeding():
    from tinyprof.timing.agreement import FAULT_GAP, FEEDING, MACHINE, Agreement

    machine = Agreement(_result(3.6, 0.53, (0, 0)), _result(4.6, 0.54, (0, 0)))
    assert machine.cause == MACHINE and "the machine changed" in str(machine)
    fed = Agreement(_result(3.6, 0.53, (0, 0)), _result(3.6, 0.70, (0, FAULT_GAP - 1)))
    assert fed.cause == FEEDING and "without more page faults" in str(fed)
    uncounted = Agreement(_result(3.6, 0.53), _result(3.6, 0.70))
    assert uncounted.cause == FEEDING and uncounted.extra_faults is None
