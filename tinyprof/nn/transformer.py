"""The pieces of a GPT-style decoder: a pre-norm block and a language-model head tied to the
token embedding."""

from __future__ import annotations

import numpy as np

from .. import ops
from .activations import GELU
from .attention import MultiHeadAttention
from .containers import Sequential
from .linear import Linear
from .module import Module, Parameter, as_float
from .norm import LayerNorm


class TransformerBlock(Module):
    """x + attn(ln_1(x)), then x + mlp(ln_2(x)) with mlp = Linear(d, 4d) → GELU → Linear(4d, d).

    Parameters: attention 4d² + 4d, MLP 8d² + 5d, two LayerNorms 4d; in all 12d² + 13d.
    """

    def __init__(self, d_model: int, n_heads: int, causal: bool = True, mlp_ratio: int = 4, *,
                 dtype=np.float32, shape_only: bool = False, rng=None):
        make = dict(dtype=dtype, shape_only=shape_only, rng=rng)
        self.ln_1 = LayerNorm(d_model, **make)
        self.attn = MultiHeadAttention(d_model, n_heads, causal=causal, **make)
        self.ln_2 = LayerNorm(d_model, **make)
        self.mlp = Sequential(Linear(d_model, mlp_ratio * d_model, **make), GELU(),
                              Linear(mlp_ratio * d_model, d_model, **make))

    def forward(self, x: np.ndarray) -> np.ndarray:
        x = as_float(x, self.ln_1.weight.dtype)   # the residual stream stays in the block's dtype
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def backward(self, grad: np.ndarray) -> np.ndarray:
        grad = grad + self.ln_2.backward(self.mlp.backward(grad))
        return grad + self.ln_1.backward(self.attn.backward(grad))


class TiedLMHead(Module):
    """logits = h·Eᵀ with E the token-embedding table (V, d): no parameters of its own.

    Forward FLOPs 2·B·S·d·V; backward dh = dlogits·E and dE += dlogitsᵀ·h, the same again each.
    """

    def __init__(self, embedding_weight: Parameter):
        self.weight = embedding_weight

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """(..., d) → logits (..., V), with the token table E of shape (V, d)."""
        vocab, d = self.weight.shape
        self.check_shape(input_shape, f"(..., {d})", len(input_shape) >= 1 and input_shape[-1] == d)
        return (*input_shape[:-1], vocab)

    def forward(self, h: np.ndarray) -> np.ndarray:
        self.check_runnable()
        self.check_forward_input(h)
        self._h = h
        return ops.matmul(h, self.weight.data.T)

    def backward(self, grad: np.ndarray) -> np.ndarray:
        d = self.weight.shape[1]
        g2 = grad.reshape(-1, grad.shape[-1])
        (h,) = self.pop_saved("_h")
        self.weight.accumulate_grad(ops.matmul(g2.T, h.reshape(-1, d)))
        return ops.matmul(grad, self.weight.data)
