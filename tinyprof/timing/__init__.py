"""Latency you can trust: a timing harness and an immutable statistics object.

- :func:`measure_latency` collects samples (warm-up, loop calibration, GC off);
- :class:`LatencyStats` computes everything from the raw samples (also via ``from_samples``);
- :class:`TimingContext` records what else changes the numbers (threads, versions, load);
- :func:`compare_latency` compares them (figures of them live in :mod:`tinyprof.plots`).
"""

from .context import BLAS_THREAD_VARIABLES, TimingContext, collect_context
from .harness import calibrate_loops, callable_name, measure_latency, timer_overhead
from .report import compare_latency
from .stats import PERCENTILE_METHOD, UNSTABLE_THRESHOLD, LatencyStats, bootstrap_median_ci

__all__ = [
    "BLAS_THREAD_VARIABLES", "LatencyStats", "PERCENTILE_METHOD", "TimingContext",
    "UNSTABLE_THRESHOLD", "bootstrap_median_ci", "calibrate_loops", "callable_name",
    "collect_context", "compare_latency", "measure_latency", "timer_overhead",
]
