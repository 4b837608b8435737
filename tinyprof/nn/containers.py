"""Containers and shape plumbing: Sequential, Residual, Flatten."""

from __future__ import annotations

import math

import numpy as np

from .module import Module, ShapeError


class Sequential(Module):
    """Layers applied in order; backward runs them in reverse (the chain rule)."""

    def __init__(self, *layers: Module):
        self.layers = list(layers)
        self.set_names()

    def forward(self, x: np.ndarray) -> np.ndarray:
        for layer in self.layers:
            x = layer(x)
        return x

    def backward(self, grad: np.ndarray) -> np.ndarray:
        for layer in reversed(self.layers):
            grad = layer.backward(grad)
        return grad

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, index: int) -> Module:
        return self.layers[index]


class Residual(Module):
    """y = x + f(x); dy/dx = 1 + f'(x), so backward adds the skip path's gradient."""

    def __init__(self, fn: Module):
        self.fn = fn

    def forward(self, x: np.ndarray) -> np.ndarray:
        out = self.fn(x)
        if np.shape(out) != np.shape(x):
            raise ShapeError(f"{self.describe()}: y = x + f(x) needs f to keep the input's "
                             f"shape, but {self.fn.describe()} maps {np.shape(x)} to "
                             f"{np.shape(out)}")
        return x + out

    def backward(self, grad: np.ndarray) -> np.ndarray:
        return grad + self.fn.backward(grad)


class Flatten(Module):
    """(N, d1, d2, ...) → (N, d1·d2·...); backward reshapes the gradient back."""

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """(N, d1, d2, ...) → (N, d1·d2·...)."""
        self.check_shape(input_shape, "(N, ...)", len(input_shape) >= 1)
        return (input_shape[0], math.prod(input_shape[1:]))

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.check_forward_input(x)
        self._shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, grad: np.ndarray) -> np.ndarray:
        (shape,) = self.pop_saved("_shape")
        self.check_grad(grad, (shape[0], int(np.prod(shape[1:], dtype=np.int64))))
        return grad.reshape(shape)
