"""The classic benchmarking helpers, on tinyprof's measurements: ``Timer`` and ``MemoryTracker``
context managers and a ``@profile`` decorator.

>>> with Timer("forward") as t:
...     model(x)
>>> t.seconds
>>> with MemoryTracker() as m:
...     model(x)
>>> m.peak_bytes
>>> @profile
... def step(model, x): ...    # each call prints time, traced peak memory and FLOPs
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

import numpy as np

from ..memory.trace import TraceWindow
from ..nn.module import Module
from ..units import format_bytes, format_count, format_seconds


class Timer:
    """Wall time of a block by ``time.perf_counter`` (``.seconds``); prints it when
    ``verbose``. One run of one block: for statistics, use :func:`tinyprof.measure_latency`."""

    def __init__(self, name: str = "block", verbose: bool = False):
        self.name, self.verbose = name, verbose
        self.seconds: float | None = None

    def __enter__(self) -> "Timer":
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.seconds = time.perf_counter() - self._start
        if self.verbose:
            print(f"{self.name}: {format_seconds(self.seconds)}")


class MemoryTracker:
    """Traced bytes (tracemalloc) allocated by a block: ``.peak_bytes`` above the size at entry
    and ``.retained_bytes`` still allocated at exit. Safe inside another trace (see
    :func:`tinyprof.measure_memory`)."""

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self.peak_bytes: int | None = None
        self.retained_bytes: int | None = None

    def __enter__(self) -> "MemoryTracker":
        self._window = TraceWindow()
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.retained_bytes, self.peak_bytes = self._window.read()
        finally:
            self._window.close()
        if self.verbose:
            print(f"peak {format_bytes(self.peak_bytes)}, "
                  f"retained {format_bytes(self.retained_bytes)}")


def _flops_of(args: tuple) -> int | None:
    """Forward FLOPs when the call is (model, x, ...) with a tinyprof model and an array."""
    if len(args) >= 2 and isinstance(args[0], Module) and isinstance(args[1], np.ndarray):
        from ..flops import count_flops

        try:
            return count_flops(args[0], args[1].shape)
        except (LookupError, ValueError):
            return None
    return None


def profile(fn: Callable | None = None, *, printer: Callable[[str], Any] = print) -> Callable:
    """Decorate ``fn`` so that every call prints its wall time, traced peak memory and, when
    called as ``fn(model, x, ...)``, the model's forward FLOPs for x; the result is returned
    unchanged. Usable as ``@profile`` or ``@profile(printer=log.info)``."""
    if fn is None:
        return functools.partial(profile, printer=printer)

    @functools.wraps(fn)
    def profiled(*args: Any, **kwargs: Any) -> Any:
        with MemoryTracker() as memory, Timer() as timer:
            result = fn(*args, **kwargs)
        flops = _flops_of(args)
        printer(f"{fn.__name__}: {format_seconds(timer.seconds)}, peak "
                f"{format_bytes(memory.peak_bytes)}"
                + (f", {format_count(flops)} FLOPs" if flops is not None else ""))
        return result

    return profiled


__all__ = ["MemoryTracker", "Timer", "profile"]
