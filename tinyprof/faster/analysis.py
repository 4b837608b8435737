"""What chapter 08 measures on the pipeline: each stage's time and work, and Amdahl's prediction.

- :func:`stage_seconds`: the per-layer profiler's self time of each of the five stages
  (:func:`tinyprof.faster.pipeline.stages`), the median over a few profiled steps;
- :func:`stage_work`: each stage's FLOPs and bytes from the shapes (every tensor moved once, as
  chapter 05 counts them), so that the roofline can place it;
- :func:`predicted_speedup`: Amdahl's law on measured stage times. Stages a fix touches take
  their new time, the others keep theirs:

  .. math::

     \\text{speedup} = \\frac{\\sum_s t_s}
                            {\\sum_s t_s - \\sum_{s \\in \\text{fixed}} (t_s - t'_s)},

  which is :math:`1/((1 - p) + p/k)` with :math:`p` the fixed stages' share and :math:`k` their
  own speedup;
- :func:`predicted_seconds`: the step time predicted for any set of fixes from the baseline's
  stage times and each fix measured alone (each fix scales the stages it touches, independently
  of the others: the assumption that makes predictions and measurements differ).
"""

from __future__ import annotations

import math
from typing import Collection, Mapping

import numpy as np

from ..bottlenecks import roofline
from ..bottlenecks.layer_profiler import LayerProfiler
from .pipeline import BATCH, CLASSES, FEATURES, FIXES, HIDDEN, check_fixes, make_inputs, run, stages

#: The step's stages, in the order they run.
STAGES = ("statistics", "load", "hidden", "loss", "update")
#: The part of a step outside the stages, in :func:`stage_seconds`.
OTHER = "other"
#: The stages each fix changes.
FIX_STAGES: dict[str, tuple[str, ...]] = {
    "quiet_logging": ("load",),
    "cached_statistics": ("statistics",),
    "fused_elementwise": ("hidden", "update"),
    "vectorised_loading": ("load",),
    "batched_loss": ("loss",),
    "float32": STAGES,
}
#: FLOPs per element of the GELU and its derivative (tanh counted as one), as gelu_fast does them.
GELU_FLOPS = 17
#: FLOPs per element of the loss, its softmax and its gradient (max, subtract, exp, sum, log,
#: the targets' product and dz), counted once per logit.
LOSS_FLOPS = 8
#: Images in the digits data set (what the statistics sort, per pixel).
DIGITS = 1797


def _dtype(fixes: Collection[str]) -> type:
    return np.float32 if "float32" in fixes else np.float64


def stage_seconds(fixes: Collection[str] = (), steps: int = 3, seed: int = 0) -> dict[str, float]:
    """Median self seconds of each stage over ``steps`` steps with ``fixes``, each step recorded
    by the per-layer profiler after one unrecorded warm-up step, and under ``"other"`` the
    median of the rest of each step (its wall time less the five stages: casting the weights,
    reading the labels, the profiler's own cost), which no fix touches."""
    fixes = check_fixes(fixes)
    if steps < 1:
        raise ValueError(f"steps must be ≥ 1, got {steps}")
    parts, dtype = stages(fixes), _dtype(fixes)
    weights, batch = make_inputs(seed)
    run(parts, weights, batch, dtype)
    seen: dict[str, list[float]] = {stage: [] for stage in (*STAGES, OTHER)}
    for _ in range(steps):
        with LayerProfiler() as prof:
            run(parts, weights, batch, dtype)
        for call in prof.calls:
            seen[call.name].append(call.self_seconds)
        seen[OTHER].append(max(0.0, prof.wall_seconds - sum(c.self_seconds for c in prof.calls)))
    return {stage: float(np.median(times)) for stage, times in seen.items()}


