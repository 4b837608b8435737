"""The FLOP formula of every built-in layer, each a small function of shapes.

Convention: a FLOP is one add or one multiply (a comparison, exp or tanh also counts as one);
a multiply-accumulate is 2 FLOPs. ``matmul`` counts the matrix multiplies; ``elementwise``
counts the rest, with the per-element costs stated in each docstring. Backward counts are the
matmuls the layer's own ``backward`` really runs: ``grad_input`` (gradients of activations)
and ``grad_weight`` (gradients of parameters).

Shapes: ``x`` is the input shape and ``y`` the output shape, both from the shared shape walk
(:mod:`tinyprof.shapes`, which also checks them); B batch, S sequence length, d model width,
rows = the product of all leading dimensions of a Linear's input.
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
    MultiHeadAttention,
    QuantizedLinear,
    ReLU,
    Residual,
    Sequential,
    TiedLMHead,
    TransformerBlock,
)
from ..ops import mm_flops
from ..shapes import Shape, numel
from .registry import LayerFlops, no_own_work, register_flops

# -- layers that do their own work ------------------------------------------------------------


@register_flops(Linear)
def linear_flops(layer: Linear, x: Shape, y: Shape) -> LayerFlops:
    """y = x·W + b on (..., in): 2·rows·in·out FLOPs, plus 1 per output element for the bias.

    Backward: dX = dY·Wᵀ and dW = Xᵀ·dY, 2·rows·in·out each (db is a sum, not a matmul).
    """
    mm = mm_flops(numel(x[:-1]), layer.in_features, layer.out_features)
    bias = numel(y) if layer.bias is not None else 0
    return LayerFlops(matmul=mm, elementwise=bias, grad_input=mm, grad_weight=mm,
                      note="2·rows·in·out")


@register_flops(Conv2d)
def conv2d_flops(layer: Conv2d, x: Shape, y: Shape) -> LayerFlops:
    """(N, C, H, W) → (N, O, Ho, Wo): 2·N·O·Ho·Wo·(C/groups)·kh·kw FLOPs, +1 per output for bias.

    Ho, Wo = ⌊(H + 2·pad − dil·(k − 1) − 1)/stride⌋ + 1: padded positions are multiplied like
    any other (im2col fills them with zeros). Backward: dX (Wᵀ·dY, then col2im) and dW
    (dY·colsᵀ) cost the same as the forward each.
    """
    kh, kw = layer.kernel_size
    # im2col: (N·Ho·Wo) rows of (C/groups)·kh·kw patch values times O filters
    mm = mm_flops(numel(y) // layer.out_channels, (layer.in_channels // layer.groups) * kh * kw,
                  layer.out_channels)
    bias = numel(y) if layer.bias is not None else 0
    return LayerFlops(matmul=mm, elementwise=bias, grad_input=mm, grad_weight=mm,
                      note="2·N·O·Ho·Wo·(C/g)·kh·kw")


@register_flops(ReLU)
def relu_flops(layer: ReLU, x: Shape, y: Shape) -> LayerFlops:
    """max(x, 0): 1 FLOP (a comparison) per element; no matmul forward or backward."""
    return LayerFlops(elementwise=numel(x), grad_input=0, grad_weight=0, note="1 per element")


def _inference_linear(layer, x: Shape, y: Shape, note: str) -> LayerFlops:
    """2·rows·in·out matmul FLOPs and 2 elementwise FLOPs per output (1 without a bias)."""
    extra = numel(y) * (2 if layer.bias is not None else 1)
    return LayerFlops(matmul=mm_flops(numel(x[:-1]), layer.in_features, layer.out_features),
                      elementwise=extra, note=note)


@register_flops(QuantizedLinear)
def quantized_linear_flops(layer: QuantizedLinear, x: Shape, y: Shape) -> LayerFlops:
    """(x·W_q)·s + b: 2·rows·in·out matmul FLOPs, plus 1 per output for the scale and 1 for the
    bias. Inference only: no backward counts."""
    return _inference_linear(layer, x, y, "2·rows·in·out, int8 weights")


@register_flops(FusedLinearReLU)
def fused_linear_relu_flops(layer: FusedLinearReLU, x: Shape, y: Shape) -> LayerFlops:
    """max(x·W + b, 0): 2·rows·in·out matmul FLOPs, plus 1 per output for the bias and 1 for
    the ReLU's comparison, as Linear followed by ReLU. Inference only: no backward counts."""
    return _inference_linear(layer, x, y, "2·rows·in·out, bias and ReLU fused")


GELU_FLOPS_PER_ELEMENT = 9


@register_flops(GELU)
def gelu_flops(layer: GELU, x: Shape, y: Shape) -> LayerFlops:
    """½·x·(1 + tanh(c·(x + 0.044715·x³))): 9 FLOPs per element.

    x³ (2), ·0.044715 (1), x + (1), c· (1), tanh (1), 1 + (1), ½·x (1), ·(1 + t) (1).
    """
    return LayerFlops(elementwise=GELU_FLOPS_PER_ELEMENT * numel(x), grad_input=0,
                      grad_weight=0, note="9 per element")


