"""Variants of a trained model for benchmarking (chapter 6): each function returns a new model
and leaves the original untouched.

- :func:`float16`: every parameter stored in float16 (half the bytes; numpy has no half-precision
  matrix multiply on CPUs, so expect it to be *slower* there, unlike on a GPU);
- :func:`int8`: every ``Linear`` replaced by a :class:`~tinyprof.nn.QuantizedLinear` with int8
  weights and per-output-channel scales (weights 4× smaller than float32);
- :func:`pruned`: the smallest-magnitude fraction ``sparsity`` of every ``Linear``'s weights set
  to zero (the arrays stay dense: same bytes, same matmul time in numpy);
- :func:`fused`: every ``Linear`` followed by a ``ReLU`` in a ``Sequential`` replaced by one
  :class:`~tinyprof.nn.FusedLinearReLU`.
"""

from __future__ import annotations

import copy

import numpy as np

from .nn import FusedLinearReLU, Linear, QuantizedLinear, ReLU, Sequential
from .nn.module import Module


def _copy(model: Module) -> Module:
    if not isinstance(model, Module):
        raise TypeError(f"variants are made from a tinyprof Module, got {type(model).__name__}")
    model.check_runnable()
    return copy.deepcopy(model)


def _replace_layers(model: Module, convert) -> Module:
    """Apply ``convert(layer) -> layer`` to every layer inside every Sequential, in place."""
    for _, module in list(model.named_modules()):
        if isinstance(module, Sequential):
            module.layers = [convert(layer) for layer in module.layers]
    return model.set_names()


def float16(model: Module) -> Module:
    """A copy with every parameter stored as float16."""
    result = _copy(model)
    for param in result.parameters():
        param.data = param.data.astype(np.float16)
    return result


def int8(model: Module) -> Module:
    """A copy with every Linear of a Sequential quantized to int8 (per-channel scales)."""
    return _replace_layers(_copy(model),
                           lambda layer: QuantizedLinear(layer) if isinstance(layer, Linear)
                           else layer)


def pruned(model: Module, sparsity: float) -> Module:
    """A copy in which, for every Linear, the ``sparsity`` fraction of weights with the smallest
    abs(w) is set to 0 (biases kept)."""
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity is the fraction of weights set to zero, in [0, 1); got "
                         f"{sparsity}")
    result = _copy(model)
    for _, module in result.named_modules():
        if isinstance(module, Linear):
            weight = module.weight.data
            cut = int(round(sparsity * weight.size))
            if cut:
                threshold = np.partition(np.abs(weight).ravel(), cut - 1)[cut - 1]
                weight[np.abs(weight) <= threshold] = 0
    return result


def fused(model: Module) -> Module:
    """A copy in which each Linear directly followed by a ReLU (in a Sequential) is one
    FusedLinearReLU."""
    result = _copy(model)
    for _, module in list(result.named_modules()):
        if isinstance(module, Sequential):
            layers, merged = list(module.layers), []
            while layers:
                layer = layers.pop(0)
                if isinstance(layer, Linear) and layers and isinstance(layers[0], ReLU):
                    layers.pop(0)
                    layer = FusedLinearReLU(layer)
                merged.append(layer)
            module.layers = merged
    return result.set_names()


def sparsity(model: Module) -> float:
    """Fraction of the model's parameter values that are exactly zero."""
    values = [p.data for p in model.parameters()]
    return sum(int((v == 0).sum()) for v in values) / sum(v.size for v in values)


__all__ = ["float16", "fused", "int8", "pruned", "sparsity"]
