"""How shapes flow through every built-in layer: a shape rule per layer that computes by itself,
a container flow per layer made of other layers. Each rule also checks its input shape.

Notation: ``x`` is the input shape; B batch, S sequence length, d model width.
"""

from __future__ import annotations

from ..nn import (
    GELU,
    GPT,
    Conv2d,
    Embedding,
    Flatten,
    FusedLinearReLU,
    LayerNorm,
    Linear,
    Module,
    MultiHeadAttention,
    QuantizedLinear,
    ReLU,
    Residual,
    Sequential,
    TiedLMHead,
    TransformerBlock,
)
from .walk import Shape, check_shape, numel, register_container, register_shape

# -- layers that compute by themselves -----------------------------------------------------------


@register_shape(Linear)
@register_shape(QuantizedLinear)
@register_shape(FusedLinearReLU)
def linear_shape(layer: Module, x: Shape) -> tuple[int, ...]:
    """(..., in) → (..., out)."""
    check_shape(layer, x, f"(..., {layer.in_features})",
                len(x) >= 1 and x[-1] == layer.in_features)
    return (*x[:-1], layer.out_features)


@register_shape(Conv2d)
def conv2d_shape(layer: Conv2d, x: Shape) -> tuple[int, ...]:
    """(N, C, H, W) → (N, O, Ho, Wo), Ho = ⌊(H + 2·pad − dil·(k − 1) − 1)/stride⌋ + 1."""
    check_shape(layer, x, f"(N, {layer.in_channels}, H, W)",
                len(x) == 4 and x[1] == layer.in_channels)
    return layer.output_shape(x)


@register_shape(ReLU)
@register_shape(GELU)
def elementwise_shape(layer: Module, x: Shape) -> tuple[int, ...]:
    """Elementwise: the output has the input's shape."""
    return x


@register_shape(LayerNorm)
def layernorm_shape(layer: LayerNorm, x: Shape) -> tuple[int, ...]:
    """(..., d) → (..., d), normalised over the last axis."""
    d = layer.normalized_shape
    check_shape(layer, x, f"(..., {d})", len(x) >= 1 and x[-1] == d)
    return x


@register_shape(Embedding)
def embedding_shape(layer: Embedding, ids: Shape) -> tuple[int, ...]:
    """Token ids (...) → vectors (..., embedding_dim)."""
    return (*ids, layer.embedding_dim)


@register_shape(Flatten)
def flatten_shape(layer: Flatten, x: Shape) -> tuple[int, ...]:
    """(N, d1, d2, ...) → (N, d1·d2·...)."""
    check_shape(layer, x, "(N, ...)", len(x) >= 1)
    return (x[0], numel(x[1:]))


@register_shape(TiedLMHead)
def tied_head_shape(layer: TiedLMHead, h: Shape) -> tuple[int, ...]:
    """(..., d) → logits (..., V), with the token table E of shape (V, d)."""
    vocab, d = layer.weight.shape
    check_shape(layer, h, f"(..., {d})", len(h) >= 1 and h[-1] == d)
    return (*h[:-1], vocab)


# -- layers made of other layers -----------------------------------------------------------------


@register_container(Sequential)
def sequential_flow(layer: Sequential, x: Shape, visit) -> Shape:
    """Each layer's output is the next one's input."""
    for child in layer.layers:
        x = visit(child, x)
    return x


@register_container(Residual)
def residual_flow(layer: Residual, x: Shape, visit) -> Shape:
    """x + f(x)."""
    return visit.join(x, visit(layer.fn, x))


@register_container(TransformerBlock)
def block_flow(layer: TransformerBlock, x: Shape, visit) -> Shape:
    """x + attn(ln_1(x)), then x + mlp(ln_2(x))."""
    x = visit.join(x, visit(layer.attn, visit(layer.ln_1, x)))
    return visit.join(x, visit(layer.mlp, visit(layer.ln_2, x)))


@register_container(MultiHeadAttention)
def attention_flow(layer: MultiHeadAttention, x: Shape, visit) -> Shape:
    """(B, S, d): the q, k and v projections of x, softmax(Q·Kᵀ/√d_head)·V (B, S, d), then the
    output projection."""
    check_shape(layer, x, f"(batch, seq, {layer.d_model})",
                len(x) == 3 and x[-1] == layer.d_model)
    q, k, v = (visit(proj, x) for proj in (layer.q_proj, layer.k_proj, layer.v_proj))
    return visit(layer.out_proj, visit.join(q, k, v))


@register_container(GPT)
def gpt_flow(model: GPT, ids: Shape, visit) -> Shape:
    """ids (B, S) → wte(ids) + wpe(positions 0..S−1) → blocks → ln_f → tied head."""
    n_ctx = model.config.n_ctx
    check_shape(model, ids, f"(batch, seq ≤ {n_ctx}) of token ids",
                len(ids) == 2 and ids[1] <= n_ctx)
    h = visit.join(visit(model.wte, ids), visit(model.wpe, (ids[1],)))
    for block in model.h:
        h = visit(block, h)
    return visit(model.head, visit(model.ln_f, h))
