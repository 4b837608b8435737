"""The shape walk: propagate an input shape through a model once, layer by layer.

Every analysis that works by shape (FLOPs, activation memory, the per-layer roofline placement)
starts from the same :func:`trace_shapes`: a list of :class:`Node` s, one per layer call in
forward order, each with the layer, its dotted path and its input and output shapes. No weight
is read and no input is made, so ``shape_only=True`` models walk as fast as real ones.

Two kinds of rule describe how shapes flow, one registry each:

* a **shape rule** ``rule(layer, x) -> output shape`` for a layer that computes by itself
  (:func:`register_shape`); it also checks the input shape and raises a ShapeError naming the
  layer;
* a **container flow** ``flow(layer, x, visit) -> output shape`` for a layer made of other layers
  (:func:`register_container`): it hands shapes to its children in the order its forward runs
  them with ``visit(child, shape)``, which returns the child's output shape, and combines values
  with ``visit.join(a, b)`` (broadcast shape, for a residual add).

Shapes are :class:`Shape` tuples that also carry ``needs_grad``: False for a model input that
needs no gradient (``skip_first_input_grad``) and for values computed from it by layers without
parameters, as autograd's ``requires_grad`` propagates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..nn.checks import input_shape as checked_shape
from ..nn.module import Module
from .registry import FormulaRegistry, MissingFormulaError, snake_case

SHAPE_RULES = FormulaRegistry("shape rule")
CONTAINER_FLOWS = FormulaRegistry("container flow")
ROOT_NAME = "(model)"


class Shape(tuple):
    """A tensor's shape plus ``needs_grad``: whether the backward pass computes its gradient."""

    needs_grad: bool

    def __new__(cls, dims: Sequence[int], needs_grad: bool = True) -> "Shape":
        self = super().__new__(cls, (int(d) for d in dims))
        self.needs_grad = needs_grad
        return self


def numel(shape: Sequence[int]) -> int:
    """Number of elements of a tensor of this shape: the product of its dimensions (exact
    Python int, 1 for a scalar)."""
    return math.prod(int(d) for d in shape)


def check_shape(layer: Module, x: Sequence[int], expected: str, ok: bool) -> None:
    """Raise a ShapeError naming the layer, the expected and the received shape unless ``ok``
    (:meth:`Module.check_shape`, the same message a layer's forward gives)."""
    layer.check_shape(tuple(x), expected, ok)


class MissingShapeRuleError(MissingFormulaError):
    """A layer type with neither a shape rule nor a container flow."""


def register_shape(layer_type: type, *, replace: bool = False):
    """Decorator: ``rule(layer, x) -> output shape`` for every ``layer_type`` layer.

    Example, for a layer ``Scale`` that multiplies its input by a constant::

        @register_shape(Scale)
        def scale_shape(layer, x):
            return x
    """
    if (isinstance(layer_type, type) and issubclass(layer_type, Module) and not replace
            and layer_type.output_shape is not Module.output_shape):
        raise ValueError(f"{layer_type.__name__} already has a shape rule: its own "
                         f"{layer_type.__name__}.output_shape, which its forward checks its "
                         "input with. Pass replace=True to walk shapes with another rule")
    return SHAPE_RULES.register(layer_type, replace=replace)


def register_container(layer_type: type, *, replace: bool = False):
    """Decorator: ``flow(layer, x, visit) -> output shape`` for a layer made of other layers.

    The flow calls ``visit(child, shape)`` for each child in the order the forward runs them.
    """
    return CONTAINER_FLOWS.register(layer_type, replace=replace)


@dataclass
class Node:
    """One layer call of the walk: ``nodes[index + 1:end]`` are the calls it makes (its
    children's nodes, for a container)."""

    layer: Module
    path: str
    input_shape: Shape
    output_shape: Shape | None = None
    container: bool = False
    end: int = 0

    @property
    def name(self) -> str:
        """The dotted path, or ``(model)`` for the model itself."""
        return self.path or ROOT_NAME


class _Walk:
    """Visits layers in forward order and appends a :class:`Node` for each call."""

    def __init__(self, model: Module):
        self.paths: dict[int, str] = {}
        for path, module in model.named_modules():
            self.paths.setdefault(id(module), path)
        self.nodes: list[Node] = []

    def __call__(self, layer: Module, x: Sequence[int]) -> Shape:
        if not isinstance(layer, Module):
            raise TypeError(f"the shape walk visits tinyprof Modules, got {type(layer).__name__}")
        x = x if isinstance(x, Shape) else Shape(x)
        node = Node(layer, self.paths.get(id(layer), layer.name), x)
        self.nodes.append(node)
        flow = CONTAINER_FLOWS.find(layer)
        if flow is not None:
            node.container = True
            out = flow[0](layer, x, self)
        else:
            out = _shape_rule(layer)(layer, x)
        node.output_shape = Shape(out, x.needs_grad or has_parameters(layer))
        node.end = len(self.nodes)
        return node.output_shape

    def join(self, *inputs: Sequence[int], shape: Sequence[int] | None = None) -> Shape:
        """The shape of a value computed from ``inputs`` (their broadcast shape unless ``shape``
        is given); it needs a gradient when any input does."""
        out = np.broadcast_shapes(*inputs) if shape is None else shape
        return Shape(out, any(getattr(s, "needs_grad", True) for s in inputs))


def _own_shape(layer: Module, x: Shape) -> tuple[int, ...]:
    """The rule of a layer that states its shape itself: its ``output_shape``."""
    return layer.output_shape(tuple(x))


def _shape_rule(layer: Module) -> Callable:
    """A registered shape rule (nearest along the MRO), else the layer's own
    ``Module.output_shape`` when its class defines one."""
    found = SHAPE_RULES.find(layer)
    if found is None and type(layer).output_shape is not Module.output_shape:
        return _own_shape
    if found is None:
        name = type(layer).__name__
        raise MissingShapeRuleError(
            f"no shape rule for {layer.describe()} ({type(layer).__module__}.{name}): every "
            f"analysis by shape needs its output shape first. Define "
            f"{name}.output_shape(self, input_shape), or register it:\n"
            f"    from tinyprof.shapes import register_shape\n"
            f"    @register_shape({name})\n"
            f"    def {snake_case(name)}_shape(layer, x):  # x: the input shape\n"
            f"        return ...  # the output shape\n"
            f"or, for a layer made of other layers, @register_container({name}) with "
            f"flow(layer, x, visit) calling visit(child, shape) for each child; then its "
            f"FLOPs with tinyprof.flops.register_flops({name}) and what it keeps for backward "
            f"with tinyprof.memory.register_activation_formula({name}).")
    return found[0]


def has_parameters(layer: Module) -> bool:
    """Whether ``layer`` or one of its children holds a parameter."""
    return next(iter(layer.parameters()), None) is not None


def trace_shapes(model: Module, input_shape: Sequence[int], *,
                 skip_first_input_grad: bool = False) -> list[Node]:
    """Every layer call of one forward pass on ``input_shape``, in forward order, containers
    before their children.

    ``skip_first_input_grad=True`` marks the model's input as needing no gradient (autograd's
    ``requires_grad=False``), which the backward FLOP count uses.
    """
    if not isinstance(model, Module):
        raise TypeError(f"walk a tinyprof Module, got {type(model).__name__}")
    walk = _Walk(model)
    walk(model, Shape(checked_shape(input_shape), needs_grad=not skip_first_input_grad))
    return walk.nodes
