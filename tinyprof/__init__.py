"""tinyprof: measure where the parameters, FLOPs, memory and time of a numpy model go."""

from . import flops, memory, models, nn, ops, optim, scaling, timing
from .amdahl import amdahl_limit, amdahl_speedup, required_factor
from .bottlenecks import layer_work, place_layers
from .flops import (
    arithmetic_intensity,
    count_flops,
    flop_report,
    flops_by_layer,
    gflops_per_second,
    measure_matmul_flops,
    register_container,
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
from .scaling import BatchScaling, batch_scaling, best_batch_under_latency
from .table import Table
from .timing import LatencyStats, TimingContext, compare_latency, measure_latency, plot_latency
from .units import bytes_per_element, format_bytes, format_count, format_seconds

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("plots", "widgets")


def __getattr__(name: str):
    """Import the plotting and widget modules on first use (they pull in matplotlib/IPython)."""
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
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
    "register_flops", "required_factor", "LayerProfiler", "layer_work", "place_layers",
]
