"""Every layer on the roofline: what limits it, measured, and what fixing it would buy.

For each (layer, phase) that a :class:`~tinyprof.layer_profiler.LayerProfiler` recorded, the
work is computed from the shapes and the time is measured:

- **FLOPs** per call: forward = matmul + elementwise FLOPs of the layer's formula; backward =
  its input- and weight-gradient matmul FLOPs (tinyprof.flops; elementwise backward work is not
  stated by the formulas and so not counted);
- **bytes** per call, a lower bound on memory traffic in which every tensor a layer takes or
  returns is read or written once: forward = input + output + own parameters; backward =
  output gradient + saved input + parameters read, input gradient + parameter gradients written
  (2·input + output + 2·parameters), all at the model's bytes per element;
- **arithmetic intensity** = FLOPs / bytes; **attainable** FLOP/s = min(peak, intensity ×
  bandwidth) from the measured roofline; **achieved** FLOP/s = FLOPs / measured self time per
  call; **bound** = :meth:`MachinePeaks.classify` (compute, memory or overhead);
- **Amdahl × roofline**: if the layer ran at its roof (time FLOPs/peak or bytes/bandwidth,
  whichever is longer) instead of its measured time, the whole recorded step would speed up by
  1 / ((1 − p) + p / k), with p the layer's share of the step and k = measured / roof time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..amdahl import amdahl_speedup
from ..flops import flops_by_layer
from ..nn.module import Module
from ..nn.state import KeptState
from ..shapes import ROOT_NAME, numel
from ..table import Table
from ..units import format_percent, format_ratio, format_seconds, format_si
from .layer_profiler import LayerProfiler
from .roofline import MachinePeaks, machine_peaks


@dataclass(frozen=True)
class LayerWork:
    """FLOPs and bytes moved by one call of one layer in one phase (see the module docstring);
    ``path`` is the layer's dotted path in the model ("" for the root)."""

    name: str
    type: str
    phase: str
    flops: int
    bytes: int
    path: str = ""

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes if self.bytes else float("inf")


def layer_work(model: Module, input_shape: Sequence[int]) -> dict[tuple[str, str], LayerWork]:
    """(layer name, phase) → :class:`LayerWork` for every layer with its own work, forward and
    backward, for an input of ``input_shape`` (names as the profiler shows them; each value
    also carries the layer's ``path``, which :func:`place_layers` joins on)."""
    return {(work.name, work.phase): work for work in work_by_path(model, input_shape).values()}


def work_by_path(model: Module, input_shape: Sequence[int]) -> dict[tuple[str, str], LayerWork]:
    """(layer path, phase) → :class:`LayerWork`: :func:`layer_work` keyed by each layer's
    dotted path in the model ("" for the root), unique even where display names repeat."""
    modules = dict(model.named_modules())
    itemsize = model.dtype.itemsize
    work = {}
    for row in flops_by_layer(model, input_shape, backward=True):
        path = "" if row.name == ROOT_NAME else row.name
        module = modules.get(path)
        if module is None:
            continue
        name = module.name or type(module).__name__
        params = sum(p.size for _, p in module.own_parameters())
        x, y = numel(row.input_shape), numel(row.output_shape)
        work[(path, "forward")] = LayerWork(name, row.type, "forward",
                                            row.matmul + row.elementwise,
                                            (x + y + params) * itemsize, path)
        work[(path, "backward")] = LayerWork(name, row.type, "backward", row.backward,
                                             (2 * x + y + 2 * params) * itemsize, path)
    return work


def place_layers(profile: LayerProfiler, model: Module, input_shape: Sequence[int],
                 peaks: MachinePeaks | None = None) -> Table:
    """Every recorded (layer, phase) with work on the roofline: FLOPs and bytes per call,
    intensity, attainable and achieved FLOP/s, bound, share of the step, and the whole step's
    speedup if that layer reached its roof (Amdahl × roofline). Most self time first. A row is
    joined to its FLOPs and bytes by the layer's path in ``model`` and its type, so two layers
    that display the same name are never mixed up; layers recorded that are not in ``model``
    are left out."""
    peaks = peaks or machine_peaks()
    work = work_by_path(model, input_shape)
    body = []
    for row in profile.rows():
        done = work.get((row.path, row.phase))
        if done is None or done.type != row.type:
            continue  # a container (its children carry the work), or not a layer of model
        per_call = row.self_s / row.calls
        roof = peaks.roof_seconds(done.flops, done.bytes)
        body.append([row.name, row.type, row.phase, done.flops, done.bytes,
                     done.intensity, peaks.attainable(done.intensity), done.flops / per_call,
                     peaks.classify(done.flops, done.bytes, per_call), per_call, row.share,
                     amdahl_speedup(row.share, max(per_call / roof, 1.0)) if roof else 1.0])
    columns = ["name", "type", "phase", "flops", "bytes", "intensity", "attainable",
               "achieved", "bound", "time", "share", "step speedup at roof"]
    return Table(columns, body, title=f"Layers on this machine's roofline "
                 f"(ridge at {peaks.ridge_intensity:.1f} FLOPs/byte)",
                 formats={"intensity": lambda v: f"{v:.2f}",
                          "attainable": lambda v: format_si(v, "FLOP/s"),
                          "achieved": lambda v: format_si(v, "FLOP/s"),
                          "time": format_seconds, "share": format_percent,
                          "step speedup at roof": format_ratio})


def profile_step(model: Module, x: np.ndarray, steps: int = 3, warmup: int = 1,
                 seed: int = 0) -> LayerProfiler:
    """Record ``steps`` forward + backward passes of ``model`` on ``x`` (the first ``warmup``
    calls of every layer left out of the statistics), with a seeded gradient of the output's
    shape; the parameters' ``.grad`` are as they were afterwards."""
    with KeptState(model):
        output = model(x)
        grad = np.random.default_rng(seed).standard_normal(output.shape).astype(output.dtype)
        grad /= output.size
        with LayerProfiler(warmup) as profile:
            for _ in range(steps):
                model(x)
                model.backward(grad)
    return profile


__all__ = ["LayerWork", "layer_work", "place_layers", "profile_step", "work_by_path"]
