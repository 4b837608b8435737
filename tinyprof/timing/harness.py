"""measure_latency: warm up, calibrate, sample with the garbage collector off.

What one sample is
    ``t = perf_counter(); fn() repeated `loops` times; perf_counter() − t``, divided by
    ``loops`` (:func:`tinyprof.ab_test` with ``clock="cpu"`` reads ``process_time`` instead:
    see :data:`CLOCKS`). Nothing is subtracted: the loop's own cost (a few ns per call) and one
    timer read stay in, because an "empty loop" baseline is itself noisy and subtracting it can
    give zero or negative times for very fast functions. Instead, ``loops`` is chosen so that a
    block lasts at least 200 µs and at least ``CALIBRATION_FACTOR`` (1000) times the timer's tick
    (its resolution, or the measured cost of reading it, whichever is larger): the timer then
    adds < 0.1%.
    So ``lambda: None`` reports what a Python call really costs (about 15–30 ns on a current
    x86 machine), not 0 and not the 40–80 ns that one ``perf_counter()`` read costs.

Order of events
    1. ``warmup`` calls (not timed; exceptions become a RuntimeError naming ``fn``);
    2. garbage collection off (as :mod:`timeit` does), calibration blocks (also untimed
       warm-up), then ``iterations`` timed blocks; the collector is switched back on only if
       it was on before, also when ``fn`` raises.
"""

from __future__ import annotations

import gc
import itertools
import math
import numbers
import time
from typing import Any, Callable

from ..torchprobe import synchronized
from .context import collect_context
from .stats import PERF_COUNTER_RESOLUTION, LatencyStats

#: A calibrated block lasts at least this many timer ticks (resolution or read cost).
CALIBRATION_FACTOR = 1000
#: ... and at least this long, in seconds: well above interrupts and timer reads (~10 µs, which
#: would otherwise inflate single blocks) and well below a scheduler time slice (~4 ms, so that
#: being descheduled spoils a few blocks, which the median ignores, rather than every block).
MIN_BLOCK_SECONDS = 200e-6
#: Calibration never runs more calls than this in one block.
MAX_LOOPS = 10_000_000
_timer = time.perf_counter

#: The clocks a block can be timed by, by name.
#:
#: - ``"wall"``, ``time.perf_counter``: elapsed time, everything that happened meanwhile
#:   included. Right for anything that waits (I/O, sleeps, locks, a device) or runs threads, and
#:   what a user waits for. On a loaded machine it also counts the time the process was
#:   pre-empted, which grows with the length of a call: a 100 ms step is interrupted far more
#:   often than a 3 ms one, so wall-clock ratios move with the machine's load.
#: - ``"cpu"``, ``time.process_time``: the CPU time of this process, all its threads, user and
#:   system. Right for single-threaded CPU-bound code on a shared machine: time spent waiting for
#:   a core, or sleeping, is not counted, so other programs barely move it. It counts every
#:   thread's work, so a multi-threaded call (a BLAS matmul on 4 threads) costs its total work,
#:   more than its wall time; waits cost nothing.
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}

Block = Callable[[int], float]


def clock_named(clock: Any, caller: str = "make_block") -> Callable[[], float]:
    """The timer function of ``clock`` (a key of :data:`CLOCKS`); TypeError or ValueError
    naming ``caller``'s ``clock`` argument and the choices otherwise."""
    if not isinstance(clock, str):
        raise TypeError(f"{caller}: clock must be a string, one of {', '.join(map(repr, CLOCKS))}; "
                        f"got {clock!r}")
    if clock not in CLOCKS:
        raise ValueError(f"{caller}: clock must be one of {', '.join(map(repr, CLOCKS))} "
                         "(\"wall\": elapsed time, for code that waits or runs threads; "
                         "\"cpu\": this process's CPU time, for single-threaded CPU-bound "
                         f"code); got {clock!r}")
    return CLOCKS[clock]


def callable_name(fn: Any) -> str:
    """A readable name for error messages and reports: ``Sequential 'encoder'``, ``forward``."""
    describe = getattr(fn, "describe", None)
    if callable(describe) and hasattr(fn, "named_modules"):
        return describe()
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def timer_overhead(reads: int = 201) -> float:
    """Median time between two back-to-back ``perf_counter()`` reads: the timer's own cost."""
    deltas = []
    for _ in range(reads):
        start = _timer()
        deltas.append(_timer() - start)
    deltas.sort()
    middle = len(deltas) // 2
    return deltas[middle] if len(deltas) % 2 else (deltas[middle - 1] + deltas[middle]) / 2


