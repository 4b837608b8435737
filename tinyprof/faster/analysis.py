"""What chapter 08 measures on the pipeline: each stage's time and work, and Amdahl's prediction.

- :func:`stage_seconds`: the per-layer profiler's self time of each of the six stages
  (:func:`tinyprof.faster.pipeline.stages`), the median over a few profiled steps;
- :func:`stage_work`: each stage's FLOPs and bytes from the shapes (every tensor moved once, as
  chapter 05 counts them), so that the roofline can place it; :func:`stage_calls`: the function
  calls each stage makes, counted, so that the roofline can tell a stage bound by per-call cost;
- :func:`forecast_seconds`: a forecast of what a fix does to the stages it touches, made before
  the fix is applied to the step: each of those stages timed alone, with the fix, on the
  arguments the step gives it (a microbenchmark, after one warm-up call);
  :func:`forecast_miss` and :func:`forecast_error` say afterwards where a forecast missed;
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
import sys
from importlib import resources
from typing import Any, Callable, Collection, Mapping

import numpy as np

from ..bottlenecks import roofline
from ..bottlenecks.layer_profiler import LayerProfiler
from ..timing import measure_latency
from .pipeline import (
    BATCH,
    CLASSES,
    FEATURES,
    FIXES,
    HIDDEN,
    Stage,
    check_fixes,
    make_inputs,
    run,
    stages,
)

#: The step's stages, in the order they run.
STAGES = ("read", "statistics", "load", "hidden", "loss", "update")
#: The part of a step outside the stages, in :func:`stage_seconds`.
OTHER = "other"
#: The stages each fix changes.
FIX_STAGES: dict[str, tuple[str, ...]] = {
    "quiet_logging": ("load",),
    "cached_statistics": ("statistics",),
    "cached_dataset": ("read",),
    "cube_by_multiplying": ("hidden",),
    "in_place": ("hidden", "update"),
    "vectorised_loading": ("load",),
    "batched_loss": ("loss",),
    "float32": ("statistics", "load", "hidden", "loss", "update"),
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
    median of the rest of each step (its wall time less the six stages: the weights converted
    to float64 when the step computes in float64, and the profiler's own cost), which no fix
    touches."""
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


def dataset_file_bytes() -> int:
    """Bytes of the stored data set, ``tinyprof/data/digits.npz`` (compressed)."""
    with (resources.files("tinyprof") / "data" / "digits.npz").open("rb") as file:
        return len(file.read())


