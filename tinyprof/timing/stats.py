"""LatencyStats: one immutable value object computed from raw timing samples.

How samples are collected (``harness.py``) is kept apart from what is computed from them
(here), as in pyperf and ``torch.utils.benchmark``: build a ``LatencyStats`` from any list of
per-call times in seconds with :meth:`LatencyStats.from_samples`, and you get exactly the
numbers :func:`tinyprof.measure_latency` reports.
"""

from __future__ import annotations

import math
import numbers
import os
import time
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..table import Table
from ..units import format_interval, format_percent, format_seconds
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
#: A sample above this many seconds (about 31 years) is refused as not a measured time.
MAX_SAMPLE_SECONDS = 1e9
#: What ``time.get_clock_info("perf_counter")`` says one tick of the timer is, in seconds.
PERF_COUNTER_RESOLUTION = time.get_clock_info("perf_counter").resolution


def bootstrap_medians(samples: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES,
                      seed: int | np.random.Generator = BOOTSTRAP_SEED) -> np.ndarray:
    """The medians of ``resamples`` bootstrap resamples (n draws with replacement) of ``samples``.

    Drawing all n indices of every resample costs O(resamples · n) (4 s for 10⁵ samples), yet a
    median depends only on the resample's middle order statistics, so each is drawn directly,
    with exactly the same distribution. Sort the samples; the m-th smallest of n uniform indices
    ⌊n·U⌋ is ⌊n·U₍ₘ₎⌋, with U₍ₘ₎ ~ Beta(m, n − m + 1), m = ⌈n/2⌉. For even n the median is the
    mean of that and the next order statistic, U₍ₘ₊₁₎ = U₍ₘ₎ + (1 − U₍ₘ₎)·V with
    V ~ Beta(1, n − m), the smallest of the n − m uniforms above U₍ₘ₎. Cost O(n log n +
    resamples); the generator is ``np.random.default_rng(seed)``, so a seed repeats exactly (a
    Generator passed as ``seed`` is drawn from as it is: two calls then give independent draws).
    """
    x = np.sort(np.asarray(samples, dtype=float).ravel())
    n = x.size
    if n == 0:
        raise ValueError("bootstrap_medians needs at least one sample, got none")
    rng = np.random.default_rng(seed)
    m = (n + 1) // 2
    u = rng.beta(m, n - m + 1, resamples)
    medians = x[_order_index(u, n)]
    if n % 2 == 0:
        upper = u + (1 - u) * rng.beta(1, n - m, resamples)
        medians = medians / 2 + x[_order_index(upper, n)] / 2   # no overflow near 1e308
    return medians


def _order_index(u: np.ndarray, n: int) -> np.ndarray:
    """The index ⌊n·u⌋ into n sorted samples that a uniform draw u ∈ [0, 1) picks."""
    return np.minimum((n * u).astype(np.int64), n - 1)


