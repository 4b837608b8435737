"""The counting machinery: walk a model by shape, apply each layer's registered formula.

No input data and no weights are touched, so ``shape_only=True`` models count as fast as real
ones. Shapes come from :func:`tinyprof.shapes.trace_shapes`; the formulas live in
:mod:`tinyprof.flops.formulas`; this module only looks them up and adds the results up.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ..nn.module import Module
from ..shapes import ROOT_NAME, Node, trace_shapes
from ..table import Table
from ..torchprobe import is_torch_module
from .registry import LayerFlops, LayerFormula, check_overlay, lookup
from .report import LayerCount, flop_table, total_flops


def _count(node: Node, backward: bool,
           formulas: Mapping[type, LayerFormula] | None = None) -> LayerCount:
    """Apply ``node``'s FLOP formula (from ``formulas`` first); check what it returned."""
    layer, x = node.layer, node.input_shape
    flops = lookup(layer, formulas)(layer, x, node.output_shape)
    kind = type(layer).__name__
    if not isinstance(flops, LayerFlops):
        raise TypeError(f"the FLOP formula for {kind} '{node.name}' returned "
                        f"{type(flops).__name__}; it must return a LayerFlops")
    grad_input, grad_weight = flops.grad_input, flops.grad_weight
    if backward and (grad_input is None or grad_weight is None):
        raise ValueError(f"the FLOP formula for {kind} '{node.name}' states no backward FLOPs: "
                         "give its LayerFlops grad_input and grad_weight (0 when the backward "
                         "runs no matmul)")
    if not node.container and not x.needs_grad:
        grad_input = 0      # nothing upstream needs dX: e.g. the model's input
    return LayerCount(node.name, kind, tuple(x), tuple(node.output_shape), flops.matmul,
                      flops.elementwise, grad_input or 0, grad_weight or 0, flops.note)


def flops_by_layer(model: Module, input_shape: Sequence[int], *, backward: bool = False,
                   skip_first_input_grad: bool = False,
                   formulas: Mapping[type, LayerFormula] | None = None) -> list[LayerCount]:
    """Every layer's counted work, in forward order (containers before their children).

    Leaves always get a row; a container only when it does work of its own (a residual add,
    attention scores). ``skip_first_input_grad=True`` treats the model's input as not needing a
    gradient, so the first layers that read it (up to the first layer with parameters) drop
    their dX matmuls, as autograd does for an input with ``requires_grad=False``. With
    ``backward=True`` every formula must state its backward FLOPs. ``formulas``
    (``{layer type: formula}``) overlays the registered formulas for this call only, as torch's
    ``FlopCounterMode(custom_mapping=...)`` does; the registry is not changed. A
    ``torch.nn.Module`` gets :func:`tinyprof.pytorch.flops_by_module`'s rows.
    """
    if is_torch_module(model):
        from .torch_counter import flops_by_module

        return flops_by_module(model, input_shape, backward=backward,
                               skip_first_input_grad=skip_first_input_grad, formulas=formulas)
    if not isinstance(model, Module):
        raise TypeError(f"count FLOPs of a tinyprof Module, got {type(model).__name__}")
    formulas = check_overlay(formulas, "flops_by_layer")
    rows = []
    for node in trace_shapes(model, input_shape, skip_first_input_grad=skip_first_input_grad):
        row = _count(node, backward, formulas)
        if not node.container or row.matmul or row.elementwise or row.backward:
            rows.append(row)
    return rows


def count_flops(model: Module, input_shape: Sequence[int], backward: bool = False, *,
                skip_first_input_grad: bool = False,
                formulas: Mapping[type, LayerFormula] | None = None) -> int:
    """Matmul FLOPs (matmul, conv, attention; 2 per multiply-accumulate) of one forward pass on
    an input of ``input_shape``, or with ``backward=True`` of the backward pass alone (input and
    weight gradients). Elementwise work is left out; :func:`flop_report` lists it.

    Counts by shape only, so ``shape_only=True`` models work. For a GPT, ``input_shape`` is
    (batch, seq) of token ids. Linear(128, 64) on (1, 128): 16,384. ``formulas={Layer: f}``
    counts ``Layer`` (and its subclasses without a nearer formula) with ``f`` for this call
    only. A ``torch.nn.Module`` is counted by :func:`tinyprof.pytorch.count_flops` on a traced
    forward pass, with the same arguments and the same convention: the input of a shape needs
    a gradient (the first layer's dX is counted) unless ``skip_first_input_grad=True``, so
    Linear(72, 40) on (6, 72) is 69,120 backward in both wings.
    """
    if is_torch_module(model):
        from .torch_counter import count_flops as count_torch

        return count_torch(model, input_shape, backward,
                           skip_first_input_grad=skip_first_input_grad, formulas=formulas)
    rows = flops_by_layer(model, input_shape, backward=backward,
                          skip_first_input_grad=skip_first_input_grad, formulas=formulas)
    return total_flops(rows, backward)


def flop_report(model: Module, input_shape: Sequence[int], backward: bool = False, *,
                skip_first_input_grad: bool = False,
                formulas: Mapping[type, LayerFormula] | None = None) -> Table:
    """Per-layer FLOP table whose ``flops`` column sums to :func:`count_flops`.

    Forward columns: name, type, output shape, flops (matmul), macs, elementwise, % flops.
    Backward columns: name, type, output shape, grad input, grad weight, flops, % flops.
    Attention rows (type MultiHeadAttention) hold Q·Kᵀ + A·V; their projections are Linear rows
    of their own, so each sub-total is a sum over rows. ``formulas``: as for
    :func:`count_flops`. A ``torch.nn.Module`` gets :func:`tinyprof.pytorch.flop_report`.
    """
    if is_torch_module(model):
        from .torch_counter import flop_report as torch_report

        return torch_report(model, input_shape, backward,
                            skip_first_input_grad=skip_first_input_grad, formulas=formulas)
    rows = flops_by_layer(model, input_shape, backward=backward,
                          skip_first_input_grad=skip_first_input_grad, formulas=formulas)
    return flop_table(rows, backward, type(model).__name__, str(tuple(input_shape)))


__all__ = ["ROOT_NAME", "LayerCount", "count_flops", "flop_report", "flops_by_layer"]
