"""What the per-layer profiler costs, and how much of a training step its layers account for.

On a small GPT-style model's forward + backward step (the kind chapter 05 profiles), PAIRS
interleaved pairs of steps are timed, one bare and one inside ``with tp.Profiler()``; the median
of the per-pair ratios is the profiler's overhead, measured side by side on this shared machine.
Printed beside it: the profiler's own lower bound (calls × overhead per call / wall time), the
measured cost of entering and leaving the block, and the
coverage (Σ per-layer self time / wall time of the block; goal ≥ 0.9).

Run: ``python benchmarks/bench_profiler.py [PAIRS] [--quick]``  (``--quick``: 3 pairs)
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import tinyprof as tp
from tinyprof import models
from tinyprof.layer_profiler import overhead_per_call


def gpt_step():
    model = models.gpt2(vocab_size=2000, n_ctx=128, d_model=128, n_layer=2, n_head=4)
    tokens = np.random.default_rng(0).integers(0, 2000, (8, 128))
    grad = np.full(model(tokens).shape, 1e-6, dtype=np.float32)

    def step() -> None:
        model(tokens)
        model.backward(grad)
    return step


def main(pairs: int = 30) -> None:
    step = gpt_step()
    step()
    ratios, coverages, estimates, setups, calls, bares = [], [], [], [], 0, []
    for _ in range(pairs):
        start = time.perf_counter()
        step()
        bare = time.perf_counter() - start
        with tp.Profiler() as prof:
            start = time.perf_counter()
            step()
            profiled = time.perf_counter() - start
        ratios.append(profiled / bare)
        bares.append(bare)
        coverages.append(prof.layers.coverage)
        estimates.append(prof.layers.overhead_fraction)
        setups.append(prof.layers.setup_seconds)
        calls = len(prof.layers.calls)
    print(f"step of {calls} layer calls, {statistics.median(bares) * 1e3:.2f} ms bare; "
          f"{pairs} interleaved pairs")
    print(f"profiled / bare step time (median of pairs): {statistics.median(ratios):.3f}  "
          "(goal ≤ 1.05)")
    print(f"profiler's own lower bound on its overhead:   {statistics.median(estimates):.2%}  "
          f"({overhead_per_call() * 1e6:.2f} µs per call; goal: ≤ the measured overhead)")
    print(f"entering and leaving the block (measured):   "
          f"{statistics.median(setups) * 1e3:.3f} ms, not part of the step")
    print(f"coverage, Σ self time / wall time (median):  {statistics.median(coverages):.3f}  "
          "(goal ≥ 0.9)")


if __name__ == "__main__":
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    main(int(numbers[0]) if numbers else (3 if "--quick" in sys.argv else 30))
