"""tinyprof: measure where the parameters, FLOPs, memory and time of a numpy model go.

``import tinyprof`` loads none of its submodules (PEP 562, as scipy does): each public name below
is imported from its module the first time it is used (``tp.measure_latency``, ``from tinyprof
import nn``), then kept, so the import costs next to nothing and a session pays only for what it
uses (benchmarks/bench_cli_startup.py measures it against ``import numpy``). Importing
``tinyprof.testing``, which names every public route by reading the package's namespace, loads
them all first, so the namespace it reads is the complete one.

The library has a wing per chapter: ``timing`` (chapter 4, with ``abtest`` and ``scaling``),
``bottlenecks`` (chapter 5: ``roofline``, ``layer_profiler``, ``placement``), ``bench``
(chapter 6: ``suite``, ``regression``, ``reports``, ``classic``) and ``models`` (``builders``,
``optim``, ``vocabulary``, ``training``, ``variants``, ``datasets``). A module that moved into a
wing keeps its old name (``tinyprof.roofline``, ``tinyprof.abtest``, ``python -m
tinyprof.regression``): the old name is an alias of the very same module object (``_MOVED``),
so importing, patching or running either name reaches the one module. The torch code sits in
the same wings, beside the numpy module it mirrors (``flops.torch_counter``,
``memory.torch_step``, ``bottlenecks.torch_placement``, ...); ``tinyprof.pytorch`` is its lazy
public face, and its old submodules (``tinyprof.pytorch.flops``, ...) are aliases too.
"""

import importlib
import sys
import types

__version__ = "0.1.0"

#: Old module name → where the module lives now (issue 22's wings, issue 34's torch modules);
#: the old name is an alias.
_MOVED = {
    "abtest": "timing.abtest", "scaling": "timing.scaling",
    "roofline": "bottlenecks.roofline", "layer_profiler": "bottlenecks.layer_profiler",
    "suite": "bench.suite", "regression": "bench.regression", "reports": "bench.reports",
    "classic": "bench.classic",
    "optim": "models.optim", "training": "models.training", "variants": "models.variants",
    "datasets": "models.datasets",
    "memory.training": "memory.step",
    # issue 34: the torch wing's modules sit in the wings of their numpy counterparts
    "pytorch.dispatch": "torchprobe", "pytorch.params": "torch_params",
    "pytorch.flops": "flops.torch_counter", "pytorch.formulas": "flops.torch_formulas",
    "pytorch.memory": "memory.torch_step", "pytorch.timing": "timing.torch_cuda",
    "pytorch.profiler": "bottlenecks.torch_profiler",
    "pytorch.roofline": "bottlenecks.torch_placement",
}

#: Public name → the submodule it is defined in (imported on first use).
_EXPORTS = {
    **dict.fromkeys(("ABResult", "ab_test"), "timing.abtest"),
    **dict.fromkeys(("amdahl_limit", "amdahl_speedup", "required_factor"), "amdahl"),
    **dict.fromkeys(("layer_work", "place_layers"), "bottlenecks.placement"),
    **dict.fromkeys(("MemoryTracker", "Timer", "profile"), "bench.classic"),
    **dict.fromkeys(("arithmetic_intensity", "count_flops", "flop_report", "flops_by_layer",
                     "gflops_per_second", "measure_matmul_flops", "register_flops"), "flops"),
    "LayerProfiler": "bottlenecks.layer_profiler",
    **dict.fromkeys(("MemoryMeasurement", "MemoryTimeline", "activation_table",
                     "max_batch_size", "measure_memory", "predict_training_memory",
                     "training_memory"), "memory"),
    **dict.fromkeys(("count_parameters", "parameter_bytes", "parameter_groups",
                     "parameter_table"), "params"),
    **dict.fromkeys(("Profiler", "quick_profile"), "profiler"),
    "check_regression": "bench.regression",
    **dict.fromkeys(("BatchScaling", "batch_scaling", "best_batch_under_latency"),
                    "timing.scaling"),
    **dict.fromkeys(("register_container", "register_shape", "trace_shapes"), "shapes"),
    **dict.fromkeys(("SuiteResult", "benchmark_suite"), "bench.suite"),
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
    "amdahl", "bench", "bottlenecks", "faster", "flops", "leaks", "loading", "memory", "models",
    "nn", "ops", "params", "plots", "profiler", "pytorch", "shapes", "table", "timing", "units",
    "widgets",
} | {old for old in _MOVED if "." not in old})
#: What ``import tinyprof`` used to load with the package: loaded together by _load_all.
_EAGER_SUBMODULES = ("flops", "memory", "models", "nn", "ops", "optim", "scaling", "shapes",
                     "timing", "variants")

#: The grading machinery: the modules that carry the grader's requests in the student's kernel
#: (``testing``'s switch, ``remote``'s answers, ``wire``'s format, ``pipecheck``'s graded input
#: loop and ``prefetchcheck``'s probe of a student's prefetcher). tinyprof.testing never
#: switches them off nor counts them as tinyprof's own code. The roll is here, beside the
#: other rolls of the package's modules, rather than in testing (which would name a module
#: that imports it) or in a flag each module sets on itself (which testing could read only by
#: importing them, and which notebook code could set on any module); testing copies it into
#: its sealed namespace when it is imported, before the student's code runs.
_GRADING_MACHINERY = frozenset({"testing", "remote", "wire", "pipecheck", "prefetchcheck"})


def _install_moved_names() -> None:
    """Put a finder for the old names of moved modules at the end of ``sys.meta_path`` (after
    the path finder, so a real file always wins). Its spec's loader hands over the module that
    lives at the new name (``create_module``) and leaves it as it is (``exec_module`` puts back
    the module's own ``__spec__``, which the import system overwrote); ``get_code`` serves
    ``python -m OLD``, run with the new module's package so its relative imports resolve. The
    classes live only in this function: the package's namespace holds no finder that
    ``tinyprof.testing`` would list among the routes it switches off."""
    from importlib.machinery import ModuleSpec

    class AliasSpec(ModuleSpec):
        @property
        def parent(self) -> str:
            return self.loader.target.rpartition(".")[0]

    class Alias:
        def __init__(self, target: str):
            self.target = target

        def create_module(self, spec):
            module = importlib.import_module(self.target)
            self.own_spec = module.__spec__
            return module

        def exec_module(self, module) -> None:
            module.__spec__ = self.own_spec

        def get_code(self, fullname: str):
            spec = importlib.import_module(self.target).__spec__
            return spec.loader.get_code(self.target)

    class MovedNames:
        def find_spec(self, fullname: str, path=None, target=None):
            old = fullname[len(__name__) + 1:] if fullname.startswith(__name__ + ".") else None
            if old not in _MOVED:
                return None
            new = f"{__name__}.{_MOVED[old]}"
            origin = importlib.util.find_spec(new).origin
            return AliasSpec(fullname, Alias(new), origin=origin)

    import importlib.util  # noqa: F401 - find_spec above

    sys.meta_path.append(MovedNames())


_install_moved_names()


def __getattr__(name: str):
    """Import a public name's module on first use and keep the name in the package."""
    home = _EXPORTS.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f".{home}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{_MOVED.get(name, name)}", __name__)
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
