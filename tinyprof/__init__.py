"""tinyprof: measure where the parameters, FLOPs, memory and time of a numpy model go."""

from . import flops, memory, models, nn, ops, optim, scaling, shapes, timing, variants
from .abtest import ABResult, ab_test
from .amdahl import amdahl_limit, amdahl_speedup, required_factor
from .bottlenecks import layer_work, place_layers
from .classic import MemoryTracker, Timer, profile
from .flops import (
    arithmetic_intensity,
    count_flops,
    flop_report,
    flops_by_layer,
    gflops_per_second,
    measure_matmul_flops,
    register_flops,
)
from .layer_profiler import LayerProfiler
from .memory import (
    MemoryMeasurement,
    MemoryTimeline,
    activation_table,
    max_batch_size,
    measure_memory,
    predict_training_memory,
    training_memory,
)
from .params import count_parameters, parameter_bytes, parameter_groups, parameter_table
from .profiler import Profiler, quick_profile
from .regression import check_regression
from .scaling import BatchScaling, batch_scaling, best_batch_under_latency
from .shapes import register_container, register_shape, trace_shapes
from .suite import SuiteResult, benchmark_suite
from .table import Table
from .timing import LatencyStats, TimingContext, compare_latency, measure_latency
from .units import bytes_per_element, format_bytes, format_count, format_seconds

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("plots", "reports", "widgets", "training", "datasets")
_LAZY_PLOTS = ("plot_performance_comparison", "plot_roofline", "plot_ab", "plot_latency")


def __getattr__(name: str):
    """Import the plotting and widget modules on first use (they pull in matplotlib/IPython)."""
    import importlib

    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_PLOTS:
        return getattr(importlib.import_module(".plots", __name__), name)
    raise AttributeError(f"module 'tinyprof' has no attribute {name!r}")


__all__ = [
    "BatchScaling", "LatencyStats", "TimingContext", "batch_scaling", "best_batch_under_latency",
    "compare_latency", "measure_latency", "plot_latency", "scaling", "timing",
    "MemoryMeasurement", "MemoryTimeline", "activation_table", "max_batch_size", "measure_memory",
    "memory", "predict_training_memory", "training_memory", "Profiler", "quick_profile",
    "Table", "amdahl_limit", "amdahl_speedup", "arithmetic_intensity", "bytes_per_element",
    "count_flops", "count_parameters", "flop_report", "flops", "flops_by_layer", "format_bytes",
    "format_count", "format_seconds", "gflops_per_second", "measure_matmul_flops", "models", "nn",
    "ops", "optim", "parameter_bytes", "parameter_groups", "parameter_table", "register_container",
    "register_flops", "register_shape", "trace_shapes", "shapes", "required_factor",
    "LayerProfiler", "layer_work", "place_layers",
    "ABResult", "ab_test", "MemoryTracker", "Timer", "profile", "check_regression",
    "SuiteResult", "benchmark_suite", "plot_performance_comparison", "plot_roofline", "plot_ab",
    "variants",
]
