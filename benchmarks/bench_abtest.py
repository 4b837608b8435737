"""How often each way of comparing two timings is fooled, and how often it finds a real change.

Same workload (four 96×96 float32 matmuls, tens of µs), TRIALS trials per row, in one run:

- **A/A**: the same function as A and as B. A "difference" found here is a false positive.
  Compared three ways: ``tp.ab_test`` (interleaved rounds; its verdict needs p < 0.01 *and* an
  interval outside the ±5 % noise band); the same interleaved samples with only Mann–Whitney
  p < 0.05; and sequential blocks (all of A, then all of B) with Welch's t-test p < 0.05, the
  naive comparison.
- **10 % and 20 % slower**: B does the same work plus a busy wait of 10 % or 20 % of A's median.
  The detection rate is how often each method calls B slower.

Last, what the speedup's bootstrap interval costs at 10³–10⁵ samples a side.

Run: ``python benchmarks/bench_abtest.py [TRIALS] [--quick]``  (``--quick``: 3 trials, the textbook
bootstrap at 10³ only: a few seconds)
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from tinyprof.abtest import ab_test, bootstrap_ratio_ci, mann_whitney_u
from tinyprof.timing import measure_latency

ROUNDS = 20
X = np.random.default_rng(0).standard_normal((96, 96)).astype(np.float32)


def work() -> None:
    for _ in range(4):
        X @ X


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of Welch's t-test, the t distribution's tail integrated numerically."""
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    t = abs(a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    grid = np.linspace(t, t + 200, 200_001)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    pdf = np.exp(log_norm - (df + 1) / 2 * np.log1p(grid**2 / df))
    return float(min(1.0, 2 * np.trapezoid(pdf, grid)))


def sequential_samples(a, b) -> tuple[np.ndarray, np.ndarray]:
    first = measure_latency(a, warmup=3, iterations=ROUNDS)
    second = measure_latency(b, warmup=3, iterations=ROUNDS)
    return np.asarray(first.samples), np.asarray(second.samples)


def trial(a, b) -> tuple[bool, bool, bool]:
    """(ab_test says B slower or faster, interleaved Mann–Whitney p < 0.05, sequential Welch
    p < 0.05) for one trial; for a slower B only "slower" counts as found."""
    result = ab_test(a, b, rounds=ROUNDS)
    _, p_mw = mann_whitney_u(result.baseline.samples, result.candidate.samples)
    first, second = sequential_samples(a, b)
    return result.verdict != "no change", p_mw < 0.05, welch_p(first, second) < 0.05


def main(trials: int = 40) -> None:
    median = measure_latency(work, iterations=50).median
    rows = {"A/A (false positives)": work}
    for share in (0.10, 0.20):
        def slower(extra=share * median) -> None:
            work()
            spin(extra)
        rows[f"B {share:.0%} slower (detections)"] = slower
    print(f"workload median {median * 1e6:.0f} µs; {trials} trials per row, {ROUNDS} rounds "
          "or samples per side\n")
    print(f"{'':<30}{'ab_test verdict':>18}{'interleaved MW p<.05':>22}{'sequential t p<.05':>20}")
    for label, candidate in rows.items():
        counts = np.sum([trial(work, candidate) for _ in range(trials)], axis=0)
        print(f"{label:<30}" + "".join(f"{c:>{w}}" for c, w in zip(
            [f"{n}/{trials} ({n / trials:.0%})" for n in counts], (18, 22, 20))))

    bootstrap_cost(textbook_up_to=1_000 if trials < 10 else 10_000)


def bootstrap_cost(textbook_up_to: int = 10_000) -> None:
    """The speedup interval's cost by sample size: each side's resampled medians drawn from
    their order statistics (one bootstrap for ab_test and LatencyStats), beside the textbook
    resampling of n indices per resample where it fits in memory (goal: 10⁵ a side < 50 ms)."""
    print("\nbootstrap interval of the speedup, 2,000 resamples (best of 3):")
    rng = np.random.default_rng(0)
    for n in (1_000, 10_000, 100_000):
        a, b = rng.lognormal(0, 0.1, n), rng.lognormal(0.1, 0.1, n)
        ours = min(_seconds(bootstrap_ratio_ci, a, b) for _ in range(3))
        line = f"  {n:>7,} samples a side: {ours * 1e3:7.1f} ms"
        if n <= textbook_up_to:
            textbook = _seconds(_textbook_ratio_ci, a, b)
            line += f"   textbook resampling {textbook * 1e3:8.1f} ms ({textbook / ours:.0f}×)"
        print(line)


def _seconds(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def _textbook_ratio_ci(a: np.ndarray, b: np.ndarray, resamples: int = 2000) -> tuple:
    rng = np.random.default_rng(0)
    medians_a = np.median(a[rng.integers(0, a.size, (resamples, a.size))], axis=1)
    medians_b = np.median(b[rng.integers(0, b.size, (resamples, b.size))], axis=1)
    return tuple(np.percentile(medians_a / medians_b, [2.5, 97.5]))


if __name__ == "__main__":
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    main(int(numbers[0]) if numbers else (3 if "--quick" in sys.argv else 40))
