"""What tinyprof's latency statistics cost: building a LatencyStats and reading its statistics
(each computed when first asked for), its bootstrap interval (the one expensive statistic:
2,000 resamples of n), and measure_latency's time beyond the samples it takes.

Target (issue 9): 10⁵ samples to statistics in under 0.5 s (it took 6.5 s when the bootstrap
ran on construction).

Run: ``python benchmarks/bench_latency_stats.py``
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import tinyprof as tp
from tinyprof.timing import LatencyStats


def spin_1ms() -> None:
    end = time.perf_counter() + 1e-3
    while time.perf_counter() < end:
        pass


def main() -> None:
    rng = np.random.default_rng(0)
    print("LatencyStats.from_samples (median of 5) and the first .ci (its 2,000 resamples):")
    for n in (10**3, 10**4, 10**5):
        x = rng.lognormal(0, 0.3, n) * 1e-3
        builds, reads = [], []
        for _ in range(5):
            start = time.perf_counter()
            stats = LatencyStats.from_samples(x)
            builds.append(time.perf_counter() - start)
            start = time.perf_counter()
            _ = (stats.median, stats.p99, stats.mean, stats.cv, stats.outliers, stats.warnings)
            reads.append(time.perf_counter() - start)
        start = time.perf_counter()
        interval = stats.ci
        first_ci = time.perf_counter() - start
        assert interval[0] <= stats.median <= interval[1]
        print(f"  {n:>7,} samples: from_samples {statistics.median(builds) * 1e3:7.1f} ms "
              f"({statistics.median(builds) / n * 1e6:.2f} µs per sample), percentiles, mean, "
              f"CV, outliers and warnings {statistics.median(reads) * 1e3:6.1f} ms, first .ci "
              f"{first_ci * 1e3:7.0f} ms")
    tp.measure_latency(spin_1ms, iterations=5)  # first-call costs (context, BLAS name) once
    walls, sampled = [], []
    for _ in range(5):
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
    main()
