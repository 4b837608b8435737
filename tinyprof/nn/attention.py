"""Multi-head self-attention, optionally causal."""

from __future__ import annotations

import numpy as np

from .. import ops
from .checks import positive_int
from .linear import Linear
from .module import Module, ShapeError


def softmax(scores: np.ndarray) -> np.ndarray:
    """exp(s − max s) / Σ exp(s − max s) over the last axis."""
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


class MultiHeadAttention(Module):
    """softmax(Q·Kᵀ/√d_head [+ causal mask])·V over ``n_heads`` heads, then an output projection.

    Parameters: four d×d projections with biases, 4·d² + 4·d. Forward FLOPs on (B, S, d):
    projections 4·2·B·S·d², scores Q·Kᵀ 2·B·S²·d, and A·V 2·B·S²·d. The causal mask is applied
    to a full S×S score matrix, so masked positions are computed (and counted), then discarded.
    """

    def __init__(self, d_model: int, n_heads: int, causal: bool = False, bias: bool = True, *,
                 dtype=np.float32, shape_only: bool = False, rng=None):
        d_model = positive_int("MultiHeadAttention", "d_model", d_model)
        n_heads = positive_int("MultiHeadAttention", "n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"MultiHeadAttention: d_model ({d_model}) must be divisible by "
                             f"n_heads ({n_heads})")
        self.d_model, self.n_heads, self.causal = d_model, n_heads, causal
        self.head_dim = d_model // n_heads
        make = dict(bias=bias, dtype=dtype, shape_only=shape_only, rng=rng)
        self.q_proj = Linear(d_model, d_model, **make)
        self.k_proj = Linear(d_model, d_model, **make)
        self.v_proj = Linear(d_model, d_model, **make)
        self.out_proj = Linear(d_model, d_model, **make)

    def _split(self, x: np.ndarray) -> np.ndarray:
        b, s, _ = x.shape
        return x.reshape(b, s, self.n_heads, self.head_dim).transpose(0, 2, 1, 3)

    def _merge(self, x: np.ndarray) -> np.ndarray:
        b, _, s, _ = x.shape
        return x.transpose(0, 2, 1, 3).reshape(b, s, self.d_model)

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """(B, S, d) → (B, S, d). Its projections are layers of their own: the shape walk
        follows them through the container flow in tinyprof.shapes, after this check."""
        self.check_shape(input_shape, f"(batch, seq, {self.d_model})",
                         len(input_shape) == 3 and input_shape[-1] == self.d_model)
        return tuple(input_shape)

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.check_runnable()
        self.check_forward_input(x)
        if x.shape[1] == 0:
            raise ShapeError(f"{self.describe()}: the sequence is empty (input {x.shape}); "
                             "attention needs at least one position")
        scale = float(1.0 / np.sqrt(self.head_dim))
        q = self._split(self.q_proj(x))
        k = self._split(self.k_proj(x))
        v = self._split(self.v_proj(x))
        scores = ops.matmul(q, k.transpose(0, 1, 3, 2)) * scale   # (B, H, S, S)
        if self.causal:
            s = scores.shape[-1]
            scores = np.where(np.triu(np.ones((s, s), dtype=bool), 1), -np.inf, scores)
        attn = softmax(scores).astype(q.dtype, copy=False)
        self._q, self._k, self._v, self._attn, self._scale = q, k, v, attn, scale
        return self.out_proj(self._merge(ops.matmul(attn, v)))

    def backward(self, grad: np.ndarray) -> np.ndarray:
        q, k, v, attn, scale = self.pop_saved("_q", "_k", "_v", "_attn", "_scale")
        dctx = self._split(self.out_proj.backward(grad))
        dattn = ops.matmul(dctx, v.transpose(0, 1, 3, 2))
        dv = ops.matmul(attn.transpose(0, 1, 3, 2), dctx)
        dscores = attn * (dattn - (dattn * attn).sum(axis=-1, keepdims=True)) * scale
        dq = ops.matmul(dscores, k)
        dk = ops.matmul(dscores.transpose(0, 1, 3, 2), q)
        dx = self.q_proj.backward(self._merge(dq))
        dx += self.k_proj.backward(self._merge(dk))
        dx += self.v_proj.backward(self._merge(dv))
        return dx

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}"
