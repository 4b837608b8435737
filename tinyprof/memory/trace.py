"""Measuring memory with tracemalloc, without disturbing a trace the caller already runs.

numpy reports every data buffer it allocates to tracemalloc (domain ``np.lib.tracemalloc_domain``),
so the traced size counts arrays byte for byte, plus the small Python objects around them.

Nesting. tracemalloc keeps one global pair (current, peak). A measurement that finds tracing
already on measures relative to the current traced size, leaves tracing on, and must call
``tracemalloc.reset_peak()`` to see its own peak. That also wipes the outer caller's peak, and the
stdlib has no call that sets a peak back. So we read the outer peak before resetting, and when we
finish, if it was higher than anything seen since, we raise the peak to it again with a fake
allocation of exactly the missing bytes: ``PyTraceMalloc_Track`` registers that many bytes in a
private tracemalloc domain and ``PyTraceMalloc_Untrack`` removes them at once; no memory is
touched. The outer caller then reads max(its peak before, the peak during our call) — what it would
have read had we never reset. (Without ctypes, a never-touched ``np.empty`` buffer does the same,
at the price of a few hundred bytes of array header above the old peak.)
"""

from __future__ import annotations

import ctypes
import gc
import tracemalloc
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..table import Table
from ..units import format_bytes

_FAKE_DOMAIN = 0x7470  # "tp": a tracemalloc domain of our own, used only by _raise_peak_to


def _trace_functions() -> tuple[Callable, Callable] | None:
    try:
        api = ctypes.pythonapi
        track, untrack = api.PyTraceMalloc_Track, api.PyTraceMalloc_Untrack
    except AttributeError:  # not CPython
        return None
    track.argtypes, track.restype = [ctypes.c_uint, ctypes.c_size_t, ctypes.c_size_t], ctypes.c_int
    untrack.argtypes, untrack.restype = [ctypes.c_uint, ctypes.c_size_t], ctypes.c_int
    return track, untrack


_TRACE_FUNCTIONS = _trace_functions()


def _raise_peak_to(target: int) -> None:
    """Make tracemalloc's peak at least ``target`` (absolute bytes) without keeping memory."""
    current, peak = tracemalloc.get_traced_memory()
    missing = target - current
    if peak >= target or missing <= 0:
        return
    if _TRACE_FUNCTIONS is not None:
        track, untrack = _TRACE_FUNCTIONS
        if track(_FAKE_DOMAIN, 1, missing) == 0:
            untrack(_FAKE_DOMAIN, 1)
            return
    buffer = np.empty(missing, dtype=np.uint8)  # virtual memory only: its pages are never touched
    del buffer


class TraceWindow:
    """Traced bytes above a baseline, for one measurement, in or outside someone else's trace.

    Opening starts tracemalloc if it is off (and closing stops it again); if tracing is already
    on it is shared: the baseline is the current traced size, and closing gives the outer caller
    back a peak at least as high as the one it had (see the module docstring).
    """

    def __init__(self) -> None:
        gc.collect()  # garbage freed during the measurement would read as negative bytes
        self.started = not tracemalloc.is_tracing()
        if self.started:
            tracemalloc.start()
        self._outer_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        self.baseline = tracemalloc.get_traced_memory()[0]
        self._highest = self.baseline
        self.closed = False

    def read(self) -> tuple[int, int]:
        """(current, peak since the last reset), both in bytes above the baseline."""
        current, peak = tracemalloc.get_traced_memory()
        self._highest = max(self._highest, peak)
        return current - self.baseline, peak - self.baseline

    def reset_peak(self) -> None:
        """Start a new peak interval (the highest peak so far is remembered for :meth:`close`)."""
        self.read()
        tracemalloc.reset_peak()

    def close(self) -> None:
        """Stop tracing if this window started it; otherwise restore the outer caller's peak."""
        if self.closed:
            return
        self.closed = True
        if self.started:
            tracemalloc.stop()
        elif tracemalloc.is_tracing():
            self.read()
            _raise_peak_to(max(self._outer_peak, self._highest))


