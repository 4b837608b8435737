"""Memory: measured with tracemalloc, predicted by formula, compared component by component.

* :func:`measure_memory` — peak and retained bytes of one call (nested-trace safe);
* :class:`MemoryTimeline` — labelled points of a run and the deltas between them;
* :func:`activation_table` / :func:`activation_bytes` — what each layer saves for backward;
* :func:`training_memory` / :func:`predict_training_memory` — parameters, activations,
  gradients and optimizer state of a training step, measured beside predicted;
* :func:`max_batch_size` — the largest batch that fits a memory budget;
* :mod:`.torch_step` — a torch module's training memory, measured on one real step beside the
  same formulas (``tinyprof.pytorch.training_memory``; loaded when used).
"""

from .activations import (
    ACTIVATION_FORMULAS,
    LOSS_FORMULAS,
    ActivationRow,
    MissingActivationFormulaError,
    Saved,
    activation_bytes,
    activation_rows,
    activation_table,
    loss_saved,
    nothing_saved,
    register_activation_formula,
    register_loss_formula,
)
from .batch import BatchFit, max_batch_size
from .step import (
    COMPONENTS,
    Component,
    TrainingMemory,
    predict_training_memory,
    training_memory,
)
from .trace import Mark, MemoryMeasurement, MemoryTimeline, measure_memory

__all__ = [
    "ACTIVATION_FORMULAS", "COMPONENTS", "LOSS_FORMULAS",
    "ActivationRow", "BatchFit", "Component", "Mark", "MemoryMeasurement", "MemoryTimeline",
    "MissingActivationFormulaError", "Saved", "TrainingMemory", "activation_bytes",
    "activation_rows", "activation_table", "loss_saved", "max_batch_size", "measure_memory",
    "nothing_saved",
    "predict_training_memory", "register_activation_formula", "register_loss_formula",
    "training_memory",
]
