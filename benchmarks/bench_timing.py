"""How much does tinyprof's timing harness cost, does it agree with timeit, and how often does
it cry "unstable" on a function that is not?

Run: python benchmarks/bench_timing.py [--quick]  (about 30 s; prints numbers, asserts nothing;
``--quick``: 1 agreement round and 2 runs per false-alarm row, a few seconds)

1. Timer overhead: perf_counter's claimed resolution, the measured cost of one read, what one
   sample costs on top of the function, and what computing the statistics costs.
2. Agreement: tinyprof's median vs timeit's on the same ~1 ms numpy function, in interleaved
   rounds of the same run (ratio ≈ 1 means no bias from the harness).
3. False alarms: the share of runs flagged "unstable" (IQR/median or the CV without outliers
   > 10%) or "outliers" (only outliers push the CV > 10%) on quiet functions, next to the
   plain rule "CV or IQR/median > 10%". Run it on an idle machine for the number that matters.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import timeit

import numpy as np

from tinyprof.timing import LatencyStats, measure_latency, timer_overhead
from tinyprof.timing.harness import make_block
from tinyprof.units import format_seconds

QUICK = "--quick" in sys.argv
RUNS = 2 if QUICK else 20
AGREEMENT_ROUNDS = 1 if QUICK else 5


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def timer_costs() -> None:
    print("1. Timer and harness overhead")
    clock = time.get_clock_info("perf_counter")
    print(f"   perf_counter: {clock.implementation}, claimed resolution {clock.resolution:g} s")
    reads = [timer_overhead(1001) for _ in range(5)]
    print(f"   one perf_counter() read (median of 1001 back-to-back pairs, 5 tries): "
          f"{', '.join(format_seconds(r) for r in reads)}")
    n = 20_000
    single = measure_latency(lambda: None, warmup=0, iterations=n, loops=1)
    block = make_block(lambda: None, (), {})  # the harness's own sampling loop
    start = time.perf_counter()
    for _ in range(n):
        block(1)
    wall = (time.perf_counter() - start) / n
    print(f"   lambda: None, loops=1: median sample {format_seconds(single.median)} "
          f"(= call + loop + one timer read); wall time per sample of the sampling loop "
          f"{format_seconds(wall)}")
    calibrated = measure_latency(lambda: None)
    per_loop = min(timeit.repeat(lambda: None, number=100_000, repeat=5)) / 100_000
    print(f"   lambda: None, calibrated: {calibrated.loops:,} loops/sample, median "
          f"{format_seconds(calibrated.median)}; timeit best-of-5 {format_seconds(per_loop)}; "
          f"ratio {calibrated.median / per_loop:.2f}")
    for size in (100, 1_000, 10_000):
        samples = np.random.default_rng(0).lognormal(np.log(1e-3), 0.1, size)
        begin = time.perf_counter()
        LatencyStats.from_samples(samples)
        print(f"   LatencyStats.from_samples({size:,} samples), bootstrap included: "
              f"{format_seconds(time.perf_counter() - begin)}")


def one_ms_function():
    """np.sin(x).sum() over an array sized so that one call takes about 1 ms (single thread)."""
    x = np.random.default_rng(0).standard_normal(100_000)
    per_call = min(timeit.repeat(lambda: np.sin(x).sum(), number=20, repeat=3)) / 20
    x = np.random.default_rng(0).standard_normal(int(100_000 * 1e-3 / per_call))
    return (lambda: np.sin(x).sum()), x.size


def agreement(fn, size: int) -> None:
    print(f"\n2. tinyprof vs timeit on np.sin(x).sum(), x of {size:,} float64 (~1 ms), "
          f"{AGREEMENT_ROUNDS} interleaved round(s)")
    ratios = []
    for round_ in range(AGREEMENT_ROUNDS):
        ours = measure_latency(fn, warmup=10, iterations=100)
        timer = timeit.Timer(fn)
        timer.repeat(repeat=10, number=1)  # the same warm-up
        theirs = timer.repeat(repeat=100, number=1)
        ratio = ours.median / statistics.median(theirs)
        ratios.append(ratio)
        print(f"   round {round_ + 1}: tinyprof median {format_seconds(ours.median)} "
              f"(loops {ours.loops}), timeit median {format_seconds(statistics.median(theirs))}"
              f", timeit min {format_seconds(min(theirs))}; ratio {ratio:.3f}")
    print(f"   median ratio tinyprof/timeit: {statistics.median(ratios):.3f}")


def false_alarms(name: str, fn) -> None:
    """Counts per warning kind, and the plain rule 'CV or IQR/median > 10%' for reference."""
    kinds = {"unstable": 0, "outliers": 0, "busy": 0}
    plain_rule = 0
    cvs, robust = [], []
    for _ in range(RUNS):
        s = measure_latency(fn)
        cvs.append(s.cv)
        robust.append(s.cv_inliers)
        plain_rule += s.cv > 0.10 or s.iqr / s.median > 0.10
        for kind in kinds:
            kinds[kind] += any(w.kind.startswith(kind) for w in s.warnings)
    print(f"   {name:24s} 'unstable' {kinds['unstable']}/{RUNS}, 'outliers' "
          f"{kinds['outliers']}/{RUNS}, 'busy machine' {kinds['busy']}/{RUNS}; "
          f"plain CV-or-IQR rule {plain_rule}/{RUNS}; median CV {statistics.median(cvs):.1%}, "
          f"without outliers {statistics.median(robust):.1%}")


def main() -> None:
    print(f"load average at start: {load()} on {os.cpu_count()} CPUs\n")
    timer_costs()
    fn, size = one_ms_function()
    agreement(fn, size)
    print(f"\n3. False 'unstable' rate, {RUNS} runs each with the defaults (warm-up 10, "
          "100 samples)")
    small = np.random.default_rng(1).standard_normal(2_000)
    false_alarms("np.sin(x).sum(), ~1 ms", fn)
    false_alarms("np.sin(x).sum(), ~20 µs", lambda: np.sin(small).sum())
    false_alarms("lambda: None", lambda: None)
    print(f"\nload average at end: {load()}")


if __name__ == "__main__":
    main()
