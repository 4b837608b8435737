"""The largest batch that fits a memory budget, from straight lines through a few batch sizes.

Memory grows linearly with the batch: peak(B) ≈ fixed + per_sample·B, where fixed holds the
parameters, gradients and optimizer state and per_sample the activations (and temporaries) of one
sample. Fitting that line by least squares to peaks at a few small batches and solving
fixed + per_sample·B ≤ budget gives

    B_max = ⌊(budget − fixed) / per_sample⌋          (0 when even the fixed part does not fit).

``method="measure"`` measures real steps. A step has phases whose peaks grow differently: the
forward and backward peaks grow with the batch, the optimizer step's (state and update
temporaries) hardly does, and at small batches it is often the highest. One line through the
overall peaks would bend, so each phase (forward, backward, optimizer step) gets its own line,
each peak counted as in a step after the first (parameters and optimizer state already
allocated, :func:`~tinyprof.memory.training.phase_peaks`), and B_max is the smallest over the
phases. ``method="predict"`` uses :func:`predict_training_memory`: parameters + activations +
gradients + optimizer state, all alive at once (works on ``shape_only`` models).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..models.builders import random_input
from ..models.optim import Optimizer
from ..nn import Module
from ..table import Table
from ..units import format_bytes
from .step import (
    check_model,
    make_loss,
    measure_step,
    optimizer_kind,
    phase_peaks,
    predict_training_memory,
)

BatchMaker = Callable[[int], Any]
PHASES = ("forward", "backward", "optimizer step")
PREDICTED = "all components"


@dataclass(frozen=True)
class BatchFit:
    """The largest batch within ``budget_bytes`` and the line that decided it.

    ``fixed_bytes + per_sample_bytes·B`` is the fitted peak of ``phase`` (the phase that runs
    out of memory first); ``points`` are (batch, peak bytes) with the peak over all phases.
    """

    batch_size: int
    fixed_bytes: float
    per_sample_bytes: float
    budget_bytes: float
    method: str
    phase: str
    points: tuple[tuple[int, int], ...]

    def peak_at(self, batch_size: int) -> float:
        """The deciding line at ``batch_size``: fixed + per_sample·B."""
        return self.fixed_bytes + self.per_sample_bytes * batch_size

    def table(self) -> Table:
        """batch, peak (measured or predicted), the deciding line's value there."""
        rows = [[b, peak, self.peak_at(b)] for b, peak in self.points]
        peak = "measured peak" if self.method == "measure" else "predicted total"
        return Table(["batch", peak, f"fit ({self.phase})"], rows, title=str(self),
                     formats={peak: format_bytes, f"fit ({self.phase})": format_bytes})

    def __str__(self) -> str:
        how = "measured" if self.method == "measure" else "predicted"
        return (f"largest batch within {format_bytes(self.budget_bytes)}: {self.batch_size} "
                f"({self.phase}: fixed {format_bytes(self.fixed_bytes)} + "
                f"{format_bytes(self.per_sample_bytes)} per sample, {how})")

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


def fit_line(batch_sizes: Sequence[int], peaks: Sequence[float]) -> tuple[float, float]:
    """Least-squares (fixed, per_sample) of peak = fixed + per_sample·B."""
    slope, intercept = np.polyfit(np.asarray(batch_sizes, float), np.asarray(peaks, float), 1)
    return float(intercept), float(slope)


def solve_batch(fixed: float, per_sample: float, budget: float) -> float:
    """⌊(budget − fixed) / per_sample⌋ (at least 0); infinite for a line that does not grow."""
    if fixed > budget:
        return 0
    if per_sample <= 0:
        return math.inf
    return max(math.floor((budget - fixed) / per_sample), 0)


def _check_arguments(budget_bytes: float, batch_sizes: Sequence[int]) -> tuple[int, ...]:
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, (int, float, np.number)):
        raise TypeError(f"max_batch_size: budget_bytes must be a number, got "
                        f"{type(budget_bytes).__name__}")
    if not budget_bytes > 0:
        raise ValueError(f"max_batch_size: budget_bytes must be positive, got {budget_bytes}")
    sizes = tuple(int(b) for b in batch_sizes)
    if len(set(sizes)) < 2 or min(sizes) < 1:
        raise ValueError(f"max_batch_size: batch_sizes needs at least two different positive "
                         f"sizes to fit a line, got {tuple(batch_sizes)}")
    return sizes


def _batch_maker(model: Module, sample: Any, method: str) -> BatchMaker:
    if callable(sample):
        if method == "predict":
            raise ValueError("max_batch_size: method='predict' needs a sample shape, not a "
                             "function")
        return sample
    if isinstance(sample, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in sample):
        return lambda b: random_input(model, (b, *sample))
    raise TypeError(f"max_batch_size: sample must be a shape tuple or a function of the batch "
                    f"size, got {type(sample).__name__}")


def _phase_peaks(model: Module, batch: Any, loss: Any, optimizer: str | Optimizer) -> list[int]:
    """Peaks of the forward, the backward and the optimizer step (see :func:`phase_peaks`)."""
    x, targets = batch if isinstance(batch, tuple) else (batch, None)
    marks, _ = measure_step(model, x, targets, loss, optimizer, caller="max_batch_size",
                            each_optimizer=False)
    peaks = phase_peaks(marks, sum(p.nbytes for p in model.parameters()))
    return [peaks[phase] for phase in PHASES]


def max_batch_size(model: Module, sample: Sequence[int] | BatchMaker, budget_bytes: float,
                   batch_sizes: Sequence[int] = (1, 2, 4, 8), *,
                   optimizer: str | Optimizer = "adam", loss: Any = None,
                   method: str | None = None) -> BatchFit:
    """The largest batch whose training step fits ``budget_bytes``, from fitted lines.

    ``sample``: one sample's shape (e.g. ``(784,)``, or ``(seq,)`` of token ids), or a function
    ``batch(B) -> x`` or ``-> (x, targets)``. ``method``: "measure" (real steps; the default for
    a model with weights) or "predict" (formulas; the default, and the only choice, for a
    ``shape_only`` model; needs a sample shape).
    """
    check_model(model, "max_batch_size")
    sizes = _check_arguments(budget_bytes, batch_sizes)
    optimizer_kind(optimizer)
    make_loss(loss)
    method = method or ("predict" if model.shape_only else "measure")
    if method not in ("measure", "predict"):
        raise ValueError(f"max_batch_size: method must be 'measure' or 'predict', got {method!r}")
    make_batch = _batch_maker(model, sample, method)
    if method == "predict":
        totals = [predict_training_memory(model, (b, *sample), optimizer,
                                          loss=loss).predicted_total_bytes for b in sizes]
        by_phase = {PREDICTED: totals}
    else:
        per_batch = [_phase_peaks(model, make_batch(b), loss, optimizer) for b in sizes]
        by_phase = {phase: [peaks[i] for peaks in per_batch] for i, phase in enumerate(PHASES)}
    lines = {phase: fit_line(sizes, peaks) for phase, peaks in by_phase.items()}
    limits = {phase: solve_batch(*line, budget_bytes) for phase, line in lines.items()}
    phase = min(limits, key=lambda p: (limits[p], -lines[p][1]))
    if math.isinf(limits[phase]):
        raise ValueError("max_batch_size: the fitted peaks do not grow with the batch, so no "
                         f"largest batch follows from the budget (peaks {by_phase})")
    overall = [max(peaks[i] for peaks in by_phase.values()) for i in range(len(sizes))]
    return BatchFit(int(limits[phase]), *lines[phase], float(budget_bytes), method, phase,
                    tuple(zip(sizes, overall, strict=True)))