def bootstrap_median_ci(samples: Sequence[float], confidence: float = CONFIDENCE,
                        resamples: int = BOOTSTRAP_RESAMPLES,
                        seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median: the (1 − c)/2 and (1 + c)/2
    percentiles of :func:`bootstrap_medians` (``resamples`` of them, seeded with ``seed``)."""
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(bootstrap_medians(samples, resamples, seed), [tail, 100 - tail],
                              method=PERCENTILE_METHOD)
    return float(low), float(high)


def _sample_array(samples: Any) -> np.ndarray:
    """``samples`` as a 1-D float array of times in seconds, each finite, ≥ 0 and at most
    MAX_SAMPLE_SECONDS; anything else is refused with what was found."""
    if samples is None or isinstance(samples, (str, bytes, Mapping)):
        raise TypeError(f"LatencyStats: samples must be a sequence of times in seconds, got "
                        f"{type(samples).__name__}")
    try:
        x = np.asarray(samples, dtype=float)
    except (TypeError, ValueError) as error:
        raise TypeError(f"LatencyStats: samples must be a sequence of times in seconds "
                        f"({error})") from error
    if x.ndim != 1:
        raise ValueError(f"LatencyStats: samples must be a 1-D sequence of times, got shape "
                         f"{x.shape}; pass one run's samples (flatten deliberately if you mean "
                         "to pool several)")
    if x.size == 0:
        raise ValueError("LatencyStats needs at least one sample, got none")
    bad = ~np.isfinite(x) | (x < 0) | (x > MAX_SAMPLE_SECONDS)
    if bad.any():
        raise ValueError(f"LatencyStats: samples are times in seconds and must be finite and "
                         f"≥ 0 (at most {MAX_SAMPLE_SECONDS:g} s), got {float(x[bad][0])!r} "
                         f"(sample #{int(np.argmax(bad))})")
    return x


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples a TimingContext holds."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _cv(x: np.ndarray) -> float:
    """Coefficient of variation: sample std (n − 1) / mean; 0 for one sample or a zero mean."""
    mean = float(np.mean(x))
    return float(np.std(x, ddof=1)) / mean if x.size > 1 and mean > 0 else 0.0


@dataclass(frozen=True)
class TimingWarning:
    """A reason not to trust a measurement: its ``kind`` (one of :data:`WARNING_KINDS`) and a
    ``message`` that says what was seen and what to do. ``str()`` gives "kind: message"."""

    kind: str
    message: str

    def __post_init__(self) -> None:
        if self.kind not in WARNING_KINDS:
            raise ValueError(f"TimingWarning: kind must be one of {WARNING_KINDS}, "
                             f"got {self.kind!r}")

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


#: The kinds of :class:`TimingWarning`, in the order a LatencyStats reports them.
WARNING_KINDS = ("unstable", "outliers", "near resolution", "busy machine", "tracing active")
#: The ``format`` field of a saved LatencyStats.
FORMAT = "tinyprof-latency/1"


@dataclass(frozen=True, repr=False)
class LatencyStats:
    """Timing statistics of one function, all times in seconds per call.

    A value object in the style of pyperf and ``torch.utils.benchmark``: it holds the raw
    ``samples`` (one per timed block; each block ran ``loops`` calls, and its time was divided
    by ``loops``) and the settings they were taken with; every statistic is computed from them
    when first asked for, then cached:

    - ``median`` (= ``p50``), ``mean``, ``std`` (sample standard deviation, n − 1 in the
      denominator), ``min``, ``max``;
    - ``p90``, ``p95``, ``p99`` and ``q1``/``q3`` (25th/75th): numpy ``percentile`` with the
      linear-interpolation method (see ``PERCENTILE_METHOD``); ``iqr`` = q3 − q1;
    - ``ci``: a 95% percentile-bootstrap confidence interval of the median (2,000 resamples,
      seed 0: the same samples always give the same interval);
    - ``cv`` = std / mean (coefficient of variation), ``cv_inliers`` the same without outliers;
    - ``outliers``: how many samples lie outside Tukey's fences Q1 − 1.5·IQR, Q3 + 1.5·IQR;
    - ``warnings``: :class:`TimingWarning` s, each with a kind: "unstable" (IQR/median or
      ``cv_inliers`` above 10%: the typical call varies), "outliers" (only the outliers push
      the CV above 10%: the mean lies, the median holds), "near resolution" (a timed block
      under 100 timer ticks), "busy machine" (1-minute load average ≥ the usable CPUs in
      ``context``) and "tracing active" (tracemalloc was on). Every CV above 10% gives one of
      the first two.

    :meth:`save` and :meth:`load` keep it as JSON (samples, settings and context), so a
    baseline can be stored and compared later (:func:`tinyprof.timing.compare`).

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

    @classmethod
    def from_samples(cls, samples: Sequence[float], *, loops: int = 1, name: str = "",
                     warmup: int = 0, timer_resolution: float = PERF_COUNTER_RESOLUTION,
                     timer_overhead: float = 0.0, tracemalloc_active: bool = False,
                     context: TimingContext | None = None) -> "LatencyStats":
        """Statistics of per-call times in seconds (a 1-D list, tuple or numpy array)."""
        return cls(tuple(_sample_array(samples).tolist()), loops=loops,
                   name=name, warmup=warmup, timer_resolution=timer_resolution,
                   timer_overhead=timer_overhead, tracemalloc_active=tracemalloc_active,
                   context=context)

    def __post_init__(self) -> None:
        x = _sample_array(self.samples)
        for key, minimum in (("loops", 1), ("warmup", 0)):
            value = getattr(self, key)
            if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
                    or value < minimum):
                raise ValueError(f"LatencyStats: {key} must be an integer ≥ {minimum}, got "
                                 f"{value!r}")
            object.__setattr__(self, key, int(value))
        if not isinstance(self.name, str):
            raise TypeError(f"LatencyStats: name must be a string, got {self.name!r}")
        for key in ("timer_resolution", "timer_overhead"):
            value = getattr(self, key)
            if (isinstance(value, bool) or not isinstance(value, numbers.Real)
                    or not math.isfinite(value) or value < 0):
                raise ValueError(f"LatencyStats: {key} is a time in seconds, finite and ≥ 0, "
                                 f"got {value!r}")
            object.__setattr__(self, key, float(value))
        if not isinstance(self.tracemalloc_active, bool):
            raise TypeError(f"LatencyStats: tracemalloc_active must be True or False, got "
                            f"{self.tracemalloc_active!r}")
        if self.context is not None and not isinstance(self.context, TimingContext):
            raise TypeError(f"LatencyStats: context must be a TimingContext or None, got "
                            f"{type(self.context).__name__}")
        object.__setattr__(self, "samples", tuple(x.tolist()))

    # -- statistics, each computed on first use --------------------------------------------------
    @cached_property
    def _x(self) -> np.ndarray:
        return np.asarray(self.samples, dtype=float)

    @cached_property
    def _quantiles(self) -> dict[str, float]:
        values = np.percentile(self._x, [25, 50, 75, 90, 95, 99], method=PERCENTILE_METHOD)
        return dict(zip(("q1", "median", "q3", "p90", "p95", "p99"), map(float, values)))

    median = property(lambda self: self._quantiles["median"], doc="50th percentile (s).")
    p50 = property(lambda self: self._quantiles["median"], doc="The median (s).")
    q1 = property(lambda self: self._quantiles["q1"], doc="25th percentile (s).")
    q3 = property(lambda self: self._quantiles["q3"], doc="75th percentile (s).")
    p90 = property(lambda self: self._quantiles["p90"], doc="90th percentile (s).")
    p95 = property(lambda self: self._quantiles["p95"], doc="95th percentile (s).")
    p99 = property(lambda self: self._quantiles["p99"], doc="99th percentile (s).")

    @property
    def iqr(self) -> float:
        """Interquartile range q3 − q1 (s)."""
        return self.q3 - self.q1

    @cached_property
    def mean(self) -> float:
        """Arithmetic mean (s)."""
        return float(np.mean(self._x))

    @cached_property
    def std(self) -> float:
        """Sample standard deviation, n − 1 in the denominator (0 for one sample)."""
        return float(np.std(self._x, ddof=1)) if self._x.size > 1 else 0.0

    @cached_property
    def min(self) -> float:
        """Fastest sample (s)."""
        return float(self._x.min())

    @cached_property
    def max(self) -> float:
        """Slowest sample (s)."""
        return float(self._x.max())

    @cached_property
    def _inliers(self) -> np.ndarray:
        low = self.q1 - OUTLIER_IQR_FACTOR * self.iqr
        high = self.q3 + OUTLIER_IQR_FACTOR * self.iqr
        return self._x[(self._x >= low) & (self._x <= high)]

    @cached_property
    def cv(self) -> float:
        """Coefficient of variation std / mean."""
        return _cv(self._x)

    @cached_property
    def cv_inliers(self) -> float:
        """Coefficient of variation of the samples inside Tukey's fences."""
        return _cv(self._inliers)

    @cached_property
    def outliers(self) -> int:
        """Samples outside Tukey's fences Q1 − 1.5·IQR, Q3 + 1.5·IQR."""
        return self._x.size - self._inliers.size

    @cached_property
    def warnings(self) -> tuple[TimingWarning, ...]:
        """Reasons not to trust the numbers (see the class docstring), in WARNING_KINDS order."""
        found = [self._spread_warning(), self._resolution_warning(), self._busy_machine()]
        if self.tracemalloc_active:
            found.append(TimingWarning(
                "tracing active", "tracemalloc was tracing while timing: every allocation is "
                "recorded, which can make allocation-heavy code 10–20× slower. Stop tracing "
                "before timing."))
        return tuple(w for w in found if w is not None)

    def _spread_warning(self) -> TimingWarning | None:
        spread = self.iqr / self.median if self.median > 0 else 0.0
        if self.cv_inliers > UNSTABLE_THRESHOLD or spread > UNSTABLE_THRESHOLD:
            return TimingWarning("unstable", (
                f"IQR/median {spread:.1%}, CV {self.cv:.1%} ({self.cv_inliers:.1%} "
                f"without the {self.outliers} outliers); limit {UNSTABLE_THRESHOLD:.0%}. The "
                "typical call itself varies: another program may be competing for the CPU, or "
                "the machine is changing speed. Re-run on a quiet machine or use more samples."))
        if self.cv > UNSTABLE_THRESHOLD:
            return TimingWarning("outliers", (
                f"{self.outliers} of {self.n} samples are beyond Tukey's fences (the "
                f"slowest, {format_seconds(self.max)}, is {self.max / self.median:.1f}× the "
                f"median) and pull the mean to {format_seconds(self.mean)} and the CV to "
                f"{self.cv:.1%} (limit {UNSTABLE_THRESHOLD:.0%}). The median and IQR are not "
                "affected: compare medians. Usual cause: the process was paused (descheduled, "
                "a page fault)."))
        return None

    def _resolution_warning(self) -> TimingWarning | None:
        tick = max(self.timer_resolution, self.timer_overhead)
        shortest_block = self.min * self.loops
        if tick > 0 and shortest_block < RESOLUTION_FACTOR * tick:
            return TimingWarning("near resolution", (
                f"the shortest timed block ({format_seconds(shortest_block)}) is under "
                f"{RESOLUTION_FACTOR}× the timer's tick ({format_seconds(tick)}), so the timer "
                "itself is > 1% of it. Let measure_latency choose loops (loops=None) so each "
                "block runs longer."))
        return None

    def _busy_machine(self) -> TimingWarning | None:
        ctx = self.context
        if ctx is None or ctx.load_average is None or not ctx.usable_cpus:
            return None
        load = ctx.load_average[0]
        if load < ctx.usable_cpus:
            return None
        return TimingWarning("busy machine", (
            f"1-minute load average {load:.2f} on {ctx.usable_cpus} usable CPUs. Other "
            "programs compete for the cores; a multi-threaded BLAS call can then stall for a "
            "whole scheduler time slice (milliseconds). Re-run when the machine is quiet, or "
            "set OMP_NUM_THREADS=1 before numpy is imported."))

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
        return any(w.kind == "unstable" for w in self.warnings)

    # -- saving and loading ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The samples, settings and context as plain JSON-ready data (no derived statistic)."""
        return {"format": FORMAT, "name": self.name, "samples": list(self.samples),
                "loops": self.loops, "warmup": self.warmup,
                "timer_resolution": self.timer_resolution, "timer_overhead": self.timer_overhead,
                "tracemalloc_active": self.tracemalloc_active,
                "context": None if self.context is None else asdict(self.context)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LatencyStats":
        """The LatencyStats that :meth:`to_dict` described."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise ValueError(f"not a saved LatencyStats: expected format {FORMAT!r}, "
                             f"found {found!r}")
        keys = ("samples", "loops", "name", "warmup", "timer_resolution", "timer_overhead",
                "tracemalloc_active")
        missing = [key for key in keys + ("context",) if key not in data]
        if missing:
            raise ValueError(f"saved LatencyStats has no {', '.join(map(repr, missing))} "
                             f"field{'s' if len(missing) > 1 else ''}")
        context = data["context"]
        if context is not None:
            if not isinstance(context, Mapping):
                raise ValueError(f"saved LatencyStats: context must be an object or null, got "
                                 f"{context!r}"[:200])
            try:
                context = TimingContext(**{key: _tuples(value)
                                           for key, value in context.items()})
            except TypeError as error:
                raise ValueError(f"saved LatencyStats: context does not describe a "
                                 f"TimingContext ({error})") from error
        if not isinstance(data["samples"], list):
            raise ValueError(f"saved LatencyStats: samples must be a list of seconds, got "
                             f"{data['samples']!r}"[:200])
        return cls(tuple(data["samples"]), **{key: data[key] for key in keys[1:]},
                   context=context)

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`to_dict` as JSON to ``path``; returns the path."""
        import json

        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LatencyStats":
        """Read a LatencyStats written by :meth:`save`; the file is named in any error."""
        import json

        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: {error}") from error

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
        formats["95% CI"] = format_interval
        formats["CV"] = format_percent
        return Table(columns, [row], formats=formats)

    def _repr_html_(self) -> str:
        import html

        notes = "".join(f"<li>{html.escape(str(w))}</li>" for w in self.warnings)
        notes = f'<ul style="color:#b35900">{notes}</ul>' if notes else ""
        return (f"<div><b>{html.escape(self._title())}</b>"
                f"{self.table()._repr_html_()}{notes}</div>")
