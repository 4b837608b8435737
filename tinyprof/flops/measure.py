"""Counted == executed: run a model and record the matmul FLOPs that really happen, per layer.

Every layer's multiplies go through :func:`tinyprof.ops.matmul`; here each module's
``forward`` and ``backward`` are wrapped (for the duration of one call only) in an
:func:`tinyprof.ops.scoped` block naming the module, so each executed multiply is attributed to
the innermost layer that ran it, the same layer whose formula counts it.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from .. import ops
from ..nn.module import Module
from ..nn.state import KeptState
from ..shapes import ROOT_NAME


@dataclass(frozen=True)
class ExecutedFlops:
    """Matmul FLOPs recorded while running one forward and one backward pass.

    ``*_by_layer`` maps a layer's dotted name (``"(model)"`` for the root) to the FLOPs of the
    multiplies it ran itself, not counting those of its sub-layers.
    """

    forward: int
    backward: int
    forward_by_layer: dict[str, int] = field(default_factory=dict)
    backward_by_layer: dict[str, int] = field(default_factory=dict)


def measure_matmul_flops(model: Module, x: np.ndarray,
                         grad: np.ndarray | None = None) -> ExecutedFlops:
    """Run ``model(x)`` then ``model.backward(grad)`` (ones by default) and return the matmul
    FLOPs that executed in each, as :func:`tinyprof.ops.matmul` recorded them.

    The model's existing ``.grad`` arrays are put back afterwards; only a runnable model (not
    ``shape_only``) can be measured.
    """
    with KeptState(model), ops.record_matmuls() as record, _scoped_modules(model):
        with ops.tagged("forward"):
            y = model(x)
        with ops.tagged("backward"):
            model.backward(np.ones_like(y) if grad is None else grad)
    by_tag = record.flops_by_tag()
    return ExecutedFlops(by_tag.get("forward", 0), by_tag.get("backward", 0),
                         record.flops_by_scope("forward"), record.flops_by_scope("backward"))


@contextmanager
def _scoped_modules(model: Module) -> Iterator[None]:
    """Temporarily wrap each module's forward and backward in ``ops.scoped(its name)``."""
    wrapped: list[tuple[Module, str, bool, object]] = []
    seen: set[int] = set()
    try:
        for path, module in model.named_modules():
            if id(module) in seen:
                continue
            seen.add(id(module))
            for method in ("forward", "backward"):
                had_own = method in vars(module)
                old = vars(module).get(method)
                wrapped.append((module, method, had_own, old))
                setattr(module, method, _in_scope(getattr(module, method), path or ROOT_NAME))
        yield
    finally:
        for module, method, had_own, old in reversed(wrapped):
            if had_own:
                setattr(module, method, old)
            else:
                delattr(module, method)


def _in_scope(method: Callable, scope: str) -> Callable:
    def run_in_scope(*args, **kwargs):
        with ops.scoped(scope):
            return method(*args, **kwargs)

    return run_in_scope
