"""One training step's memory by component, measured beside its prediction."""

from __future__ import annotations

from typing import Callable, Sequence

import ipywidgets as widgets
import numpy as np

from ..memory import predict_training_memory, training_memory
from ..models.builders import random_input
from ..plots import plot_memory_breakdown
from ..units import byte_unit, format_bytes
from .explorer import Explorer, show

#: How memory_breakdown_explorer stacks a step: the fixed costs first, the activations on top.
_STACK_ORDER = ("parameters", "gradients", "optimizer state", "activations")


def memory_breakdown_explorer(build: Callable, sample_shape: Sequence[int], *,
                              batch_sizes: Sequence[int] = (1, 16, 64, 256, 1024),
                              optimizers: Sequence[str] = ("sgd", "momentum", "adam"),
                              dtypes: Sequence[str] = ("float32", "float64"),
                              batch_size: int | None = None, optimizer: str = "adam",
                              dtype: str = "float32") -> Explorer:
    """One real training step, measured by component, beside its prediction (controls: batch
    size, optimizer, dtype).

    ``build(dtype)`` returns the model in that dtype (built once per dtype, on first use);
    ``sample_shape`` is one sample's shape, e.g. ``(784,)``. Each setting is measured once with
    :func:`~tinyprof.memory.training_memory` and cached, so keep the model small: one step per
    new setting. The figure stacks parameters, gradients, optimizer state and activations for
    the measured and the predicted step, marks the measured peak (temporaries included), and
    keeps one y scale: the largest predicted total over every setting (or the peak, if higher).
    The explorer's ``result`` is the :class:`~tinyprof.memory.TrainingMemory` on show.
    """

    sizes = sorted({int(b) for b in batch_sizes})
    batch_size = sizes[len(sizes) // 2] if batch_size is None else int(batch_size)
    for name, value, options in (("batch_size", batch_size, sizes),
                                 ("optimizer", optimizer, list(optimizers)),
                                 ("dtype", dtype, list(dtypes))):
        if value not in options:
            raise ValueError(f"memory_breakdown_explorer: {name}={value!r} is not one of the "
                             f"choices {options}")
    built: dict[str, object] = {}
    measured: dict[tuple[int, str, str], object] = {}

    def model_in(dt: str):
        if dt not in built:
            built[dt] = build(np.dtype(dt))
        return built[dt]

    reference = model_in(dtype)
    highest = max(predict_training_memory(reference, (b, *sample_shape), opt,
                                          dtype=dt).predicted_total_bytes
                  for b in sizes for opt in optimizers for dt in dtypes)

    def draw(batch_size: int, optimizer: str, dtype: str):
        key = (batch_size, optimizer, dtype)
        if key not in measured:
            model = model_in(dtype)
            with np.errstate(all="ignore"):  # a float16 Adam step may divide 0 by 0: bytes are fine
                measured[key] = training_memory(model, random_input(model, (batch_size,
                                                                            *sample_shape)),
                                                optimizer=optimizer)
        step = measured[key]
        unit, scale = byte_unit(max(highest, step.peak_bytes))
        print(f"batch {batch_size}, {optimizer}, {dtype}: measured "
              f"{format_bytes(step.measured_total_bytes)}, predicted "
              f"{format_bytes(step.predicted_total_bytes)}; peak during the step "
              f"{format_bytes(step.peak_bytes)}")
        bars = {kind: {name: (getattr(step[name], f"{kind}_bytes") or 0) / scale
                       for name in _STACK_ORDER} for kind in ("measured", "predicted")}
        show(plot_memory_breakdown(
            bars, unit=unit, peaks={"measured": step.peak_bytes / scale},
            ymax=1.15 * max(highest, step.peak_bytes) / scale,
            title=f"One training step: batch {batch_size}, {optimizer}, {dtype}"))
        return step

    return Explorer(
        draw,
        batch_size=widgets.SelectionSlider(options=sizes, value=batch_size,
                                           description="batch size", continuous_update=False),
        optimizer=widgets.Dropdown(options=list(optimizers), value=optimizer,
                                   description="optimizer"),
        dtype=widgets.Dropdown(options=list(dtypes), value=dtype, description="dtype"),
    )
