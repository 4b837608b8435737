"""FLOP formulas of torch's aten operators: each a small pure function of one traced call's shapes.

As in ``torch/utils/flop_counter.py`` a formula is registered against the operator it describes
and the counting machinery (:mod:`tinyprof.flops.torch_counter`) only looks it up; unlike torch's,
each formula also states its backward from the call it sees: one product of the forward's size
for each operand that autograd needs a gradient of (a parameter's is a weight gradient, dW;
anything else's an input gradient, dX), and nothing for an operand that needs none.

The course's convention throughout: a FLOP is one add or one multiply, a multiply-accumulate 2.
``matmul`` holds the matrix products (what :func:`~tinyprof.pytorch.count_flops` adds up and
what ``FlopCounterMode`` counts); ``elementwise`` everything else (bias, activations, norms,
softmax, pooling), which :func:`~tinyprof.pytorch.flop_report` lists in its own column.

``torch.matmul``, ``F.linear``, ``torch.einsum``, ``nn.Linear``, the math backend of
``F.scaled_dot_product_attention`` and the cells of ``nn.GRU``/``nn.RNN`` reach aten as the
products below (mm, addmm, bmm, baddbmm), so they need no formula of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..shapes import numel
from .registry import LayerFlops

Shape = tuple[int, ...]

SOFTMAX_FLOPS_PER_ELEMENT = 5
NORM_FLOPS_PER_ELEMENT = 7
NORM_FLOPS_PER_ROW = 5


@dataclass(frozen=True)
class Call:
    """One traced call, as a formula sees it: the shapes of its tensor arguments (positional
    first, then keyword ones, in order), which of them require a gradient and which are (views
    of) parameters, the shape of its (first) output tensor, its other keyword arguments, the
    bytes per element of each input and of the output, and ``args``: its positional arguments
    with each tensor replaced by its shape (an aten formula reads ``stride`` or ``groups`` there
    by position, as the operator's schema orders them)."""

    inputs: tuple[Shape, ...]
    output: Shape
    input_grads: tuple[bool, ...] = ()
    input_params: tuple[bool, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    itemsizes: tuple[int, ...] = ()
    output_itemsize: int = 0
    args: tuple = ()

    @property
    def x(self) -> Shape:
        """The first input's shape."""
        return self.inputs[0] if self.inputs else ()

    @property
    def needs_input_grad(self) -> bool:
        """Does autograd compute a gradient for the first input (is dX computed)?"""
        return bool(self.input_grads and self.input_grads[0])

    def grads(self, *positions: int) -> tuple[int, int]:
        """How many of the tensor inputs at ``positions`` need an activation gradient (dX) and
        how many a parameter gradient (dW)."""
        flags = [(self.input_grads[i], self.input_params[i]) for i in positions
                 if i < len(self.input_grads)]
        return (sum(g and not p for g, p in flags), sum(g and p for g, p in flags))


def _products(mm: int, call: Call, *positions: int, note: str,
              elementwise: int = 0) -> LayerFlops:
    """A product of ``mm`` FLOPs whose backward is one more of the same size per operand (at
    ``positions`` among the tensor inputs) that needs a gradient."""
    dx, dw = call.grads(*positions)
    return LayerFlops(matmul=mm, elementwise=elementwise, grad_input=dx * mm,
                      grad_weight=dw * mm, note=note)


def mm_flops(call: Call) -> LayerFlops:
    """mm(A, B), A (M, K), B (K, N): 2·M·K·N. Backward: dA = dY·Bᵀ and dB = Aᵀ·dY, 2·M·K·N
    each, for the operand that needs it."""
    (m, k), n = call.inputs[0], call.inputs[1][-1]
    return _products(2 * m * k * n, call, 0, 1, note="2·M·K·N")


def addmm_flops(call: Call) -> LayerFlops:
    """addmm(b, A, B) = b + A·B (``nn.Linear``'s forward): 2·M·K·N, + M·N for the bias.
    Backward: as :func:`mm_flops` (db is a sum, not a product)."""
    (m, k), n = call.inputs[1], call.inputs[2][-1]
    return _products(2 * m * k * n, call, 1, 2, note="2·M·K·N + bias",
                     elementwise=m * n)


def bmm_flops(call: Call) -> LayerFlops:
    """bmm(A, B), A (batch, M, K), B (batch, K, N): 2·batch·M·K·N; backward as mm's."""
    (batch, m, k), n = call.inputs[0], call.inputs[1][-1]
    return _products(2 * batch * m * k * n, call, 0, 1, note="2·batch·M·K·N")


def baddbmm_flops(call: Call) -> LayerFlops:
    """baddbmm(c, A, B) = β·c + α·A·B, batched: 2·batch·M·K·N, + batch·M·N for the add."""
    (batch, m, k), n = call.inputs[1], call.inputs[2][-1]
    return _products(2 * batch * m * k * n, call, 1, 2, note="2·batch·M·K·N + add",
                     elementwise=batch * m * n)


def mv_flops(call: Call) -> LayerFlops:
    """mv(A, v), A (M, N): 2·M·N (``torch.utils.flop_counter`` has no formula: counts 0)."""
    return _products(2 * numel(call.inputs[0]), call, 0, 1, note="2·M·N")


def dot_flops(call: Call) -> LayerFlops:
    """dot(a, b) of length N: 2·N (``FlopCounterMode`` counts 0)."""
    return _products(2 * numel(call.inputs[0]), call, 0, 1, note="2·N")


def conv_flops(call: Call) -> LayerFlops:
    """convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    2·N·Π(w)·Π(spatial) FLOPs, w = ``(O, C/g, *k)`` and the output's positions for a convolution,
    w = ``(C, O/g, *k)`` and the input's positions for a transposed one (each input pixel is
    spread over k·O/g outputs). For a plain conv that is 2·N·O·Π(out)·(C/g)·Π(k), the output
    size holding stride, padding and dilation, ⌊(L + 2·pad − dil·(k − 1) − 1)/stride⌋ + 1;
    + 1 per output for the bias. Backward: dX and dW cost the forward each. (torch's
    FlopCounterMode counts a grouped conv's dW as if groups = 1: g × this.)"""
    x, w = call.inputs[0], call.inputs[1]
    transposed = bool(call.args[6])
    spatial = (x if transposed else call.output)[2:]
    mm = 2 * x[0] * numel(w) * numel(spatial)
    bias = numel(call.output) if call.args[2] is not None else 0
    return _products(mm, call, 0, 1, note="2·N·Π(w)·Π(" + ("in" if transposed else "out") + ")",
                     elementwise=bias)


def sdpa_flops(call: Call) -> LayerFlops:
    """A fused scaled-dot-product-attention kernel, softmax(Q·Kᵀ·scale + mask)·V with Q
    (..., L, E), K (..., S, E), V (..., S, Ev): Q·Kᵀ is 2·Π(...)·L·S·E and A·V 2·Π(...)·L·S·Ev,
    over all L×S scores also when causal (as torch's formulas count). Elementwise per score:
    scale 1, softmax 5. Backward: dA = dO·Vᵀ (when Q or K needs a gradient), dV = Aᵀ·dO, dQ =
    dS·K and dK = dSᵀ·Q, each for the operand that needs it (all of them dX: no weights)."""
    q, k, v = call.inputs[:3]
    batch, length, width = numel(q[:-2]), q[-2], q[-1]
    source, value_width = k[-2], v[-1]
    scores_mm = 2 * batch * length * source * width
    values_mm = 2 * batch * length * source * value_width
    gq, gk, gv = (tuple(call.input_grads[:3]) + (False,) * 3)[:3]
    grad_input = (values_mm if gq or gk else 0) + (values_mm if gv else 0) + \
        (scores_mm if gq else 0) + (scores_mm if gk else 0)
    return LayerFlops(matmul=scores_mm + values_mm,
                      elementwise=(1 + SOFTMAX_FLOPS_PER_ELEMENT) * batch * length * source,
                      grad_input=grad_input, grad_weight=0, note="QKᵀ + AV")


def rnn_layer_flops(call: Call) -> LayerFlops:
    """One layer, one direction of a fused LSTM (``mkldnn_rnn_layer``: x (T, N, I), W_ih
    (G·H, I), W_hh (G·H, H), G = 4 gates): per step x·W_ihᵀ, 2·N·I·G·H, and h·W_hhᵀ,
    2·N·H·G·H. Backward: dX through W_ih when x needs it; dh through W_hh for the T − 1
    earlier steps (and h₀ when it needs it) whenever anything upstream needs a gradient; dW_ih
    and dW_hh over all T steps. Elementwise: the gates, 10·N·G·H/4 per step (σ, tanh, c, h)."""
    x, w_ih, w_hh = call.inputs[:3]
    steps, batch = x[0], x[1]
    gates, hidden = w_hh
    ih = 2 * steps * batch * w_ih[1] * gates
    hh_step = 2 * batch * hidden * gates
    gx, g_ih, g_hh = (tuple(call.input_grads[:3]) + (False,) * 3)[:3]
    h0_grad = len(call.input_grads) > 5 and call.input_grads[5]
    anything = gx or g_ih or g_hh or h0_grad
    recurrence = hh_step * ((steps - 1) + (1 if h0_grad else 0)) if anything else 0
    return LayerFlops(matmul=ih + steps * hh_step, elementwise=10 * steps * batch * hidden,
                      grad_input=(ih if gx else 0) + recurrence,
                      grad_weight=(ih if g_ih else 0) + (steps * hh_step if g_hh else 0),
                      note="T·(x·W_ihᵀ + h·W_hhᵀ)")


# -- elementwise work (no products: matmul 0, backward 0) -------------------------------------

def _elementwise(flops: int, note: str) -> LayerFlops:
    return LayerFlops(elementwise=flops, grad_input=0, grad_weight=0, note=note)


def per_element(cost: int, note: str, of: str = "output") -> Callable[[Call], LayerFlops]:
    """``cost`` FLOPs per element of the output (a pointwise operator) or, with
    ``of="input"``, of the input (a reduction, a softmax, an adaptive pool)."""
    def formula(call: Call) -> LayerFlops:
        return _elementwise(cost * numel(call.output if of == "output" else call.x), note)
    formula.__doc__ = f"{note}: {cost} FLOP(s) per {of} element; no products."
    return formula


def gelu_flops(call: Call) -> LayerFlops:
    """Exact GELU ½·x·(1 + erf(x/√2)): 5 per element; the tanh approximation: 9."""
    per = 9 if call.kwargs.get("approximate", "none") == "tanh" else 5
    return _elementwise(per * numel(call.output), f"gelu: {per} per element")


def layer_norm_flops(call: Call) -> LayerFlops:
    """native_layer_norm(x, normalized_shape, γ, β, eps), (x − mean)/√(var + eps)·γ + β: 7
    FLOPs per element + 5 per row (as tinyprof's numpy LayerNorm)."""
    x = call.x
    rows = numel(x[:len(x) - len(call.args[1])])
    return _elementwise(NORM_FLOPS_PER_ELEMENT * numel(x) + NORM_FLOPS_PER_ROW * rows,
                        "7 per element + 5 per row")


def pool_flops(call: Call) -> LayerFlops:
    """Max or average pooling with a k₁×k₂ window: Π(k) FLOPs per output element."""
    kernel = call.args[1] if len(call.args) > 1 else ()
    size = numel(kernel) if isinstance(kernel, (list, tuple)) else int(kernel)
    dims = len(call.output) - 2
    if isinstance(kernel, (list, tuple)) and len(kernel) == 1:
        size = kernel[0] ** dims
    return _elementwise(size * numel(call.output), f"{size} per output")


def builtin_op_formulas() -> dict[Any, Callable[[Call], LayerFlops]]:
    """aten operator (``torch.ops.aten.*``, an OpOverloadPacket) → formula, for torch's own."""
    import torch

    aten = torch.ops.aten
    products = {aten.mm: mm_flops, aten.addmm: addmm_flops, aten.bmm: bmm_flops,
                aten.baddbmm: baddbmm_flops, aten.mv: mv_flops, aten.dot: dot_flops,
                aten.vdot: dot_flops, aten.convolution: conv_flops,
                aten._convolution: conv_flops,
                aten._scaled_dot_product_flash_attention_for_cpu: sdpa_flops,
                aten._scaled_dot_product_flash_attention: sdpa_flops,
                aten._scaled_dot_product_efficient_attention: sdpa_flops,
                aten._scaled_dot_product_cudnn_attention: sdpa_flops,
                aten.mkldnn_rnn_layer: rnn_layer_flops}
    elementwise = {
        aten.gelu: gelu_flops, aten.native_layer_norm: layer_norm_flops,
        aten.native_group_norm: per_element(NORM_FLOPS_PER_ELEMENT, "group norm", "input"),
        aten._softmax: per_element(SOFTMAX_FLOPS_PER_ELEMENT, "softmax", "input"),
        aten._log_softmax: per_element(SOFTMAX_FLOPS_PER_ELEMENT, "log-softmax", "input"),
        aten.silu: per_element(4, "x·σ(x)"), aten.sigmoid: per_element(3, "1/(1 + exp(−x))"),
        aten.native_dropout: per_element(2, "mask and rescale"),
        aten.max_pool2d_with_indices: pool_flops, aten.max_pool1d: pool_flops,
        aten.max_pool3d_with_indices: pool_flops, aten.avg_pool2d: pool_flops,
        aten.avg_pool1d: pool_flops, aten.avg_pool3d: pool_flops,
        aten._adaptive_avg_pool2d: per_element(1, "adaptive average", "input"),
        aten._adaptive_avg_pool3d: per_element(1, "adaptive average", "input"),
        aten.mean: per_element(1, "mean", "input"), aten.sum: per_element(1, "sum", "input"),
        aten.amax: per_element(1, "max", "input"),
        aten.var_mean: per_element(3, "variance", "input"),
        aten.nll_loss_forward: per_element(1, "pick"),
        aten.mse_loss: per_element(3, "(x − y)², mean", "input"),
    }
    for name in ("_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
                 "native_batch_norm"):
        elementwise[getattr(aten, name)] = per_element(NORM_FLOPS_PER_ELEMENT, "batch norm",
                                                       "input")
    return {**products, **elementwise}


#: aten operators that multiply matrices and have no formula here: traced, they raise
#: MissingFlopFormulaError instead of counting as 0 (names, resolved when torch is loaded).
UNCOUNTED_OPS = (
    "_trilinear", "addbmm", "addmv", "addr", "_int_mm", "_scaled_mm", "_weight_int8pack_mm",
    "_weight_int4pack_mm", "mkldnn_linear", "mkldnn_convolution", "_mkldnn_convolution",
    "cudnn_convolution", "cudnn_convolution_transpose", "miopen_convolution", "_cudnn_rnn",
    "miopen_rnn", "_efficient_attention_forward", "_flash_attention_forward",
    "_scaled_dot_product_fused_attention_overrideable", "_native_multi_head_attention",
    "_transformer_encoder_layer_fwd", "linalg_vecdot", "_thnn_fused_lstm_cell", "lstm",
    "gru", "rnn_tanh", "rnn_relu",
)


__all__ = ["Call", "UNCOUNTED_OPS", "addmm_flops", "baddbmm_flops", "bmm_flops",
           "builtin_op_formulas", "conv_flops", "dot_flops", "gelu_flops", "layer_norm_flops",
           "mm_flops", "mv_flops", "per_element", "numel", "rnn_layer_flops", "sdpa_flops"]
