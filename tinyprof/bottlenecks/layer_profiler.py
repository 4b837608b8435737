"""A per-layer profiler: every layer's forward and backward calls, timed, with self and total time.

While a :class:`LayerProfiler` records, the ``forward`` and ``backward`` methods of every
:class:`~tinyprof.nn.Module` subclass are wrapped so that each call is timed with
``time.perf_counter``; on exit the original methods are put back, so outside a ``with`` block
tinyprof's layers run exactly as before, at no cost. tinyprof owns its backward passes, so
backward time is attributed to the layer that spends it and added up per layer (torch.profiler
records backward operators too and links each to its forward operator by a sequence number, but
does not aggregate them per module).

Definitions, for one recorded call:

- **total** time: from entering the layer's method to leaving it, children included;
- **self** time: total minus the totals of the calls it made to other layers (a container's
  self time is its own bookkeeping; a leaf layer's self time is its total);
- a row of :meth:`LayerProfiler.top_operations` adds these up over a layer's calls in one phase;
  its share is self time over the self time of every kept call (the shares add up to 100 %).

The first ``warmup`` calls of each layer and phase are recorded, marked as warm-up in the Chrome
trace, and left out of the table. The profiler's own cost per layer call is measured on a
two-layer model of trivial layers (``overhead_per_call``: recorded minus unrecorded calls, median
of interleaved rounds) and reported beside the table as a **lower bound**: on real layers the
recording also evicts some of their data from the caches, which costs more (up to twice as much
on a 100 µs step in our runs). Entering and leaving the ``with`` block (wrapping and unwrapping
every layer class) is a fixed cost, measured and reported apart (``setup_seconds``); it is not
part of the block's wall time. The coverage is the self times of all calls over the wall time of
the block. A profiler records one block: entering it again is an error (make a new one).
"""

from __future__ import annotations

import os
import time
from _thread import get_ident
from collections import defaultdict
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, Callable, Iterator

from ..amdahl import amdahl_speedup
from ..nn.module import Module
from ..table import Table
from ..timing.chrome import chrome_trace, complete_event, write_chrome_trace
from ..units import format_percent, format_seconds

PHASES = ("forward", "backward")


@dataclass(frozen=True)
class LayerCall:
    """One recorded call: which layer (its display ``name`` and its ``path``, the dotted path
    that ``named_modules`` gives it, "" for a model's root or a lone layer), which phase, when
    (perf_counter seconds), its parent call (an index into the list of calls, None at the top),
    whether it was a warm-up call, and the time spent in the calls it made to other layers."""

    name: str
    kind: str
    phase: str
    start: float
    end: float
    depth: int
    parent: int | None
    warmup: bool
    children_seconds: float
    path: str = ""

    @property
    def total_seconds(self) -> float:
        return self.end - self.start

    @property
    def self_seconds(self) -> float:
        return self.total_seconds - self.children_seconds


@dataclass(frozen=True)
class LayerRow:
    """One (layer, phase) of :meth:`LayerProfiler.rows`: its calls' self and total seconds
    added up, and its share of all kept self time. Read as attributes or, as the chapters do,
    as a mapping (``row["self_s"]``; ``dict(row)``); ``path`` joins it to the layer's FLOPs
    and bytes (:func:`tinyprof.bottlenecks.layer_work`)."""

    name: str
    type: str
    phase: str
    calls: int
    self_s: float
    total_s: float
    share: float
    path: str = ""

    def keys(self) -> tuple[str, ...]:
        return ("name", "type", "phase", "calls", "self_s", "total_s", "share", "path")

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(f"a profiler row has {list(self.keys())}, not {key!r}")
        return getattr(self, key)


class _Open:
    """A call being recorded (mutable until it returns); becomes a :class:`LayerCall`."""

    __slots__ = ("name", "kind", "phase", "start", "depth", "parent", "module", "end",
                 "warmup", "children", "path")

    def __init__(self, module: Module, phase: str, depth: int, parent: int | None,
                 warmup: bool):
        self.name, self.kind, self.phase = _display_name(module), type(module).__name__, phase
        self.path, self.module, self.depth, self.parent = module.name, module, depth, parent
        self.warmup, self.start, self.end, self.children = warmup, 0.0, 0.0, 0.0

    def closed(self) -> LayerCall:
        return LayerCall(self.name, self.kind, self.phase, self.start, self.end, self.depth,
                         self.parent, self.warmup, self.children, self.path)


def _all_module_classes() -> Iterator[type]:
    seen: set[type] = set()
    todo = [Module]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.add(cls)
            yield cls
            todo.extend(cls.__subclasses__())


def _display_name(module: Module) -> str:
    return module.name or type(module).__name__


