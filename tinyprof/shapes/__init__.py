"""Shapes: one walk that propagates an input shape through any model, for every analysis.

* :func:`trace_shapes` — each layer call of a forward pass with its input and output shapes;
* :func:`register_shape` / :func:`register_container` — how shapes flow through your own layer
  (the first step of making it countable: then ``tinyprof.flops.register_flops`` and
  ``tinyprof.memory.register_activation_formula``);
* :class:`FormulaRegistry` — the registry every analysis keeps its per-layer formulas in.
"""

from . import rules
from .registry import FormulaRegistry, MissingFormulaError
from .walk import (
    CONTAINER_FLOWS,
    ROOT_NAME,
    SHAPE_RULES,
    MissingShapeRuleError,
    Node,
    Shape,
    check_shape,
    has_parameters,
    numel,
    register_container,
    register_shape,
    trace_shapes,
)

__all__ = [
    "CONTAINER_FLOWS", "FormulaRegistry", "MissingFormulaError", "MissingShapeRuleError", "Node",
    "ROOT_NAME", "SHAPE_RULES", "Shape", "check_shape", "has_parameters", "numel",
    "register_container", "register_shape", "rules", "trace_shapes",
]
