"""LatencyStats on known samples, and measure_latency's harness: calibration, GC, warnings."""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import platform
import statistics
import time
import tracemalloc

import numpy as np
import pytest

from tinyprof.models import mlp
from tinyprof.plots import plot_latency
from tinyprof.timing import (
    BLAS_THREAD_VARIABLES,
    LatencyStats,
    TimingContext,
    TimingWarning,
    bootstrap_median_ci,
    bootstrap_medians,
    collect_context,
    compare,
    compare_latency,
    measure_latency,
)

MS = 1e-3
SEED_EXAMPLE = [5.1 * MS, 5.2 * MS, 5.0 * MS, 5.3 * MS, 50.0 * MS]


def quiet_context(**changes) -> TimingContext:
    """The real context with a load average that cannot trigger the busy-machine warning."""
    return dataclasses.replace(collect_context(), **{"load_average": (0.0, 0.0, 0.0), **changes})


# -- statistics on known samples ----------------------------------------------------------------
def test_seed_example_mean_lies_median_does_not():
    s = LatencyStats.from_samples(SEED_EXAMPLE)
    assert s.mean == pytest.approx(14.12 * MS)
    assert s.median == pytest.approx(5.2 * MS) and s.p50 == s.median
    assert (s.min, s.max) == (pytest.approx(5.0 * MS), pytest.approx(50.0 * MS))
    # linear percentiles of 5 sorted values: Q1 at position 1, Q3 at position 3
    assert (s.q1, s.q3) == (pytest.approx(5.1 * MS), pytest.approx(5.3 * MS))
    assert s.iqr == pytest.approx(0.2 * MS)
    assert s.outliers == 1, "50 ms lies above Q3 + 1.5·IQR = 5.6 ms; nothing else does"
    assert s.std == pytest.approx(statistics.stdev(SEED_EXAMPLE))
    assert s.cv == pytest.approx(statistics.stdev(SEED_EXAMPLE) / (14.12 * MS))
    # the CV is all the one outlier's doing: the typical call is steady, the mean is not
    assert s.cv_inliers == pytest.approx(statistics.stdev(SEED_EXAMPLE[:4]) / (5.15 * MS))
    assert not s.unstable
    assert s.warnings[0].kind == "outliers"
    assert s.warnings[0].message.startswith("1 of 5 samples are beyond")
    assert "CV to 142.1%" in s.warnings[0].message


def test_percentiles_of_1_to_100_use_linear_interpolation():
    s = LatencyStats.from_samples(np.arange(1.0, 101.0))
    # position h = 99·q/100: p90 → 89.1 → 90 + 0.1·1
    assert s.p50 == pytest.approx(50.5)
    assert s.p90 == pytest.approx(90.1)
    assert s.p95 == pytest.approx(95.05)
    assert s.p99 == pytest.approx(99.01)
    assert (s.q1, s.q3, s.iqr) == (pytest.approx(25.75), pytest.approx(75.25), pytest.approx(49.5))
    assert s.mean == pytest.approx(50.5)
    assert s.std == pytest.approx(math.sqrt(100 * 101 / 12))  # n(n+1)/12 with ddof=1
    assert s.cv == pytest.approx(math.sqrt(100 * 101 / 12) / 50.5)
    assert s.outliers == 0


def test_iqr_and_cv_of_four_values():
    s = LatencyStats.from_samples([1.0, 2.0, 3.0, 4.0])
    assert (s.q1, s.q3, s.iqr) == (1.75, 3.25, 1.5)
    assert s.median == 2.5
    assert s.std == pytest.approx(math.sqrt(5 / 3))
    assert s.cv == pytest.approx(math.sqrt(5 / 3) / 2.5)


def test_one_sample_has_zero_spread_and_a_point_ci():
    s = LatencyStats.from_samples([3e-3])
    assert (s.std, s.iqr, s.cv, s.outliers) == (0.0, 0.0, 0.0, 0)
    assert s.ci == (3e-3, 3e-3)


def test_from_samples_round_trip_rebuilds_the_same_object():
    measured = measure_latency(time.sleep, 1e-4, warmup=1, iterations=15)
    rebuilt = LatencyStats.from_samples(
        list(measured.samples), loops=measured.loops, name=measured.name,
        warmup=measured.warmup, timer_resolution=measured.timer_resolution,
        timer_overhead=measured.timer_overhead, tracemalloc_active=measured.tracemalloc_active,
        context=measured.context)
    assert rebuilt == measured
    bare = LatencyStats.from_samples(np.array(measured.samples))
    assert bare.summary() | {"loops": 1} == measured.summary() | {"loops": 1}


