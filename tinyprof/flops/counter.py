"""The counting machinery: walk a model by shape, apply each layer's registered formula.

No input data and no weights are touched, so ``shape_only=True`` models count as fast as real
ones. The formulas live in :mod:`tinyprof.flops.formulas`; this module only looks them up,
propagates shapes through containers and adds the results up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..nn.checks import input_shape as checked_shape
from ..nn.module import Module
from ..table import Table
from ..units import format_si
from .registry import LayerFlops, Shape, lookup

ROOT_NAME = "(model)"


@dataclass(frozen=True)
class LayerCount:
    """One layer's counted work for one input shape (see :class:`LayerFlops` for the fields)."""

    name: str
    type: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    matmul: int
    elementwise: int
    grad_input: int
    grad_weight: int
    note: str = ""

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the forward matmuls: matmul / 2."""
        return self.matmul // 2

    @property
    def backward(self) -> int:
        """Backward matmul FLOPs: grad_input + grad_weight."""
        return self.grad_input + self.grad_weight


class _Counter:
    """Visits layers in forward order, collecting one :class:`LayerCount` per layer with work.

    Leaves always get a row; a container only when it does work of its own (a residual add,
    attention scores). Rows appear before their children's rows.
    """

    def __init__(self, model: Module, backward: bool):
        self.paths: dict[int, str] = {}
        for path, module in model.named_modules():
            self.paths.setdefault(id(module), path or ROOT_NAME)
        self.backward = backward
        self.rows: list[LayerCount | None] = []

    def __call__(self, layer: Module, x: Sequence[int]) -> Shape:
        """Count ``layer`` (and, for a container, its children) on input shape ``x``."""
        if not isinstance(layer, Module):
            raise TypeError(f"FLOP counting walks tinyprof Modules; got {type(layer).__name__}")
        x = x if isinstance(x, Shape) else Shape(x)
        kind, formula = lookup(layer)
        slot = len(self.rows)
        self.rows.append(None)
        flops = formula(layer, x, self) if kind == "container" else formula(layer, x)
        row = self._row(layer, kind, x, flops)
        if kind == "layer" or row.matmul or row.elementwise or row.backward:
            self.rows[slot] = row
        return Shape(flops.output_shape, x.needs_grad or _has_parameters(layer))

    def join(self, *inputs: Sequence[int], shape: Sequence[int] | None = None) -> Shape:
        """The shape of a value computed from ``inputs`` (their broadcast shape unless ``shape``
        is given); it needs a gradient when any input does."""
        out = np.broadcast_shapes(*inputs) if shape is None else shape
        return Shape(out, any(getattr(s, "needs_grad", True) for s in inputs))

    def _row(self, layer: Module, kind: str, x: Shape, flops: LayerFlops) -> LayerCount:
        name = self.paths.get(id(layer), type(layer).__name__)
        if not isinstance(flops, LayerFlops):
            raise TypeError(f"the FLOP formula for {type(layer).__name__} '{name}' returned "
                            f"{type(flops).__name__}; it must return a LayerFlops")
        grad_input, grad_weight = flops.grad_input, flops.grad_weight
        if self.backward and (grad_input is None or grad_weight is None):
            raise ValueError(f"the FLOP formula for {type(layer).__name__} '{name}' states no "
                             "backward FLOPs: give its LayerFlops grad_input and grad_weight "
                             "(0 when the backward runs no matmul)")
        if kind == "layer" and not x.needs_grad:
            grad_input = 0      # nothing upstream needs dX: e.g. the model's input
        return LayerCount(name, type(layer).__name__, tuple(x), tuple(flops.output_shape),
                          flops.matmul, flops.elementwise, grad_input or 0, grad_weight or 0,
                          flops.note)


def _has_parameters(layer: Module) -> bool:
    return next(iter(layer.parameters()), None) is not None


def _input_shape(input_shape: Sequence[int]) -> tuple[int, ...]:
    return checked_shape(input_shape)


def flops_by_layer(model: Module, input_shape: Sequence[int], *, backward: bool = False,
                   skip_first_input_grad: bool = False) -> list[LayerCount]:
    """Every layer's counted work, in forward order (containers before their children).

    ``skip_first_input_grad=True`` treats the model's input as not needing a gradient, so the
    first layers that read it (up to the first layer with parameters) drop their dX matmuls,
    as autograd does for an input with ``requires_grad=False``. With ``backward=True`` every
    formula must state its backward FLOPs.
    """
    if not isinstance(model, Module):
        raise TypeError(f"count FLOPs of a tinyprof Module, got {type(model).__name__}")
    counter = _Counter(model, backward)
    counter(model, Shape(_input_shape(input_shape), needs_grad=not skip_first_input_grad))
    return [row for row in counter.rows if row is not None]


def count_flops(model: Module, input_shape: Sequence[int], backward: bool = False, *,
                skip_first_input_grad: bool = False) -> int:
    """Matmul FLOPs (matmul, conv, attention; 2 per multiply-accumulate) of one forward pass on
    an input of ``input_shape``, or with ``backward=True`` of the backward pass alone (input and
    weight gradients). Elementwise work is left out; :func:`flop_report` lists it.

    Counts by shape only, so ``shape_only=True`` models work. For a GPT, ``input_shape`` is
    (batch, seq) of token ids. Linear(128, 64) on (1, 128): 16,384.
    """
    rows = flops_by_layer(model, input_shape, backward=backward,
                          skip_first_input_grad=skip_first_input_grad)
    return sum(row.backward if backward else row.matmul for row in rows)


def flop_report(model: Module, input_shape: Sequence[int], backward: bool = False, *,
                skip_first_input_grad: bool = False) -> Table:
    """Per-layer FLOP table whose ``flops`` column sums to :func:`count_flops`.

    Forward columns: name, type, output shape, flops (matmul), macs, elementwise, % flops.
    Backward columns: name, type, output shape, grad input, grad weight, flops, % flops.
    Attention rows (type MultiHeadAttention) hold Q·Kᵀ + A·V; their projections are Linear rows
    of their own, so each sub-total is a sum over rows.
    """
    rows = flops_by_layer(model, input_shape, backward=backward,
                          skip_first_input_grad=skip_first_input_grad)
    total = sum(row.backward if backward else row.matmul for row in rows)

    def share(flops: int) -> float:
        return 100.0 * flops / total if total else 0.0

    if backward:
        columns = ["name", "type", "output shape", "grad input", "grad weight", "flops",
                   "% flops"]
        body = [[r.name, r.type, r.output_shape, r.grad_input, r.grad_weight, r.backward,
                 share(r.backward)] for r in rows]
        footer = ["total", "", "", sum(r.grad_input for r in rows),
                  sum(r.grad_weight for r in rows), total, 100.0 if total else 0.0]
    else:
        columns = ["name", "type", "output shape", "flops", "macs", "elementwise", "% flops"]
        body = [[r.name, r.type, r.output_shape, r.matmul, r.macs, r.elementwise,
                 share(r.matmul)] for r in rows]
        footer = ["total", "", "", total, total // 2, sum(r.elementwise for r in rows),
                  100.0 if total else 0.0]
    direction = "backward" if backward else "forward"
    title = (f"{type(model).__name__} on {tuple(input_shape)}: {format_si(total, 'FLOPs')} "
             f"{direction} (matmul)")
    return Table(columns, body, title=title, footer=footer,
                 formats={"% flops": lambda v: f"{v:.1f}%"})