def stage_work(fixes: Collection[str] = (), batch: int = BATCH) -> dict[str, tuple[float, float]]:
    """``{stage: (FLOPs, bytes)}`` of one step with ``fixes``, from the shapes; b bytes per
    number (8 in float64, 4 with ``float32``), B the batch, F = 256 inputs, H hidden units,
    C = 10 classes, N = 1797 digits, P the parameters:

    - statistics: a sort of each pixel's N values, N·log₂N comparisons per pixel (counted as
      operations), over the N·64 stored bytes read and N·F·b written and sorted twice (a copy);
      nothing when ``cached_statistics`` is applied;
    - load: (x − centre)/scale, 2·B·F; B·64 bytes read, the statistics 2·F·b, the batch B·F·b
      written;
    - hidden: 2·B·F·H (matmul) + B·H (bias) + 17·B·H (GELU and its derivative); x, W1, b1 read,
      h written and read, a and GELU'(h) written;
    - loss: 2·B·H·C + B·C + 8·B·C; a, W2, b2 read, z, dz and the targets;
    - update: 2·B·C·H + 2·B·F·H + 2·B·H·C (three matmuls) + B·H (⊙ GELU') + B·H + B·C (bias
      sums) + 3·P (SGD with weight decay); dz, W2, GELU'(h), dh twice, x, a read, and the
      gradients written, the weights read and written (P each).
    """
    fixes = check_fixes(fixes)
    b = np.dtype(_dtype(fixes)).itemsize
    B, F, H, C, N = batch, FEATURES, HIDDEN, CLASSES, DIGITS
    P = F * H + H + H * C + C
    statistics = ((0.0, 0.0) if "cached_statistics" in fixes else
                  (F * N * math.log2(N), N * 64 + 3 * N * F * b))
    return {
        "statistics": statistics,
        "load": (2.0 * B * F, B * 64 + (2 * F + B * F) * b),
        "hidden": (2.0 * B * F * H + B * H + GELU_FLOPS * B * H,
                   (B * F + F * H + H + 4 * B * H) * b),
        "loss": (2.0 * B * H * C + B * C + LOSS_FLOPS * B * C,
                 (B * H + H * C + C + 3 * B * C) * b),
        "update": (2.0 * B * C * H + 2 * B * F * H + 2 * B * H * C + 2 * B * H + B * C + 3 * P,
                   (B * C + H * C + 4 * B * H + B * F + 3 * P) * b),
    }


def quick_machine_peaks(stream_bytes: int = 64 * 2**20) -> roofline.MachinePeaks:
    """This machine's roofline measured in well under a second, in this process: the best
    float32 matmul of n = 256 and 512, STREAM on two arrays of ``stream_bytes`` (beyond most
    per-core caches; chapter 05's :func:`~tinyprof.bottlenecks.roofline.machine_peaks` sweeps
    more sizes, on larger arrays, with the cache roofs, in a child process) and one numpy call's
    cost. For placing the pipeline's stages, which need the roofs' order of magnitude."""
    flops, size = roofline.measure_peak_flops(sizes=(256, 512), budget_s=0.05)
    stream = roofline.measure_stream(stream_bytes, repeats=3)
    return roofline.MachinePeaks(flops, max(stream.values()), stream, size, (),
                                 roofline.measure_call_overhead(300), stream_bytes)


def predicted_speedup(before: Mapping[str, float], after: Mapping[str, float]) -> float:
    """Amdahl's law on measured times: ``before`` maps every part to its seconds, ``after`` the
    parts a fix changes to their new seconds; the whole's speedup is
    Σ before / (Σ before − Σ over the changed parts of (before − after))."""
    unknown = sorted(set(after) - set(before))
    if unknown:
        raise ValueError(f"after names parts that before does not have: {', '.join(unknown)}")
    total = sum(before.values())
    new = total - sum(before[part] - seconds for part, seconds in after.items())
    if total <= 0 or new <= 0:
        raise ValueError(f"the step's time must stay positive: {total!r} s before, {new!r} after")
    return total / new


def predicted_seconds(baseline: Mapping[str, float], alone: Mapping[str, Mapping[str, float]],
                      fixes: Collection[str]) -> float:
    """The step time predicted for ``fixes`` together: each stage's baseline seconds, scaled by
    the factor (alone / baseline) of every chosen fix that touches it, measured with that fix
    applied alone (``alone[fix]`` is :func:`stage_seconds` of ``(fix,)``)."""
    fixes = check_fixes(fixes)
    total = 0.0
    for stage, seconds in baseline.items():
        for fix in fixes:
            if stage in FIX_STAGES[fix] and baseline[stage] > 0:
                seconds *= alone[fix][stage] / baseline[stage]
        total += seconds
    return total


__all__ = ["FIXES", "FIX_STAGES", "OTHER", "STAGES", "predicted_seconds", "predicted_speedup",
           "quick_machine_peaks", "stage_seconds", "stage_work"]
