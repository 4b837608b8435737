"""What each layer keeps for its backward pass: one formula per layer type.

In the style of the FLOP formulas, each formula is a small function of the input's shape and the
compute dtype, registered against the layer type it describes; :func:`activation_rows` walks a
model, passing shapes from layer to layer, and only looks formulas up:

* a **layer formula** ``formula(layer, shape, dtype) -> Saved`` for a layer that saves arrays
  (:func:`register_activation_formula`);
* a **container rule** ``rule(layer, shape, visit) -> output shape`` for a layer built from
  other layers, which hands shapes to its children with ``visit(child, shape)``
  (:func:`register_activation_container`).

A type with neither raises :class:`MissingActivationFormulaError`; nothing is silently 0.
Every formula states what the layer's ``forward`` really stores, so that the sum matches what
tracemalloc measures after a forward pass (:func:`tinyprof.memory.training_memory`).

Notation: n = number of elements of the input, b = bytes per element of the compute dtype
(4 for float32), B batch, S sequence length, d model width, H heads. A layer's saved input is
counted at the layer that saves it; a value nobody saves (a residual sum) costs nothing after
the forward pass. Token ids and targets are counted as int64 (numpy's default integer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..models import GPT
from ..nn import (
    GELU,
    Conv2d,
    CrossEntropyLoss,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    Module,
    MSELoss,
    MultiHeadAttention,
    ReLU,
    Residual,
    Sequential,
    ShapeError,
    TiedLMHead,
    TransformerBlock,
)
from ..nn.checks import input_shape as checked_shape
from ..table import Table
from ..units import format_bytes

Shape = tuple[int, ...]
INDEX_BYTES = np.dtype(np.int64).itemsize


class MissingActivationFormulaError(LookupError):
    """A layer type without an activation formula or container rule."""


@dataclass(frozen=True)
class Saved:
    """What one layer keeps for backward: its output shape, the bytes it saves and what they are."""

    output_shape: Shape
    nbytes: int = 0
    what: str = ""


@dataclass(frozen=True)
class ActivationRow:
    """One layer's line of the activation breakdown."""

    name: str
    type: str
    input_shape: Shape
    nbytes: int
    what: str


Visit = Callable[[Module, Shape], Shape]
LayerFormula = Callable[[Module, Shape, np.dtype], Saved]
ContainerRule = Callable[[Module, Shape, Visit], Shape]
LossFormula = Callable[[object, Shape, np.dtype], Saved]

ACTIVATION_FORMULAS: dict[type, LayerFormula] = {}
ACTIVATION_CONTAINERS: dict[type, ContainerRule] = {}
LOSS_FORMULAS: dict[type, LossFormula] = {}


def _register(table: dict, kind: str, layer_type: type) -> Callable:
    def decorate(fn: Callable) -> Callable:
        if layer_type in table:
            raise ValueError(f"{layer_type.__name__} already has an activation {kind}")
        table[layer_type] = fn
        return fn
    return decorate


def register_activation_formula(layer_type: type) -> Callable[[LayerFormula], LayerFormula]:
    """Register ``formula(layer, shape, dtype) -> Saved`` for ``layer_type``."""
    return _register(ACTIVATION_FORMULAS, "formula", layer_type)


def register_activation_container(layer_type: type) -> Callable[[ContainerRule], ContainerRule]:
    """Register ``rule(layer, shape, visit) -> output shape`` for a layer made of layers."""
    return _register(ACTIVATION_CONTAINERS, "container rule", layer_type)


def register_loss_formula(loss_type: type) -> Callable[[LossFormula], LossFormula]:
    """Register ``formula(loss, prediction_shape, dtype) -> Saved`` for a loss type."""
    return _register(LOSS_FORMULAS, "loss formula", loss_type)


def numel(shape: Sequence[int]) -> int:
    """Product of the dimensions (1 for a scalar)."""
    return int(np.prod(shape, dtype=np.int64))


def _lookup(table: dict, obj: object):
    for cls in type(obj).__mro__:
        if cls in table:
            return table[cls]
    return None


def _check(layer: Module, shape: Shape, expected: str, ok: bool) -> None:
    if not ok:
        raise ShapeError(f"{layer.describe()} expected input of shape {expected}, got {shape}")


# -- layers that save arrays ---------------------------------------------------------------------


@register_activation_formula(Linear)
def linear_saved(layer: Linear, x: Shape, dtype: np.dtype) -> Saved:
    """Saves its input x for dW = xᵀ·dY: n·b bytes."""
    _check(layer, x, f"(..., {layer.in_features})", len(x) >= 1 and x[-1] == layer.in_features)
    return Saved((*x[:-1], layer.out_features), numel(x) * dtype.itemsize, "input x")


