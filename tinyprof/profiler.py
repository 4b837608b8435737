"""The seed-compatible facade: ``Profiler`` and ``quick_profile``.

Same method names and dictionary keys as the classic teaching profiler, but every value is
counted exactly or measured: FLOPs from the layer formulas (the backward from the real backward's
matmuls), memory with tracemalloc on a real training step, time with ``measure_latency``, and the
bottleneck from this machine's measured roofline instead of a hard-coded 100 GFLOP/s.
Memory is reported in MB = 10⁶ bytes, time in milliseconds.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .bottlenecks.layer_profiler import LayerProfiler
from .bottlenecks.roofline import machine_peaks
from .flops import count_flops
from .memory import TrainingMemory, training_memory
from .models.builders import random_input
from .nn.module import Module
from .nn.state import KeptState
from .params import count_parameters, parameter_bytes
from .table import Table
from .timing import measure_latency
from .torchprobe import is_torch_module, torch_loaded

MB = 1e6


def _shape(caller: str, input_shape: Sequence[int]) -> tuple:
    """``input_shape`` as a tuple; an array passed instead of its shape is a TypeError that says
    so (instead of an error message that prints the whole array)."""
    if isinstance(input_shape, np.ndarray):
        raise TypeError(f"Profiler.{caller} takes the input's shape, e.g. x.shape = "
                        f"{input_shape.shape}, not the array itself")
    try:
        return tuple(input_shape)
    except TypeError:
        raise TypeError(f"Profiler.{caller}: input_shape must be a tuple of ints, got "
                        f"{type(input_shape).__name__}") from None


def _output_grad(output: np.ndarray) -> np.ndarray:
    """A seeded gradient for the model's output (its values do not change the work done)."""
    rng = np.random.default_rng(0)
    return rng.standard_normal(output.shape).astype(output.dtype) / output.size


