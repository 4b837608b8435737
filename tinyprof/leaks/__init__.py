"""Chapter 10's wing: memory over many steps, leaks told from plateaus and found by line.

* :mod:`.loop` — a training loop with the classic leaks planted, each switchable
  (:class:`~.loop.Trainer`, :data:`~.loop.LEAKS`, :func:`~.loop.train`), and PyTorch's
  what four PyTorch habits keep from every step (:func:`~.loop.torch_kept`);
* :mod:`.measure` — memory per step as tracemalloc's live bytes and the resident set
  (:func:`~.measure.memory_per_step`), and why they differ;
* :mod:`.growth` — growth per step with an interval that holds for autocorrelated readings,
  and the verdict against a tolerance: leak / plateau / within tolerance / undecided
  (:func:`~.growth.growth_per_step`, :func:`~.growth.t_quantile`);
* :mod:`.snapshots` — two tracemalloc snapshots compared by line or traceback
  (:func:`~.snapshots.top_growth`);
* ``expect_leak_free`` lives in :mod:`tinyprof.memcheck`: a loop run for N and 2N steps, each
  run in a fork of the kernel (:mod:`tinyprof.testing.forked`) while the grader reads the
  kernel's memory from outside (autograder/run/memory_check.py).
"""

from .growth import VERDICTS, Growth, fit_line, growth, growth_per_step, t_quantile
from .loop import (
    BATCH,
    BATCHES,
    FEATURES,
    HIDDEN,
    LEAKS,
    Trainer,
    collector_off,
    leak_bytes_per_step,
    train,
)
from .measure import StepMemory, memory_per_step, rss_bytes, steps_until
from .snapshots import LineGrowth, snapshot_of, top_growth

__all__ = ["BATCH", "BATCHES", "FEATURES", "HIDDEN", "LEAKS", "VERDICTS", "Growth", "LineGrowth",
           "StepMemory", "Trainer", "collector_off", "fit_line", "growth", "growth_per_step",
           "leak_bytes_per_step", "memory_per_step", "rss_bytes", "snapshot_of", "steps_until",
           "t_quantile", "top_growth", "train"]
