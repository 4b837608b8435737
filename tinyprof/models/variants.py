"""Variants of a trained model for benchmarking (chapter 6): each function returns a new model
and leaves the original untouched.

- :func:`float16`: every parameter stored in float16 (half the bytes; numpy has no half-precision
  matrix multiply on CPUs, so expect it to be *slower* there, unlike on a GPU);
- :func:`int8`: every ``Linear``, wherever it sits (a ``Sequential``, an attribute such as an
  attention projection, a list or a dict, or the model itself), replaced by a
  :class:`~tinyprof.nn.QuantizedLinear` with int8 weights and per-output-channel scales (weights
  4× smaller than float32); layers with other weight matrices (Conv2d, Embedding, a tied head)
  keep them, and a warning names them;
- :func:`pruned`: the smallest-magnitude fraction ``sparsity`` of every ``Linear``'s weights set
  to zero (the arrays stay dense: same bytes, same matmul time in numpy);
- :func:`fused`: every ``Linear`` directly followed by a ``ReLU`` in a ``Sequential`` (the only
  container whose order is the order of computation) replaced by one
  :class:`~tinyprof.nn.FusedLinearReLU`.

A variant that would change nothing (no ``Linear`` to quantize or prune, no ``Linear`` + ``ReLU``
pair to fuse) is a ValueError that says what the model holds, never an unchanged copy.
"""

from __future__ import annotations

import copy
import warnings
from collections import Counter
from typing import Callable

import numpy as np

from ..nn import FusedLinearReLU, Linear, QuantizedLinear, ReLU, Sequential
from ..nn.module import Module


def _copy(model: Module) -> Module:
    if not isinstance(model, Module):
        raise TypeError(f"variants are made from a tinyprof Module, got {type(model).__name__}")
    model.check_runnable()
    return copy.deepcopy(model)


def _layer_types(model: Module) -> str:
    counts = Counter(type(m).__name__ for _, m in model.named_modules())
    return ", ".join(f"{n} {kind}" for kind, n in counts.most_common())


def _convert_tree(module: Module, convert: Callable[[Module], Module]) -> tuple[Module, int]:
    """``convert`` applied to ``module`` and, where it returns the module itself, to every
    sub-module held in an attribute, a list, a tuple or a dict (the places
    :meth:`Module.children` walks), in place; returns the (new) module and how many layers
    ``convert`` replaced."""
    new = convert(module)
    if new is not module:
        return new, 1
    replaced = 0
    for key, value in list(vars(module).items()):
        if key.startswith("_"):
            continue
        if isinstance(value, Module):
            child, n = _convert_tree(value, convert)
            replaced += n
            setattr(module, key, child)
        elif type(value) in (list, tuple) or isinstance(value, dict):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            rebuilt = {}
            for index, item in items:
                if isinstance(item, Module):
                    item, n = _convert_tree(item, convert)
                    replaced += n
                rebuilt[index] = item
            setattr(module, key, rebuilt if isinstance(value, dict)
                    else type(value)(rebuilt.values()))
    return module, replaced


def float16(model: Module) -> Module:
    """A copy with every parameter stored as float16."""
    result = _copy(model)
    for param in result.parameters():
        param.data = param.data.astype(np.float16)
    return result


def int8(model: Module) -> Module:
    """A copy with every Linear, wherever it sits, quantized to int8 (per-channel scales).

    Raises ValueError when the model holds no Linear; warns (UserWarning) naming the layers
    whose weight matrices stay in floating point (Conv2d, Embedding, tied heads, ...)."""
    result, replaced = _convert_tree(_copy(model), lambda layer: QuantizedLinear(layer)
                                     if isinstance(layer, Linear) else layer)
    if not replaced:
        raise ValueError(f"int8: {model.describe()} holds no Linear layer to quantize (it "
                         f"holds {_layer_types(model)}): the copy would be unchanged")
    left = Counter(f"{type(m).__name__} '{name or '(model)'}'" for name, m in
                   result.named_modules() if not isinstance(m, QuantizedLinear)
                   and any(p.data.ndim >= 2 for _, p in m.own_parameters()))
    if left:
        warnings.warn(f"int8: quantized {replaced} Linear layers; {', '.join(left)} keep "
                      "floating-point weights (only Linear layers are quantized)",
                      stacklevel=2)
    return result.set_names()


def pruned(model: Module, sparsity: float) -> Module:
    """A copy in which, for every Linear, the ``sparsity`` fraction of weights with the smallest
    abs(w) is set to 0 (biases kept). Raises ValueError when the model holds no Linear."""
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity is the fraction of weights set to zero, in [0, 1); got "
                         f"{sparsity}")
    result = _copy(model)
    linears = [module for _, module in result.named_modules() if isinstance(module, Linear)]
    if not linears:
        raise ValueError(f"pruned: {model.describe()} holds no Linear layer to prune (it holds "
                         f"{_layer_types(model)}): the copy would be unchanged")
    for module in linears:
        weight = module.weight.data
        cut = int(round(sparsity * weight.size))
        if cut:
            threshold = np.partition(np.abs(weight).ravel(), cut - 1)[cut - 1]
            weight[np.abs(weight) <= threshold] = 0
    return result


def fused(model: Module) -> Module:
    """A copy in which each Linear directly followed by a ReLU in a Sequential is one
    FusedLinearReLU. Raises ValueError when there is no such pair (a Linear + ReLU elsewhere
    cannot be fused: only a Sequential says that one feeds the other)."""
    result = _copy(model)
    pairs = 0
    for _, module in list(result.named_modules()):
        if isinstance(module, Sequential):
            layers, merged = list(module.layers), []
            while layers:
                layer = layers.pop(0)
                if isinstance(layer, Linear) and layers and isinstance(layers[0], ReLU):
                    layers.pop(0)
                    layer = FusedLinearReLU(layer)
                    pairs += 1
                merged.append(layer)
            module.layers = merged
    if not pairs:
        raise ValueError(f"fused: {model.describe()} has no Linear directly followed by a ReLU "
                         f"inside a Sequential (it holds {_layer_types(model)}): nothing to "
                         "fuse, the copy would be unchanged")
    return result.set_names()


def sparsity(model: Module) -> float:
    """Fraction of the model's parameter values that are exactly zero."""
    values = [p.data for p in model.parameters()]
    return sum(int((v == 0).sum()) for v in values) / sum(v.size for v in values)


__all__ = ["float16", "fused", "int8", "pruned", "sparsity"]
