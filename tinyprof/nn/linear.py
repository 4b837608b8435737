"""Linear: y = x W + b, with W of shape (in_features, out_features)."""

from __future__ import annotations

import numpy as np

from .. import ops
from .checks import positive_int
from .module import Module, as_float, new_parameter


class Linear(Module):
    """Fully connected layer over the last axis: y = x·W + b.

    Parameters: in·out weights + out biases. Forward FLOPs: 2·rows·in·out, where rows is the
    product of all leading dimensions. Backward: dX = dY·Wᵀ and dW = Xᵀ·dY, 2·rows·in·out each.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 dtype=np.float32, shape_only: bool = False, rng=None):
        self.in_features = positive_int("Linear", "in_features", in_features)
        self.out_features = positive_int("Linear", "out_features", out_features)
        bound = 1.0 / np.sqrt(in_features)
        self.weight = new_parameter((in_features, out_features), dtype, shape_only, rng, bound)
        self.bias = (new_parameter((out_features,), dtype, shape_only, rng, bound)
                     if bias else None)
        self._x: np.ndarray | None = None

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """(..., in) → (..., out)."""
        x = tuple(input_shape)
        self.check_shape(x, f"(..., {self.in_features})",
                         len(x) >= 1 and x[-1] == self.in_features)
        return (*x[:-1], self.out_features)

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.check_runnable()
        self.check_forward_input(x)
        x = as_float(x, self.weight.dtype)
        self._x = x
        y = ops.matmul(x, self.weight.data)
        if self.bias is not None:
            y += self.bias.data
        return y

    def backward(self, grad: np.ndarray) -> np.ndarray:
        (x,) = self.pop_saved("_x")
        self.check_grad(grad, (*x.shape[:-1], self.out_features))
        x2 = x.reshape(-1, self.in_features)
        g2 = grad.reshape(-1, self.out_features)
        self.weight.accumulate_grad(ops.matmul(x2.T, g2))
        if self.bias is not None:
            self.bias.accumulate_grad(g2.sum(axis=0))
        return ops.matmul(grad, self.weight.data.T)

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"
