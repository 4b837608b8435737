"""Counting GPT-2 XL by shape: how long it takes and how little memory it needs.

Builds ``models.gpt2("xl", shape_only=True)`` and counts its forward and backward FLOPs on
(1, 1024) token ids, timing each step (best of a few runs, milliseconds) and tracing the peak
Python/numpy memory with tracemalloc. The float32 weights that a real build would allocate
(count_parameters × 4 bytes ≈ 6.2 GB) are printed next to the traced peak, as a ratio.

Run: ``python benchmarks/bench_flops_shape_only.py``
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Callable

import numpy as np

from tinyprof import count_parameters, models
from tinyprof.flops import count_flops
from tinyprof.units import format_bytes, format_si

INPUT_SHAPE = (1, 1024)
REPEATS = 5


def best_seconds(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    """Shortest wall time of ``repeats`` calls (the least disturbed by a busy machine)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def traced_peak(fn: Callable[[], object]) -> int:
    """Peak bytes traced by tracemalloc while ``fn`` runs (numpy buffers included)."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return peak - base


def main() -> None:
    def build():
        return models.gpt2("xl", shape_only=True)

    model = build()
    params = count_parameters(model)
    weight_bytes = params * np.dtype(np.float32).itemsize

    def count_both():
        return (count_flops(model, INPUT_SHAPE), count_flops(model, INPUT_SHAPE, backward=True))

    forward, backward = count_both()
    build_s = best_seconds(build)
    count_s = best_seconds(lambda: count_flops(model, INPUT_SHAPE))
    peak_build = traced_peak(build)
    peak_count = traced_peak(count_both)
    peak_all = traced_peak(lambda: count_flops(build(), INPUT_SHAPE))

    print(f"GPT-2 XL (shape_only=True) on {INPUT_SHAPE} token ids")
    print(f"  parameters              {params:,}  ({format_bytes(weight_bytes)} as float32)")
    print(f"  forward FLOPs           {forward:,}  ({format_si(forward, 'FLOPs')})")
    print(f"  backward FLOPs          {backward:,}  ({format_si(backward, 'FLOPs')})")
    print(f"  build time (best of {REPEATS})   {build_s * 1e3:.2f} ms")
    print(f"  count time (best of {REPEATS})   {count_s * 1e3:.2f} ms")
    print(f"  peak traced, build          {format_bytes(peak_build)}")
    print(f"  peak traced, count fwd+bwd  {format_bytes(peak_count)}")
    print(f"  peak traced, build + count  {format_bytes(peak_all)}")
    print(f"  float32 weights / peak(build+count) = {weight_bytes / peak_all:,.0f}×  "
          f"(no weight array is allocated)")


if __name__ == "__main__":
    main()