class LayerProfiler:
    """``with LayerProfiler() as prof: ...`` records each layer call made inside the block.

    Only one profiler records at a time, and only calls made on the thread that entered it.
    """

    _active: "LayerProfiler | None" = None

    def __init__(self, warmup: int = 0):
        if warmup < 0:
            raise ValueError(f"warmup must be a number of calls ≥ 0, got {warmup}")
        self.warmup = warmup
        self._rows: list[_Open] = []          # every call, in the order they started
        self._stack: list[int] = []
        self._seen: dict[tuple[int, str], int] = defaultdict(int)
        self._patched: list[tuple[type, str, Callable]] = []
        self._thread: int | None = None
        self.wall_seconds = 0.0
        #: Seconds spent wrapping the layer classes on entry and unwrapping them on exit.
        self.setup_seconds = 0.0
        self.calls: list[LayerCall] = []
        self._used = False

    # -- recording ------------------------------------------------------------------------------
    def __enter__(self) -> "LayerProfiler":
        entered = time.perf_counter()
        if LayerProfiler._active is not None:
            raise RuntimeError("a tinyprof profiler is already recording: nest the work in one "
                               "`with` block instead of two")
        if self._used:
            raise RuntimeError(f"this profiler already recorded a `with` block "
                               f"({len(self.calls)} layer calls): a profiler records one block; "
                               "make a new one (tp.Profiler()) for the next")
        self._used = True
        LayerProfiler._active = self
        self._thread = get_ident()
        for cls in _all_module_classes():
            for phase in PHASES:
                method = cls.__dict__.get(phase)
                if method is not None:
                    self._patched.append((cls, phase, method))
                    setattr(cls, phase, self._wrap(method, phase))
        self._started = time.perf_counter()
        self.setup_seconds = self._started - entered
        return self

    def __exit__(self, *exc_info: object) -> None:
        ended = time.perf_counter()
        self.wall_seconds = ended - self._started
        for cls, phase, method in reversed(self._patched):
            setattr(cls, phase, method)
        self._patched.clear()
        LayerProfiler._active = None
        self.setup_seconds += time.perf_counter() - ended
        self.calls = [row.closed() for row in self._rows]

    def _wrap(self, method: Callable, phase: str) -> Callable:
        record = self._record

        @wraps(method)
        def recorded(module: Module, *args: Any, **kwargs: Any) -> Any:
            return record(module, phase, method, args, kwargs)

        recorded.__wrapped_by_tinyprof__ = True
        return recorded

    def _record(self, module: Module, phase: str, method: Callable, args: tuple,
                kwargs: dict) -> Any:
        stack = self._stack
        if get_ident() != self._thread or (
                stack and self._rows[stack[-1]].module is module
                and self._rows[stack[-1]].phase == phase):
            return method(module, *args, **kwargs)  # another thread, or a super() call
        key = (id(module), phase)
        warm = self._seen[key] < self.warmup
        self._seen[key] += 1
        row = _Open(module, phase, len(stack), stack[-1] if stack else None, warm)
        stack.append(len(self._rows))
        self._rows.append(row)
        row.start = time.perf_counter()
        try:
            return method(module, *args, **kwargs)
        finally:
            row.end = end = time.perf_counter()
            stack.pop()
            row.module = None  # keep no reference to the model after the call
            if row.parent is not None:
                self._rows[row.parent].children += end - row.start

    # -- results --------------------------------------------------------------------------------
    def _kept(self) -> list[LayerCall]:
        if not self.calls and self._rows:
            raise RuntimeError("the profiler is still recording: read results after the block")
        return [call for call in self.calls if not call.warmup]

    @property
    def coverage(self) -> float:
        """Σ self time of every recorded call (warm-up included) / wall time of the block."""
        covered = sum(call.self_seconds for call in self.calls)
        return covered / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def overhead_fraction(self) -> float:
        """A lower bound on the share of the block's wall time spent by the profiler itself:
        calls × overhead_per_call() / wall time (see the module docstring for why it is a
        lower bound; the fixed ``setup_seconds`` are not in the wall time)."""
        if not self.wall_seconds:
            return 0.0
        return len(self.calls) * overhead_per_call() / self.wall_seconds

    def rows(self) -> list[LayerRow]:
        """One :class:`LayerRow` per (layer, phase): name, type, phase, calls, self and total
        seconds, share of all kept self time, and the layer's path; most self time first."""
        groups: dict[tuple[str, str, str, str], list[LayerCall]] = defaultdict(list)
        for call in self._kept():
            groups[(call.path, call.name, call.kind, call.phase)].append(call)
        everything = sum(call.self_seconds for call in self._kept()) or 1.0
        rows = []
        for (path, name, kind, phase), calls in groups.items():
            own = sum(c.self_seconds for c in calls)
            rows.append(LayerRow(name, kind, phase, len(calls), own,
                                 sum(c.total_seconds for c in calls), own / everything, path))
        return sorted(rows, key=lambda r: r.self_s, reverse=True)

    def top_operations(self, n: int = 10) -> Table:
        """The ``n`` (layer, phase) rows with the most self time, as a :class:`Table`."""
        rows = self.rows()[:n]
        columns = ["name", "type", "phase", "calls", "self_s", "total_s", "share"]
        title = (f"Top {len(rows)} operations by self time: coverage {self.coverage:.0%} of "
                 f"{format_seconds(self.wall_seconds)}, profiler overhead ≥ "
                 f"{self.overhead_fraction:.1%} (+ {format_seconds(self.setup_seconds)} to "
                 "enter and leave the block)")
        return Table(columns, [[getattr(r, c) for c in columns] for r in rows], title=title,
                     formats={"self_s": format_seconds, "total_s": format_seconds,
                              "share": format_percent})

    def print_top_operations(self, n: int = 10) -> None:
        """Print :meth:`top_operations` as aligned text."""
        print(self.top_operations(n))

    def share(self, select: str | Callable[[LayerCall], bool]) -> float:
        """Share of the kept self time spent in the selected calls: ``select`` is a layer name, a
        layer type (``"Linear"``), a phase, or a predicate on :class:`LayerCall`."""
        kept = self._kept()
        if isinstance(select, str):
            text = select

            def select(call: LayerCall) -> bool:
                return text in (call.name, call.kind, call.phase)
        everything = sum(call.self_seconds for call in kept)
        if not everything:
            raise ValueError("nothing was recorded: run the model inside the `with` block")
        chosen = sum(call.self_seconds for call in kept if select(call))
        return chosen / everything

    def amdahl(self, select: str | Callable[[LayerCall], bool], factor: float) -> float:
        """Speedup of the whole recorded work if the selected calls ran ``factor`` times faster:
        1 / ((1 − p) + p / factor) with p = :meth:`share` of the selection (measured time)."""
        return amdahl_speedup(self.share(select), factor)

    def chrome_trace(self) -> dict[str, Any]:
        """Chrome trace event JSON (:mod:`tinyprof.timing.chrome`): one complete ("X") event
        per call, times in microseconds from the block's start, on the lane of the thread that
        ran the block (its ident is the tid; the layers it records all run there)."""
        tid = self._thread or 0
        events = [complete_event(call.name, call.start, call.end, origin=self._started, tid=tid,
                                 cat=call.phase,
                                 args={"type": call.kind, "phase": call.phase,
                                       "warmup": call.warmup,
                                       "self_us": call.self_seconds * 1e6})
                  for call in self.calls]
        return chrome_trace(events, {tid: "layers"})

    def export_chrome_trace(self, path: str | os.PathLike) -> Path:
        """Write :meth:`chrome_trace` to ``path`` (open it in Perfetto or chrome://tracing)."""
        return write_chrome_trace(path, self.chrome_trace())


