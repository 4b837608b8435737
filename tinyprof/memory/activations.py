"""What each layer keeps for its backward pass: one formula per layer type.

In the style of the FLOP formulas, each formula is a small function of shapes and the compute
dtype, registered against the layer type it describes; shapes come from the shared walk
(:func:`tinyprof.shapes.trace_shapes`), so a formula never propagates them:

* a **layer formula** ``formula(layer, x, y, dtype) -> Saved`` for a layer that saves arrays
  (:func:`register_activation_formula`); a layer the walk treats as a leaf must have one;
* a layer made of other layers states what it saves itself, as the FLOP formulas have a
  container state its own work: :func:`nothing_saved` when it keeps nothing (the sums of a
  residual block are kept by nobody), and it gets a row only when it saves something. Registered
  with ``whole=True`` the formula accounts for the container *and* its children (attention: one
  saved x is shared by the q, k and v projections, so counting each projection's saved input
  would count it three times). One policy in both registries: every layer of the walk,
  container or leaf, has a formula in each, or the count stops with a named error;
* a **loss formula** ``formula(loss, prediction_shape, dtype) -> Saved``
  (:func:`register_loss_formula`).

A leaf type without a formula raises :class:`MissingActivationFormulaError`; nothing is silently
0. Every formula states what the layer's ``forward`` really stores, so that the sum matches what
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

from ..nn import (
    GELU,
    GPT,
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
    TiedLMHead,
    TransformerBlock,
)
from ..shapes import FormulaRegistry, MissingFormulaError, Shape, numel, trace_shapes
from ..table import Table
from ..units import format_bytes

INDEX_BYTES = np.dtype(np.int64).itemsize
ACTIVATION_FORMULAS = FormulaRegistry("activation formula")
LOSS_FORMULAS = FormulaRegistry("loss formula")


class MissingActivationFormulaError(MissingFormulaError):
    """A layer or loss type without an activation formula."""


@dataclass(frozen=True)
class Saved:
    """What one layer keeps for backward: the bytes it saves and what they are."""

    nbytes: int = 0
    what: str = ""


@dataclass(frozen=True)
class ActivationRow:
    """One layer's line of the activation breakdown."""

    name: str
    type: str
    input_shape: tuple[int, ...]
    nbytes: int
    what: str


LayerFormula = Callable[[Module, Shape, Shape, np.dtype], Saved]
LossFormula = Callable[[object, tuple[int, ...], np.dtype], Saved]


def register_activation_formula(layer_type: type, *, whole: bool = False,
                                replace: bool = False) -> Callable[[LayerFormula], LayerFormula]:
    """Register ``formula(layer, x, y, dtype) -> Saved`` for ``layer_type``; ``whole=True``
    for a container whose formula also covers everything its children save."""
    return ACTIVATION_FORMULAS.register(layer_type, replace=replace, whole=whole)


def register_loss_formula(loss_type: type, *, replace: bool = False
                          ) -> Callable[[LossFormula], LossFormula]:
    """Register ``formula(loss, prediction_shape, dtype) -> Saved`` for a loss type."""
    return LOSS_FORMULAS.register(loss_type, replace=replace)


# -- layers that save arrays ---------------------------------------------------------------------


