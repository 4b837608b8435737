"""How shapes flow through every built-in layer made of other layers: a container flow each.

A layer that computes by itself states its own shape contract (``Module.output_shape``, which
its ``forward`` also checks its input with), so no rule restates it here; a container checks its
input with its own ``output_shape`` and hands shapes to its children in forward order.

Notation: ``x`` is the input shape; B batch, S sequence length, d model width.
"""

from __future__ import annotations

from ..nn import (
    GPT,
    MultiHeadAttention,
    Residual,
    Sequential,
    TransformerBlock,
)
from .walk import Shape, register_container

# -- layers that compute by themselves: each states its shape in Module.output_shape, which its
# forward checks its input with; the walk calls it (tinyprof.shapes.walk). Nothing to restate.


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
    layer.output_shape(x)   # the layer's own check
    q, k, v = (visit(proj, x) for proj in (layer.q_proj, layer.k_proj, layer.v_proj))
    return visit(layer.out_proj, visit.join(q, k, v))


@register_container(GPT)
def gpt_flow(model: GPT, ids: Shape, visit) -> Shape:
    """ids (B, S) → wte(ids) + wpe(positions 0..S−1) → blocks → ln_f → tied head."""
    model.output_shape(ids)   # the model's own check
    h = visit.join(visit(model.wte, ids), visit(model.wpe, (ids[1],)))
    for block in model.h:
        h = visit(block, h)
    return visit(model.head, visit(model.ln_f, h))
