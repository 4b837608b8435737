"""The FLOP-formula registry: one formula per layer type, looked up by the counter.

In the style of ``torch/utils/flop_counter.py``, a formula is a small pure function of shapes,
registered against the layer type it describes; the counting machinery only looks formulas up.
Shapes come from the shared walk (:mod:`tinyprof.shapes`), so a formula never propagates
shapes itself:

    formula(layer, x, y) -> LayerFlops      x: input shape, y: output shape

Every layer in the walk needs one, containers included (a container's formula states only the
work it does itself, e.g. a residual add; its children have formulas of their own). A layer
type without one raises :class:`MissingFlopFormulaError`; nothing is ever counted as a silent 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from ..nn.module import Module
from ..shapes import FormulaRegistry, MissingFormulaError, Shape
from ..shapes.registry import snake_case
from ..torchprobe import is_torch_module_type

FLOP_FORMULAS = FormulaRegistry("FLOP formula")


@dataclass(frozen=True)
class LayerFlops:
    """What one layer computes for one input shape (its own work, not its children's).

    * ``matmul``: forward FLOPs of its matrix multiplies, 2 per multiply-accumulate.
    * ``elementwise``: forward FLOPs of everything else (bias, activation, norm, softmax, adds),
      as each formula's docstring defines them.
    * ``grad_input``: backward matmul FLOPs that compute gradients of activations (dX).
    * ``grad_weight``: backward matmul FLOPs that compute gradients of parameters (dW).
      ``None`` means "not stated": counting a backward pass then raises instead of assuming 0.
    * ``note``: the formula in words, shown to readers of the per-layer report.
    """

    matmul: int = 0
    elementwise: int = 0
    grad_input: int | None = None
    grad_weight: int | None = None
    note: str = ""

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the matmuls: matmul FLOPs / 2."""
        return self.matmul // 2


NO_WORK = LayerFlops(grad_input=0, grad_weight=0)
LayerFormula = Callable[[Module, Shape, Shape], LayerFlops]


class MissingFlopFormulaError(MissingFormulaError):
    """A layer type without a registered FLOP formula."""


def register_flops(layer_type: type, *, replace: bool = False
                   ) -> Callable[[LayerFormula], LayerFormula]:
    """Decorator: ``formula(layer, x, y) -> LayerFlops`` counts every ``layer_type`` layer.

    Example, for a layer ``Scale`` that multiplies its input by a constant (its output shape is
    registered first with :func:`tinyprof.shapes.register_shape`)::

        @register_flops(Scale)
        def scale_flops(layer, x, y):
            return LayerFlops(elementwise=numel(x), grad_input=0, grad_weight=0)

    A container made of other layers states only its own work (``NO_WORK`` if none). Subclasses
    inherit their base's formula unless they register their own; registering a second formula
    for the same type raises unless ``replace=True``. A ``torch.nn.Module`` type is refused by
    name: its formulas take ``(module, call)`` and live in :func:`tinyprof.pytorch.register_flops`.
    """
    if is_torch_module_type(layer_type):
        raise TypeError(f"{layer_type.__name__} is a torch.nn.Module: register its formula "
                        "(module, call) -> LayerFlops with tinyprof.pytorch.register_flops, or "
                        "count it from its operators (no formula needed)")
    return FLOP_FORMULAS.register(layer_type, replace=replace)


def no_own_work(layer: Module, x: Shape, y: Shape) -> LayerFlops:
    """The FLOP formula of a container that only runs its children."""
    return NO_WORK


def unregister(layer_type: type) -> None:
    """Forget the FLOP formula registered for exactly ``layer_type`` (tests, experiments)."""
    FLOP_FORMULAS.unregister(layer_type)


def check_overlay(formulas: Mapping[type, LayerFormula] | None,
                  caller: str) -> Mapping[type, LayerFormula]:
    """``formulas`` (a per-call ``{layer type: formula}`` overlay) after checking that every
    key is a class and every value a function; an empty mapping for None."""
    if formulas is None:
        return {}
    if not isinstance(formulas, Mapping):
        raise TypeError(f"{caller}: formulas must be a mapping {{layer type: formula}}, got "
                        f"{type(formulas).__name__}")
    for layer_type, formula in formulas.items():
        if not isinstance(layer_type, type):
            raise TypeError(f"{caller}: formulas keys are layer classes, got {layer_type!r}")
        if not callable(formula):
            raise TypeError(f"{caller}: the formula for {layer_type.__name__} must be a "
                            f"function (layer, x, y) -> LayerFlops, got {formula!r}")
    return formulas


def lookup(layer: Module, formulas: Mapping[type, LayerFormula] | None = None) -> LayerFormula:
    """The FLOP formula for ``layer``'s class or its nearest registered base. ``formulas``
    overlays the registry for one call (as torch's ``FlopCounterMode(custom_mapping=...)``):
    along the class's MRO the nearest class with a formula in either wins, the overlay first
    at the same class; the registry itself is never changed."""
    overlay = formulas or {}
    for cls in type(layer).__mro__:
        if cls in overlay:
            return overlay[cls]
        if cls in FLOP_FORMULAS:   # the first registered class of the MRO: find() returns it
            return FLOP_FORMULAS.find(layer)[0]
    name = type(layer).__name__
    raise MissingFlopFormulaError(
        f"no FLOP formula for {layer.describe()} ({type(layer).__module__}.{name}). "
        f"Register one:\n"
        f"    from tinyprof.flops import LayerFlops, register_flops\n"
        f"    @register_flops({name})\n"
        f"    def {snake_case(name)}_flops(layer, x, y):  # x, y: input and output shapes\n"
        f"        return LayerFlops(matmul=..., elementwise=..., grad_input=..., "
        f"grad_weight=...)\n"
        f"or pass it for one call: count_flops(model, shape, formulas={{{name}: formula}}). "
        f"A layer made of other layers registers only its own work (flops.no_own_work if none) "
        f"after describing its children with tinyprof.shapes.register_container({name}).")

