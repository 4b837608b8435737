"""The pipeline's model: step time and device utilization predicted from measured stage times.

Inputs, per batch: ``load`` seconds (read + decode + augment, in one thread) and ``compute``
seconds (the device's step), and the loop of :mod:`tinyprof.loading.loop` (the host reads the
step's result, so it waits for the device every step). With ``workers`` w and a ``serial``
part s of the load that cannot be spread over workers (the consumer's own share, e.g. receiving
a batch from a worker process; 0 unless you measure it), the load seen per batch is

    L = s + (load − s) / min(w, d)      (d = depth: at most d batches are loaded at once)

and for n steps:

    serial (depth 0)  T = n × (load + compute)                 step = load + compute
    prefetch (d ≥ 1)  T = load + (n − 1) × max(L, C) + C       step → max(L, C)

The first batch is loaded whole before the device can start (the fill: ``load``, not L, since
one batch is loaded by one worker); after it the slower of loading and computing sets the pace,
and the last step's compute follows the last load. Utilization = n × C / T; the input wait is
1 − utilization. Workers without prefetching (d = 0) are not modelled: a pool always loads ahead.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..units import format_percent, format_seconds

__all__ = ["Check", "Prediction", "check", "predict", "schedule"]


@dataclass(frozen=True)
class Prediction:
    """What the model predicts for ``steps`` steps."""

    load: float
    compute: float
    depth: int
    workers: int
    steps: int
    total_seconds: float

    @property
    def step_seconds(self) -> float:
        """Mean seconds per step, T / n."""
        return self.total_seconds / self.steps

    @property
    def utilization(self) -> float:
        """Device busy / wall = n × C / T."""
        return self.steps * self.compute / self.total_seconds

    @property
    def input_wait(self) -> float:
        return 1.0 - self.utilization

    def throughput(self, batch_size: int) -> float:
        """Samples per second: n × batch size / T."""
        return self.steps * batch_size / self.total_seconds

    def __str__(self) -> str:
        return (f"depth {self.depth}, {self.workers} worker(s): "
                f"{format_seconds(self.step_seconds)} per step, device busy "
                f"{format_percent(self.utilization)}")


def predict(load: float, compute: float, *, depth: int = 0, workers: int = 1,
            serial: float = 0.0, steps: int = 20) -> Prediction:
    """The model of the module docstring for ``steps`` steps."""
    if load < 0 or compute < 0 or steps < 1 or depth < 0 or workers < 1:
        raise ValueError("need load, compute ≥ 0 s, steps ≥ 1, depth ≥ 0 and workers ≥ 1")
    if not 0 <= serial <= load:
        raise ValueError(f"the serial part of the load is between 0 and load ({load}), "
                         f"got {serial}")
    if depth == 0:
        if workers > 1:
            raise ValueError("workers load ahead: give them a depth ≥ 1")
        total = steps * (load + compute)
    else:
        per_batch = serial + (load - serial) / min(workers, depth)
        total = load + (steps - 1) * max(per_batch, compute) + compute
    return Prediction(load, compute, depth, workers, steps, total)


@dataclass(frozen=True)
class Check:
    """A prediction beside the run that tests it: ``error`` = measured / predicted − 1."""

    prediction: Prediction
    measured_seconds: float
    measured_utilization: float

    @property
    def error(self) -> float:
        return self.measured_seconds / self.prediction.total_seconds - 1

    def __str__(self) -> str:
        p = self.prediction
        return (f"{p}; measured {format_seconds(self.measured_seconds / p.steps)} per step "
                f"({self.error:+.1%}), device busy {format_percent(self.measured_utilization)}")


def check(prediction: Prediction, measured_seconds: float,
          measured_utilization: float) -> Check:
    """Compare a prediction with a run's measured wall time and utilization."""
    return Check(prediction, measured_seconds, measured_utilization)


def schedule(load: float, compute: float, *, depth: int = 0, workers: int = 1,
             steps: int = 8) -> list:
    """The model's timeline: the :class:`~.timeline.Event` s a run with these stage times
    would record if every stage took exactly its time (no noise, no hand-over cost). Batch k's
    load starts when a worker is free and, with ``depth`` d, once batch k − d has been handed to
    the device (at most d loaded ahead); step k computes once its batch is loaded and step k − 1
    is done. Depth 0: the host loads, then the device computes, in turn. Its wall time is
    :func:`predict`'s total, except when loading sets the pace with several workers: they start
    together, so batches arrive in groups and the run ends up to a few % earlier."""
    from .timeline import DEVICE, Event

    events, free = [], [0.0] * (workers if depth else 1)
    starts: list[float] = []
    device_free = 0.0
    for k in range(steps):
        worker = min(range(len(free)), key=free.__getitem__)
        begin = free[worker] if depth else device_free
        if depth and k >= depth:
            begin = max(begin, starts[k - depth])
        ready = begin + load
        free[worker] = ready
        lane = f"loader {worker}" if depth else "MainThread"
        events.append(Event("load", lane, 100 + worker if depth else 1, begin, ready))
        start = max(ready, device_free)
        if start > device_free and k:
            events.append(Event("wait for batch", "MainThread", 1, device_free, start))
        starts.append(start)
        device_free = start + compute
        events.append(Event("compute", DEVICE, 2, start, device_free))
    return events
