"""What tinyprof's latency statistics cost: building a LatencyStats and reading its statistics
(each computed when first asked for), its bootstrap interval (2,000 resampled medians, each drawn
from its order statistics) beside the textbook bootstrap that draws all n indices of every
resample, and measure_latency's time beyond the samples it takes.

Target (issue 9): 10⁵ samples to statistics in under 0.5 s (it took 6.5 s when the textbook
bootstrap ran on construction).

Run: ``python benchmarks/bench_latency_stats.py [--quick]``  (``--quick``: 10³ and 10⁴ samples, one
measure_latency run)
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import tinyprof as tp
from tinyprof.timing import LatencyStats


def spin_1ms() -> None:
    end = time.perf_counter() + 1e-3
    while time.perf_counter() < end:
        pass


def textbook_bootstrap_ci(x: np.ndarray, resamples: int = 2000) -> tuple[float, float]:
    """The bootstrap as chapter 04 defines it: n indices per resample (in chunks of 10⁶ values)."""
    rng, medians = np.random.default_rng(0), []
    chunk = max(1, 10**6 // x.size)
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        medians.append(np.median(x[rng.integers(0, x.size, size=(rows, x.size))], axis=1))
    low, high = np.percentile(np.concatenate(medians), [2.5, 97.5])
    return float(low), float(high)


def main(quick: bool = False) -> None:
    rng = np.random.default_rng(0)
    repeats = 1 if quick else 5
    print("LatencyStats.from_samples (median of 5), its statistics and the first .ci:")
    for n in (10**3, 10**4) if quick else (10**3, 10**4, 10**5):
        x = rng.lognormal(0, 0.3, n) * 1e-3
        builds, reads = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            stats = LatencyStats.from_samples(x)
            builds.append(time.perf_counter() - start)
            start = time.perf_counter()
            _ = (stats.median, stats.p99, stats.mean, stats.cv, stats.outliers, stats.warnings)
            reads.append(time.perf_counter() - start)
        start = time.perf_counter()
        interval = stats.ci
        first_ci = time.perf_counter() - start
        start = time.perf_counter()
        textbook = textbook_bootstrap_ci(x)
        textbook_s = time.perf_counter() - start
        assert interval[0] <= stats.median <= interval[1]
        total = statistics.median(builds) + statistics.median(reads) + first_ci
        print(f"  {n:>7,} samples: from_samples {statistics.median(builds) * 1e3:5.1f} ms, "
              f"percentiles, mean, CV, outliers and warnings {statistics.median(reads) * 1e3:5.1f}"
              f" ms, first .ci {first_ci * 1e3:5.1f} ms; all {total * 1e3:6.1f} ms")
        print(f"  {'':>7}          textbook bootstrap {textbook_s * 1e3:7.0f} ms "
              f"= {textbook_s / first_ci:,.0f}× the .ci; interval {interval[0] * 1e3:.5f}–"
              f"{interval[1] * 1e3:.5f} ms vs {textbook[0] * 1e3:.5f}–{textbook[1] * 1e3:.5f} ms")
    tp.measure_latency(spin_1ms, iterations=5)  # first-call costs (context, BLAS name) once
    walls, sampled = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        stats = tp.measure_latency(spin_1ms)
        walls.append(time.perf_counter() - start)
        sampled.append(sum(stats.samples) * stats.loops)
    wall, sample = statistics.median(walls), statistics.median(sampled)
    warmup = 10 * 1e-3
    print(f"\nmeasure_latency of a 1 ms function with defaults (median of 5): {wall * 1e3:.1f} ms "
          f"= {sample * 1e3:.1f} ms of samples + {warmup * 1e3:.0f} ms of warm-up + "
          f"{(wall - sample - warmup) * 1e3:.1f} ms of calibration, context and statistics "
          f"({wall / (sample + warmup):.3f}× samples + warm-up)")


if __name__ == "__main__":
    main("--quick" in sys.argv)
