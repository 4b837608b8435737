"""Builders for the models every chapter profiles: an MLP, a small CNN and GPT-style
transformers (GPT-2 small to XL, or any configuration), and :func:`random_input` for any model.

:class:`GPT` itself is a layer (:mod:`tinyprof.nn.gpt`); it is re-exported here.

Every builder takes ``dtype`` (float32 by default) and ``shape_only=True``, which allocates no
weight arrays, so even GPT-2 XL (1.56 B parameters) can be counted in milliseconds.
"""

from __future__ import annotations

import numpy as np

from ..nn import (
    GELU,
    GPT,
    Conv2d,
    Embedding,
    Flatten,
    GPTConfig,
    Linear,
    Module,
    ReLU,
    Sequential,
)
from ..nn.checks import positive_int
from ..nn.module import ShapeError

__all__ = ["GPT", "GPT2_SIZES", "GPTConfig", "gpt2", "gpt_part", "mlp", "random_input",
           "small_cnn"]

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


GPT2_SIZES = {
    "small": GPTConfig(d_model=768, n_layer=12, n_head=12),
    "medium": GPTConfig(d_model=1024, n_layer=24, n_head=16),
    "large": GPTConfig(d_model=1280, n_layer=36, n_head=20),
    "xl": GPTConfig(d_model=1600, n_layer=48, n_head=25),
}


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


def random_input(model: Module, shape, seed: int = 0) -> np.ndarray:
    """A seeded input of ``shape`` for ``model``: token ids in [0, vocabulary) when its first
    layer is an Embedding, otherwise standard normal values in the model's dtype."""
    rng = np.random.default_rng(seed)
    first = next((m for _, m in model.named_modules() if not list(m.children())), model)
    if isinstance(first, Embedding):
        return rng.integers(0, first.num_embeddings, size=tuple(shape))
    return rng.standard_normal(tuple(shape)).astype(model.dtype)