def test_samples_are_checked():
    with pytest.raises(ValueError, match="at least one sample"):
        LatencyStats.from_samples([])
    with pytest.raises(ValueError, match="finite and ≥ 0"):
        LatencyStats.from_samples([1e-3, -1e-3])
    with pytest.raises(ValueError, match="finite and ≥ 0"):
        LatencyStats.from_samples([1e-3, float("nan")])
    with pytest.raises(ValueError, match="loops"):
        LatencyStats.from_samples([1e-3], loops=0)


def test_stats_are_immutable():
    s = LatencyStats.from_samples(SEED_EXAMPLE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.median = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.samples = ()
    assert isinstance(s.samples, tuple) and isinstance(s.ci, tuple)
    assert hash(s) == hash(LatencyStats.from_samples(SEED_EXAMPLE))


# -- the bootstrap CI of the median -------------------------------------------------------------
def test_ci_contains_the_median_and_is_reproducible():
    rng = np.random.default_rng(1)
    for n in (5, 21, 200):
        samples = rng.lognormal(np.log(1e-3), 0.3, n)
        s = LatencyStats.from_samples(samples)
        assert s.ci[0] <= s.median <= s.ci[1], f"n={n}: {s.ci} misses the median {s.median}"
        assert LatencyStats.from_samples(samples).ci == s.ci, "seeded bootstrap must repeat"


def test_ci_shrinks_with_more_samples():
    rng = np.random.default_rng(2)
    few = LatencyStats.from_samples(rng.lognormal(np.log(1e-3), 0.3, 20))
    many = LatencyStats.from_samples(rng.lognormal(np.log(1e-3), 0.3, 2000))
    width = lambda s: s.ci[1] - s.ci[0]  # noqa: E731
    # the CI width of a median shrinks like 1/√n: 100× the samples, about 10× narrower
    assert width(many) < width(few) / 4, (width(few), width(many))


# -- warnings -------------------------------------------------------------------------------------
def test_steady_samples_have_no_warnings():
    samples = 1e-3 * (1 + 0.01 * np.random.default_rng(3).standard_normal(100))
    s = LatencyStats.from_samples(samples, context=quiet_context())
    assert s.warnings == () and not s.unstable


def test_cv_above_10_percent_from_one_outlier_warns_outliers_not_unstable():
    s = LatencyStats.from_samples([1e-3] * 99 + [10e-3], context=quiet_context())
    assert s.iqr == 0.0 and s.cv > 0.10 and s.cv_inliers < 1e-12 and s.outliers == 1
    assert len(s.warnings) == 1 and str(s.warnings[0]).startswith("outliers: 1 of 100 samples")
    assert "10.0× the median" in s.warnings[0].message and not s.unstable


def test_unstable_by_cv_without_outliers():
    # 24 + 24 samples far out (but inside the fences 0.82–1.18 ms), 52 near the median
    samples = [0.83e-3] * 24 + [0.955e-3] * 26 + [1.045e-3] * 26 + [1.17e-3] * 24
    s = LatencyStats.from_samples(samples)
    assert s.outliers == 0 and s.iqr / s.median == pytest.approx(0.09)
    assert s.cv == s.cv_inliers == pytest.approx(0.1228, abs=1e-3)
    assert s.unstable and str(s.warnings[0]).startswith("unstable: IQR/median 9.0%, CV 12.3%")


def test_unstable_by_iqr_alone():
    s = LatencyStats.from_samples([0.94e-3] * 50 + [1.06e-3] * 50)
    assert s.cv == pytest.approx(0.0603, abs=1e-3)
    assert s.iqr / s.median == pytest.approx(0.12)
    assert s.unstable


def test_near_timer_resolution_warning():
    coarse = LatencyStats.from_samples([10e-6] * 10, timer_resolution=1e-6)
    assert any(w.kind == "near resolution" for w in coarse.warnings)
    fine = LatencyStats.from_samples([10e-6] * 10, timer_resolution=1e-9)
    assert fine.warnings == ()
    # 10 loops of 10 µs make a 100 µs block: 100 ticks of 1 µs, just enough
    looped = LatencyStats.from_samples([10e-6] * 10, loops=10, timer_resolution=1e-6)
    assert looped.warnings == ()


def test_busy_machine_warning_comes_from_the_context():
    busy = quiet_context(load_average=(4.0, 3.0, 2.0), usable_cpus=2)
    s = LatencyStats.from_samples([1e-3] * 10, context=busy)
    assert len(s.warnings) == 1
    assert str(s.warnings[0]).startswith("busy machine: 1-minute load average 4.00 on 2 usable")


def test_tracemalloc_warning_and_the_trace_is_left_running():
    warning = LatencyStats.from_samples([1e-3], tracemalloc_active=True).warnings[-1]
    assert warning.kind == "tracing active"
    assert warning.message.startswith("tracemalloc was tracing")
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        s = measure_latency(lambda: [0] * 10, warmup=1, iterations=5)
        assert tracemalloc.is_tracing(), "measure_latency must not stop a caller's trace"
    finally:
        if started:
            tracemalloc.stop()
    assert s.tracemalloc_active and any(w.kind == "tracing active" for w in s.warnings)


# -- the harness ----------------------------------------------------------------------------------
def test_lambda_none_is_calibrated_to_a_sane_sub_microsecond_median():
    s = measure_latency(lambda: None)
    assert s.loops > 1, "a ~20 ns call needs many calls per sample"
    assert 1e-9 < s.median < 5e-6
    assert s.n == 100 and s.calls == 100 * s.loops
    assert not any(w.kind == "near resolution" for w in s.warnings)


def test_single_calls_of_a_tiny_function_warn_about_the_timer():
    s = measure_latency(lambda: None, warmup=0, iterations=5, loops=1)
    assert s.loops == 1
    assert any(w.kind == "near resolution" for w in s.warnings)


def test_sleeping_2_ms_measures_about_2_ms():
    s = measure_latency(time.sleep, 2e-3, warmup=1, iterations=10)
    assert s.loops == 1
    assert 1.9e-3 < s.median < 100e-3  # sleep never returns early; the machine may be busy
    assert s.name == "sleep"


def test_arguments_and_keyword_arguments_reach_the_function():
    calls = []
    measure_latency(lambda a, b=0: calls.append((a, b)), 1, b=2, warmup=2, iterations=3, loops=1)
    assert calls == [(1, 2)] * 5


def test_warmup_and_iteration_counts_are_honoured():
    calls = []
    s = measure_latency(lambda: calls.append(1), warmup=7, iterations=4, loops=3)
    assert len(calls) == 7 + 4 * 3 and s.n == 4 and s.warmup == 7


@pytest.mark.parametrize("enabled_before", [True, False])
def test_gc_is_off_while_sampling_and_restored(enabled_before):
    seen = []
    was = gc.isenabled()
    (gc.enable if enabled_before else gc.disable)()
    try:
        measure_latency(lambda: seen.append(gc.isenabled()), warmup=2, iterations=3, loops=1)
        assert gc.isenabled() is enabled_before
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [enabled_before] * 2 + [False] * 3


@pytest.mark.parametrize("enabled_before", [True, False])
def test_gc_is_restored_when_the_function_raises_while_timed(enabled_before):
    calls = []

    def fails_on_fourth_call():
        calls.append(1)
        if len(calls) == 4:
            raise KeyError("boom")

    was = gc.isenabled()
    (gc.enable if enabled_before else gc.disable)()
    try:
        with pytest.raises(RuntimeError, match="fails_on_fourth_call raised KeyError during "
                                               "timing") as info:
            measure_latency(fails_on_fourth_call, warmup=2, iterations=5, loops=1)
        assert gc.isenabled() is enabled_before
    finally:
        (gc.enable if was else gc.disable)()
    assert isinstance(info.value.__cause__, KeyError)


def test_a_function_raising_in_warmup_is_named_with_its_error_chained():
    def broken(x):
        raise ValueError(f"cannot take {x}")

    with pytest.raises(RuntimeError, match=r"broken raised ValueError during warm-up: cannot "
                                           r"take 3") as info:
        measure_latency(broken, 3)
    assert isinstance(info.value.__cause__, ValueError)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="iterations must be ≥ 1, got 0"):
        measure_latency(lambda: None, iterations=0)
    with pytest.raises(ValueError, match="warmup must be ≥ 0, got -1"):
        measure_latency(lambda: None, warmup=-1)
    with pytest.raises(ValueError, match="loops must be ≥ 1"):
        measure_latency(lambda: None, loops=0)
    with pytest.raises(TypeError, match="iterations must be an integer, got 2.5"):
        measure_latency(lambda: None, iterations=2.5)
    with pytest.raises(TypeError, match="fn must be callable, got ndarray"):
        measure_latency(np.zeros(3))


