"""A timeline: every host and device event of a run, with the thread that ran it.

An :class:`Event` is a span (name, lane, tid, start, end; perf_counter seconds) recorded by
:meth:`Timeline.span`, a context manager, in whatever thread runs it: the lane is that thread's
name (``"MainThread"`` is the host, ``"device"`` the device's worker thread, ``"prefetcher"``
the loader), the tid its ``threading.get_ident()``. From a list of events, for a device lane::

    wall          = last end − first start (of every event),
    device busy   = length of the union of the device's spans,
    utilization   = device busy / wall,
    input wait    = (wall − device busy) / wall = 1 − utilization
                    (the share of the run the device sits idle waiting for its next batch:
                    on this loop the host only waits for data, so idle is waiting for input),
    throughput    = samples / wall (samples per second).

:meth:`Timeline.export_chrome_trace` writes it for Perfetto or chrome://tracing, one lane per
thread (:mod:`tinyprof.timing.chrome`).
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..timing.chrome import chrome_trace, complete_event, write_chrome_trace

DEVICE = "device"


@dataclass(frozen=True)
class Event:
    """One span: what (``name``), where (``lane``: the thread's name; ``tid``: its ident) and
    when (``start`` and ``end``, perf_counter seconds)."""

    name: str
    lane: str
    tid: int
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def wall_seconds(events: Sequence[Event]) -> float:
    """Last end − first start over all events (0 for none)."""
    if not events:
        return 0.0
    return max(e.end for e in events) - min(e.start for e in events)


def busy_seconds(events: Sequence[Event], lane: str = DEVICE) -> float:
    """Length of the union of ``lane``'s spans (overlapping or nested spans count once)."""
    total, reach = 0.0, -float("inf")
    for event in sorted((e for e in events if e.lane == lane), key=lambda e: e.start):
        start = max(event.start, reach)
        if event.end > start:
            total += event.end - start
        reach = max(reach, event.end)
    return total


def device_utilization(events: Sequence[Event], lane: str = DEVICE) -> float:
    """Device busy / wall (see the module docstring)."""
    wall = wall_seconds(events)
    return busy_seconds(events, lane) / wall if wall > 0 else 0.0


def input_wait_fraction(events: Sequence[Event], lane: str = DEVICE) -> float:
    """(wall − device busy) / wall: the share of the run the device waits for input."""
    wall = wall_seconds(events)
    return 1.0 - device_utilization(events, lane) if wall > 0 else 0.0


def throughput(events: Sequence[Event], samples: int) -> float:
    """Samples per second over the run's wall time."""
    wall = wall_seconds(events)
    return samples / wall if wall > 0 else 0.0


class Timeline:
    """Events recorded from any thread (a lock keeps the list whole)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self.origin = time.perf_counter()

    def record(self, name: str, start: float, end: float) -> Event:
        """Add a span of the calling thread that ran from ``start`` to ``end``."""
        thread = threading.current_thread()
        event = Event(name, thread.name, threading.get_ident(), start, end)
        with self._lock:
            self.events.append(event)
        return event

    @contextmanager
    def span(self, name: str) -> Iterator[None]:
        """Record the ``with`` block as one event of the calling thread (also if it raises)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.record(name, start, time.perf_counter())

    def lanes(self) -> dict[int, str]:
        """tid → lane name, in the order the lanes first appear."""
        return {event.tid: event.lane for event in self.events}

    def select(self, name: str | None = None, lane: str | None = None) -> list[Event]:
        """The events with this name and/or on this lane."""
        return [e for e in self.events
                if (name is None or e.name == name) and (lane is None or e.lane == lane)]

    def utilization(self, lane: str = DEVICE) -> float:
        return device_utilization(self.events, lane)

    def input_wait(self, lane: str = DEVICE) -> float:
        return input_wait_fraction(self.events, lane)

    def wall_seconds(self) -> float:
        return wall_seconds(self.events)

    def chrome_trace(self) -> dict[str, Any]:
        """Chrome trace JSON: one complete event per span, one named lane (tid) per thread,
        times in µs from the timeline's creation."""
        events = [complete_event(e.name, e.start, e.end, origin=self.origin, tid=e.tid,
                                 cat=e.lane) for e in self.events]
        return chrome_trace(events, self.lanes())

    def export_chrome_trace(self, path: str | os.PathLike) -> Path:
        """Write :meth:`chrome_trace` to ``path`` (Perfetto, chrome://tracing)."""
        return write_chrome_trace(path, self.chrome_trace())

    def plot(self, title: str = "Timeline"):
        """The figure of :func:`tinyprof.plots.plot_timeline`: one lane per thread."""
        from ..plots.timeline import plot_timeline

        return plot_timeline(self.events, title=title)

    def __len__(self) -> int:
        return len(self.events)


def null_span(timeline: Timeline | None, name: str):
    """``timeline.span(name)``, or a do-nothing context when there is no timeline."""
    from contextlib import nullcontext

    return nullcontext() if timeline is None else timeline.span(name)

