"""tinyprof: measure where the parameters, FLOPs, memory and time of a numpy model go.

``import tinyprof`` loads none of its submodules (PEP 562, as scipy does): each public name below
is imported from its module the first time it is used (``tp.measure_latency``, ``from tinyprof
import nn``), then kept, so the import costs next to nothing and a session pays only for what it
uses (benchmarks/bench_cli_startup.py measures it against ``import numpy``). Importing
``tinyprof.testing``, which names every public route by reading the package's namespace, loads
them all first, so the namespace it reads is the complete one.
"""

import importlib
import sys
import types

__version__ = "0.1.0"

#: Public name → the submodule it is defined in (imported on first use).
_EXPORTS = {
    **dict.fromkeys(("ABResult", "ab_test"), "abtest"),
    **dict.fromkeys(("amdahl_limit", "amdahl_speedup", "required_factor"), "amdahl"),
    **dict.fromkeys(("layer_work", "place_layers"), "bottlenecks"),
    **dict.fromkeys(("MemoryTracker", "Timer", "profile"), "classic"),
    **dict.fromkeys(("arithmetic_intensity", "count_flops", "flop_report", "flops_by_layer",
                     "gflops_per_second", "measure_matmul_flops", "register_flops"), "flops"),
    "LayerProfiler": "layer_profiler",
    **dict.fromkeys(("MemoryMeasurement", "MemoryTimeline", "activation_table",
                     "max_batch_size", "measure_memory", "predict_training_memory",
                     "training_memory"), "memory"),
    **dict.fromkeys(("count_parameters", "parameter_bytes", "parameter_groups",
                     "parameter_table"), "params"),
    **dict.fromkeys(("Profiler", "quick_profile"), "profiler"),
    "check_regression": "regression",
    **dict.fromkeys(("BatchScaling", "batch_scaling", "best_batch_under_latency"), "scaling"),
    **dict.fromkeys(("register_container", "register_shape", "trace_shapes"), "shapes"),
    **dict.fromkeys(("SuiteResult", "benchmark_suite"), "suite"),
    "Table": "table",
    **dict.fromkeys(("LatencyStats", "TimingContext", "compare_latency", "measure_latency"),
                    "timing"),
    **dict.fromkeys(("bytes_per_element", "format_bytes", "format_count", "format_seconds"),
                    "units"),
    **dict.fromkeys(("plot_performance_comparison", "plot_roofline", "plot_ab", "plot_latency"),
                    "plots"),
}
#: Submodules reachable as attributes (``tp.nn``, ``tp.roofline``, ``tp.widgets``, ...).
_SUBMODULES = frozenset({
    "abtest", "amdahl", "bottlenecks", "classic", "datasets", "flops", "layer_profiler",
    "memory", "models", "nn", "ops", "optim", "params", "plots", "profiler", "pytorch",
    "regression", "reports", "roofline", "scaling", "shapes", "suite", "table", "timing",
    "training", "units", "variants", "widgets",
})
#: What ``import tinyprof`` used to load with the package: loaded together by _load_all.
_EAGER_SUBMODULES = ("flops", "memory", "models", "nn", "ops", "optim", "scaling", "shapes",
                     "timing", "variants")


def __getattr__(name: str):
    """Import a public name's module on first use and keep the name in the package."""
    home = _EXPORTS.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f".{home}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'tinyprof' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | _SUBMODULES)


def _load_all() -> None:
    """Bind every public name and the submodules the package used to import eagerly (plots and
    widgets stay lazy: they pull in matplotlib and ipywidgets)."""
    for name in _EAGER_SUBMODULES:
        __getattr__(name)
    for name, home in _EXPORTS.items():
        if home != "plots" and name not in globals():
            __getattr__(name)


class _Package(types.ModuleType):
    """The package module: binding ``tinyprof.testing`` (done by the import system once that
    module has loaded) first binds every public name, because the testing module names each
    route by the shortest public spelling it finds in ``vars(tinyprof)``."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "testing":
            _load_all()
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

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