@register_activation_formula(Linear)
def linear_saved(layer: Linear, x: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """Saves its input x for dW = xᵀ·dY: n·b bytes."""
    return Saved(numel(x) * dtype.itemsize, "input x")


@register_activation_formula(Conv2d)
def conv2d_saved(layer: Conv2d, x: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """Saves the im2col columns for dW = dY·colsᵀ: N·(C·kh·kw)·(Ho·Wo)·b bytes (not x itself)."""
    n, _, ho, wo = y
    kh, kw = layer.kernel_size
    columns = n * layer.in_channels * kh * kw * ho * wo
    return Saved(columns * dtype.itemsize, "im2col columns (N, C·kh·kw, Ho·Wo)")


@register_activation_formula(ReLU)
def relu_saved(layer: ReLU, x: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """Saves the mask x > 0: n bytes (one bool each), whatever the dtype."""
    return Saved(numel(x), "mask x > 0 (bool)")


@register_activation_formula(GELU)
def gelu_saved(layer: GELU, x: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """Saves x and t = tanh(c·(x + 0.044715·x³)) for dy/dx: 2·n·b bytes."""
    return Saved(2 * numel(x) * dtype.itemsize, "x and tanh(·)")


@register_activation_formula(LayerNorm)
def layernorm_saved(layer: LayerNorm, x: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """Saves x̂ = (x − mean)/σ and 1/σ per row: (n + n/d)·b bytes."""
    return Saved((numel(x) + numel(x[:-1])) * dtype.itemsize, "x̂ and 1/σ per row")


@register_activation_formula(Embedding)
def embedding_saved(layer: Embedding, ids: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """Saves the token ids to scatter dW into: n·8 bytes (int64 ids)."""
    return Saved(numel(ids) * INDEX_BYTES, "token ids (int64)")


@register_activation_formula(Flatten)
def flatten_saved(layer: Flatten, x: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """Saves only the input's shape (a tuple): 0 array bytes."""
    return Saved(0, "input shape only")


@register_activation_formula(MultiHeadAttention, whole=True)
def attention_saved(layer: MultiHeadAttention, x: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """Saves (5·B·S·d + B·H·S²)·b bytes, its projections included.

    x (the input of the q, k and v projections, one array shared by all three), Q, K and V
    (B·S·d each), the context softmax(·)·V that the output projection saves (B·S·d), and the
    attention probabilities A (B·H·S·S). The scores before the softmax are not kept.
    """
    b, s, d = x
    elements = 5 * b * s * d + b * layer.n_heads * s * s
    return Saved(elements * dtype.itemsize, "x, Q, K, V, context + probabilities (B·H·S²)")


@register_activation_formula(TiedLMHead)
def tied_head_saved(layer: TiedLMHead, h: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """Saves its input h for dE = dlogitsᵀ·h: n·b bytes."""
    return Saved(numel(h) * dtype.itemsize, "input h")


# -- losses --------------------------------------------------------------------------------------


@register_loss_formula(CrossEntropyLoss)
def cross_entropy_saved(loss: CrossEntropyLoss, logits: tuple[int, ...],
                        dtype: np.dtype) -> Saved:
    """Saves softmax probabilities (rows × C, the logits' dtype) and targets: rows·(C·b + 8)."""
    rows, classes = numel(logits[:-1]), logits[-1]
    return Saved(rows * (classes * dtype.itemsize + INDEX_BYTES), "probabilities + targets")


@register_loss_formula(MSELoss)
def mse_saved(loss: MSELoss, prediction: tuple[int, ...], dtype: np.dtype) -> Saved:
    """Saves prediction − target: n·b bytes."""
    return Saved(numel(prediction) * dtype.itemsize, "prediction − target")


# -- the sum over the walk -----------------------------------------------------------------------


def nothing_saved(layer: Module, x: Shape, y: Shape, dtype: np.dtype) -> Saved:
    """The activation formula of a container that keeps nothing itself (its children's rows
    hold what they save)."""
    return Saved(0, "")


for _container in (Sequential, Residual, TransformerBlock, GPT):
    register_activation_formula(_container)(nothing_saved)


def _missing(layer: Module, container: bool) -> MissingActivationFormulaError:
    name = type(layer).__name__
    extra = (f" (a layer made of other layers that keeps nothing itself registers "
             f"tinyprof.memory.nothing_saved: register_activation_formula({name})"
             f"(nothing_saved))" if container else "")
    return MissingActivationFormulaError(
        f"no activation formula for {layer.describe()}: register what it keeps for backward "
        f"with @tinyprof.memory.register_activation_formula({name}), "
        f"formula(layer, x, y, dtype) -> Saved(nbytes, what){extra}")


def activation_rows(model: Module, input_shape: Sequence[int],
                    dtype=None) -> tuple[list[ActivationRow], tuple[int, ...]]:
    """Per-layer saved bytes for one forward pass on ``input_shape``, and the output shape.

    ``dtype`` is the compute dtype (the model's own by default). Works on shape-only models.
    """
    dtype = np.dtype(dtype if dtype is not None else model.dtype)
    nodes = trace_shapes(model, input_shape)
    rows: list[ActivationRow] = []
    index = 0
    while index < len(nodes):
        node = nodes[index]
        found = ACTIVATION_FORMULAS.find(node.layer)
        if found is None:
            raise _missing(node.layer, node.container)
        whole = found[1].get("whole", False)
        saved = found[0](node.layer, node.input_shape, node.output_shape, dtype)
        if not node.container or saved.nbytes:   # a container only when it saves something
            rows.append(ActivationRow(node.name, type(node.layer).__name__,
                                      tuple(node.input_shape), saved.nbytes, saved.what))
        index = node.end if whole else index + 1
    return rows, tuple(nodes[0].output_shape)


def loss_saved(loss: object, prediction_shape: Sequence[int], dtype) -> Saved:
    """What ``loss`` keeps for its backward on a prediction of ``prediction_shape``."""
    found = LOSS_FORMULAS.find(loss)
    if found is None:
        raise MissingActivationFormulaError(
            f"no activation formula for the loss {type(loss).__name__}: register one with "
            f"@tinyprof.memory.register_loss_formula({type(loss).__name__})")
    return found[0](loss, tuple(int(d) for d in prediction_shape), np.dtype(dtype))


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
