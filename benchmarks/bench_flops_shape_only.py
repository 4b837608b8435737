"""Counting GPT-2 XL by shape: how long it takes and how little memory it needs.

Builds ``models.gpt2("xl", shape_only=True)`` and counts its forward and backward FLOPs on
(1, 1024) token ids, timing each step (best of a few runs, milliseconds) and tracing the peak
Python/numpy memory with tracemalloc. The float32 weights that a real build would allocate
(count_parameters × 4 bytes ≈ 6.2 GB) are printed next to the traced peak, as a ratio.

Run: ``python benchmarks/bench_flops_shape_only.py [--quick]``  (``--quick``: best of 1, not 5)
"""

from __future__ import annotations

import sys

import numpy as np

from tinyprof import count_parameters, measure_memory, models
from tinyprof.flops import count_flops
from tinyprof.roofline import best_seconds
from tinyprof.units import format_bytes, format_si

INPUT_SHAPE = (1, 1024)
REPEATS = 1 if "--quick" in sys.argv else 5


def main() -> None:
    def build():
        return models.gpt2("xl", shape_only=True)

    model = build()
    params = count_parameters(model)
    weight_bytes = params * np.dtype(np.float32).itemsize

    def count_both():
        return (count_flops(model, INPUT_SHAPE), count_flops(model, INPUT_SHAPE, backward=True))

    forward, backward = count_both()
    build_s = best_seconds(build, REPEATS)
    count_s = best_seconds(lambda: count_flops(model, INPUT_SHAPE), REPEATS)
    peak_build = measure_memory(build).peak_bytes
    peak_count = measure_memory(count_both).peak_bytes
    peak_all = measure_memory(lambda: count_flops(build(), INPUT_SHAPE)).peak_bytes

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
