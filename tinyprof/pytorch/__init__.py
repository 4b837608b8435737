"""tinyprof on PyTorch modules (``pip install "tinyprof[torch]"``): the course's measurements on a
``torch.nn.Module``, each one checked against torch's own tools in the tests and in chapter 07.

* :func:`count_parameters`, :func:`parameter_counts`, :func:`parameter_table` — each tensor once
  (tied weights once), trainable and frozen apart (``tp.count_parameters(module)`` and
  ``tp.parameter_table(module)`` dispatch here);
* :func:`count_flops`, :func:`flops_by_module`, :func:`flop_report` — tinyprof's own formula
  for each aten operator of one traced forward pass (:mod:`tinyprof.flops.torch_formulas`), charged
  to the module that ran it, forward or backward; :func:`register_flops` for a module of your
  own counted as one, :func:`register_function_flops` for an aten operator
  (``tp.count_flops(module, shape)`` dispatches here). Inputs: a shape, a tensor, a tuple of
  tensors or a dict of keyword tensors (a Hugging Face model's ``input_ids=`` ...);
* :func:`training_memory` — parameters, gradients, optimizer state and activations of one real
  training step, measured beside the formulas, with its timeline and measured peak;
* ``with tp.Profiler() as prof`` records every module's forward *and* backward (see
  :mod:`tinyprof.bottlenecks.torch_profiler`); :func:`place_modules` puts each module on the
  measured roofline;
* :func:`synchronized` and :func:`cuda_event_seconds` — timing that stays right when a module
  runs on a GPU; ``tp.measure_latency`` and ``tp.ab_test`` take torch callables and wait for
  the device when one is involved (asynchronous launches are waited for).

``import tinyprof`` and ``import tinyprof.pytorch`` never import torch: each name below is
imported from its module the first time it is used, and only those modules import torch.

Where the code lives (issue 34): each torch module sits in the wing of its numpy counterpart,
on that wing's floor of the layer table (tests/test_architecture.py), and this package is only
the public face over them. The probe "is this torch?" is :mod:`tinyprof.torchprobe` (the
ground floor: the numpy entry points ask it before dispatching); parameters are
:mod:`tinyprof.torch_params`; FLOPs :mod:`tinyprof.flops.torch_counter` and
:mod:`tinyprof.flops.torch_formulas`; training memory :mod:`tinyprof.memory.torch_step`; GPU
timing :mod:`tinyprof.timing.torch_cuda`; the profiler and the roofline placement
:mod:`tinyprof.bottlenecks.torch_profiler` and :mod:`tinyprof.bottlenecks.torch_placement`.
The old names (``tinyprof.pytorch.flops``, ``.dispatch``, ``.params``, ``.formulas``,
``.memory``, ``.timing``, ``.profiler``, ``.roofline``) are aliases of the very same module
objects (``tinyprof._MOVED``), so importing or patching either name reaches the one module.
"""

import importlib

#: Public name → the module it is defined in, below ``tinyprof`` (imported on first use).
_EXPORTS = {
    **dict.fromkeys(("count_parameters", "parameter_counts", "parameter_table"),
                    "torch_params"),
    **dict.fromkeys(("Call", "ModuleFlops", "MissingFlopFormulaError", "count_flops",
                     "example_input", "flop_report", "flops_by_module", "model_inputs",
                     "register_flops", "register_function_flops"), "flops.torch_counter"),
    **dict.fromkeys(("LiveStorages", "activation_table", "training_memory"),
                    "memory.torch_step"),
    "TorchRecorder": "bottlenecks.torch_profiler",
    **dict.fromkeys(("module_work", "place_modules"), "bottlenecks.torch_placement"),
    "cuda_event_seconds": "timing.torch_cuda",
    **dict.fromkeys(("is_torch_module", "synchronized", "torch_loaded", "uses_cuda"),
                    "torchprobe"),
}

#: The old submodule names, each an alias of the module it moved to (``tinyprof._MOVED``).
_SUBMODULES = frozenset({"dispatch", "flops", "formulas", "memory", "params", "profiler",
                         "roofline", "timing"})

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    home = _EXPORTS.get(name)
    if name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    elif home is None:
        raise AttributeError(f"module 'tinyprof.pytorch' has no attribute {name!r}")
    else:
        value = getattr(importlib.import_module(f"tinyprof.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | _SUBMODULES)