def make_block(fn: Callable, args: tuple, kwargs: dict, clock: str = "wall") -> Block:
    """A function that times ``loops`` calls of ``fn`` and returns the block's seconds on
    ``clock`` (a key of :data:`CLOCKS`).

    The loop is specialised on whether there are arguments, so that ``fn()`` is not slowed
    down by unpacking an empty ``*args`` every call; ``itertools.repeat`` is the cheapest
    Python loop (the one :mod:`timeit` uses).
    """
    timer = clock_named(clock)
    if not args and not kwargs:
        def block(loops: int) -> float:
            it = itertools.repeat(None, loops)
            start = timer()
            for _ in it:
                fn()
            return timer() - start
    elif not kwargs:
        def block(loops: int) -> float:
            it = itertools.repeat(None, loops)
            start = timer()
            for _ in it:
                fn(*args)
            return timer() - start
    else:
        def block(loops: int) -> float:
            it = itertools.repeat(None, loops)
            start = timer()
            for _ in it:
                fn(*args, **kwargs)
            return timer() - start
    return block


def calibrate_loops(block: Block, target: float) -> int:
    """Smallest-ish loop count whose block lasts ≥ ``target`` seconds.

    Times 1 call; while the block is too short, scales loops by target/measured (×1.2 margin,
    at least ×2, at most ×1000 per step, so a single lucky reading cannot overshoot wildly).
    A block's length is the larger of its own reading and its wall-clock time, so that a block
    timed by CPU time of a function that mostly waits (a sleep reads about 0 s of CPU) stops
    growing once it lasts ``target`` seconds of wall time.
    """
    loops = 1
    while loops < MAX_LOOPS:
        elapsed = min(_lasted(block, loops), _lasted(block, loops))
        if elapsed >= target:
            return loops
        growth = 1000.0 if elapsed <= 0 else min(1000.0, max(2.0, 1.2 * target / elapsed))
        loops = min(MAX_LOOPS, math.ceil(loops * growth))
    return loops


def _lasted(block: Block, loops: int) -> float:
    """max(the block's own reading, its wall-clock time), in seconds."""
    start = _timer()
    reading = block(loops)
    return max(reading, _timer() - start)


def _check_count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"measure_latency: {name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"measure_latency: {name} must be ≥ {minimum}, got {value}")
    return int(value)


def _run_phase(phase: str, name: str, action: Callable[[], Any]) -> Any:
    try:
        return action()
    except Exception as error:
        raise RuntimeError(f"measure_latency: {name} raised {type(error).__name__} during "
                           f"{phase}: {error}") from error


def measure_latency(fn: Callable, *args: Any, warmup: int = 10, iterations: int = 100,
                    loops: int | None = None, **kwargs: Any) -> LatencyStats:
    """Time ``fn(*args, **kwargs)`` and return its :class:`LatencyStats` (seconds per call).

    ``warmup`` untimed calls first (caches, lazy allocation, branch predictors), then
    ``iterations`` timed samples. ``loops=None`` calibrates the calls per sample so that each
    sample lasts ≥ max(200 µs, 1000 × timer tick); pass ``loops=1`` to time single calls (with
    ``warmup=0, iterations=1, loops=1`` the one sample is the cold first call). Other keyword
    arguments are passed to ``fn``. Garbage collection is off while sampling and restored to
    its previous state afterwards. Percentiles: numpy's linear interpolation.

    Raises TypeError for a non-callable ``fn`` or non-integer counts, ValueError for
    ``iterations`` < 1, ``warmup`` < 0 or ``loops`` < 1, and RuntimeError (with the original
    exception chained) when ``fn`` raises.
    """
    import tracemalloc  # here, not at import: it pulls in pickle, fnmatch and linecache

    if not callable(fn):
        raise TypeError(f"measure_latency: fn must be callable, got {type(fn).__name__}. Pass "
                        "the function (or model) itself and its arguments separately: "
                        "measure_latency(model, x), not measure_latency(model(x)).")
    warmup = _check_count("warmup", warmup, 0)
    iterations = _check_count("iterations", iterations, 1)
    if loops is not None:
        loops = _check_count("loops", loops, 1)
    name = callable_name(fn)
    context = collect_context()
    tracing = tracemalloc.is_tracing()
    block = make_block(synchronized(fn, *args), args, kwargs)   # GPU torch: wait for the device
    _run_phase("warm-up", name, lambda: block(warmup))
    overhead = timer_overhead()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        if loops is None:
            target = max(MIN_BLOCK_SECONDS,
                         CALIBRATION_FACTOR * max(PERF_COUNTER_RESOLUTION, overhead))
            loops = _run_phase("calibration", name, lambda: calibrate_loops(block, target))
        times = _run_phase("timing", name, lambda: [block(loops) for _ in range(iterations)])
    finally:
        if gc_was_enabled:
            gc.enable()
    return LatencyStats.from_samples(
        [t / loops for t in times], loops=loops, name=name, warmup=warmup,
        timer_resolution=PERF_COUNTER_RESOLUTION, timer_overhead=overhead,
        tracemalloc_active=tracing or tracemalloc.is_tracing(), context=context)
