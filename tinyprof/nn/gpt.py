"""A GPT-style decoder: token and position embeddings, pre-norm blocks, a tied LM head.

It lives with the layers (not with the model builders in :mod:`tinyprof.models`) because it is a
layer like any other to every analysis: the FLOP, memory and shape walks describe how shapes flow
through it, just as they do for :class:`~tinyprof.nn.TransformerBlock`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .embedding import Embedding
from .module import Module
from .norm import LayerNorm
from .transformer import TiedLMHead, TransformerBlock


@dataclass(frozen=True)
class GPTConfig:
    """The shape of a GPT-style decoder."""

    vocab_size: int = 50257
    n_ctx: int = 1024
    d_model: int = 768
    n_layer: int = 12
    n_head: int = 12


class GPT(Module):
    """Token + position embeddings → n_layer pre-norm blocks → LayerNorm → tied LM head.

    Parameters: V·d + n_ctx·d + n_layer·(12d² + 13d) + 2d (the head reuses the token table).
    Input: integer token ids (batch, seq) with seq ≤ n_ctx; output: logits (batch, seq, V).
    """

    def __init__(self, config: GPTConfig, *, dtype=np.float32, shape_only: bool = False,
                 seed: int = 0):
        self.config = config
        rng = np.random.default_rng(seed)
        make = dict(dtype=dtype, shape_only=shape_only, rng=rng)
        self.wte = Embedding(config.vocab_size, config.d_model, **make)
        self.wpe = Embedding(config.n_ctx, config.d_model, **make)
        self.h = [TransformerBlock(config.d_model, config.n_head, causal=True, **make)
                  for _ in range(config.n_layer)]
        self.ln_f = LayerNorm(config.d_model, **make)
        self.head = TiedLMHead(self.wte.weight)
        self.set_names()

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Token ids (B, S ≤ n_ctx) → logits (B, S, V). The blocks are layers of their own: the
        shape walk follows them through the container flow in tinyprof.shapes."""
        n_ctx = self.config.n_ctx
        self.check_shape(input_shape, f"(batch, seq ≤ {n_ctx}) of token ids",
                         len(input_shape) == 2 and input_shape[1] <= n_ctx)
        return (*input_shape, self.config.vocab_size)

    def forward(self, ids: np.ndarray) -> np.ndarray:
        self.check_runnable()
        ids = np.asarray(ids)
        self.check_forward_input(ids)
        positions = np.arange(ids.shape[1])
        x = self.wte(ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))

    def backward(self, grad: np.ndarray) -> None:
        grad = self.ln_f.backward(self.head.backward(grad))
        for block in reversed(self.h):
            grad = block.backward(grad)
        self.wpe.backward(grad.sum(axis=0))
        self.wte.backward(grad)
        return None

    def extra_repr(self) -> str:
        c = self.config
        return (f"vocab_size={c.vocab_size}, n_ctx={c.n_ctx}, d_model={c.d_model}, "
                f"n_layer={c.n_layer}, n_head={c.n_head}")
