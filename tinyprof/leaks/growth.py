"""Growth per step with a confidence interval, and the verdict: leak, plateau or noise.

Memory after each step, ``m_0 … m_{N-1}``; the first ``warmup`` steps are dropped (caches
filling, the allocator's first requests). Over the other n steps, the least-squares line
``m_i ≈ a + b·i`` gives the growth per step

    b = Σ (i − ī)(m_i − m̄) / Σ (i − ī)²,

its standard error ``se = s / √Σ (i − ī)²`` with ``s² = Σ residual² / (n − 2)``, and the 95 %
interval ``b ± t · se``, t the 97.5 % quantile of Student's t with n − 2 degrees of freedom
(:func:`t_quantile`, computed exactly: no table, no normal approximation).

The verdict (:func:`verdict`):

- **noise**: the interval's lower end is at most ``tolerance`` bytes a step: no growth that
  the measurements can tell from nothing (or from the tolerated growth of, say, a history of
  floats);
- **leak**: growth whose interval excludes it, and which *persists*: the slope over the last
  half of the steps is at least half the slope over all of them;
- **plateau**: growth over the window that stopped: the last half grows less than half as
  fast as the whole window (a cache that filled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

VERDICTS = ("leak", "plateau", "noise")


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (Lentz's method)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _ibeta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, dof: float) -> float:
    """P(T ≤ t) for Student's t with ``dof`` degrees of freedom."""
    tail = 0.5 * _ibeta(dof / 2.0, 0.5, dof / (dof + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(q: float, dof: float) -> float:
    """The ``q`` quantile of Student's t with ``dof`` degrees of freedom (bisection on
    :func:`t_cdf` to 1e-12): ``t_quantile(0.975, 10)`` = 2.228…"""
    if not 0.0 < q < 1.0 or dof <= 0:
        raise ValueError(f"t_quantile needs 0 < q < 1 and dof > 0, got q={q}, dof={dof}")
    if q < 0.5:
        return -t_quantile(1.0 - q, dof)
    low, high = 0.0, 1.0
    while t_cdf(high, dof) < q:
        high *= 2.0
    while high - low > 1e-12 * max(1.0, high):
        mid = (low + high) / 2.0
        low, high = (mid, high) if t_cdf(mid, dof) < q else (low, mid)
    return (low + high) / 2.0


@dataclass(frozen=True)
class Fit:
    """A least-squares line's slope, its standard error and its size (n points)."""

    slope: float
    se: float
    n: int


def fit_line(x: Sequence[float], y: Sequence[float]) -> Fit:
    """The least-squares slope of ``y`` on ``x`` with its standard error."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3:
        raise ValueError(f"a slope with an interval needs at least 3 points, got {x.size}")
    dx = x - x.mean()
    sxx = float(dx @ dx)
    slope = float(dx @ (y - y.mean())) / sxx
    residual = y - y.mean() - slope * dx
    s2 = float(residual @ residual) / (x.size - 2)
    return Fit(slope, math.sqrt(s2 / sxx), int(x.size))


@dataclass(frozen=True)
class Growth:
    """Growth per step over the steps after the warm-up: ``slope`` (bytes per step) with its
    ``confidence`` interval ``low``–``high``, the last half's slope (``late``), and the
    ``verdict``."""

    slope: float
    low: float
    high: float
    late: float
    verdict: str
    n: int
    confidence: float = 0.95

    def describe(self, unit: str = "step") -> str:
        from ..units import format_bytes

        def signed(value: float) -> str:
            return ("−" if value < 0 else "") + format_bytes(abs(value))

        return (f"{signed(self.slope)}/{unit} ({self.confidence:.0%} interval "
                f"{signed(self.low)} to {signed(self.high)}, n = {self.n}; last half "
                f"{signed(self.late)}/{unit}): {self.verdict}")

    def __str__(self) -> str:
        return self.describe()


def verdict(slope: float, low: float, late: float, tolerance: float = 0.0) -> str:
    """``noise`` when the interval's lower end ``low`` ≤ ``tolerance``; else ``leak`` when the
    last half's slope ``late`` ≥ ``slope`` / 2; else ``plateau`` (module docstring)."""
    if low <= tolerance:
        return "noise"
    return "leak" if late >= slope / 2.0 else "plateau"


def growth(x: Sequence[float], y: Sequence[float], tolerance: float = 0.0,
           confidence: float = 0.95) -> Growth:
    """:class:`Growth` of ``y`` against ``x`` (all points used: drop the warm-up first)."""
    fit = fit_line(x, y)
    t = t_quantile(0.5 + confidence / 2.0, fit.n - 2)
    low, high = fit.slope - t * fit.se, fit.slope + t * fit.se
    half = fit.n // 2
    late = fit_line(list(x)[half:], list(y)[half:]).slope if fit.n - half >= 3 else fit.slope
    return Growth(fit.slope, low, high, late, verdict(fit.slope, low, late, tolerance), fit.n,
                  confidence)


def growth_per_step(memory: Sequence[float], warmup: int = 10, tolerance: float = 0.0,
                    confidence: float = 0.95) -> Growth:
    """Growth per step of ``memory`` (bytes after each step) after the first ``warmup``
    steps, with its interval and verdict (module docstring)."""
    kept = list(memory)[warmup:]
    if len(kept) < 3:
        raise ValueError(f"{len(memory)} steps with a warm-up of {warmup} leave {len(kept)}: "
                         "a slope with an interval needs at least 3")
    return growth(range(warmup, warmup + len(kept)), kept, tolerance, confidence)


def growth_over_run(times: Sequence[float], memory: Sequence[float], start: float, end: float,
                    steps: int, warmup: float = 0.25, blocks: int = 12, tolerance: float = 0.0,
                    confidence: float = 0.95) -> Growth:
    """Growth per step of a loop of ``steps`` steps that ran from ``start`` to ``end``
    (seconds), from ``memory`` read at ``times`` while it ran (by someone who does not know
    when each step ran: the grader, reading the kernel from outside). The first ``warmup`` of
    the run is dropped; the rest is cut into ``blocks`` equal spans of time, and each span's
    median time and median memory make one point (medians, so that a step's temporaries
    caught in a read move nothing; spans, so that the points are far enough apart for their
    errors to be independent). The slope of those points in bytes per second, times the
    seconds per step ``(end − start) / steps``, is the growth per step, with its interval
    (t with ``blocks − 2`` degrees of freedom, for the spans that hold a read)."""
    t, m = np.asarray(times, dtype=float), np.asarray(memory, dtype=float)
    begin = start + warmup * (end - start)
    edges = np.linspace(begin, end, blocks + 1)
    points = []
    for low, high in zip(edges[:-1], edges[1:]):
        inside = (t >= low) & (t < high)
        if inside.any():
            points.append((float(np.median(t[inside])), float(np.median(m[inside]))))
    if len(points) < 3:
        raise ValueError(f"{len(points)} spans of the run hold a memory reading: a slope with "
                         "an interval needs 3 (read more often, or run more steps)")
    per_second = growth([p[0] for p in points], [p[1] for p in points], 0.0, confidence)
    scale = (end - start) / steps
    slope, low, high, late = (v * scale for v in (per_second.slope, per_second.low,
                                                  per_second.high, per_second.late))
    return Growth(slope, low, high, late, verdict(slope, low, late, tolerance), per_second.n,
                  confidence)


__all__ = ["VERDICTS", "Fit", "Growth", "fit_line", "growth", "growth_over_run",
           "growth_per_step", "t_cdf", "t_quantile", "verdict"]
