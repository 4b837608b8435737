"""Training memory by component, measured on a real step and predicted by formula.

A training step holds four kinds of memory (b = bytes per element, P = number of parameters):

* parameters:                        P·b
* activations kept for backward:     Σ over layers of what each saves (``activations.py``),
                                     plus what the loss saves
* gradients:                         P·b (one gradient array per parameter)
* optimizer state:                   k·P·b, k = 0 for SGD, 1 for momentum (velocity),
                                     2 for Adam (first and second moments)

:func:`training_memory` runs forward, loss, backward and one optimizer step under tracemalloc and
reads each component off a :class:`~tinyprof.memory.trace.MemoryTimeline`; the layers free their
saved activations during backward, so what the step holds after backward is the gradients.
:func:`predict_training_memory` gives the formulas alone and works on ``shape_only`` models.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..models.optim import Optimizer
from ..models.vocabulary import (  # the vocabulary, also read from here (memory.training)
    LOSSES,  # noqa: F401
    OPTIMIZERS,
    STATE_SLOTS,
    make_loss,
    optimizer_kind,
    random_targets,
)
from ..nn import Module
from ..nn.state import KeptState
from ..params import count_parameters
from ..shapes import MissingFormulaError
from ..table import Table
from ..units import format_bytes
from .activations import (
    ActivationRow,
    activation_rows,
    loss_saved,
)
from .trace import Mark, MemoryTimeline

COMPONENTS = ("parameters", "activations", "gradients", "optimizer state")



# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """One component's bytes, measured and predicted (either may be missing)."""

    name: str
    measured_bytes: int | None
    predicted_bytes: int | None
    formula: str = ""

    @property
    def ratio(self) -> float | None:
        """measured / predicted, None when either is missing or the prediction is 0."""
        if self.measured_bytes is None or not self.predicted_bytes:
            return None
        return self.measured_bytes / self.predicted_bytes


@dataclass(frozen=True, repr=False)
class TrainingMemory:
    """Memory of one training step by component; prints as a table.

    ``forward_peak_bytes``: traced peak from the start of the step to the end of the forward pass
    and loss (parameters excluded, since they existed before). ``step_peak_bytes``: traced peak
    of the whole (first) step. ``peak_bytes``: the memory a step needs once the optimizer state
    exists, see :func:`phase_peaks`.
    ``optimizer_state_bytes``: ``state_bytes()`` of a real SGD, SGD-with-momentum and Adam after
    one step on the measured gradients. All None/empty for a prediction.
    """

    title: str
    components: tuple[Component, ...]
    forward_peak_bytes: int | None = None
    step_peak_bytes: int | None = None
    optimizer_state_bytes: Mapping[str, int] = field(
        default_factory=lambda: types.MappingProxyType({}))
    timeline: tuple[Mark, ...] = ()
    activation_rows: tuple[ActivationRow, ...] = ()

    def __getitem__(self, name: str) -> Component:
        for component in self.components:
            if component.name == name:
                return component
        raise KeyError(f"no component {name!r}; components: {list(COMPONENTS)}")

    @property
    def parameters(self) -> Component:
        return self["parameters"]

    @property
    def activations(self) -> Component:
        return self["activations"]

    @property
    def gradients(self) -> Component:
        return self["gradients"]

    @property
    def optimizer_state(self) -> Component:
        return self["optimizer state"]

    @property
    def measured(self) -> bool:
        return all(c.measured_bytes is not None for c in self.components)

    @property
    def predicted_total_bytes(self) -> int:
        """Σ predicted components: the memory if all four are alive at once."""
        return sum(c.predicted_bytes or 0 for c in self.components)

    @property
    def measured_total_bytes(self) -> int | None:
        if not self.measured:
            return None
        return sum(c.measured_bytes for c in self.components)

    @property
    def peak_bytes(self) -> int | None:
        """The highest of :func:`phase_peaks` (None for a prediction)."""
        if not self.timeline:
            return None
        return max(phase_peaks(self.timeline, self.parameters.measured_bytes).values())

    def table(self) -> Table:
        """component, measured, predicted, measured/predicted, formula (prediction: no measured)."""
        fmt = {"measured": format_bytes, "predicted": format_bytes,
               "ratio": lambda r: f"{r:.3f}"}
        if not self.measured:
            rows = [[c.name, c.predicted_bytes, c.formula] for c in self.components]
            return Table(["component", "predicted", "formula"], rows, title=self.title,
                         formats=fmt, footer=["total", self.predicted_total_bytes, ""])
        rows = [[c.name, c.measured_bytes, c.predicted_bytes, c.ratio, c.formula]
                for c in self.components]
        total_ratio = self.measured_total_bytes / max(self.predicted_total_bytes, 1)
        return Table(["component", "measured", "predicted", "ratio", "formula"], rows,
                     title=self.title, formats=fmt,
                     footer=["total", self.measured_total_bytes, self.predicted_total_bytes,
                             total_ratio, ""])

    def timeline_table(self) -> Table:
        """The step's memory timeline: traced bytes, delta and peak at each mark."""
        rows = [[m.label, m.traced_bytes, m.delta_bytes, m.peak_bytes] for m in self.timeline]
        return Table(["label", "traced", "delta", "peak since previous"], rows,
                     title="one training step (bytes above the start; parameters not included)",
                     formats={c: format_bytes for c in ("traced", "delta", "peak since previous")})

    def __str__(self) -> str:
        return str(self.table())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


