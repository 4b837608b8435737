"""LayerNorm over the last axis."""

from __future__ import annotations

import numpy as np

from .checks import positive_float, positive_int
from .module import Module, as_float, new_parameter


class LayerNorm(Module):
    """y = (x − mean) / √(var + eps) · γ + β over the last axis (2·d parameters).

    Backward with x̂ the normalised input and r = 1/√(var + eps):
    dx = r/d · (d·ĝ − Σĝ − x̂·Σ(ĝ·x̂)), where ĝ = dy·γ; dγ = Σ dy·x̂; dβ = Σ dy.
    """

    def __init__(self, normalized_shape: int, eps: float = 1e-5, *,
                 dtype=np.float32, shape_only: bool = False, rng=None):
        self.normalized_shape = positive_int("LayerNorm", "normalized_shape", normalized_shape)
        # eps = 0 would divide 0 by 0 on a constant row
        self.eps = positive_float("LayerNorm", "eps", eps)
        self.weight = new_parameter((self.normalized_shape,), dtype, shape_only, rng, fill=1.0)
        self.bias = new_parameter((self.normalized_shape,), dtype, shape_only, rng, fill=0.0)

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """(..., d) → (..., d), normalised over the last axis."""
        d = self.normalized_shape
        self.check_shape(input_shape, f"(..., {d})", len(input_shape) >= 1 and input_shape[-1] == d)
        return tuple(input_shape)

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.check_runnable()
        self.check_forward_input(x)
        x = as_float(x, self.weight.dtype)
        mean = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        self._rstd = 1.0 / np.sqrt(var + self.eps)
        self._xhat = (x - mean) * self._rstd
        return self._xhat * self.weight.data + self.bias.data

    def backward(self, grad: np.ndarray) -> np.ndarray:
        d = self.normalized_shape
        xhat, rstd = self.pop_saved("_xhat", "_rstd")
        lead = tuple(range(grad.ndim - 1))
        self.weight.accumulate_grad((grad * xhat).sum(axis=lead))
        self.bias.accumulate_grad(grad.sum(axis=lead))
        ghat = grad * self.weight.data
        dx = (d * ghat - ghat.sum(axis=-1, keepdims=True)
              - xhat * (ghat * xhat).sum(axis=-1, keepdims=True))
        return (dx * rstd / d).astype(grad.dtype, copy=False)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}"
