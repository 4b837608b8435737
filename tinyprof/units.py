"""Friendly units for bytes, seconds and counts (used by every printed report)."""

from __future__ import annotations

import math
import numbers

import numpy as np

BYTE_UNITS = (("GB", 1e9), ("MB", 1e6), ("KB", 1e3))
TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def bytes_per_element(dtype) -> int:
    """Bytes one element of ``dtype`` takes: float64 8, float32 4, float16 2, int8 1."""
    return np.dtype(dtype).itemsize


def format_bytes(n: float) -> str:
    """Decimal units, as model sizes are quoted: 497,759,232 → '497.8 MB'."""
    sign = "-" if n < 0 else ""
    n = abs(float(n))
    for unit, scale in BYTE_UNITS:
        if n >= scale:
            return f"{sign}{n / scale:.1f} {unit}"
    return f"{sign}{n:.0f} B"


def format_seconds(t: float) -> str:
    """Three significant digits in the largest unit that keeps the number ≥ 1:
    0.00123 → '1.23 ms'; 0.0009996 rounds to '1 ms', not '1e+03 µs'. NaN is 'nan' (no unit:
    it is no time), ±infinity '±inf s'."""
    t = float(t)
    if math.isnan(t):
        return "nan"
    if math.isinf(t):
        return f"{t} s"
    for unit, scale in TIME_UNITS:
        shown = float(f"{t / scale:.3g}")
        if abs(shown) >= 1:
            return f"{shown:g} {unit}"
    return f"{float(f'{t / 1e-9:.3g}'):g} ns"


def format_count(n: float) -> str:
    """Thousands separators for exact counts: 124439808 → '124,439,808'. A count is a whole
    number: 1.7 (or NaN) is a ValueError, not '1'."""
    if isinstance(n, numbers.Integral):
        return f"{int(n):,}"
    value = float(n)
    if not value.is_integer():
        raise ValueError(f"format_count formats exact counts (whole numbers), got {n!r}")
    return f"{int(value):,}"


def format_percent(value: float, digits: int = 1, *, signed: bool = False) -> str:
    """A share or a relative change as a percent: 0.1234 → '12.3%'; ``signed`` for a change:
    +0.05 → '+5.0%'."""
    return f"{value:+.{digits}%}" if signed else f"{value:.{digits}%}"


def format_ratio(value: float, digits: int = 2) -> str:
    """A speedup or a ratio of two times: 1.234 → '1.23×'."""
    return f"{value:.{digits}f}×"


def format_interval(interval: tuple[float, float], kind: str = "seconds",
                    digits: int = 2) -> str:
    """One interval, written one way everywhere a report prints one:

    - ``"seconds"``: '1.2 ms – 1.35 ms' (each end by :func:`format_seconds`);
    - ``"ratio"``: '1.05–1.12×' (a speedup's interval, ``digits`` decimals);
    - ``"change"``: '+1.0% to +3.2%' (a relative change's interval, signed percents with
      ``digits - 1`` decimals).
    """
    low, high = interval
    if kind == "seconds":
        return f"{format_seconds(low)} – {format_seconds(high)}"
    if kind == "ratio":
        return f"{low:.{digits}f}–{format_ratio(high, digits)}"
    if kind == "change":
        return (f"{format_percent(low, digits - 1, signed=True)} to "
                f"{format_percent(high, digits - 1, signed=True)}")
    raise ValueError(f"format_interval: kind is 'seconds', 'ratio' or 'change', got {kind!r}")


def format_si(n: float, unit: str = "") -> str:
    """Short SI form for large quantities: 2.9e11 FLOPs → '291.6 G'."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {prefix}{unit}"
    return f"{n:g} {unit}".strip()


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit (name, seconds per unit) that shows ``seconds`` as a number ≥ 1: s, ms, µs or
    ns (ns below that)."""
    for unit, scale in TIME_UNITS:
        if abs(seconds) >= scale:
            return unit, scale
    return TIME_UNITS[-1]


def byte_unit(n: float) -> tuple[str, float]:
    """The decimal unit that keeps ``n`` bytes ≥ 1 (B, KB, MB or GB) and its size in bytes."""
    return next(((unit, scale) for unit, scale in BYTE_UNITS if n >= scale), ("B", 1.0))