# -- arguments -----------------------------------------------------------------------------------


def check_model(model: Module, caller: str) -> None:
    """A model with ``parameters()`` and at least one parameter, or a clear error."""
    if not isinstance(model, Module):
        raise TypeError(f"{caller}: model must be a tinyprof Module, got {type(model).__name__}")
    if next(iter(model.parameters()), None) is None:
        raise ValueError(f"{caller}: model {model.describe()} has no parameters, so a training "
                         "step has nothing to train (no gradients, no optimizer state)")


# -- prediction ----------------------------------------------------------------------------------


def predict_training_memory(model: Module, input_shape: Sequence[int],
                            optimizer: str | Optimizer = "adam", dtype=None,
                            loss: Any = None, *, strict: bool = True) -> TrainingMemory:
    """The four components by formula, for an input of ``input_shape`` (no computation).

    parameters = P·b; activations = Σ layer formulas + loss formula; gradients = P·b;
    optimizer state = k·P·b with k = 0 (SGD), 1 (momentum), 2 (Adam). ``dtype`` overrides the
    model's dtype (e.g. "what if float16?"). Works on ``shape_only=True`` models, which is how
    "would GPT-2 fit?" is answered. A layer or loss without an activation formula (or a layer
    without a shape rule) raises a :class:`~tinyprof.shapes.MissingFormulaError`, or with
    ``strict=False`` leaves the activations' prediction empty (None) and names the culprit in
    the formula column.
    """
    check_model(model, "predict_training_memory")
    kind = optimizer_kind(optimizer)
    loss = make_loss(loss)
    dtype = np.dtype(dtype if dtype is not None else model.dtype)
    params = count_parameters(model) * dtype.itemsize
    rows: list[ActivationRow] = []
    try:
        rows, output_shape = activation_rows(model, input_shape, dtype)
        saved_by_loss = loss_saved(loss, output_shape, dtype)
        activations: int | None = sum(row.nbytes for row in rows) + saved_by_loss.nbytes
        how = f"Σ per-layer saved + loss ({format_bytes(saved_by_loss.nbytes)})"
    except MissingFormulaError as error:
        if strict:
            raise
        activations, how = None, str(error).split(":")[0]
    slots = STATE_SLOTS[kind]
    components = (
        Component("parameters", None, params, f"P × {dtype.itemsize} B"),
        Component("activations", None, activations, how),
        Component("gradients", None, params, "1 × parameters"),
        Component("optimizer state", None, slots * params, f"{slots} × parameters ({kind})"),
    )
    total = sum(c.predicted_bytes or 0 for c in components)
    title = (f"{type(model).__name__} training step, input {tuple(input_shape)}, {dtype}, "
             f"{kind}: predicted {format_bytes(total)}")
    return TrainingMemory(title, components, activation_rows=tuple(rows))


# -- measurement ---------------------------------------------------------------------------------


def training_step(model: Module, loss: Any, x: np.ndarray, targets: np.ndarray,
                  optimizer: Optimizer, timeline: MemoryTimeline) -> None:
    """One step with marks "after forward", "after backward", "after optimizer step".

    The batch is copied in first (a step loads its batch), so a layer that saves its input
    is seen saving it; nothing else the step allocates is kept by this function.
    """
    batch, labels = np.array(x, copy=True), np.array(targets, copy=True)
    output = model(batch)
    del batch
    loss(output, labels)
    del output, labels
    timeline.mark("after forward")
    model.backward(loss.backward())
    timeline.mark("after backward")
    optimizer.step()
    timeline.mark("after optimizer step")