@register_activation_formula(Conv2d)
def conv2d_saved(layer: Conv2d, x: Shape, dtype: np.dtype) -> Saved:
    """Saves the im2col columns for dW = dY·colsᵀ: N·(C·kh·kw)·(Ho·Wo)·b bytes (not x itself)."""
    _check(layer, x, f"(N, {layer.in_channels}, H, W)", len(x) == 4 and x[1] == layer.in_channels)
    n, _, ho, wo = out = layer.output_shape(x)
    kh, kw = layer.kernel_size
    columns = n * layer.in_channels * kh * kw * ho * wo
    return Saved(out, columns * dtype.itemsize, "im2col columns (N, C·kh·kw, Ho·Wo)")


@register_activation_formula(ReLU)
def relu_saved(layer: ReLU, x: Shape, dtype: np.dtype) -> Saved:
    """Saves the mask x > 0: n bytes (one bool each), whatever the dtype."""
    return Saved(x, numel(x), "mask x > 0 (bool)")


@register_activation_formula(GELU)
def gelu_saved(layer: GELU, x: Shape, dtype: np.dtype) -> Saved:
    """Saves x and t = tanh(c·(x + 0.044715·x³)) for dy/dx: 2·n·b bytes."""
    return Saved(x, 2 * numel(x) * dtype.itemsize, "x and tanh(·)")


@register_activation_formula(LayerNorm)
def layernorm_saved(layer: LayerNorm, x: Shape, dtype: np.dtype) -> Saved:
    """Saves x̂ = (x − mean)/σ and 1/σ per row: (n + n/d)·b bytes."""
    d = layer.normalized_shape
    _check(layer, x, f"(..., {d})", len(x) >= 1 and x[-1] == d)
    return Saved(x, (numel(x) + numel(x[:-1])) * dtype.itemsize, "x̂ and 1/σ per row")


@register_activation_formula(Embedding)
def embedding_saved(layer: Embedding, ids: Shape, dtype: np.dtype) -> Saved:
    """Saves the token ids to scatter dW into: n·8 bytes (int64 ids)."""
    return Saved((*ids, layer.embedding_dim), numel(ids) * INDEX_BYTES, "token ids (int64)")


@register_activation_formula(Flatten)
def flatten_saved(layer: Flatten, x: Shape, dtype: np.dtype) -> Saved:
    """Saves only the input's shape (a tuple): 0 array bytes."""
    _check(layer, x, "(N, ...)", len(x) >= 1)
    return Saved((x[0], numel(x[1:])), 0, "input shape only")


@register_activation_formula(MultiHeadAttention)
def attention_saved(layer: MultiHeadAttention, x: Shape, dtype: np.dtype) -> Saved:
    """Saves (5·B·S·d + B·H·S²)·b bytes.

    x (the input of the q, k and v projections, one array shared by all three), Q, K and V
    (B·S·d each), the context softmax(·)·V that the output projection saves (B·S·d), and the
    attention probabilities A (B·H·S·S). The scores before the softmax are not kept.
    """
    _check(layer, x, f"(batch, seq, {layer.d_model})", len(x) == 3 and x[-1] == layer.d_model)
    b, s, d = x
    elements = 5 * b * s * d + b * layer.n_heads * s * s
    return Saved(x, elements * dtype.itemsize, "x, Q, K, V, context + probabilities (B·H·S²)")


@register_activation_formula(TiedLMHead)
def tied_head_saved(layer: TiedLMHead, h: Shape, dtype: np.dtype) -> Saved:
    """Saves its input h for dE = dlogitsᵀ·h: n·b bytes."""
    vocab, d = layer.weight.shape
    _check(layer, h, f"(..., {d})", len(h) >= 1 and h[-1] == d)
    return Saved((*h[:-1], vocab), numel(h) * dtype.itemsize, "input h")


# -- layers made of layers -----------------------------------------------------------------------


@register_activation_container(Sequential)
def sequential_flow(layer: Sequential, x: Shape, visit: Visit) -> Shape:
    """Each layer's output is the next one's input."""
    for child in layer.layers:
        x = visit(child, x)
    return x


@register_activation_container(Residual)
def residual_flow(layer: Residual, x: Shape, visit: Visit) -> Shape:
    """x + f(x): f saves what it saves; the sum is saved by nobody."""
    visit(layer.fn, x)
    return x


@register_activation_container(TransformerBlock)
def block_flow(layer: TransformerBlock, x: Shape, visit: Visit) -> Shape:
    """x + attn(ln_1(x)), then x + mlp(ln_2(x)); the residual sums are not saved."""
    visit(layer.attn, visit(layer.ln_1, x))
    visit(layer.mlp, visit(layer.ln_2, x))
    return x