def stage_work(fixes: Collection[str] = (), batch: int = BATCH) -> dict[str, tuple[float, float]]:
    """``{stage: (FLOPs, bytes)}`` of one step with ``fixes``, from the shapes; b bytes per
    number (8 in float64, 4 with ``float32``), B the batch, F = 256 inputs, H hidden units,
    C = 10 classes, N = 1797 digits, P the parameters:

    - read: no FLOPs; the stored file read and its N·65 bytes of arrays written (nothing when
      ``cached_dataset`` is applied: the arrays are already in memory);
    - statistics: a sort of each pixel's N values, N·log₂N comparisons per pixel (counted as
      operations), over the N·64 stored bytes read and N·F·b written and sorted twice (a copy);
      nothing when ``cached_statistics`` is applied;
    - load: (x − centre)/scale, 2·B·F; B·64 bytes read, the statistics 2·F·b, the batch B·F·b
      written, the labels B read and 8·B written;
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
    read = (0.0, 0.0) if "cached_dataset" in fixes else (0.0, dataset_file_bytes() + N * 65)
    statistics = ((0.0, 0.0) if "cached_statistics" in fixes else
                  (F * N * math.log2(N), N * 64 + 3 * N * F * b))
    return {
        "read": read,
        "statistics": statistics,
        "load": (2.0 * B * F, B * 64 + (2 * F + B * F) * b + 9 * B),
        "hidden": (2.0 * B * F * H + B * H + GELU_FLOPS * B * H,
                   (B * F + F * H + H + 4 * B * H) * b),
        "loss": (2.0 * B * H * C + B * C + LOSS_FLOPS * B * C,
                 (B * H + H * C + C + 3 * B * C) * b),
        "update": (2.0 * B * C * H + 2 * B * F * H + 2 * B * H * C + 2 * B * H + B * C + 3 * P,
                   (B * C + H * C + 4 * B * H + B * F + 3 * P) * b),
    }


def stage_arguments(fixes: Collection[str] = (), seed: int = 0) -> dict[str, tuple]:
    """What each stage is given in one step with ``fixes`` on :func:`make_inputs` ``(seed)``:
    ``{stage: args}``, recorded as the step runs (no stage changes its arguments, so each can
    be called again on them)."""
    fixes = check_fixes(fixes)
    parts, given = stages(fixes), {}
    for name, part in parts.items():
        part.forward = _recorder(part, name, given)
    run(parts, *make_inputs(seed), _dtype(fixes))
    return given


def _recorder(part: Stage, name: str, given: dict) -> Callable[..., Any]:
    def forward(*args: Any) -> Any:
        given[name] = args
        return part.fn(*args)
    return forward


def count_calls(fn: Callable[..., Any], *args: Any) -> int:
    """The function calls ``fn(*args)`` makes, Python functions and built-ins (numpy's
    included) alike, counted by a profile hook (``sys.setprofile``) for the one call. Refuses
    to run while another profile function is installed: tinyprof never replaces a hook it did
    not set."""
    if sys.getprofile() is not None:
        raise RuntimeError(f"count_calls: a profile function is already installed "
                           f"({sys.getprofile()!r}); tinyprof does not replace it")
    count = 0

    def hook(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(hook)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return max(count - 1, 1)   # less the hook's own call of sys.setprofile


def stage_calls(fixes: Collection[str] = (), seed: int = 0) -> dict[str, int]:
    """``{stage: calls}``: the function calls (:func:`count_calls`) each stage makes in one step
    with ``fixes``; with the stage's time, the time per call that tells a stage bound by
    per-call cost (a Python loop) from one bound by arithmetic or memory
    (:meth:`~tinyprof.bottlenecks.roofline.MachinePeaks.classify`)."""
    fixes = check_fixes(fixes)
    given, parts = stage_arguments(fixes, seed), stages(fixes)
    return {stage: count_calls(parts[stage].fn, *given[stage]) for stage in STAGES}


def forecast_seconds(fix: str, applied: Collection[str] = (), seed: int = 0,
                     repeats: int = 5, arguments: Mapping[str, tuple] | None = None
                     ) -> dict[str, float]:
    """A forecast, made before ``fix`` is added to the step with ``applied``: ``{stage:
    seconds}`` for each stage the fix touches (FIX_STAGES), that stage's median time over
    ``repeats`` calls alone (after one warm-up call: a cache is timed as filled), with the fix,
    on the arguments the step with ``applied`` gives it (:func:`stage_arguments`, or
    ``arguments`` when the caller has them for ``applied``; floating arrays converted to float32
    for the ``float32`` fix). With :func:`predicted_speedup` on the step's profile before the
    fix, it predicts the gain the A/B then measures."""
    applied, _ = check_fixes(applied), check_fixes((fix,))
    if fix in applied:
        raise ValueError(f"forecast_seconds: {fix!r} is already applied")
    after = applied | {fix}
    given = arguments if arguments is not None else stage_arguments(applied, seed)
    parts, dtype = stages(after), _dtype(after)
    return {stage: measure_latency(parts[stage].fn, *_as_dtype(given[stage], dtype), warmup=1,
                                   iterations=repeats, loops=1).median
            for stage in FIX_STAGES[fix]}


def _as_dtype(value: Any, dtype: type) -> Any:
    """``value`` with every floating array in it (in tuples, lists and dicts) as ``dtype``."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(dtype, copy=False)
    if isinstance(value, (tuple, list)):
        return type(value)(_as_dtype(item, dtype) for item in value)
    if isinstance(value, dict):
        return {key: _as_dtype(item, dtype) for key, item in value.items()}
    return value


