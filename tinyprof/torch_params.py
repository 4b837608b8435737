"""Parameters of a torch module: how many, trainable or frozen, where, and how many bytes.

A tensor is counted once however many modules hold it: ``lm_head.weight = wte.weight`` ties two
modules to one Parameter, and ``module.named_parameters()`` (with its default
``remove_duplicate=True``) yields it once, under the first name it is reached by. Trainable
means ``requires_grad``; a frozen parameter still takes memory but gets no gradient and no
optimizer state.
"""

from __future__ import annotations

from typing import NamedTuple

from .table import Table
from .torchprobe import is_torch_module
from .units import format_bytes


class ParameterCounts(NamedTuple):
    """Elements of a module's unique parameters: trainable, frozen, and both."""

    trainable: int
    frozen: int

    @property
    def total(self) -> int:
        return self.trainable + self.frozen


def _require_module(caller: str, module: object) -> None:
    if not is_torch_module(module):
        raise TypeError(f"{caller} needs a torch.nn.Module, got {type(module).__name__}")


def parameter_counts(module) -> ParameterCounts:
    """(trainable, frozen) elements over the unique parameters of ``module``."""
    _require_module("parameter_counts", module)
    trainable = frozen = 0
    for _, param in module.named_parameters():
        if param.requires_grad:
            trainable += param.numel()
        else:
            frozen += param.numel()
    return ParameterCounts(trainable, frozen)


def count_parameters(module, trainable: bool | None = None) -> int:
    """Σ numel over the unique parameters of ``module`` (tied weights once).

    ``trainable=True`` counts only parameters with ``requires_grad``, ``False`` only frozen
    ones, ``None`` (default) all. ``nn.Linear(128, 64)``: 128·64 + 64 = 8,256.
    """
    counts = parameter_counts(module)
    if trainable is None:
        return counts.total
    return counts.trainable if trainable else counts.frozen


def parameter_table(module, dtype=None) -> Table:
    """One row per module that owns parameters (its direct ones): name, type, shapes,
    trainable and frozen elements, bytes (in the parameters' own dtypes, or in ``dtype``, a
    torch dtype). A parameter already listed under another module (a tied weight) is shown as
    ``tied to <name>`` and counted only where it first appears, so the totals equal
    :func:`count_parameters`."""
    _require_module("parameter_table", module)
    import torch

    itemsize = None if dtype is None else torch.empty((), dtype=dtype).element_size()
    seen: dict[int, str] = {}
    rows = []
    for name, sub in module.named_modules():
        own = list(sub.named_parameters(recurse=False, remove_duplicate=False))
        if not own:
            continue
        shapes, trainable, frozen, nbytes = [], 0, 0, 0
        for key, param in own:
            full = f"{name}.{key}" if name else key
            if id(param) in seen:
                shapes.append(f"{key} tied to {seen[id(param)]}")
                continue
            seen[id(param)] = full
            shapes.append(f"{key} {tuple(param.shape)}" + ("" if param.requires_grad
                                                           else " frozen"))
            if param.requires_grad:
                trainable += param.numel()
            else:
                frozen += param.numel()
            nbytes += param.numel() * (itemsize or param.element_size())
        rows.append([name or "(model)", type(sub).__name__, ", ".join(shapes), trainable,
                     frozen, nbytes])
    total = [sum(row[i] for row in rows) for i in (3, 4, 5)]
    return Table(["name", "type", "shape", "trainable", "frozen", "bytes"], rows,
                 title=f"{type(module).__name__}: {total[0] + total[1]:,} parameters "
                       f"({total[0]:,} trainable, {total[1]:,} frozen), "
                       f"{format_bytes(total[2])}",
                 formats={"bytes": format_bytes}, footer=["total", "", "", *total])


__all__ = ["ParameterCounts", "count_parameters", "parameter_counts", "parameter_table"]