def phase_peaks(marks: Sequence[Mark], parameter_bytes: int) -> dict[str, int]:
    """Peak memory of each phase of a training step once the optimizer state exists.

    The marks come from a first step, in which the optimizer creates its state; in every later
    step that state is already allocated during forward and backward. So, with the traced peaks
    of the three phases and state = the bytes the optimizer step added:

        forward  = parameters + state + forward peak
        backward = parameters + state + backward peak
        optimizer step = parameters + step peak          (the state is inside it)
    """
    forward, backward, step = marks
    state = step.delta_bytes
    return {"forward": parameter_bytes + state + forward.peak_bytes,
            "backward": parameter_bytes + state + backward.peak_bytes,
            "optimizer step": parameter_bytes + step.peak_bytes}


def measure_step(model: Module, x: np.ndarray, targets: np.ndarray | None = None,
                 loss: Any = None, optimizer: str | Optimizer = "adam",
                 caller: str = "training_memory",
                 each_optimizer: bool = True) -> tuple[tuple[Mark, ...], dict[str, int]]:
    """Marks of one measured training step, and (``each_optimizer``) the state bytes of a real
    SGD, momentum SGD and Adam stepped on the measured gradients.

    A warm-up forward/backward runs first (outside the measurement); gradients are cleared
    before the step; the weights and gradients are restored afterwards, so profiling does not
    train the model.
    """
    check_model(model, caller)
    if model.shape_only:
        raise ValueError(f"{caller}: {model.describe()} was built with shape_only=True and cannot "
                         "run; use predict_training_memory for the formulas alone")
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{caller}: x must be a numpy array, got {type(x).__name__}")
    kind = optimizer_kind(optimizer)
    loss = make_loss(loss)
    with KeptState(model, weights=True) as kept:
        output = model(x)
        if targets is None:
            targets = random_targets(loss, output)
        loss(output, targets)
        del output
        model.backward(loss.backward())
        model.zero_grad()
        step_optimizer = OPTIMIZERS[kind](kept.params) if isinstance(optimizer, str) else optimizer
        with MemoryTimeline() as timeline:
            training_step(model, loss, x, targets, step_optimizer, timeline)
        del step_optimizer
        states = _state_bytes_of_each_optimizer(kept) if each_optimizer else {}
    return timeline.marks, states


def _state_bytes_of_each_optimizer(kept: KeptState) -> dict[str, int]:
    """``state_bytes()`` of a fresh SGD, momentum SGD and Adam after one step each."""
    states = {}
    for name, build in OPTIMIZERS.items():
        kept.restore_weights()
        optimizer = build(kept.params)
        optimizer.step()
        states[name] = optimizer.state_bytes()
    return states


def training_memory(model: Module, x: np.ndarray, targets: np.ndarray | None = None,
                    loss: Any = None, optimizer: str | Optimizer = "adam") -> TrainingMemory:
    """Measure one real training step by component, each beside its formula.

    measured parameters   = Σ nbytes of the parameter arrays;
    measured activations  = traced bytes after forward and loss (batch copied in, output dropped);
    measured gradients    = traced bytes after backward (backward freed the activations);
    measured optimizer    = traced bytes added by ``optimizer.step()``.

    ``loss``: None (cross-entropy), "cross_entropy", "mse" or a loss object; ``targets``:
    random ones (seeded) when None. ``optimizer``: "sgd", "momentum", "adam" or an SGD/Adam
    instance over the model's parameters (stepped for real; its state is kept). The model's
    weights and gradients are restored afterwards.
    """
    check_model(model, "training_memory")
    if isinstance(optimizer, Optimizer):
        owned = {id(p) for p in model.parameters()}
        if {id(p) for p in optimizer.params} != owned:
            raise ValueError("training_memory: the optimizer must hold exactly the model's "
                             "parameters")
    if not isinstance(x, np.ndarray):
        raise TypeError(f"training_memory: x must be a numpy array, got {type(x).__name__}")
    prediction = predict_training_memory(model, x.shape, optimizer, loss=loss, strict=False)
    marks, states = measure_step(model, x, targets, loss, optimizer)
    after_forward, after_backward, after_step = marks
    measured = {
        "parameters": sum(p.nbytes for p in model.parameters()),
        "activations": after_forward.traced_bytes,
        "gradients": after_backward.traced_bytes,
        "optimizer state": after_step.delta_bytes,
    }
    components = tuple(Component(c.name, measured[c.name], c.predicted_bytes, c.formula)
                       for c in prediction.components)
    step_peak = max(m.peak_bytes for m in marks)
    kind = optimizer_kind(optimizer)
    peak = max(phase_peaks(marks, measured["parameters"]).values())
    title = (f"{type(model).__name__} training step, input {tuple(x.shape)}, {model.dtype}, "
             f"{kind}: measured peak {format_bytes(peak)}")
    return TrainingMemory(title, components, after_forward.peak_bytes, step_peak,
                          types.MappingProxyType(states), marks, prediction.activation_rows)