def test_a_model_is_timed_by_calling_it_and_named_by_its_type():
    model = mlp((8, 4, 2))
    x = np.ones((3, 8), dtype=np.float32)
    s = measure_latency(model, x, warmup=2, iterations=5)
    assert s.name == "Sequential" and s.median > 0
    assert s.median * 1e3 > 0  # the facade's latency_ms


def test_context_is_recorded(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    ctx = measure_latency(lambda: None, warmup=0, iterations=2).context
    assert isinstance(ctx, TimingContext)
    assert ctx.python == platform.python_version() and ctx.numpy == np.__version__
    assert ctx.machine == platform.machine() and ctx.cpu_count == os.cpu_count()
    assert tuple(k for k, _ in ctx.blas_threads) == BLAS_THREAD_VARIABLES
    threads = dict(ctx.blas_threads)
    assert threads["OMP_NUM_THREADS"] == "3" and threads["MKL_NUM_THREADS"] is None
    assert "OMP_NUM_THREADS=3" in str(ctx) and "perf_counter" in ctx.timer


# -- printing, plotting, comparing ----------------------------------------------------------------
def test_prints_in_friendly_units():
    text = str(LatencyStats.from_samples(SEED_EXAMPLE, name="forward"))
    assert text.startswith("forward: median 5.2 ms per call, 95% CI [")
    assert "mean 14.1 ms" in text and "IQR 200 µs" in text and "outliers 1" in text
    assert "warning: outliers" in text
    assert "ns per call" in str(LatencyStats.from_samples([20e-9, 21e-9], loops=10_000))
    assert repr(LatencyStats.from_samples(SEED_EXAMPLE)).startswith("LatencyStats(median=5.2 ms")
    html = LatencyStats.from_samples(SEED_EXAMPLE)._repr_html_()
    assert "<table" in html and "5.2 ms" in html and "<li>outliers" in html

    class Printer:
        text = ""

    def record(value):
        Printer.text += value

    printer = Printer()
    printer.text = record
    LatencyStats.from_samples(SEED_EXAMPLE)._repr_pretty_(printer, cycle=False)
    assert Printer.text == str(LatencyStats.from_samples(SEED_EXAMPLE))


def test_plot_marks_the_percentiles_and_leaves_pyplot_alone():
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    before = plt.get_fignums()
    s = LatencyStats.from_samples(np.random.default_rng(4).lognormal(np.log(3e-3), 0.2, 200))
    fig = plot_latency(s)
    assert isinstance(fig, Figure) and plt.get_fignums() == before
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert [label.split()[0] for label in labels] == ["p50", "p95", "p99"]
    assert fig.axes[0].get_lines()[1].get_xdata()[0] == pytest.approx(s.p95 / MS)
    assert fig.axes[0].get_xlabel() == "time per call (ms)"


def test_compare_says_slower_only_when_the_cis_do_not_overlap():
    rng = np.random.default_rng(5)
    base = LatencyStats.from_samples(1e-3 * rng.lognormal(0, 0.05, 100), name="base")
    twice = LatencyStats.from_samples(2 * np.array(base.samples), name="twice")
    same = LatencyStats.from_samples(1e-3 * rng.lognormal(0, 0.05, 100), name="same")
    table = compare_latency(base, twice, same)
    assert table.columns == ["name", "median", "95% CI", "p95", "IQR", "CV", "ratio", "verdict",
                             "warnings"]
    assert table.column("ratio") == [1.0, pytest.approx(2.0), pytest.approx(1.0, abs=0.05)]
    assert table.column("verdict") == ["baseline", "slower", "no change"]
    assert compare_latency(twice, base).column("verdict")[1] == "faster"
    with pytest.raises(ValueError, match="2 labels for 3"):
        compare_latency(base, twice, same, labels=["a", "b"])


def test_latency_stats_round_trip_through_json_and_compare_with_a_saved_baseline(tmp_path):
    context = collect_context()
    steady = np.linspace(5.0 * MS, 5.5 * MS, 50)
    before = LatencyStats.from_samples(steady, loops=3, name="forward", warmup=2,
                                       timer_overhead=4e-8, context=context)
    path = before.save(tmp_path / "baseline.json")
    after = LatencyStats.load(path)
    assert after == before and after.context == context
    assert (after.median, after.ci, after.warnings) == (before.median, before.ci, before.warnings)
    slower = LatencyStats.from_samples(2 * steady, name="slower")
    verdict = compare(after, slower)
    assert verdict.ratio == pytest.approx(2.0) and verdict.speedup == pytest.approx(0.5)
    assert verdict.verdict == "slower" and compare(after, after).verdict == "no change"
    assert str(verdict).startswith("slower vs forward: median")
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match=r"other.json: not a saved LatencyStats"):
        LatencyStats.load(tmp_path / "other.json")
    with pytest.raises(TypeError, match="other must be a LatencyStats"):
        compare(after, [1e-3])