LAYERNORM_FLOPS_PER_ELEMENT = 7
LAYERNORM_FLOPS_PER_ROW = 5


@register_flops(LayerNorm)
def layernorm_flops(layer: LayerNorm, x: Shape, y: Shape) -> LayerFlops:
    """(x − mean)/√(var + eps)·γ + β over the last axis: 7 FLOPs per element + 5 per row.

    Per element: Σx (1), x − mean (1), square (1), Σ for var (1), ·rstd (1), ·γ (1), + β (1).
    Per row: mean /d (1), var /d (1), + eps (1), √ (1), 1/· (1). No matmul.
    """
    work = LAYERNORM_FLOPS_PER_ELEMENT * numel(x) + LAYERNORM_FLOPS_PER_ROW * numel(x[:-1])
    return LayerFlops(elementwise=work, grad_input=0, grad_weight=0,
                      note="7 per element + 5 per row")


@register_flops(Embedding)
def embedding_flops(layer: Embedding, x: Shape, y: Shape) -> LayerFlops:
    """Row lookup W[ids]: 0 FLOPs. Backward scatters dY into dW (adds, no matmul); ids get none."""
    return LayerFlops(grad_input=0, grad_weight=0, note="lookup")


@register_flops(Flatten)
def flatten_flops(layer: Flatten, x: Shape, y: Shape) -> LayerFlops:
    """(N, d1, d2, ...) → (N, d1·d2·...): a reshape, 0 FLOPs."""
    return LayerFlops(grad_input=0, grad_weight=0, note="reshape")


@register_flops(TiedLMHead)
def tied_lm_head_flops(layer: TiedLMHead, x: Shape, y: Shape) -> LayerFlops:
    """logits = h·Eᵀ, E of shape (V, d): 2·rows·d·V FLOPs, no bias.

    Backward: dh = dlogits·E and dE = dlogitsᵀ·h, 2·rows·d·V each.
    """
    vocab, d = layer.weight.shape
    mm = mm_flops(numel(x[:-1]), d, vocab)
    return LayerFlops(matmul=mm, grad_input=mm, grad_weight=mm, note="2·rows·d·V")


# -- layers made of other layers: their own work only (the children have rows of their own) ---

SOFTMAX_FLOPS_PER_ELEMENT = 5


@register_flops(MultiHeadAttention)
def attention_flops(layer: MultiHeadAttention, x: Shape, y: Shape) -> LayerFlops:
    """On (B, S, d) with H heads: the four projections are Linear layers (their own rows);
    the attention itself is Q·Kᵀ, 2·B·S²·d, and A·V, 2·B·S²·d, so 4·B·S²·d FLOPs.

    Elementwise, per score (B·H·S² of them): ·1/√d_head (1) + softmax (5: max, −, exp, Σ, /).
    A causal mask is applied to the full S×S scores, so masked scores are computed and counted.
    Backward: dA = dC·Vᵀ, dV = Aᵀ·dC, dQ = dS·K, dK = dSᵀ·Q, 2·B·S²·d each, 8·B·S²·d in all.
    """
    b, s, d = x
    scores_and_av = 2 * mm_flops(b * s, d, s)   # QKᵀ and AV, summed over the heads
    per_score = 1 + SOFTMAX_FLOPS_PER_ELEMENT
    mask = ", causal (full S×S computed)" if layer.causal else ""
    return LayerFlops(matmul=scores_and_av, elementwise=per_score * b * layer.n_heads * s * s,
                      grad_input=2 * scores_and_av, grad_weight=0,
                      note=f"QKᵀ + AV = 4·B·S²·d{mask}")


register_flops(Sequential)(no_own_work)


@register_flops(Residual)
def residual_flops(layer: Residual, x: Shape, y: Shape) -> LayerFlops:
    """x + f(x): 1 FLOP per element for the add."""
    return LayerFlops(elementwise=numel(y), grad_input=0, grad_weight=0, note="residual add")


@register_flops(TransformerBlock)
def transformer_block_flops(layer: TransformerBlock, x: Shape, y: Shape) -> LayerFlops:
    """x + attn(ln_1(x)), then x + mlp(ln_2(x)): two residual adds, 1 FLOP per element each."""
    return LayerFlops(elementwise=2 * numel(y), grad_input=0, grad_weight=0,
                      note="two residual adds")


@register_flops(GPT)
def gpt_flops(layer: GPT, x: Shape, y: Shape) -> LayerFlops:
    """Token ids (B, S) → logits (B, S, V): wte(ids) + wpe(positions), 1 FLOP per element of
    the (B, S, d) sum; the blocks, ln_f and the tied head have rows of their own."""
    batch, seq = x
    return LayerFlops(elementwise=batch * seq * layer.config.d_model, grad_input=0,
                      grad_weight=0, note="token + position embedding add")
