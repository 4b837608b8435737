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

The torch wing's ``place_modules`` (:mod:`.torch_placement`) builds its work with
:func:`phase_work` and its table with :func:`placement_row` and :func:`placement_table`: one
set of columns and formats for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..amdahl import amdahl_speedup
from ..flops import LayerCount, flops_by_layer
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
        for done in phase_work(row, name, row.type, params, itemsize, path):
            work[(path, done.phase)] = done
    return work


def phase_work(row: LayerCount, name: str, kind: str, params: int, itemsize: int,
               path: str = "") -> tuple[LayerWork, LayerWork]:
    """The forward and backward :class:`LayerWork` of one FLOP row (a numpy layer's or a torch
    module's :class:`~tinyprof.flops.LayerCount`) with ``params`` parameters of its own:
    FLOPs forward = matmul + elementwise, backward = grad_input + grad_weight; bytes forward =
    (input + output + params)·itemsize, backward = (2·input + output + 2·params)·itemsize."""
    x, y = numel(row.input_shape), numel(row.output_shape)
    return (LayerWork(name, kind, "forward", row.matmul + row.elementwise,
                      (x + y + params) * itemsize, path),
            LayerWork(name, kind, "backward", row.backward,
                      (2 * x + y + 2 * params) * itemsize, path))


#: The columns of a placement table (:func:`place_layers`, and ``place_modules`` for torch).
PLACEMENT_COLUMNS = ["name", "type", "phase", "flops", "bytes", "intensity", "attainable",
                     "achieved", "bound", "time", "share", "step speedup at roof"]
PLACEMENT_FORMATS = {"intensity": lambda v: f"{v:.2f}",
                     "attainable": lambda v: format_si(v, "FLOP/s"),
                     "achieved": lambda v: format_si(v, "FLOP/s"),
                     "time": format_seconds, "share": format_percent,
                     "step speedup at roof": format_ratio}


def placement_row(name: str, kind: str, phase: str, work: LayerWork, per_call: float,
                  share: float, peaks: MachinePeaks) -> list:
    """One row of a placement table: ``work`` (FLOPs and bytes per call) measured at
    ``per_call`` seconds of self time, ``share`` of the step: intensity, attainable and
    achieved FLOP/s, bound, and the step's speedup at the roof, 1 / ((1 − p) + p / k) with
    k = measured / roof time (1 when the work has no roof time)."""
    roof = peaks.roof_seconds(work.flops, work.bytes)
    return [name, kind, phase, work.flops, work.bytes, work.intensity,
            peaks.attainable(work.intensity), work.flops / per_call,
            peaks.classify(work.flops, work.bytes, per_call), per_call, share,
            amdahl_speedup(share, max(per_call / roof, 1.0)) if roof else 1.0]


def placement_table(body: list[list], peaks: MachinePeaks, what: str = "Layers") -> Table:
    """Rows of :func:`placement_row` as a table titled "``what`` on this machine's
    roofline"."""
    return Table(PLACEMENT_COLUMNS, body, title=f"{what} on this machine's roofline "
                 f"(ridge at {peaks.ridge_intensity:.1f} FLOPs/byte)",
                 formats=PLACEMENT_FORMATS)


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
        body.append(placement_row(row.name, row.type, row.phase, done,
                                  row.self_s / row.calls, row.share, peaks))
    return placement_table(body, peaks, "Layers")


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


__all__ = ["PLACEMENT_COLUMNS", "PLACEMENT_FORMATS", "LayerWork", "layer_work", "phase_work",
           "place_layers", "placement_row", "placement_table", "profile_step", "work_by_path"]
