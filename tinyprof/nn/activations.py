"""Elementwise activations: ReLU and GELU (tanh approximation, as in GPT-2)."""

from __future__ import annotations

import numpy as np

from .checks import floating
from .module import Module

_GELU_C = float(np.sqrt(2.0 / np.pi))  # a Python float keeps float32 math float32


class ReLU(Module):
    """y = max(x, 0); dy/dx = 1 where x > 0 else 0 (a NaN input stays NaN, as in PyTorch).

    Saves the boolean mask x > 0 for backward: one byte per element whatever the dtype.
    """

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Elementwise: the output has the input's shape."""
        return tuple(input_shape)

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.check_forward_input(x)
        self._mask = x > 0
        return np.maximum(x, 0)

    def backward(self, grad: np.ndarray) -> np.ndarray:
        (mask,) = self.pop_saved("_mask")
        self.check_grad(grad, mask.shape)
        return grad * mask


class GELU(Module):
    """y = ½·x·(1 + tanh(c·(x + 0.044715·x³))), c = √(2/π).

    dy/dx = ½·(1 + t) + ½·x·(1 − t²)·c·(1 + 3·0.044715·x²), with t the tanh above.
    """

    output_shape = ReLU.output_shape

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.check_forward_input(x)
        floating(self.describe(), "its input", x)   # tanh of ints would be cast back to ints
        self._x = x
        self._t = np.tanh(_GELU_C * (x + 0.044715 * x**3))
        return (0.5 * x * (1.0 + self._t)).astype(x.dtype, copy=False)

    def backward(self, grad: np.ndarray) -> np.ndarray:
        x, t = self.pop_saved("_x", "_t")
        self.check_grad(grad, x.shape)
        dtanh = (1.0 - t * t) * _GELU_C * (1.0 + 3 * 0.044715 * x * x)
        return (grad * (0.5 * (1.0 + t) + 0.5 * x * dtanh)).astype(grad.dtype, copy=False)
