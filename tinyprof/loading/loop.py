"""The training loop of chapter 09: a host that feeds an asynchronous device, on a timeline.

Each step the host gets the next batch (loading it itself, or waiting for a
:class:`~.prefetch.Prefetcher` that loads ahead), enqueues the step's compute on the
:class:`~.device.Device` and goes on to read the step's result, which waits for the device (as
reading a loss does on a GPU). Every span lands on one :class:`~.timeline.Timeline`: the host's
``load`` or ``wait for batch`` and ``synchronize``; the device's ``compute``; the
loader's ``load`` (and ``read``, ``decode``, ``augment`` when the data set records them). The
numbers of :class:`Run` are the timeline's (device busy / wall, samples / wall).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from .device import Device
from .prefetch import Prefetcher
from .timeline import DEVICE, Timeline


@dataclass(frozen=True)
class Run:
    """A finished run: its timeline, how many steps and samples, and what they measure."""

    timeline: Timeline
    steps: int
    samples: int

    @property
    def wall_seconds(self) -> float:
        return self.timeline.wall_seconds()

    @property
    def step_seconds(self) -> float:
        return self.wall_seconds / self.steps

    @property
    def utilization(self) -> float:
        return self.timeline.utilization(DEVICE)

    @property
    def input_wait(self) -> float:
        return self.timeline.input_wait(DEVICE)

    @property
    def throughput(self) -> float:
        """Samples per second."""
        return self.samples / self.wall_seconds


_END = object()


def _recorded(source: Iterable[Any], timeline: Timeline) -> Iterator[Any]:
    """``source``'s items, each ``next`` recorded as a ``load`` span of the calling thread."""
    items = iter(source)
    while True:
        with timeline.span("load"):
            try:
                item = next(items)
            except StopIteration:
                return
        yield item


def run(source: Iterable[Any], compute: Callable[[Any], Any] | float, *, depth: int = 0,
        timeline: Timeline | None = None) -> Run:
    """Train on every batch of ``source``: ``compute(batch)`` (or a kernel of ``compute``
    seconds) on a :class:`Device`, with ``depth`` batches prefetched (0: loaded by the host
    between steps). A batch's samples are ``len(batch.y)`` (or ``len(batch)``; 1 for others)."""
    timeline = Timeline() if timeline is None else timeline
    steps = samples = 0
    loading = _recorded(source, timeline)
    batches = Prefetcher(loading, depth) if depth else loading
    with Device(timeline) as device:
        try:
            while True:
                if depth:
                    with timeline.span("wait for batch"):
                        batch = next(batches, _END)
                else:
                    batch = next(batches, _END)
                if batch is _END:
                    break
                work = compute if not callable(compute) else (lambda b=batch: compute(b))
                step = device.submit(work)
                with timeline.span("synchronize"):
                    step.result()
                steps += 1
                samples += _samples(batch)
        finally:
            if depth:
                batches.close()
    return Run(timeline, steps, samples)


def _samples(batch: Any) -> int:
    labels = getattr(batch, "y", batch)
    try:
        return len(labels)
    except TypeError:
        return 1