@register_activation_container(GPT)
def gpt_flow(model: GPT, ids: Shape, visit: Visit) -> Shape:
    """ids (B, S) → wte(ids) + wpe(positions 0..S−1) → blocks → ln_f → tied head."""
    _check(model, ids, f"(batch, seq ≤ {model.config.n_ctx})",
           len(ids) == 2 and ids[1] <= model.config.n_ctx)
    b, s = ids
    visit(model.wte, (b, s))
    visit(model.wpe, (s,))
    x: Shape = (b, s, model.config.d_model)
    for block in model.h:
        x = visit(block, x)
    return visit(model.head, visit(model.ln_f, x))


# -- losses --------------------------------------------------------------------------------------


@register_loss_formula(CrossEntropyLoss)
def cross_entropy_saved(loss: CrossEntropyLoss, logits: Shape, dtype: np.dtype) -> Saved:
    """Saves softmax probabilities (rows × C, the logits' dtype) and targets: rows·(C·b + 8)."""
    rows, classes = numel(logits[:-1]), logits[-1]
    return Saved((), rows * (classes * dtype.itemsize + INDEX_BYTES), "probabilities + targets")


@register_loss_formula(MSELoss)
def mse_saved(loss: MSELoss, prediction: Shape, dtype: np.dtype) -> Saved:
    """Saves prediction − target: n·b bytes."""
    return Saved((), numel(prediction) * dtype.itemsize, "prediction − target")


# -- the walk ------------------------------------------------------------------------------------


def activation_rows(model: Module, input_shape: Sequence[int],
                    dtype=None) -> tuple[list[ActivationRow], Shape]:
    """Per-layer saved bytes for one forward pass on ``input_shape``, and the output shape.

    ``dtype`` is the compute dtype (the model's own by default). Works on shape-only models.
    """
    dtype = np.dtype(dtype if dtype is not None else model.dtype)
    names = {id(module): name for name, module in model.named_modules()}
    rows: list[ActivationRow] = []

    def visit(layer: Module, shape: Shape) -> Shape:
        shape = tuple(int(d) for d in shape)
        rule = _lookup(ACTIVATION_CONTAINERS, layer)
        if rule is not None:
            return tuple(rule(layer, shape, visit))
        formula = _lookup(ACTIVATION_FORMULAS, layer)
        if formula is None:
            raise MissingActivationFormulaError(
                f"no activation formula for {layer.describe()}: register one with "
                f"@register_activation_formula({type(layer).__name__}) or "
                f"@register_activation_container({type(layer).__name__})")
        saved = formula(layer, shape, dtype)
        name = names.get(id(layer)) or layer.name or "(model)"
        rows.append(ActivationRow(name, type(layer).__name__, shape, saved.nbytes, saved.what))
        return tuple(saved.output_shape)

    output_shape = visit(model, checked_shape(input_shape))
    return rows, output_shape


def loss_saved(loss: object, prediction_shape: Sequence[int], dtype) -> Saved:
    """What ``loss`` keeps for its backward on a prediction of ``prediction_shape``."""
    formula = _lookup(LOSS_FORMULAS, loss)
    if formula is None:
        raise MissingActivationFormulaError(
            f"no activation formula for the loss {type(loss).__name__}: register one with "
            f"@register_loss_formula({type(loss).__name__})")
    return formula(loss, tuple(int(d) for d in prediction_shape), np.dtype(dtype))


def activation_bytes(model: Module, input_shape: Sequence[int], dtype=None) -> int:
    """Σ over layers of the bytes each saves for backward (no loss): the activation formula."""
    rows, _ = activation_rows(model, input_shape, dtype)
    return sum(row.nbytes for row in rows)


def activation_table(model: Module, input_shape: Sequence[int], dtype=None,
                     loss: object | None = None) -> Table:
    """One row per layer: name, type, input shape, what it saves, bytes; the loss last if given."""
    dtype = np.dtype(dtype if dtype is not None else model.dtype)
    rows, output_shape = activation_rows(model, input_shape, dtype)
    body = [[r.name, r.type, r.input_shape, r.what, r.nbytes] for r in rows]
    if loss is not None:
        saved = loss_saved(loss, output_shape, dtype)
        body.append(["(loss)", type(loss).__name__, output_shape, saved.what, saved.nbytes])
    total = sum(row[-1] for row in body)
    return Table(["name", "type", "input shape", "saves", "bytes"], body,
                 title=f"activations kept for backward, input {tuple(input_shape)}, {dtype}: "
                       f"{format_bytes(total)}",
                 formats={"bytes": format_bytes}, footer=["total", "", "", "", total])