def test_statistics_are_computed_when_first_asked_for():
    stats = LatencyStats.from_samples(np.linspace(1e-3, 2e-3, 100_000))
    assert not {"_quantiles", "ci", "warnings", "mean"} & set(vars(stats))
    assert stats.median == pytest.approx(1.5e-3)
    assert "_quantiles" in vars(stats) and "ci" not in vars(stats)
    with pytest.raises(ValueError, match="kind must be one of"):
        TimingWarning("odd", "message")


def _cdf_at(draws: np.ndarray, points: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.sort(draws), points, side="right") / draws.size


@pytest.mark.parametrize("n", [1, 7, 31])
def test_bootstrap_medians_follow_the_exact_bootstrap_distribution(n):
    # For odd n the resample's median is at most the j-th smallest sample exactly when at least
    # m = (n + 1)/2 of its n draws fall among the j smallest: P = P(Binomial(n, j/n) ≥ m).
    x = np.random.default_rng(n).lognormal(0, 0.4, n)
    m = (n + 1) // 2
    exact = [sum(math.comb(n, k) * (j / n) ** k * (1 - j / n) ** (n - k) for k in range(m, n + 1))
             for j in range(1, n + 1)]
    drawn = _cdf_at(bootstrap_medians(x, resamples=200_000, seed=1), np.sort(x))
    assert np.abs(drawn - exact).max() < 0.005


