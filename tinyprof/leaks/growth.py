"""Growth per step with a confidence interval that holds for a memory series, and the verdict
against a stated tolerance: leak, plateau, within tolerance or undecided.

Memory after each step, ``m_0 … m_{N-1}``; the first ``warmup`` steps are dropped (caches
filling, the allocator's first requests). Over the other n steps, the least-squares line
``m_i ≈ a + b·i`` gives the growth per step

    b = Σ (i − ī)(m_i − m̄) / Σ (i − ī)².

**Why not the textbook interval.** The textbook standard error ``s / √Σ (i − ī)²`` (with
``s² = Σ r_i² / (n − 2)``, r the residuals) assumes the readings' errors are independent. A
memory reading is not: what one step leaves (a freed block the allocator keeps, a page not yet
returned, a memo half full) is still there at the next, so a reading above the line is followed
by another. The residuals of this chapter's runs have a lag-1 autocorrelation of 0.67 to 0.97,
and under AR(1) errors with φ = 0.8 the textbook 95 % interval covers the true slope about half
the time (tests/test_growth.py measures it on 400 series).

**The threat and the defence.** The threat is an interval that looks precise and is not: a
"leak" called on a wandering level, or a leak-free loop's tiny real growth reported as a slope
that excludes zero and then called noise. The defence is the effective sample size of a trend
under AR(1) errors (Santer et al. 2000, J. Geophys. Res. 105, 7337): the residuals' lag-1
autocorrelation ``r₁ = Σ r_i r_{i+1} / Σ r_i²``, corrected for its bias after a fitted line
(Shaman and Stine 1988: E r₁ ≈ ρ − (2 + 4ρ)/n, so ``ρ = (n·r₁ + 2) / (n − 4)``, clamped to
``[0, 1)``: negative autocorrelation is not credited), then

    n_e = max(n (1 − ρ) / (1 + ρ), 3),   se = √(Σ r_i² / (n_e − 2) / Σ (i − ī)²),

and the interval ``b ± t · se``, t Student's 97.5 % quantile with ``⌊n_e − 2⌋`` degrees of
freedom (:func:`t_quantile`, exact; rounded down, the wider side). Why this and not Newey–West:
with the usual bandwidth rule ``⌊4 (n/100)^{2/9}⌋`` (3 lags at n = 80) the Bartlett kernel sees
too few lags of a slowly decaying series and covers 55 to 72 % at φ = 0.8 for n from 20 to 100;
the effective sample size uses the whole decay through ρ and covers 91 to 96 % there (the same
tests, 400 seeded series each), numpy only. Its assumption: the errors decay like an AR(1),
which a memory level that is refilled and drained step after step is close to.

**A series with no noise** (every residual under half a byte: the line passes through every
reading, as the live bytes of a deterministic loop do) has no spread to put an interval on: it is
reported as ``exactly`` its slope (``exact``), low = high = slope, and never as an interval.

**The verdict** (:func:`verdict`) is a test against a stated ``tolerance`` (bytes a step a
loop may grow, such as a history of floats):

- **leak**: the interval's lower end is above the tolerance, and the growth *persists*: the
  slope over the last half of the steps is at least half the slope over all of them;
- **plateau**: above the tolerance, but the last half grows less than half as fast as the
  whole window (a cache that filled);
- **within tolerance**: the interval's upper end is at most the tolerance (a real growth
  smaller than the tolerance is reported as such, not as noise);
- **undecided**: the interval straddles the tolerance: measure more steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

VERDICTS = ("leak", "plateau", "within tolerance", "undecided")
#: Residuals all below this many bytes: the line passes through every reading (exact).
EXACT_BYTES = 0.5



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
    """A least-squares line's ``slope`` and its autocorrelation-aware standard error ``se``
    over ``n`` points; ``lag1`` the residuals' lag-1 autocorrelation as measured, ``rho`` the
    bias-corrected value used, ``n_eff`` the effective sample size and ``dof`` the t degrees
    of freedom; ``iid_se`` the textbook error that assumes independent readings (kept to show
    how far off it is). ``exact`` when the line passes through every reading."""

    slope: float
    se: float
    n: int
    lag1: float = 0.0
    rho: float = 0.0
    n_eff: float = 0.0
    dof: int = 1
    iid_se: float = 0.0
    exact: bool = False


def corrected_rho(lag1: float, n: int) -> float:
    """The AR(1) coefficient behind a lag-1 autocorrelation ``lag1`` of the residuals of a
    fitted line over ``n`` points: ``(n·lag1 + 2) / (n − 4)`` (Shaman and Stine's bias),
    clamped to ``[0, 1)``."""
    return min(max((n * lag1 + 2.0) / (n - 4.0), 0.0), 1.0 - 1e-12) if n > 4 else 0.0


def effective_n(n: int, rho: float) -> float:
    """Independent readings worth as much as ``n`` AR(1) readings: ``n (1 − ρ) / (1 + ρ)``,
    at least 3 (one degree of freedom)."""
    return max(n * (1.0 - rho) / (1.0 + rho), 3.0)


def fit_line(x: Sequence[float], y: Sequence[float]) -> Fit:
    """The least-squares slope of ``y`` on ``x`` with its standard error under AR(1) errors
    (module docstring)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3:
        raise ValueError(f"a slope with an interval needs at least 3 points, got {x.size}")
    n, dx = int(x.size), x - x.mean()
    sxx = float(dx @ dx)
    slope = float(dx @ (y - y.mean())) / sxx
    residual = y - y.mean() - slope * dx
    squares = float(residual @ residual)
    iid_se = math.sqrt(squares / (n - 2) / sxx)
    if float(np.max(np.abs(residual))) < EXACT_BYTES:
        return Fit(slope, 0.0, n, 0.0, 0.0, float(n), n - 2, iid_se, exact=True)
    lag1 = float(residual[1:] @ residual[:-1]) / squares
    rho = corrected_rho(lag1, n)
    n_eff = effective_n(n, rho)
    se = math.sqrt(squares / (n_eff - 2.0) / sxx)
    return Fit(slope, se, n, lag1, rho, n_eff, max(int(math.floor(n_eff - 2.0)), 1), iid_se)


@dataclass(frozen=True)
class Growth:
    """Growth per step over the steps after the warm-up: ``slope`` (bytes per step) with its
    ``confidence`` interval ``low``–``high`` (low = high = slope when ``exact``), the last
    half's slope (``late``), and the ``verdict`` against ``tolerance``; ``n`` steps, worth
    ``n_eff`` independent ones (``rho`` the autocorrelation used)."""

    slope: float
    low: float
    high: float
    late: float
    verdict: str
    n: int
    confidence: float = 0.95
    tolerance: float = 0.0
    exact: bool = False
    rho: float = 0.0
    n_eff: float = 0.0
    late_low: float = -math.inf
    late_high: float = math.inf

    def describe(self, unit: str = "step") -> str:
        from ..units import format_bytes

        def signed(value: float) -> str:
            return ("−" if value < 0 else "") + format_bytes(abs(value))

        def spread(low: float, high: float) -> str:
            return (" exactly" if high == low else
                    f" ± {format_bytes((high - low) / 2)}")

        if self.exact:
            measured = (f"exactly {signed(self.slope)}/{unit} (the line passes through every "
                        f"reading: no noise to put an interval on; n = {self.n}")
        else:
            measured = (f"{signed(self.slope)}/{unit} ± {format_bytes((self.high - self.low) / 2)}"
                        f" ({self.confidence:.0%} interval; n = {self.n} steps, worth "
                        f"{self.n_eff:.0f} independent ones at autocorrelation {self.rho:.2f}, "
                        "bias-corrected")
        late = f"last half {signed(self.late)}/{unit}{spread(self.late_low, self.late_high)}"
        return f"{measured}; {late}): {self.reason(unit)}"

    def reason(self, unit: str = "step") -> str:
        """The verdict in words that agree with the interval."""
        from ..units import format_bytes

        limit = f"the {format_bytes(self.tolerance)}/{unit} tolerance"
        if self.verdict == "leak":
            return f"leak (above {limit}, and the last half grows as fast)"
        if self.verdict == "plateau" and self.low > self.tolerance:
            return f"plateau (grew above {limit}, and the last half grows less than half as fast)"
        if self.verdict == "plateau":
            return (f"plateau (grew {format_bytes(self.slope)}/{unit} on average, above {limit}, "
                    "and the last half's interval is under it: it stopped)")
        if self.verdict == "undecided":
            return f"undecided (the interval straddles {limit}: measure more steps)"
        if self.low > 0:
            return f"within tolerance (it grows, but under {limit}: not a leak)"
        if self.high < 0:
            return "within tolerance (it shrinks: not a leak)"
        return f"within tolerance (no growth told from zero, and under {limit}: not a leak)"

    def __str__(self) -> str:
        return self.describe()


def verdict(slope: float, low: float, high: float, late: float, tolerance: float = 0.0,
            late_high: float = math.inf) -> str:
    """``leak`` when ``low`` > ``tolerance`` and the last half's slope ``late`` ≥ ``slope`` / 2;
    ``plateau`` when ``low`` > ``tolerance`` and it is less, or when the interval straddles
    the tolerance, the slope is above it and the last half's upper end ``late_high`` is not (a
    line drawn through a bend, whose residuals wander); ``within tolerance`` when ``high`` ≤
    ``tolerance``; else ``undecided`` (module docstring)."""
    if low > tolerance:
        return "leak" if late >= slope / 2.0 else "plateau"
    if high <= tolerance:
        return "within tolerance"
    return "plateau" if late_high <= tolerance < slope else "undecided"


def interval(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> tuple:
    """``(slope, low, high, fit)``: the least-squares slope with its interval (module
    docstring), and the :class:`Fit`."""
    fit = fit_line(x, y)
    t = 0.0 if fit.exact else t_quantile(0.5 + confidence / 2.0, fit.dof)
    return fit.slope, fit.slope - t * fit.se, fit.slope + t * fit.se, fit


def growth(x: Sequence[float], y: Sequence[float], tolerance: float = 0.0,
           confidence: float = 0.95) -> Growth:
    """:class:`Growth` of ``y`` against ``x`` (all points used: drop the warm-up first); the
    last half is the points after the first ``n // 2``."""
    x, y = list(x), list(y)
    slope, low, high, fit = interval(x, y, confidence)
    half = fit.n // 2
    late, late_low, late_high = slope, low, high
    if fit.n - half >= 3:
        late, late_low, late_high, _ = interval(x[half:], y[half:], confidence)
    return Growth(slope, low, high, late,
                  verdict(slope, low, high, late, tolerance, late_high), fit.n,
                  confidence, tolerance, fit.exact, fit.rho, fit.n_eff, late_low, late_high)


def growth_per_step(memory: Sequence[float], warmup: int = 10, tolerance: float = 0.0,
                    confidence: float = 0.95) -> Growth:
    """Growth per step of ``memory`` (bytes after each step) after the first ``warmup``
    steps, with its interval and verdict against ``tolerance`` (module docstring)."""
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
    caught in a read move nothing; spans, so that a burst of reads weighs no more than a
    quiet span). The slope of those points in bytes per second, times the seconds per step
    ``(end − start) / steps``, is the growth per step, with the same autocorrelation-aware
    interval as :func:`growth` over the spans that hold a read (neighbouring spans' medians
    are not assumed independent either)."""
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
    scale = (end - start) / steps
    per_second = growth([p[0] for p in points], [p[1] for p in points], tolerance / scale,
                        confidence)
    return replace(per_second, tolerance=tolerance, **{
        name: getattr(per_second, name) * scale
        for name in ("slope", "low", "high", "late", "late_low", "late_high")})


__all__ = ["EXACT_BYTES", "VERDICTS", "Fit", "Growth", "corrected_rho", "effective_n", "fit_line",
           "growth", "growth_over_run", "growth_per_step", "interval", "t_cdf", "t_quantile",
           "verdict"]
