"""Inference-only layers that chapter 6's variants swap in: int8 weights with per-channel scales,
and a Linear fused with its bias and ReLU. They compute what the layers they replace compute
(up to rounding); they have no backward pass, and say so."""

from __future__ import annotations

import numpy as np

from .. import ops
from .linear import Linear
from .module import Module, Parameter, as_float


class InferenceOnly(Module):
    """A layer for measuring inference: backward raises a clear error."""

    def backward(self, grad: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{self.describe()} is an inference-only layer (a benchmark "
                                  "variant): train the float model, then convert it")


class QuantizedLinear(InferenceOnly):
    """y = (x · W_q) ⊙ s + b with int8 weights W_q and one float scale per output channel.

    Quantization, per output column j: s_j = max_i abs(W_ij) / 127 (1 where the column is all
    zero), W_q = round(W / s) clipped to [−127, 127]. Weights take 1 byte instead of 4; the
    dequantization is folded into the output (one multiply per output element), and the matmul
    runs on W_q converted to the input's dtype, since numpy has no int8 matrix multiply.
    """

    def __init__(self, linear: Linear):
        weight = linear.weight.data
        self.in_features, self.out_features = linear.in_features, linear.out_features
        scale = np.abs(weight).max(axis=0) / 127.0
        scale = np.where(scale > 0, scale, 1.0).astype(weight.dtype)
        quantized = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
        self.weight = Parameter(quantized)
        self.scale = Parameter(scale)
        self.bias = Parameter(linear.bias.data.copy()) if linear.bias is not None else None

    def dequantized(self) -> np.ndarray:
        """W_q ⊙ s: the float weights this layer stands for."""
        return self.weight.data.astype(self.scale.dtype) * self.scale.data

    output_shape = Linear.output_shape

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.check_forward_input(x)
        x = as_float(x, self.scale.dtype)
        y = ops.matmul(x, self.weight.data.astype(x.dtype))
        y *= self.scale.data
        if self.bias is not None:
            y += self.bias.data
        return y

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, int8 weights, per-channel scales"


class FusedLinearReLU(InferenceOnly):
    """y = max(x·W + b, 0) computed in one output buffer: the matmul writes it, the bias add and
    the ReLU update it in place. Unfused, Linear and ReLU allocate two outputs and a mask and
    pass over the activation three times."""

    def __init__(self, linear: Linear):
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias

    output_shape = Linear.output_shape

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.check_forward_input(x)
        y = ops.matmul(as_float(x, self.weight.dtype), self.weight.data)
        if self.bias is not None:
            y += self.bias.data
        return np.maximum(y, 0, out=y)

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, fused bias + ReLU"