@pytest.mark.parametrize("n", [2, 8, 30])
def test_bootstrap_medians_match_resampling_indices_for_even_n(n):
    # The textbook bootstrap (chapter 04's recipe) draws n indices per resample.
    x = np.random.default_rng(n).lognormal(0, 0.4, n)
    indices = np.random.default_rng(2).integers(0, n, size=(100_000, n))
    textbook = np.median(x[indices], axis=1)
    fast = bootstrap_medians(x, resamples=100_000, seed=3)
    points = np.unique(textbook)
    assert np.abs(_cdf_at(fast, points) - _cdf_at(textbook, points)).max() < 0.01


def test_the_bootstrap_of_many_samples_brackets_their_median_closely():
    # 10⁵ samples: O(n log n + resamples) work, not 2,000 × 10⁵ draws (benchmarks/ times it).
    x = np.random.default_rng(0).lognormal(0, 0.3, 100_000)
    low, high = bootstrap_median_ci(x)
    assert low < np.median(x) < high
    assert (high - low) / np.median(x) < 0.01   # the median of 10⁵ samples is known closely


def test_bootstrap_refuses_no_samples():
    with pytest.raises(ValueError, match="at least one sample"):
        bootstrap_median_ci([])


def test_one_machine_description_and_its_differences():
    """TimingContext describes the machine once: the suite's machine profile, the roofline's
    context line and the regression check's warnings are all read from it."""
    from dataclasses import replace

    from tinyprof.bench.regression import machine_differences
    from tinyprof.bench.suite import machine_profile
    from tinyprof.timing import collect_context
    from tinyprof.timing.context import COMPARABLE_KEYS

    here = collect_context()
    assert here.differences(here) == [] and set(here.comparable()) == set(COMPARABLE_KEYS)
    other = replace(here, numpy="1.0.0", blas_threads=(("OMP_NUM_THREADS", "8"),),
                    load_average=(9.0, 9.0, 9.0))
    assert here.differences(other) == [
        f"numpy: '1.0.0' → {here.numpy!r}",
        f"blas_threads: {{'OMP_NUM_THREADS': '8'}} → {dict(here.blas_threads)!r}"]
    profile = machine_profile()
    assert {k: profile[k] for k in COMPARABLE_KEYS} == here.comparable()
    assert machine_differences(profile, other.comparable()) == here.differences(other)
    assert here.differences(other.comparable()) == here.differences(other)
    assert here.hardware().startswith(f"{here.cpu}; {here.usable_cpus} usable CPUs; BLAS ")
