"""Argument and input checks shared by the layers: every refusal names the layer, the argument
and what was expected, so a bad setting fails where it is made, not three calls later."""

from __future__ import annotations

import numbers

import numpy as np


def positive_int(owner: str, name: str, value, minimum: int = 1) -> int:
    """``value`` as an int ≥ ``minimum``; booleans and non-integral numbers are refused.

    >>> positive_int("Linear", "in_features", 0)
    ValueError: Linear: in_features must be a positive integer, got 0
    """
    what = "a positive integer" if minimum == 1 else f"an integer ≥ {minimum}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and not isinstance(value, bool) \
                and float(value).is_integer():
            value = int(value)
        else:
            raise ValueError(f"{owner}: {name} must be {what}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{owner}: {name} must be {what}, got {value}")
    return int(value)


def positive_float(owner: str, name: str, value) -> float:
    """``value`` as a float > 0 (NaN and infinity refused)."""
    if not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive number, got {value!r}")
    return float(value)


def float_dtype(owner: str, dtype) -> np.dtype:
    """``dtype`` if it is a floating-point type; weights in an integer or boolean type would
    round every initial value to 0."""
    dtype = np.dtype(dtype)
    if not np.issubdtype(dtype, np.floating):
        raise TypeError(f"{owner}: parameters need a floating-point dtype (float16, float32, "
                        f"float64), got {dtype}")
    return dtype


def array(owner: str, name: str, value) -> np.ndarray:
    """``value`` if it is a numpy array; a list or a scalar is refused with the fix."""
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{owner} expects {name} as a numpy array, got {type(value).__name__}: "
                        f"wrap it with np.asarray(...)")
    return value


def floating(owner: str, name: str, value) -> np.ndarray:
    """``value`` as a numpy array of a floating-point dtype (integers would be computed in
    integer arithmetic, silently wrong)."""
    value = array(owner, name, value)
    if not np.issubdtype(value.dtype, np.floating):
        raise TypeError(f"{owner} computes in floating point: {name} has dtype {value.dtype}; "
                        f"convert it first, e.g. {name}.astype(np.float32)")
    return value


def input_shape(value) -> tuple[int, ...]:
    """An input shape for counting by shape: a tuple of positive ints (an array is refused with
    the fix, since the analyses take ``x.shape``, not ``x``)."""
    if isinstance(value, np.ndarray):
        raise TypeError("FLOPs and memory are counted from the input's shape, not the input: "
                        f"pass x.shape (here {value.shape}) as input_shape")
    try:
        dims = tuple(value)
    except TypeError:
        raise TypeError(f"input_shape must be a tuple of ints, got {value!r}") from None
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0
               for d in dims):
        raise ValueError(f"input_shape must be a tuple of positive ints, got {value!r}")
    return tuple(int(d) for d in dims)


def same_shape(owner: str, name: str, value: np.ndarray, expected: tuple[int, ...]) -> None:
    """Refuse a gradient (or target) whose shape is not ``expected`` (no broadcasting)."""
    shape = tuple(np.shape(value))
    if shape != tuple(expected):
        raise ValueError(f"{owner}: {name} has shape {shape}, expected {tuple(expected)}")


__all__ = ["array", "float_dtype", "floating", "input_shape", "positive_float", "positive_int",
           "same_shape"]