class Profiler:
    """Counting, measuring and profiling a model in one object (the classic API).

    Used as a context manager it is also the per-layer profiler (:mod:`tinyprof.layer_profiler`):
    ``with Profiler() as prof: model(x); model.backward(grad)`` records each layer's forward and
    backward calls; then ``prof.print_top_operations(n)``, ``prof.top_operations(n)`` and
    ``prof.export_chrome_trace(path)``. The first ``warmup`` calls of each layer and phase are
    left out of the table (and marked in the trace). When torch has been imported, every
    ``torch.nn.Module`` call, its backward and every ``torch.optim`` step in the block are
    recorded too (:mod:`tinyprof.bottlenecks.torch_profiler`), into the same table and trace.
    """

    def __init__(self, warmup: int = 0):
        self.layers = LayerProfiler(warmup)
        self._torch = None

    def __enter__(self) -> "Profiler":
        self.layers.__enter__()
        if torch_loaded():   # torch modules too: forward, backward and optimizer steps
            from .bottlenecks.torch_profiler import TorchRecorder

            self._torch = TorchRecorder(self.layers.warmup).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        recorded = self._torch.stop() if self._torch is not None else []
        self.layers.__exit__(*exc_info)
        if recorded:
            offset = len(self.layers.calls)
            self.layers.calls.extend(
                replace(call, parent=None if call.parent is None else call.parent + offset)
                for call in recorded)

    def top_operations(self, n: int = 10) -> Table:
        """The n (layer, phase) rows with the most self time (see LayerProfiler)."""
        return self.layers.top_operations(n)

    def print_top_operations(self, n: int = 10) -> None:
        """Print name, type, phase, calls, self and total time and share of the top n rows."""
        self.layers.print_top_operations(n)

    def export_chrome_trace(self, path: str | os.PathLike) -> Path:
        """Write the recorded calls as Chrome trace JSON (Perfetto, chrome://tracing)."""
        return self.layers.export_chrome_trace(path)

    def count_parameters(self, model: Module) -> int:
        """Σ parameter sizes, each array once (see :func:`tinyprof.count_parameters`)."""
        return count_parameters(model)

    def count_flops(self, model: Module, input_shape: Sequence[int]) -> int:
        """Forward matmul/conv/attention FLOPs for ``input_shape`` (batch included); a torch
        module also takes its inputs as a PyTorch user has them (a tensor, a tuple of tensors, a
        dict of keyword tensors such as ``{"input_ids": ids}``)."""
        if is_torch_module(model):
            return count_flops(model, input_shape)
        return count_flops(model, _shape("count_flops", input_shape))

    def measure_memory(self, model: Module, input_shape: Sequence[int]) -> dict[str, float]:
        """Measured on a real forward + loss + backward of a seeded input of ``input_shape``.

        - parameter_memory_mb: Σ nbytes of the parameters;
        - activation_memory_mb: traced bytes kept for backward after forward and loss;
        - peak_memory_mb: parameters + traced peak of the forward and loss;
        - memory_efficiency: (parameters + activations) / peak, the share of the peak that is
          not short-lived temporaries.
        """
        return self._memory(model, random_input(model, _shape("measure_memory",
                                                               input_shape)))[0]

    def _memory(self, model: Module, x: np.ndarray) -> tuple[dict[str, float], TrainingMemory]:
        """The classic memory keys, and the measured training step they come from."""
        step = training_memory(model, x, optimizer="sgd")
        params = step.parameters.measured_bytes
        activations = step.activations.measured_bytes
        peak = params + step.forward_peak_bytes
        return {"parameter_memory_mb": params / MB, "activation_memory_mb": activations / MB,
                "peak_memory_mb": peak / MB,
                "memory_efficiency": min((params + activations) / peak, 1.0)}, step

    def measure_latency(self, model: Module, input_tensor: np.ndarray, warmup: int = 10,
                        iterations: int = 100) -> float:
        """Median forward latency in milliseconds (full statistics: tinyprof.measure_latency)."""
        return measure_latency(model, input_tensor, warmup=warmup,
                               iterations=iterations).median * 1e3

    def profile_forward_pass(self, model: Module, input_tensor: np.ndarray) -> dict[str, Any]:
        """Parameters, FLOPs, measured latency and memory, achieved GFLOP/s, and the bottleneck.

        bytes moved ≥ parameters + input + activations (each read or written once: a lower
        bound on memory traffic); arithmetic intensity = FLOPs / bytes moved; bottleneck =
        "memory" below this machine's measured ridge point, "compute" above it.
        """
        flops = count_flops(model, tuple(input_tensor.shape))
        seconds = measure_latency(model, input_tensor, warmup=5, iterations=20).median
        memory, step = self._memory(model, input_tensor)
        bytes_moved = (step.parameters.measured_bytes + input_tensor.nbytes
                       + step.activations.measured_bytes)
        intensity = flops / bytes_moved
        peaks = machine_peaks()
        achieved = flops / seconds
        bound = peaks.bound(intensity)
        return {
            "parameters": count_parameters(model), "flops": flops, "latency_ms": seconds * 1e3,
            **memory,
            "gflops_per_second": achieved / 1e9,
            "memory_bandwidth_mbs": bytes_moved / seconds / MB,
            "arithmetic_intensity": intensity,
            "computational_efficiency": achieved / peaks.flops_per_second,
            "is_memory_bound": bound == "memory", "is_compute_bound": bound == "compute",
            "bottleneck": bound,
        }

    def profile_backward_pass(self, model: Module, input_tensor: np.ndarray) -> dict[str, Any]:
        """Forward and backward FLOPs (counted from the real backward), latencies (measured),
        gradient memory and optimizer state of SGD, momentum and Adam (real state arrays).

        backward latency = median(forward + backward) − median(forward): backward frees what
        forward saved, so it can only be timed together with a forward.
        """
        shape = tuple(input_tensor.shape)
        forward_flops = count_flops(model, shape)
        backward_flops = count_flops(model, shape, backward=True)
        grad = _output_grad(model(input_tensor))

        def forward_and_backward() -> None:
            model(input_tensor)
            model.backward(grad)

        with KeptState(model):
            forward_s = measure_latency(model, input_tensor, warmup=3, iterations=20).median
            step_s = measure_latency(forward_and_backward, warmup=3, iterations=20).median
        backward_s = max(step_s - forward_s, 0.0)
        memory, step = self._memory(model, input_tensor)
        gradients = step.gradients.measured_bytes
        total = step.parameters.measured_bytes + step.activations.measured_bytes + gradients
        peaks = machine_peaks()
        return {
            "forward_flops": forward_flops, "forward_latency_ms": forward_s * 1e3,
            "forward_memory_mb": memory["activation_memory_mb"],
            "backward_flops": backward_flops, "backward_latency_ms": backward_s * 1e3,
            "gradient_memory_mb": gradients / MB,
            "total_flops": forward_flops + backward_flops, "total_latency_ms": step_s * 1e3,
            "total_memory_mb": total / MB,
            "total_gflops_per_second": (forward_flops + backward_flops) / step_s / 1e9,
            "optimizer_memory_estimates": {name: state / MB for name, state
                                           in step.optimizer_state_bytes.items()},
            "memory_efficiency": memory["memory_efficiency"],
            "bottleneck": peaks.bound((forward_flops + backward_flops) / total),
        }


def quick_profile(model: Module, input_tensor: np.ndarray,
                  profiler: Profiler | None = None) -> dict[str, Any]:
    """Profile one forward pass, print a short summary, and return the full dictionary."""
    result = (profiler or Profiler()).profile_forward_pass(model, input_tensor)
    print(f"{type(model).__name__} on input {tuple(input_tensor.shape)}")
    print(f"  parameters   {result['parameters']:,} ({parameter_bytes(model) / MB:.2f} MB)")
    print(f"  FLOPs        {result['flops']:,}")
    print(f"  latency      {result['latency_ms']:.3f} ms (median)")
    print(f"  throughput   {result['gflops_per_second']:.2f} GFLOP/s "
          f"({result['computational_efficiency']:.0%} of this machine's measured peak)")
    print(f"  memory       peak {result['peak_memory_mb']:.2f} MB, "
          f"activations {result['activation_memory_mb']:.2f} MB")
    print(f"  bottleneck   {result['bottleneck']} "
          f"(intensity {result['arithmetic_intensity']:.1f} FLOPs/byte)")
    return result
