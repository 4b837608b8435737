"""Throughput vs latency across batch sizes, and the best batch for a latency budget.

A bigger batch shares the fixed per-call cost (Python dispatch, reading the weights) over more
samples, so throughput (samples/s = batch / latency) rises, until the machine is saturated;
latency rises with it. :func:`batch_scaling` measures both, plus peak memory, per batch size;
:func:`best_batch_under_latency` picks the batch that serves most samples per second while
keeping a latency promise.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..memory import measure_memory
from ..models.builders import random_input
from ..nn import Conv2d, Embedding, Linear, Module
from ..table import Table
from ..units import format_bytes, format_interval, format_seconds
from .harness import callable_name, measure_latency
from .stats import LatencyStats

#: Statistics best_batch_under_latency can hold to a budget.
BUDGET_STATISTICS = ("median", "p95", "p99")


@dataclass(frozen=True)
class BatchScaling:
    """Per batch size: latency statistics, throughput and peak memory (one entry each).

    ``throughput[i]`` = batch_sizes[i] / stats[i].median (samples per second);
    ``peak_bytes[i]`` is the extra memory at the high-water mark of one call
    (:func:`tinyprof.memory.measure_memory`, tracemalloc, in a separate untimed call), or None
    when memory was not measured.
    """

    name: str
    batch_sizes: tuple[int, ...]
    stats: tuple[LatencyStats, ...]
    peak_bytes: tuple[int | None, ...]

    @property
    def median_seconds(self) -> list[float]:
        return [s.median for s in self.stats]

    @property
    def p95_seconds(self) -> list[float]:
        return [s.p95 for s in self.stats]

    @property
    def per_sample_seconds(self) -> list[float]:
        """Median latency divided by batch size: the time one sample costs in that batch."""
        return [s.median / b for s, b in zip(self.stats, self.batch_sizes, strict=True)]

    @property
    def throughput(self) -> list[float]:
        """Samples per second at each batch size: batch / median latency."""
        return [b / s.median for s, b in zip(self.stats, self.batch_sizes, strict=True)]

    def table(self) -> Table:
        """One row per batch size: latency (median, p95, 95% CI), per sample, throughput, peak."""
        rows = [[b, s.median, s.p95, s.ci, s.median / b, b / s.median, peak, len(s.warnings)]
                for b, s, peak in zip(self.batch_sizes, self.stats, self.peak_bytes,
                                      strict=True)]
        formats = {c: format_seconds for c in ("median", "p95", "per sample")}
        formats["95% CI"] = format_interval
        formats["throughput (samples/s)"] = lambda v: f"{v:,.0f}"
        formats["peak memory"] = format_bytes
        return Table(["batch", "median", "p95", "95% CI", "per sample", "throughput (samples/s)",
                      "peak memory", "warnings"], rows,
                     title=f"{self.name}: latency, throughput and memory vs batch size",
                     formats=formats)

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __str__(self) -> str:
        return str(self.table())



def _first_weighted_layer(model: Module) -> Module | None:
    for _, module in model.named_modules():
        if isinstance(module, (Linear, Conv2d, Embedding)):
            return module
    return None


def _input_maker(model_or_fn: Any, sample_shape: Sequence[int] | None, dtype: Any,
                 seed: int) -> Callable[[int], np.ndarray]:
    """A function batch_size → seeded input of shape (batch, *sample_shape).

    For a model, :func:`tinyprof.models.random_input` (token ids for a model that starts with
    an Embedding, standard-normal values in the model's dtype otherwise), cast to ``dtype``
    when given; for a plain callable, standard-normal values in ``dtype`` (float32 default).
    """
    is_model = isinstance(model_or_fn, Module)
    if sample_shape is None:
        first = _first_weighted_layer(model_or_fn) if is_model else None
        if not isinstance(first, Linear):
            raise ValueError(
                f"batch_scaling: pass sample_shape, the shape of one sample without the batch "
                f"dimension, for {callable_name(model_or_fn)}: e.g. (3, 32, 32) for an image "
                f"model or (seq_len,) for token ids (only a model that starts with a Linear "
                f"layer lets it be inferred)")
        sample_shape = (first.in_features,)
    shape = tuple(int(d) for d in sample_shape)

    def make(batch: int) -> np.ndarray:
        if is_model:
            x = random_input(model_or_fn, (batch, *shape), seed=seed)
            return x.astype(dtype) if dtype is not None and x.dtype.kind == "f" else x
        rng = np.random.default_rng(seed)
        return rng.standard_normal((batch, *shape)).astype(dtype or np.float32)

    return make


def _check_batch_sizes(batch_sizes: Sequence[int]) -> tuple[int, ...]:
    sizes = list(batch_sizes)
    bad = [b for b in sizes if isinstance(b, bool) or not isinstance(b, numbers.Integral)
           or b < 1]
    if not sizes or bad:
        raise ValueError(f"batch_scaling: batch_sizes must be positive integers, got "
                         f"{list(batch_sizes)!r}")
    return tuple(sorted({int(b) for b in sizes}))


def batch_scaling(model_or_fn: Callable, batch_sizes: Sequence[int] = (1, 2, 4, 8, 16, 32),
                  sample_shape: Sequence[int] | None = None, *, dtype: Any = None,
                  warmup: int = 3, iterations: int = 30, memory: bool = True,
                  seed: int = 0) -> BatchScaling:
    """Latency statistics, throughput and peak memory of ``model_or_fn(batch)`` per batch size.

    The input for batch size b has shape ``(b, *sample_shape)`` and comes from
    ``np.random.default_rng(seed)``: integer token ids in [0, vocab) for a model that starts
    with an Embedding (GPT), standard-normal floats in the model's dtype otherwise (float32 for
    a plain callable; ``dtype`` overrides either). ``sample_shape`` may be omitted for a model that
    starts with a Linear layer. Batch sizes are measured in increasing order. Latency is
    timed first (with tracemalloc as the caller left it: its warning shows when it is on); peak
    memory is then measured in one separate call by :func:`tinyprof.memory.measure_memory`,
    which never stops a trace it did not start.
    """
    if not callable(model_or_fn):
        raise TypeError(f"batch_scaling: model_or_fn must be a model or a function taking a "
                        f"batch, got {type(model_or_fn).__name__}")
    sizes = _check_batch_sizes(batch_sizes)
    make = _input_maker(model_or_fn, sample_shape, dtype, seed)
    stats, peaks = [], []
    for b in sizes:
        batch = make(b)
        stats.append(measure_latency(model_or_fn, batch, warmup=warmup, iterations=iterations))
        peaks.append(measure_memory(model_or_fn, batch).peak_bytes if memory else None)
    return BatchScaling(callable_name(model_or_fn), sizes, tuple(stats), tuple(peaks))


def best_batch_under_latency(result: BatchScaling, budget_seconds: float,
                             statistic: str = "p95") -> int | None:
    """The batch size with the highest throughput whose latency ``statistic`` ≤ the budget.

    The default holds p95 to the budget: a latency budget is a promise about the slow calls
    too (19 of 20 requests answered in time), which the median, the typical call, does not
    keep. Throughput is batch / median either way. Ties go to the smaller batch. Returns None
    when no batch size fits the budget.
    """
    if not isinstance(result, BatchScaling):
        raise TypeError(f"best_batch_under_latency needs a BatchScaling result, got "
                        f"{type(result).__name__}")
    if statistic not in BUDGET_STATISTICS:
        raise ValueError(f"best_batch_under_latency: statistic must be one of "
                         f"{BUDGET_STATISTICS}, got {statistic!r}")
    if not budget_seconds > 0:
        raise ValueError(f"best_batch_under_latency: budget_seconds must be > 0, got "
                         f"{budget_seconds!r}")
    fitting = [(throughput, -b, b) for b, s, throughput in
               zip(result.batch_sizes, result.stats, result.throughput, strict=True)
               if getattr(s, statistic) <= budget_seconds]
    return max(fitting)[2] if fitting else None