@dataclass(frozen=True)
class MemoryMeasurement:
    """What one call allocated, from tracemalloc.

    * ``peak_bytes``: the highest traced size during the call, above the size just before it.
    * ``retained_bytes``: traced size after the call minus before it: what the call left
      allocated, its return value included.
    * ``result``: the call's return value.
    * ``nested``: True when the call ran inside a trace someone else had started.
    """

    peak_bytes: int
    retained_bytes: int
    result: Any = field(default=None, repr=False, compare=False)
    nested: bool = False

    def __str__(self) -> str:
        return (f"peak {format_bytes(self.peak_bytes)}, "
                f"retained {format_bytes(self.retained_bytes)}")


def measure_memory(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> MemoryMeasurement:
    """Peak and retained traced bytes of ``fn(*args, **kwargs)``, and its result.

    peak = max traced size during the call − traced size before it;
    retained = traced size after the call − traced size before it.

    Safe inside an outer trace: tracing is never stopped unless this call started it. Measuring
    needs ``tracemalloc.reset_peak()``, which also resets the outer caller's peak; the stdlib
    cannot set it back, so afterwards the peak is raised again (with a zero-cost fake trace) to
    max(outer peak before the call, peak during the call): the outer caller reads the same peak
    it would have read without this measurement, never a lower one.

    >>> m = measure_memory(np.ones, (1000, 1000))   # 8,000,000 bytes of float64
    >>> print(m)                                     # peak 8.0 MB, retained 8.0 MB
    """
    if not callable(fn):
        raise TypeError(f"measure_memory: fn must be callable, got {type(fn).__name__}")
    window = TraceWindow()
    try:
        result = fn(*args, **kwargs)
        current, peak = window.read()
    finally:
        window.close()
    return MemoryMeasurement(peak, current, result, nested=not window.started)


@dataclass(frozen=True)
class Mark:
    """One labelled point of a :class:`MemoryTimeline`, bytes above the traced size at the start.

    ``traced_bytes`` now, ``delta_bytes`` since the previous mark (or the start), and
    ``peak_bytes`` the highest traced size between the previous mark and this one.
    """

    label: str
    traced_bytes: int
    delta_bytes: int
    peak_bytes: int


class MemoryTimeline:
    """Label points of a run and see what the traced memory did between them.

    >>> with MemoryTimeline() as timeline:
    ...     y = model(x); timeline.mark("after forward")
    ...     model.backward(grad); timeline.mark("after backward")
    >>> timeline.table()   # label, traced, delta, peak since the previous mark

    All bytes are relative to the traced size when the block was entered. Nested-trace safe, as
    :func:`measure_memory` is: it leaves an outer trace running and its peak no lower.
    """

    def __init__(self, title: str = "") -> None:
        self.title = title
        self._marks: list[Mark] = []
        self._window: TraceWindow | None = None

    def __enter__(self) -> "MemoryTimeline":
        if self._window is not None:
            raise RuntimeError("this MemoryTimeline is already running")
        self._marks.clear()
        self._window = TraceWindow()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._window is not None:
            self._window.close()
            self._window = None

    def mark(self, label: str) -> Mark:
        """Record the traced bytes now, the change since the last mark and the peak in between."""
        if self._window is None:
            raise RuntimeError("MemoryTimeline.mark() works only inside "
                               "`with MemoryTimeline() as timeline:`")
        current, peak = self._window.read()
        previous = self._marks[-1].traced_bytes if self._marks else 0
        mark = Mark(str(label), current, current - previous, peak)
        self._marks.append(mark)
        self._window.reset_peak()
        return mark

    @property
    def marks(self) -> tuple[Mark, ...]:
        return tuple(self._marks)

    def __getitem__(self, label: str) -> Mark:
        for mark in self._marks:
            if mark.label == label:
                return mark
        raise KeyError(f"no mark labelled {label!r}; marks: {[m.label for m in self._marks]}")

    def table(self) -> Table:
        """label, traced (above the start), delta (since the previous mark), peak since it."""
        rows = [[m.label, m.traced_bytes, m.delta_bytes, m.peak_bytes] for m in self._marks]
        return Table(["label", "traced", "delta", "peak since previous"], rows,
                     title=self.title or "memory timeline (bytes above the start)",
                     formats={c: format_bytes for c in ("traced", "delta", "peak since previous")})

    def __str__(self) -> str:
        return str(self.table())

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()
