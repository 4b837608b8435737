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

from ..flops.torch_counter import flops_by_module
from ..table import Table
from .placement import LayerWork, phase_work, placement_row, placement_table
from .roofline import MachinePeaks, machine_peaks


def module_work(module, input_shape: Sequence[int] | None = None, *, inputs: Any = None
                ) -> dict[tuple[str, str], LayerWork]:
    """(module name as the profiler shows it, phase) → :class:`~tinyprof.bottlenecks.LayerWork`
    per call, for every module with work of its own (the operators it runs itself)."""
    modules = dict(module.named_modules())
    first = next(module.parameters(), None)
    itemsize = first.element_size() if first is not None else 4
    root = type(module).__name__
    kinds = {(root if p == "" else p): type(m).__name__ for p, m in modules.items()}
    work: dict[tuple[str, str], LayerWork] = {}
    for row in flops_by_module(module, input_shape, inputs=inputs, backward=True):
        path = "" if row.name == "(model)" else row.name
        params = sum(p.numel() for p in modules.get(path, module).parameters(recurse=False))
        name = root if row.name == "(model)" else row.name
        for done in phase_work(row, name, kinds.get(name, name), params, itemsize):
            work[(name, done.phase)] = done
    return work


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
        body.append(placement_row(row["name"], row["type"], row["phase"], done,
                                  row["self_s"] / row["calls"], row["share"], peaks))
    return placement_table(body, peaks, "Modules")


__all__ = ["module_work", "place_modules"]
