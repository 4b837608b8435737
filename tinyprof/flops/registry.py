"""The FLOP-formula registry: one formula per layer type, looked up by the counter.

Two kinds of entry, in the style of ``torch/utils/flop_counter.py`` (a formula is a small pure
function of shapes, registered against what it describes; the counting machinery only looks
formulas up):

* a **layer formula** ``formula(layer, x) -> LayerFlops`` for a layer that does its own work,
  registered with :func:`register_flops`;
* a **container rule** ``rule(layer, x, visit) -> LayerFlops`` for a layer built from other
  layers: it passes shapes to its children with ``visit(child, shape)`` (which counts them) and
  reports only the work it does itself (e.g. a residual add), registered with
  :func:`register_container`.

``x`` is the input's shape (a tuple of ints). A layer type with neither raises
:class:`MissingFlopFormulaError`; nothing is ever counted as a silent 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

from ..nn.module import Module, ShapeError


class Shape(tuple):
    """A tensor's shape, plus whether the backward pass must compute a gradient for it.

    ``needs_grad`` is False only for the model's input when ``skip_first_input_grad=True`` and
    for values computed from it by layers without parameters; the counter drops the input
    gradient of a layer whose input has ``needs_grad`` False (PyTorch's ``requires_grad`` rule).
    """

    needs_grad: bool

    def __new__(cls, dims, needs_grad: bool = True) -> "Shape":
        self = super().__new__(cls, (int(d) for d in dims))
        self.needs_grad = needs_grad
        return self


@dataclass(frozen=True)
class LayerFlops:
    """What one layer computes for one input shape (its own work, not its children's).

    * ``output_shape``: the shape it returns.
    * ``matmul``: forward FLOPs of its matrix multiplies, 2 per multiply-accumulate.
    * ``elementwise``: forward FLOPs of everything else (bias, activation, norm, softmax, adds),
      as each formula's docstring defines them.
    * ``grad_input``: backward matmul FLOPs that compute gradients of activations (dX).
    * ``grad_weight``: backward matmul FLOPs that compute gradients of parameters (dW).
      ``None`` means "not stated": counting a backward pass then raises instead of assuming 0.
    * ``note``: the formula in words, shown to readers of the per-layer report.
    """

    output_shape: tuple[int, ...]
    matmul: int = 0
    elementwise: int = 0
    grad_input: int | None = None
    grad_weight: int | None = None
    note: str = ""

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the matmuls: matmul FLOPs / 2."""
        return self.matmul // 2


class Visit(Protocol):
    """What a container rule receives to count its children."""

    def __call__(self, layer: Module, x: tuple[int, ...]) -> Shape: ...

    def join(self, *inputs: tuple[int, ...], shape: tuple[int, ...] | None = None) -> Shape: ...


LayerFormula = Callable[[Module, Shape], LayerFlops]
ContainerRule = Callable[[Module, Shape, Visit], LayerFlops]

_FORMULAS: dict[type, tuple[str, Callable]] = {}


class MissingFlopFormulaError(LookupError):
    """A layer type without a registered FLOP formula or container rule."""


def register_flops(layer_type: type) -> Callable[[LayerFormula], LayerFormula]:
    """Decorator: ``formula(layer, x) -> LayerFlops`` counts every ``layer_type`` layer.

    Example, for a layer ``Scale`` that multiplies its input by a constant::

        @register_flops(Scale)
        def scale_flops(layer, x):
            return LayerFlops(x, elementwise=numel(x), grad_input=0, grad_weight=0)

    Registering again replaces the earlier formula (subclasses inherit it unless they register
    their own).
    """
    return _register(layer_type, "layer")


def register_container(layer_type: type) -> Callable[[ContainerRule], ContainerRule]:
    """Decorator: ``rule(layer, x, visit) -> LayerFlops`` for a layer made of other layers.

    The rule calls ``visit(child, shape)`` for each child in the order the forward runs them
    (it returns the child's output shape) and returns the container's own work only.
    """
    return _register(layer_type, "container")


def _register(layer_type: type, kind: str) -> Callable:
    if not isinstance(layer_type, type):
        raise TypeError(f"register a FLOP formula against a layer class, got {layer_type!r}")

    def decorator(formula: Callable) -> Callable:
        _FORMULAS[layer_type] = (kind, formula)
        return formula

    return decorator


def unregister(layer_type: type) -> None:
    """Forget the formula registered for exactly ``layer_type`` (for tests and experiments)."""
    _FORMULAS.pop(layer_type, None)


def lookup(layer: Module) -> tuple[str, Callable]:
    """``("layer" | "container", formula)`` for ``layer``'s class or its nearest registered base."""
    for cls in type(layer).__mro__:
        if cls in _FORMULAS:
            return _FORMULAS[cls]
        if cls is Module:
            break
    name = type(layer).__name__
    where = f" '{layer.name}'" if getattr(layer, "name", "") else ""
    raise MissingFlopFormulaError(
        f"no FLOP formula for {name}{where} ({type(layer).__module__}.{name}). Register one:\n"
        f"    from tinyprof.flops import LayerFlops, register_flops\n"
        f"    @register_flops({name})\n"
        f"    def {_snake(name)}_flops(layer, x):  # x: the input shape\n"
        f"        return LayerFlops(output_shape=..., matmul=..., elementwise=...,\n"
        f"                          grad_input=..., grad_weight=...)\n"
        f"or, for a layer made of other layers, @register_container({name}) with "
        f"rule(layer, x, visit) calling visit(child, shape) for each child.")


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower()
                   for i, c in enumerate(name))


def check_shape(layer: Module, x: tuple[int, ...], expected: str, ok: bool) -> None:
    """Raise the layers' ShapeError (layer, expected and received shape) when ``ok`` is False."""
    if not ok:
        raise ShapeError(f"{layer.describe()} expected input of shape {expected}, got {tuple(x)}")


def numel(shape: tuple[int, ...]) -> int:
    """Number of elements of a tensor of this shape: the product of its dimensions."""
    return math.prod(shape)
