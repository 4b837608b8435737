"""Amdahl's law: what speeding up one part of the work buys for the whole."""

from __future__ import annotations

import numbers


def amdahl_speedup(fraction: float, factor: float) -> float:
    """Overall speedup = 1 / ((1 − p) + p / s).

    ``fraction`` (p) is the share of the time that gets faster, ``factor`` (s) how much faster
    it gets. Making 70% of the work 2× faster gives 1 / (0.3 + 0.35) = 1.54×.
    """
    _check(fraction, factor)
    return 1.0 / ((1.0 - fraction) + fraction / factor)


def amdahl_limit(fraction: float) -> float:
    """The ceiling as s → ∞: 1 / (1 − p) (infinite when p = 1)."""
    _check(fraction, 1.0)
    return float("inf") if fraction == 1.0 else 1.0 / (1.0 - fraction)


def required_factor(fraction: float, target: float) -> float:
    """The factor s that ``fraction`` must be sped up by to reach ``target`` overall.

    Solving 1 / ((1 − p) + p/s) = T for s gives s = p / (1/T − (1 − p)); infinite (unreachable)
    when T ≥ 1 / (1 − p).
    """
    _check(fraction, 1.0)
    if not target >= 1:
        raise ValueError(f"target speedup must be ≥ 1, got {target}")
    slack = 1.0 / target - (1.0 - fraction)
    return float("inf") if slack <= 0 else fraction / slack


def _check(fraction: float, factor: float) -> None:
    """A fraction in [0, 1] and a factor > 0 (infinity allowed: the limit); NaN is neither."""
    for name, value in (("fraction", fraction), ("factor", factor)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"amdahl: {name} must be a number, got {value!r}")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction of the work must be between 0 and 1, got {fraction}")
    if not factor > 0:
        raise ValueError(f"speedup factor must be positive, got {factor}")
