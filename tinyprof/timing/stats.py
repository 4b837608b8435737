"""LatencyStats: one immutable value object computed from raw timing samples.

How samples are collected (``harness.py``) is kept apart from what is computed from them
(here), as in pyperf and ``torch.utils.benchmark``: build a ``LatencyStats`` from any list of
per-call times in seconds with :meth:`LatencyStats.from_samples`, and you get exactly the
numbers :func:`tinyprof.measure_latency` reports.
"""

from __future__ import annotations

import html
import numbers
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Sequence

import numpy as np

from ..table import Table
from ..units import format_seconds
from .context import TimingContext

#: Percentiles use numpy's default "linear" method: the q-th percentile of n sorted values
#: x₀ ≤ … ≤ xₙ₋₁ sits at position h = (n − 1)·q/100 and is x⌊h⌋ + (h − ⌊h⌋)·(x⌊h⌋₊₁ − x⌊h⌋).
PERCENTILE_METHOD = "linear"
#: Above this coefficient of variation (std/mean) or IQR/median the stats warn.
UNSTABLE_THRESHOLD = 0.10
#: Tukey's fences: a sample outside [Q1 − 1.5·IQR, Q3 + 1.5·IQR] is an outlier.
OUTLIER_IQR_FACTOR = 1.5
#: The bootstrap CI of the median: this many resamples from a generator seeded with this seed.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
#: A raw sample (one timed block of ``loops`` calls) shorter than this many times the timer's
#: resolution or per-read overhead carries a timer error of more than 1%.
RESOLUTION_FACTOR = 100
#: What ``time.get_clock_info("perf_counter")`` says one tick of the timer is, in seconds.
PERF_COUNTER_RESOLUTION = time.get_clock_info("perf_counter").resolution
_MAX_BOOTSTRAP_CHUNK = 1_000_000  # resampled values held in memory at once


