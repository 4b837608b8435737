"""Builders for the models every chapter profiles: an MLP, a small CNN and GPT-style
transformers (GPT-2 small to XL, or any configuration).

Every builder takes ``dtype`` (float32 by default) and ``shape_only=True``, which allocates no
weight arrays, so even GPT-2 XL (1.56 B parameters) can be counted in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .nn import (
    GELU,
    Conv2d,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    Module,
    ReLU,
    Sequential,
    TiedLMHead,
    TransformerBlock,
)
from .nn.checks import positive_int
from .nn.module import ShapeError

_ACTIVATIONS = {"relu": ReLU, "gelu": GELU}


def mlp(sizes=(784, 256, 128, 10), activation: str = "relu", *, dtype=np.float32,
        shape_only: bool = False, seed: int = 0) -> Sequential:
    """Linear(sizes[0], sizes[1]) → act → … → Linear(sizes[-2], sizes[-1]).

    Parameters: Σᵢ (sizes[i] + 1) · sizes[i+1].
    """
    if len(sizes) < 2:
        raise ValueError(f"mlp needs at least an input and an output size, got {sizes}")
    if activation not in _ACTIVATIONS:
        raise ValueError(f"mlp: unknown activation {activation!r}; "
                         f"choose from {sorted(_ACTIVATIONS)}")
    rng = np.random.default_rng(seed)
    layers: list[Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(Linear(fan_in, fan_out, dtype=dtype, shape_only=shape_only, rng=rng))
        if i < len(sizes) - 2:
            layers.append(_ACTIVATIONS[activation]())
    return Sequential(*layers)


def small_cnn(in_channels: int = 3, num_classes: int = 10, image_size: int = 32,
              channels=(16, 32, 64), *, dtype=np.float32, shape_only: bool = False,
              seed: int = 0) -> Sequential:
    """Conv 3×3 (stride 1) then 3×3 stride-2 convs, each with ReLU, then Flatten → Linear.

    Each stride-2 conv halves the image; the classifier sees channels[-1]·(image/2^(n−1))² values.
    """
    rng = np.random.default_rng(seed)
    make = dict(dtype=dtype, shape_only=shape_only, rng=rng)
    layers: list[Module] = []
    size, previous = image_size, in_channels
    for i, width in enumerate(channels):
        stride = 1 if i == 0 else 2
        layers += [Conv2d(previous, width, 3, stride=stride, padding=1, **make), ReLU()]
        size = (size + 2 - 3) // stride + 1
        previous = width
    layers += [Flatten(), Linear(previous * size * size, num_classes, **make)]
    return Sequential(*layers)


@dataclass(frozen=True)
class GPTConfig:
    """The shape of a GPT-style decoder."""

    vocab_size: int = 50257
    n_ctx: int = 1024
    d_model: int = 768
    n_layer: int = 12
    n_head: int = 12


GPT2_SIZES = {
    "small": GPTConfig(d_model=768, n_layer=12, n_head=12),
    "medium": GPTConfig(d_model=1024, n_layer=24, n_head=16),
    "large": GPTConfig(d_model=1280, n_layer=36, n_head=20),
    "xl": GPTConfig(d_model=1600, n_layer=48, n_head=25),
}


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

    def forward(self, ids: np.ndarray) -> np.ndarray:
        self.check_runnable()
        ids = np.asarray(ids)
        self.check_input(ids, f"(batch, seq ≤ {self.config.n_ctx}) of token ids",
                         ids.ndim == 2 and ids.shape[1] <= self.config.n_ctx)
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


def gpt2(size: str | None = None, *, vocab_size: int | None = None, n_ctx: int | None = None,
         d_model: int | None = None, n_layer: int | None = None, n_head: int | None = None,
         dtype=np.float32, shape_only: bool = False, seed: int = 0) -> GPT:
    """A GPT-2 of a named size ("small", "medium", "large", "xl") or a custom configuration.

    Keyword arguments override the named size (the default base is "small").
    GPT-2 small has 124,439,808 parameters: 497,759,232 bytes (498 MB) in float32.
    """
    if size is not None and size not in GPT2_SIZES:
        raise ValueError(f"gpt2: unknown size {size!r}; choose from {list(GPT2_SIZES)}")
    base = GPT2_SIZES[size or "small"]
    overrides = {k: positive_int("gpt2", k, v) for k, v in dict(
        vocab_size=vocab_size, n_ctx=n_ctx, d_model=d_model, n_layer=n_layer,
        n_head=n_head).items() if v is not None}
    config = GPTConfig(**{**base.__dict__, **overrides})
    if config.d_model % config.n_head:
        raise ShapeError(f"gpt2: d_model ({config.d_model}) must be divisible by n_head "
                         f"({config.n_head})")
    return GPT(config, dtype=dtype, shape_only=shape_only, seed=seed)


def gpt_part(parameter_name: str) -> str:
    """Which part of a GPT a parameter belongs to, from its dotted name: embeddings,
    attention, MLP or LayerNorm (for :func:`tinyprof.params.parameter_groups`)."""
    if parameter_name.startswith(("wte", "wpe")):
        return "embeddings"
    if ".attn." in parameter_name:
        return "attention"
    if ".mlp." in parameter_name:
        return "MLP"
    return "LayerNorm"
