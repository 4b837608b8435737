"""Training memory by component: measured (tracemalloc, one real step) / predicted (formulas).

Prints, for the MLP and a small GPT, float32 and float64, and SGD / momentum / Adam, each
component's measured bytes, predicted bytes and their ratio (1.000 = the formula is exact), then
the largest batch that fits Binder's 2 GB: measured fit for the small GPT, formulas for GPT-2
small (shape-only). Run: ``python benchmarks/bench_memory_components.py [--quick]``
(``--quick``: float32 only, and the largest-batch search skipped).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from tinyprof import models
from tinyprof.memory import max_batch_size, predict_training_memory, training_memory
from tinyprof.table import Table
from tinyprof.units import format_bytes

BINDER_BYTES = 2e9
GPT_CONFIG = dict(vocab_size=1000, n_ctx=64, d_model=128, n_layer=2, n_head=4)


def cases(dtype):
    rng = np.random.default_rng(0)
    yield "mlp 784-256-128-10, batch 64", models.mlp(dtype=dtype), \
        rng.standard_normal((64, 784)).astype(dtype)
    yield "gpt V1000 ctx64 d128 L2 H4, (4, 64)", models.gpt2(**GPT_CONFIG, dtype=dtype), \
        rng.integers(0, 1000, size=(4, 64))


def component_ratios(dtypes=(np.float32, np.float64)) -> None:
    rows = []
    worst = 0.0
    for dtype in dtypes:
        for label, model, x in cases(dtype):
            for optimizer in ("sgd", "momentum", "adam"):
                report = training_memory(model, x, optimizer=optimizer)
                ratios = []
                for c in report.components:
                    ratios.append(c.ratio)
                    if c.ratio is not None:
                        worst = max(worst, abs(c.ratio - 1))
                rows.append([label, np.dtype(dtype).name, optimizer, *ratios,
                             report.optimizer_state.measured_bytes,
                             report.forward_peak_bytes, report.peak_bytes])
    ratio = lambda r: "n/a (0 B)" if r is None else f"{r:.4f}"  # noqa: E731
    print(Table(["model", "dtype", "optimizer", "parameters", "activations", "gradients",
                 "optimizer state", "state measured", "forward peak", "peak, later steps"], rows,
                title="measured / predicted per component (one training step)",
                formats={"parameters": ratio, "activations": ratio, "gradients": ratio,
                         "optimizer state": ratio, "state measured": format_bytes,
                         "forward peak": format_bytes, "peak, later steps": format_bytes}))
    print(f"largest deviation from 1: {worst:.2%} (must stay below 5%)\n")


def detail() -> None:
    _, model, x = list(cases(np.float32))[1]
    report = training_memory(model, x, optimizer="adam")
    print(report)
    print()
    print(report.timeline_table())
    print()


def batch_sizes() -> None:
    gpt = models.gpt2(**GPT_CONFIG)
    started = time.perf_counter()
    measured = max_batch_size(gpt, (64,), BINDER_BYTES)
    seconds = time.perf_counter() - started
    predicted = max_batch_size(gpt, (64,), BINDER_BYTES, method="predict")
    print(measured.table())
    print(f"(measured in {seconds:.1f} s)")
    print(predicted)
    print(f"measured / predicted largest batch: {measured.batch_size / predicted.batch_size:.3f}"
          f"; per-sample bytes ratio {measured.per_sample_bytes / predicted.per_sample_bytes:.3f}"
          "\n")
    small = models.gpt2("small", shape_only=True)
    rows = []
    for seq in (1024, 512, 256, 128):
        for optimizer in ("sgd", "momentum", "adam"):
            fit = max_batch_size(small, (seq,), BINDER_BYTES, optimizer=optimizer)
            one = predict_training_memory(small, (1, seq), optimizer).predicted_total_bytes
            rows.append([seq, optimizer, one, fit.fixed_bytes, fit.per_sample_bytes,
                         fit.batch_size, fit.batch_size + 1])
    print(Table(["seq", "optimizer", "batch 1 needs", "fixed", "per sample", "largest batch",
                 "first batch that does not fit"], rows,
                title="GPT-2 small (shape-only, float32) in Binder's 2 GB: predicted",
                formats={"batch 1 needs": format_bytes, "fixed": format_bytes,
                         "per sample": format_bytes}))


if __name__ == "__main__":
    if "--quick" in sys.argv:
        component_ratios((np.float32,))
    else:
        component_ratios()
        detail()
        batch_sizes()
