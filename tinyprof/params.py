"""Parameter counting: how many numbers a model stores, where, and how many bytes they take."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .nn.module import Module
from .table import Table
from .torchprobe import is_torch_module
from .units import format_bytes, format_percent


def count_parameters(model: Module) -> int:
    """Σ size over ``model.parameters()``: each array once, so tied weights count once.

    What counts (the walk of :meth:`tinyprof.nn.Module.children` and ``own_parameters``): every
    :class:`~tinyprof.nn.Parameter` held in a public attribute of the model or of a sub-module;
    sub-modules held directly, in lists and tuples, or as values of dicts with string keys. A
    plain numpy array is state, not a parameter; private (``_``) attributes are not walked; a
    module hidden deeper (a list inside a dict) is refused with a TypeError, never skipped.
    Exact Python integers, so even a 2³²×2³² shape-only Linear counts right. Works on
    ``shape_only=True`` models (it reads shapes, never data). A ``torch.nn.Module`` is counted
    by :func:`tinyprof.pytorch.count_parameters` (torch is never imported for a numpy model).
    """
    if is_torch_module(model):
        from .torch_params import count_parameters as count_torch

        return count_torch(model)
    _require_model("count_parameters", model)
    return sum(param.size for param in model.parameters())


def _require_model(caller: str, model: object) -> None:
    """A TypeError naming ``caller`` unless ``model`` is a tinyprof model (or has the walk)."""
    if not (isinstance(model, Module) or hasattr(model, "named_parameters")
            and hasattr(model, "parameters")):
        raise TypeError(f"{caller} needs a model with .parameters() (a tinyprof Module), got "
                        f"{type(model).__name__}")


def parameter_bytes(model: Module, dtype=None) -> int:
    """Bytes the parameters take: Σ size × itemsize, in the model's own dtypes or in ``dtype``."""
    _require_model("parameter_bytes", model)
    if dtype is None:
        return sum(param.nbytes for param in model.parameters())
    return count_parameters(model) * np.dtype(dtype).itemsize


def parameter_table(model: Module, dtype=None) -> Table:
    """One row per layer that owns parameters: name, type, shapes, parameters, bytes.

    A parameter shared with an earlier layer (a tied weight) is listed as ``tied`` and counted
    only where it first appears, so the total equals :func:`count_parameters`. A
    ``torch.nn.Module`` gets :func:`tinyprof.pytorch.parameter_table` (trainable and frozen).
    """
    if is_torch_module(model):
        from .torch_params import parameter_table as torch_table

        return torch_table(model, dtype)
    if not isinstance(model, Module):
        raise TypeError(f"parameter_table needs a model (a tinyprof Module), got "
                        f"{type(model).__name__}")
    seen: dict[int, str] = {}
    rows = []
    for name, module in model.named_modules():
        own = list(module.own_parameters())
        if not own:
            continue
        shapes, count, nbytes = [], 0, 0
        for key, param in own:
            if id(param) in seen:
                shapes.append(f"{key} tied to {seen[id(param)]}")
                continue
            seen[id(param)] = f"{name}.{key}" if name else key
            shapes.append(f"{key} {param.shape}")
            count += param.size
            nbytes += param.size * np.dtype(dtype or param.dtype).itemsize
        rows.append([name or "(model)", type(module).__name__, ", ".join(shapes), count, nbytes])
    total = sum(row[3] for row in rows)
    total_bytes = sum(row[4] for row in rows)
    return Table(["name", "type", "shape", "parameters", "bytes"], rows,
                 title=f"{type(model).__name__}: {total:,} parameters, {format_bytes(total_bytes)}",
                 formats={"bytes": format_bytes},
                 footer=["total", "", "", total, total_bytes])


def parameter_groups(model: Module, key: Callable[[str], str]) -> Table:
    """Parameters summed per group, where ``key(parameter_name)`` names the group.

    Rows: group, parameters, share of the total, bytes; largest group first.
    """
    _require_model("parameter_groups", model)
    if not callable(key):
        raise TypeError(f"parameter_groups: key is a function of a parameter's name, got "
                        f"{type(key).__name__}")
    counts: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    for name, param in model.named_parameters():
        group = key(name)
        counts[group] = counts.get(group, 0) + param.size
        nbytes[group] = nbytes.get(group, 0) + param.nbytes
    total = sum(counts.values()) or 1
    rows = [[g, counts[g], counts[g] / total, nbytes[g]]
            for g in sorted(counts, key=counts.get, reverse=True)]
    return Table(["group", "parameters", "share", "bytes"], rows,
                 formats={"share": format_percent, "bytes": format_bytes},
                 footer=["total", sum(counts.values()), 1.0, sum(nbytes.values())])
