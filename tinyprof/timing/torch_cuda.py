"""Timing torch code so that it stays right on a GPU.

A CUDA kernel launch returns as soon as the kernel is queued: ``t = perf_counter(); y = model(x);
perf_counter() − t`` measures the launches, not the work, and the work lands in whatever call
next waits for the device (a ``.item()``, a copy to the host, the next timer that does
synchronise). Two remedies, both here:

- :func:`synchronized` wraps a callable so that each call ends with
  ``torch.cuda.synchronize()``: the host waits for the device, and a host timer around the call
  measures the work (plus one synchronisation, a few µs). ``tp.measure_latency`` and
  ``tp.ab_test`` wrap every callable with it, which changes nothing unless a module, a tensor
  argument or a bound method's module lives on a CUDA device;
- :func:`cuda_event_seconds` records CUDA events in the stream around each call and reads the
  device's own elapsed time, with no host timer at all.

On the CPU torch runs synchronously, so nothing is wrapped and nothing is added. This path is
tested on the CPU; the CUDA branches run only where a GPU exists.
"""

from __future__ import annotations

from typing import Any, Callable

from ..torchprobe import synchronized


def cuda_event_seconds(fn: Callable, *args: Any, repeats: int = 10, warmup: int = 3
                       ) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn(*args)`` as the GPU measured them (CUDA
    events recorded before and after each call in the current stream). Raises RuntimeError
    without a GPU."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("cuda_event_seconds needs a CUDA device; on the CPU use "
                           "tinyprof.measure_latency (torch runs synchronously there)")
    for _ in range(warmup):
        fn(*args)
    pairs = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [start.elapsed_time(end) / 1e3 for start, end in pairs]


__all__ = ["cuda_event_seconds", "synchronized"]