class _Empty(Module):
    """A layer that does almost nothing (one in-place add): what the overhead is measured on."""

    def forward(self, x: Any) -> Any:
        x += 1.0
        return x


class _Pair(Module):
    """A container of two trivial layers, so recording nests as it does in a model."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = _Empty(), _Empty()

    def forward(self, x: Any) -> Any:
        return self.second(self.first(x))


_OVERHEAD: list[float] = []


def overhead_per_call(calls: int = 300, rounds: int = 9) -> float:
    """Seconds the profiler adds to one layer call, measured once per process: ``rounds``
    interleaved rounds of ``calls`` forward calls of a two-layer container of trivial layers
    (three recorded calls each), recorded and not; the median over rounds of (recorded −
    unrecorded) / recorded calls. A lower bound for real layers (see the module docstring)."""
    if not _OVERHEAD:
        import numpy as np

        model, x = _Pair(), np.zeros(16)

        def run(recording: bool) -> float:
            profiler = LayerProfiler() if recording else None
            if profiler is not None:
                profiler.__enter__()
            try:
                start = time.perf_counter()
                for _ in range(calls):
                    model(x)
                return time.perf_counter() - start
            finally:
                if profiler is not None:
                    profiler.__exit__(None, None, None)

        run(True)
        run(False)
        differences = []
        for _ in range(rounds):
            recorded, bare = run(True), run(False)
            differences.append((recorded - bare) / (3 * calls))
        differences.sort()
        _OVERHEAD.append(max(differences[len(differences) // 2], 0.0))
    return _OVERHEAD[0]


__all__ = ["LayerCall", "LayerProfiler", "LayerRow", "PHASES", "overhead_per_call"]