def page_faults(fn: Callable[..., Any], *args: Any, calls: int = 10) -> float | None:
    """Minor page faults per call of ``fn(*args)`` (the process's count from
    ``resource.getrusage``: a first touch of a fresh memory page, served by the operating system
    without reading a disk), the mean over ``calls`` calls after one untimed call; None where
    the operating system does not count them (Windows has no ``resource`` module)."""
    try:
        import resource
    except ImportError:
        return None
    fn(*args)
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn(*args)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start) / calls


def forecast_miss(before: Mapping[str, float], forecast: Mapping[str, float],
                  after: Mapping[str, float], old_step: float, new_step: float
                  ) -> dict[str, float]:
    """Why a fix's forecast differs from its A/B, as the two factors whose product is
    forecast ÷ measured speedup, from the profiles ``before`` and ``after`` the fix
    (:func:`stage_seconds`), the ``forecast`` (:func:`forecast_seconds`) and the A/B's median
    step times ``old_step`` and ``new_step``. With P the sum of a profile and F the forecast new
    step (P_before less what the forecast saves):

    - ``"speedup: profiles / A/B"`` = (P_before / P_after) / (old_step / new_step): two
      measurements of the same two steps (a few profiled steps, many interleaved rounds);
    - ``"stages: profile after / forecast"`` = P_after / F: the forecast of the stages itself,
      which :func:`forecast_error` splits further.
    """
    saved = sum(before[stage] - seconds for stage, seconds in forecast.items())
    profile_before, profile_after = sum(before.values()), sum(after.values())
    return {"speedup: profiles / A/B": (profile_before / profile_after) / (old_step / new_step),
            "stages: profile after / forecast": profile_after / (profile_before - saved)}


def forecast_error(fix: str, before: Mapping[str, float], forecast: Mapping[str, float],
                   after: Mapping[str, float]) -> dict[str, float]:
    """Where the profile after ``fix`` differs from its forecast, in seconds (positive: the
    step took longer than forecast), from the profiles ``before`` and ``after`` the fix
    (:func:`stage_seconds`) and the ``forecast`` (:func:`forecast_seconds`):

    - ``"fixed stages"``: Σ over the stages the fix touches of (after − forecast): the stage
      in the step is not the stage timed alone (caches, the allocator, the profiler's cost);
    - ``"other stages"``: Σ over the stages it does not touch of (after − before): a fix
      changes more than it touches, or the machine's noise;
    - ``"rest of the step"``: after − before of ``"other"`` (outside every stage).
    """
    touched = set(FIX_STAGES[fix])
    return {
        "fixed stages": sum(after[s] - forecast[s] for s in touched),
        "other stages": sum(after[s] - before.get(s, 0.0) for s in after
                            if s != OTHER and s not in touched),
        "rest of the step": after.get(OTHER, 0.0) - before.get(OTHER, 0.0),
    }


def quick_machine_peaks(dtype: type = np.float64, stream_bytes: int = 64 * 2**20
                        ) -> roofline.MachinePeaks:
    """This machine's roofline measured in well under a second, in this process: the best
    matmul of ``dtype`` (the number type of what is placed under it: float64 for the slow step,
    float32 after the ``float32`` fix) of n = 256 and 512, STREAM on two arrays of
    ``stream_bytes`` (beyond most per-core caches; chapter 05's
    :func:`~tinyprof.bottlenecks.roofline.machine_peaks` sweeps more sizes, on larger arrays,
    with the cache roofs, in a child process) and one numpy call's cost. For placing the
    pipeline's stages, which need the roofs' order of magnitude."""
    flops, size = roofline.measure_peak_flops(sizes=(256, 512), budget_s=0.05, dtype=dtype)
    stream = roofline.measure_stream(stream_bytes, repeats=3)
    return roofline.MachinePeaks(flops, max(stream.values()), stream, size, (),
                                 roofline.measure_call_overhead(300), stream_bytes,
                                 matmul_dtype=np.dtype(dtype).name)


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


__all__ = ["FIXES", "FIX_STAGES", "OTHER", "STAGES", "count_calls", "dataset_file_bytes",
           "forecast_error", "forecast_miss", "forecast_seconds", "page_faults",
           "predicted_seconds", "predicted_speedup",
           "quick_machine_peaks", "stage_arguments", "stage_calls", "stage_seconds", "stage_work"]
