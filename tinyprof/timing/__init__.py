"""Latency you can trust: a timing harness and an immutable statistics object.

- :func:`measure_latency` collects samples (warm-up, loop calibration, GC off);
- :class:`LatencyStats` computes everything from the raw samples (also via ``from_samples``);
- :class:`TimingContext` records what else changes the numbers (threads, versions, load);
- :func:`compare` (two of them, e.g. a saved baseline and a new run) and
  :func:`compare_latency` (a table of several) compare them; their figures are in
  :mod:`tinyprof.plots`;
- :mod:`.abtest`: ``ab_test``, two callables timed in interleaved rounds and judged;
- :mod:`.blocks`: how the speed tests make a block of calls (calls from the baseline, every
  output kept, fresh inputs, page faults counted), the one rule ``measure_speedup``, the grader
  and ``ab_test(blocks="speed test")`` share;
- :mod:`.allocator`: the memory allocator held steady while a speed test runs (glibc), so
  that its grade does not depend on what the process freed before;
- :mod:`.agreement`: whether two measurements of the same two functions agree, and when not,
  which side's time moved and why (loaded when used);
- :mod:`.scaling`: throughput and latency across batch sizes (loaded when used);
- :mod:`.speed`: ``measure_speedup``, a rewrite against its baseline on fresh inputs, every
  output checked (chapter 08's speed tests; loaded when used);
- :mod:`.chrome`: the Chrome trace event format that ``tp.Profiler`` and chapter 09's timeline
  write (Perfetto, chrome://tracing; loaded when used);
- :mod:`.torch_cuda`: ``cuda_event_seconds``, a torch callable timed by the GPU's own events
  (``tinyprof.pytorch``; loaded when used).
"""

from .abtest import ABResult, ab_test
from .compare import Comparison, compare, compare_latency
from .context import BLAS_THREAD_VARIABLES, TimingContext, collect_context
from .harness import calibrate_loops, callable_name, measure_latency, timer_overhead
from .stats import (
    PERCENTILE_METHOD,
    UNSTABLE_THRESHOLD,
    WARNING_KINDS,
    LatencyStats,
    TimingWarning,
    bootstrap_median_ci,
    bootstrap_medians,
)

__all__ = [
    "ABResult", "ab_test", "BLAS_THREAD_VARIABLES", "Comparison", "LatencyStats",
    "TimingWarning", "WARNING_KINDS",
    "compare", "PERCENTILE_METHOD", "TimingContext", "UNSTABLE_THRESHOLD",
    "bootstrap_median_ci", "bootstrap_medians", "calibrate_loops", "callable_name",
    "collect_context", "compare_latency", "measure_latency", "timer_overhead",
]
