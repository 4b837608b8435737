"""Every torch module on this machine's measured roofline, from its FLOPs, bytes and time.

Per (module, phase), as :mod:`tinyprof.bottlenecks` does for numpy layers:

- **FLOPs** per call: forward = matmul + elementwise FLOPs of its formula (with those of the
  functions it calls itself, such as scaled_dot_product_attention); backward = its input- and
  weight-gradient matmul FLOPs (:mod:`tinyprof.flops.torch_counter`);
- **bytes** per call, a lower bound on memory traffic (each tensor read or written once):
  forward = input + output + own parameters; backward = 2·input + output + 2·parameters, at the
  parameters' bytes per element;
- **time** per call: the module's self time in that phase, measured by ``tp.Profiler``;
- then intensity, attainable and achieved FLOP/s, the bound (compute, memory or overhead) and
  the whole step's speedup if that module reached its roof (Amdahl × roofline), from
  :func:`tinyprof.roofline.machine_peaks` — measured with numpy's BLAS and STREAM kernels, so a
  torch kernel faster than numpy's best matmul can sit above the compute roof.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..amdahl import amdahl_speedup
from ..flops.torch_counter import flops_by_module, numel
from ..table import Table
from ..units import format_seconds, format_si
from .placement import LayerWork
from .roofline import MachinePeaks, machine_peaks


def module_work(module, input_shape: Sequence[int] | None = None, *, inputs: Any = None
                ) -> dict[tuple[str, str], LayerWork]:
    """(module name as the profiler shows it, phase) → :class:`~tinyprof.bottlenecks.LayerWork`
    per call, for every module with work of its own (the operators it runs itself)."""
    modules = dict(module.named_modules())
    first = next(module.parameters(), None)
    itemsize = first.element_size() if first is not None else 4
    root = type(module).__name__
    work: dict[tuple[str, str], list[int]] = {}
    for row in flops_by_module(module, input_shape, inputs=inputs, backward=True):
        path = "" if row.name == "(model)" else row.name
        params = sum(p.numel() for p in modules.get(path, module).parameters(recurse=False))
        x, y = numel(row.input_shape), numel(row.output_shape)
        name = root if row.name == "(model)" else row.name
        forward = work.setdefault((name, "forward"), [0, 0, 0])
        backward = work.setdefault((name, "backward"), [0, 0, 0])
        forward[0] += row.matmul + row.elementwise
        forward[1] += (x + y + params) * itemsize
        backward[0] += row.backward
        backward[1] += (2 * x + y + 2 * params) * itemsize
        forward[2] = backward[2] = 1
    kinds = {(root if p == "" else p): type(m).__name__ for p, m in modules.items()}
    return {(name, phase): LayerWork(name, kinds.get(name, name), phase, flops, nbytes)
            for (name, phase), (flops, nbytes, _) in work.items()}


def place_modules(profile, module, input_shape: Sequence[int] | None = None, *,
                  inputs: Any = None, peaks: MachinePeaks | None = None) -> Table:
    """Every recorded (module, phase) with work on the roofline (columns of
    :func:`tinyprof.place_layers`); ``profile`` is a ``tp.Profiler`` (or its ``.layers``) that
    recorded steps of ``module`` on inputs of ``input_shape`` (or ``inputs``)."""
    layers = getattr(profile, "layers", profile)
    peaks = peaks or machine_peaks()
    work = module_work(module, input_shape, inputs=inputs)
    body = []
    for row in layers.rows():
        done = work.get((row["name"], row["phase"]))
        if done is None or not row["calls"] or row["self_s"] <= 0:
            continue
        per_call = row["self_s"] / row["calls"]
        roof = peaks.roof_seconds(done.flops, done.bytes)
        body.append([row["name"], row["type"], row["phase"], done.flops, done.bytes,
                     done.intensity, peaks.attainable(done.intensity), done.flops / per_call,
                     peaks.classify(done.flops, done.bytes, per_call), per_call, row["share"],
                     amdahl_speedup(row["share"], max(per_call / roof, 1.0)) if roof else 1.0])
    columns = ["name", "type", "phase", "flops", "bytes", "intensity", "attainable",
               "achieved", "bound", "time", "share", "step speedup at roof"]
    return Table(columns, body, title=f"Modules on this machine's roofline "
                 f"(ridge at {peaks.ridge_intensity:.1f} FLOPs/byte)",
                 formats={"intensity": lambda v: f"{v:.2f}",
                          "attainable": lambda v: format_si(v, "FLOP/s"),
                          "achieved": lambda v: format_si(v, "FLOP/s"),
                          "time": format_seconds, "share": lambda v: f"{v:.1%}",
                          "step speedup at roof": lambda v: f"{v:.2f}×"})


__all__ = ["module_work", "place_modules"]
