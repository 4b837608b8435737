"""Failures that name the likely mistake: the comparisons a test cell makes.

``expect(got, want, what, hints)`` fails with "what: expected W, got G. <hint>", the hint looked
up by the wrong value the student produced (the value one gets by forgetting the bias, say);
``which(got, variants)`` names which of several candidate answers ``got`` is (:func:`same`:
structure and numbers within tolerance), for ``expect(which(...), "right", ...)``. A value is
quoted up to :data:`SHOWN_CHARS` characters (:func:`shown`), so that what the student's code
returns cannot fill the feedback page. None of them calls another tinyprof function: hidden
tests use them with tinyprof switched off.
"""

from __future__ import annotations

import math
from typing import Any, Mapping


def _matches(got: Any, candidate: Any, rel: float) -> bool:
    try:
        return math.isclose(float(got), float(candidate), rel_tol=rel, abs_tol=0.0)
    except (TypeError, ValueError):
        return got == candidate


def expect(got: Any, want: Any, what: str, hints: Mapping[Any, str] | None = None,
           rel: float = 0.0, otherwise: str = "") -> None:
    """Assert ``got`` equals ``want`` (within relative tolerance ``rel``), else fail with a
    message naming ``what`` and, when ``got`` is a known wrong answer, the likely mistake."""
    if got is None:
        raise AssertionError(f"{what}: got None; did you forget to return the result?")
    if _matches(got, want, rel):
        return
    hint = next((text for value, text in (hints or {}).items() if _matches(got, value, 1e-9)),
                otherwise)
    wanted = f"{want:,}" if isinstance(want, int) and not isinstance(want, bool) else repr(want)
    raise AssertionError(f"{what}: expected {wanted}, got {shown(got)}"
                         + (f". {hint}" if hint else ""))


#: A value the student's code produced is quoted in a failure message up to this many
#: characters; a longer one is described (its type and size) instead.
SHOWN_CHARS = 80


def shown(value: Any) -> str:
    """``value`` as a failure message quotes it: its ``repr`` (integers with thousands
    separators) when at most SHOWN_CHARS characters long, else what it is and how big. A message
    stays readable, and what the student's code returns cannot fill the feedback page."""
    try:
        text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) \
            else repr(value)
    except Exception:  # noqa: BLE001 - an object whose repr fails is described by its type
        text = ""
    if text and len(text) <= SHOWN_CHARS:
        return text
    kind = type(value).__name__
    if isinstance(value, int):
        return f"an integer of {len(str(abs(value))):,} digits"
    if isinstance(value, str):
        return f"a string of {len(value):,} characters"
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        return f"an array of shape {shape} ({getattr(value, 'dtype', kind)})"
    try:
        return f"a {kind} of {len(value):,} items"
    except Exception:  # noqa: BLE001 - no length: say what it is
        return f"a {kind}"


def same(got: Any, want: Any, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """True when ``got`` has ``want``'s structure (tuples and lists item by item, dicts key by
    key) and its numbers and arrays are within ``atol + rtol·|want|`` of it, shapes equal. Calls no
    other tinyprof function, so that hidden tests can use it with tinyprof switched off."""
    import numpy as np

    if isinstance(want, dict):
        return (isinstance(got, dict) and set(got) == set(want)
                and all(same(got[k], want[k], rtol, atol) for k in want))
    if isinstance(want, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(want)
                and all(same(g, w, rtol, atol) for g, w in zip(got, want)))
    try:
        return (np.shape(got) == np.shape(want)
                and bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)))
    except (TypeError, ValueError):
        return False


def which(got: Any, variants: Mapping[str, Any], rtol: float = 1e-6, atol: float = 1e-9) -> str:
    """The name of the first of ``variants`` (name → value: the right answer and those of
    likely mistakes) that ``got`` is :func:`same` as, else ``"something else"``; for
    ``expect(which(got, variants), "right", what, hints={mistake: hint})``."""
    return next((name for name, value in variants.items() if same(got, value, rtol, atol)),
                "something else")