def bootstrap_median_ci(samples: np.ndarray, confidence: float = CONFIDENCE,
                        resamples: int = BOOTSTRAP_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median.

    Draw ``resamples`` samples of size n with replacement (``np.random.default_rng(seed)``,
    so the interval is reproducible), take each one's median, and return the
    (1 − c)/2 and (1 + c)/2 percentiles of those medians.
    """
    x = np.asarray(samples, dtype=float)
    n = x.size
    if n == 1:
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    chunk = max(1, _MAX_BOOTSTRAP_CHUNK // n)
    medians = np.empty(resamples)
    for start in range(0, resamples, chunk):
        stop = min(start + chunk, resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        medians[start:stop] = np.median(x[idx], axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(medians, [tail, 100 - tail], method=PERCENTILE_METHOD)
    return float(low), float(high)


def _cv(x: np.ndarray) -> float:
    """Coefficient of variation: sample std (n − 1) / mean; 0 for one sample or a zero mean."""
    mean = float(np.mean(x))
    return float(np.std(x, ddof=1)) / mean if x.size > 1 and mean > 0 else 0.0


@dataclass(frozen=True, repr=False)
class LatencyStats:
    """Timing statistics of one function, all times in seconds per call.

    Built from ``samples`` (one per timed block; each block ran ``loops`` calls, and its time
    was divided by ``loops``). Derived fields, computed once:

    - ``median`` (= ``p50``), ``mean``, ``std`` (sample standard deviation, n − 1 in the
      denominator), ``min``, ``max``;
    - ``p90``, ``p95``, ``p99`` and ``q1``/``q3`` (25th/75th): numpy ``percentile`` with the
      linear-interpolation method (see ``PERCENTILE_METHOD``); ``iqr`` = q3 − q1;
    - ``ci``: a 95% percentile-bootstrap confidence interval of the median (2,000 resamples,
      seed 0: the same samples always give the same interval);
    - ``cv`` = std / mean (coefficient of variation), ``cv_inliers`` the same without outliers;
    - ``outliers``: how many samples lie outside Tukey's fences Q1 − 1.5·IQR, Q3 + 1.5·IQR;
    - ``warnings``: human-readable reasons not to trust the numbers, each starting with its
      kind: "unstable" (IQR/median or ``cv_inliers`` above 10%: the typical call varies),
      "outliers" (only the outliers push the CV above 10%: the mean lies, the median holds),
      "near the timer's resolution", "busy machine" (1-minute load average ≥ the usable CPUs
      in ``context``) and "tracemalloc". Every CV above 10% gives one of the first two.

    With ``loops`` > 1 every sample is an average of ``loops`` calls, so the tails (p99, max)
    describe block averages, not single calls.
    """

    samples: tuple[float, ...]
    loops: int = 1
    name: str = ""
    warmup: int = 0
    timer_resolution: float = PERF_COUNTER_RESOLUTION
    timer_overhead: float = 0.0
    tracemalloc_active: bool = False
    context: TimingContext | None = None

    median: float = field(init=False)
    mean: float = field(init=False)
    std: float = field(init=False)
    min: float = field(init=False)
    max: float = field(init=False)
    p50: float = field(init=False)
    p90: float = field(init=False)
    p95: float = field(init=False)
    p99: float = field(init=False)
    q1: float = field(init=False)
    q3: float = field(init=False)
    iqr: float = field(init=False)
    cv: float = field(init=False)
    cv_inliers: float = field(init=False)
    outliers: int = field(init=False)
    warnings: tuple[str, ...] = field(init=False)

    @classmethod
    def from_samples(cls, samples: Sequence[float], *, loops: int = 1, name: str = "",
                     warmup: int = 0, timer_resolution: float = PERF_COUNTER_RESOLUTION,
                     timer_overhead: float = 0.0, tracemalloc_active: bool = False,
                     context: TimingContext | None = None) -> "LatencyStats":
        """Statistics of per-call times in seconds (a list, tuple or numpy array)."""
        return cls(tuple(np.asarray(samples, dtype=float).ravel().tolist()), loops=loops,
                   name=name, warmup=warmup, timer_resolution=timer_resolution,
                   timer_overhead=timer_overhead, tracemalloc_active=tracemalloc_active,
                   context=context)

    def __post_init__(self) -> None:
        x = self._checked_samples()
        q1, median, q3, p90, p95, p99 = (float(v) for v in np.percentile(
            x, [25, 50, 75, 90, 95, 99], method=PERCENTILE_METHOD))
        mean = float(np.mean(x))
        std = float(np.std(x, ddof=1)) if x.size > 1 else 0.0
        iqr = q3 - q1
        low_fence, high_fence = q1 - OUTLIER_IQR_FACTOR * iqr, q3 + OUTLIER_IQR_FACTOR * iqr
        inliers = x[(x >= low_fence) & (x <= high_fence)]
        derived = dict(
            median=median, mean=mean, std=std, min=float(x.min()), max=float(x.max()),
            p50=median, p90=p90, p95=p95, p99=p99, q1=q1, q3=q3, iqr=iqr,
            cv=_cv(x), cv_inliers=_cv(inliers),
            outliers=x.size - inliers.size,
        )
        for key, value in derived.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "warnings", self._find_warnings())

    def _checked_samples(self) -> np.ndarray:
        object.__setattr__(self, "samples", tuple(float(s) for s in self.samples))
        x = np.asarray(self.samples, dtype=float)
        if x.size == 0:
            raise ValueError("LatencyStats needs at least one sample, got none")
        if not np.all(np.isfinite(x)) or np.any(x < 0):
            bad = next(s for s in self.samples if not np.isfinite(s) or s < 0)
            raise ValueError(f"LatencyStats: samples are times in seconds and must be finite "
                             f"and ≥ 0, got {bad!r}")
        if (isinstance(self.loops, bool) or not isinstance(self.loops, numbers.Integral)
                or self.loops < 1):
            raise ValueError(f"LatencyStats: loops must be an integer ≥ 1, got {self.loops!r}")
        object.__setattr__(self, "loops", int(self.loops))
        return x

    def _find_warnings(self) -> tuple[str, ...]:
        found = []
        spread = self.iqr / self.median if self.median > 0 else 0.0
        if self.cv_inliers > UNSTABLE_THRESHOLD or spread > UNSTABLE_THRESHOLD:
            found.append(
                f"unstable: IQR/median {spread:.1%}, CV {self.cv:.1%} ({self.cv_inliers:.1%} "
                f"without the {self.outliers} outliers); limit {UNSTABLE_THRESHOLD:.0%}. The "
                "typical call itself varies: another program may be competing for the CPU, or "
                "the machine is changing speed. Re-run on a quiet machine or use more samples.")
        elif self.cv > UNSTABLE_THRESHOLD:
            found.append(
                f"outliers: {self.outliers} of {self.n} samples are beyond Tukey's fences (the "
                f"slowest, {format_seconds(self.max)}, is {self.max / self.median:.1f}× the "
                f"median) and pull the mean to {format_seconds(self.mean)} and the CV to "
                f"{self.cv:.1%} (limit {UNSTABLE_THRESHOLD:.0%}). The median and IQR are not "
                "affected: compare medians. Usual cause: the process was paused (descheduled, "
                "a page fault).")
        tick = max(self.timer_resolution, self.timer_overhead)
        shortest_block = self.min * self.loops
        if tick > 0 and shortest_block < RESOLUTION_FACTOR * tick:
            found.append(
                f"near the timer's resolution: the shortest timed block "
                f"({format_seconds(shortest_block)}) is under {RESOLUTION_FACTOR}× the timer's "
                f"tick ({format_seconds(tick)}), so the timer itself is > 1% of it. Let "
                "measure_latency choose loops (loops=None) so each block runs longer.")
        busy = self._busy_machine()
        if busy:
            found.append(busy)
        if self.tracemalloc_active:
            found.append(
                "tracemalloc was tracing while timing: every allocation is recorded, which can "
                "make allocation-heavy code 10–20× slower. Stop tracing before timing.")
        return tuple(found)

    def _busy_machine(self) -> str:
        ctx = self.context
        if ctx is None or ctx.load_average is None or not ctx.usable_cpus:
            return ""
        load = ctx.load_average[0]
        if load < ctx.usable_cpus:
            return ""
        return (f"busy machine: 1-minute load average {load:.2f} on {ctx.usable_cpus} usable "
                "CPUs. Other programs compete for the cores; a multi-threaded BLAS call can "
                "then stall for a whole scheduler time slice (milliseconds). Re-run when the "
                "machine is quiet, or set OMP_NUM_THREADS=1 before numpy is imported.")

    @cached_property
    def ci(self) -> tuple[float, float]:
        """95% percentile-bootstrap interval of the median, computed when first asked for (the
        2,000 resamples cost far more than every other statistic together)."""
        return bootstrap_median_ci(np.asarray(self.samples, dtype=float))

    # -- plain data ----------------------------------------------------------------------------
    @property
    def n(self) -> int:
        """Number of samples (timed blocks)."""
        return len(self.samples)

    @property
    def calls(self) -> int:
        """Timed calls in total: samples × loops."""
        return self.n * self.loops

    @property
    def unstable(self) -> bool:
        """True when the bulk of the samples varies by more than 10% (see ``warnings``)."""
        return any(w.startswith("unstable") for w in self.warnings)

    def summary(self) -> dict[str, float | int | tuple[float, float]]:
        """The headline numbers as a plain dictionary (seconds)."""
        keys = ("median", "mean", "std", "min", "max", "p50", "p90", "p95", "p99", "iqr",
                "ci", "cv", "outliers", "loops", "n")
        return {key: getattr(self, key) for key in keys}

    # -- printing ------------------------------------------------------------------------------
    def _title(self) -> str:
        label = f"{self.name}: " if self.name else ""
        loop_word = "loop" if self.loops == 1 else "loops"
        return (f"{label}median {format_seconds(self.median)} per call, 95% CI "
                f"[{format_seconds(self.ci[0])}, {format_seconds(self.ci[1])}]  "
                f"({self.n} samples × {self.loops:,} {loop_word}, warm-up {self.warmup})")

    def __str__(self) -> str:
        f = format_seconds
        lines = [
            self._title(),
            f"  mean {f(self.mean)} ± {f(self.std)} (CV {self.cv:.1%})   "
            f"min {f(self.min)}   max {f(self.max)}",
            f"  p50 {f(self.p50)}   p90 {f(self.p90)}   p95 {f(self.p95)}   p99 {f(self.p99)}   "
            f"IQR {f(self.iqr)}   outliers {self.outliers}",
        ]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return (f"LatencyStats({label}median={format_seconds(self.median)}, "
                f"p95={format_seconds(self.p95)}, n={self.n}, loops={self.loops}, "
                f"warnings={len(self.warnings)})")

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(repr(self) if cycle else str(self))

    def table(self) -> Table:
        """One row with the headline statistics, formatted in friendly units."""
        columns = ["median", "95% CI", "mean", "std", "min", "p90", "p95", "p99", "max", "IQR",
                   "CV", "outliers"]
        row = [self.median, self.ci, self.mean, self.std, self.min, self.p90, self.p95,
               self.p99, self.max, self.iqr, self.cv, self.outliers]
        formats = {c: format_seconds for c in columns if c not in ("95% CI", "CV", "outliers")}
        formats["95% CI"] = lambda ci: f"{format_seconds(ci[0])} – {format_seconds(ci[1])}"
        formats["CV"] = lambda cv: f"{cv:.1%}"
        return Table(columns, [row], formats=formats)

    def _repr_html_(self) -> str:
        notes = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        notes = f'<ul style="color:#b35900">{notes}</ul>' if notes else ""
        return (f"<div><b>{html.escape(self._title())}</b>"
                f"{self.table()._repr_html_()}{notes}</div>")
