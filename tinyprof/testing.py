"""Helpers for the chapters' test cells: failures that name the likely mistake, and hidden tests
that check the student's own code rather than tinyprof's.

``expect(got, want, what, hints)`` fails with "what: expected W, got G: <hint>", where the hint
is looked up by the wrong value the student produced (for example the value one gets by
forgetting the bias). ``reference_unavailable()`` swaps tinyprof's reference implementations
for functions that raise, so an exercise that merely calls them earns nothing.
"""

from __future__ import annotations

import importlib
import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

#: What each chapter's exercises could delegate to; swapped out by reference_unavailable().
REFERENCES = (
    "tinyprof.count_parameters", "tinyprof.params.count_parameters",
    "tinyprof.parameter_bytes", "tinyprof.params.parameter_bytes",
    "tinyprof.parameter_table", "tinyprof.params.parameter_table",
    "tinyprof.amdahl_speedup", "tinyprof.amdahl.amdahl_speedup",
    "tinyprof.count_flops", "tinyprof.flops.count_flops",
    "tinyprof.flops.counter.count_flops", "tinyprof.flops_by_layer",
    "tinyprof.flops.flops_by_layer", "tinyprof.flops.counter.flops_by_layer",
    "tinyprof.flop_report", "tinyprof.flops.flop_report", "tinyprof.flops.counter.flop_report",
    "tinyprof.measure_matmul_flops", "tinyprof.flops.measure_matmul_flops",
    "tinyprof.flops.formulas.linear_flops", "tinyprof.flops.formulas.conv2d_flops",
    "tinyprof.flops.formulas.attention_flops",
    "tinyprof.measure_memory", "tinyprof.memory.measure_memory",
    "tinyprof.memory.trace.measure_memory", "tinyprof.MemoryTimeline",
    "tinyprof.memory.MemoryTimeline", "tinyprof.memory.trace.MemoryTimeline",
    "tinyprof.memory.trace.TraceWindow",
    "tinyprof.memory.activation_bytes", "tinyprof.memory.activations.activation_bytes",
    "tinyprof.memory.activation_rows", "tinyprof.memory.activations.activation_rows",
    "tinyprof.activation_table", "tinyprof.memory.activation_table",
    "tinyprof.memory.activations.activation_table",
    "tinyprof.predict_training_memory", "tinyprof.memory.predict_training_memory",
    "tinyprof.memory.training.predict_training_memory",
    "tinyprof.training_memory", "tinyprof.memory.training_memory",
    "tinyprof.memory.training.training_memory",
    "tinyprof.measure_latency", "tinyprof.timing.measure_latency",
)


class ReferenceUnavailable(RuntimeError):
    """Raised when an exercise calls the tinyprof function it is meant to re-implement."""


def _matches(got: Any, candidate: Any, rel: float) -> bool:
    try:
        return math.isclose(float(got), float(candidate), rel_tol=rel, abs_tol=0.0)
    except (TypeError, ValueError):
        return got == candidate


def expect(got: Any, want: Any, what: str, hints: Mapping[Any, str] | None = None,
           rel: float = 0.0, otherwise: str = "") -> None:
    """Assert ``got`` equals ``want`` (within relative tolerance ``rel``), else fail with a
    message naming ``what`` and, when ``got`` is a known wrong answer, the likely mistake."""
    if got is None:
        raise AssertionError(f"{what}: got None; did you forget to return the result?")
    if _matches(got, want, rel):
        return
    hint = next((text for value, text in (hints or {}).items() if _matches(got, value, 1e-9)),
                otherwise)
    shown = f"{got:,}" if isinstance(got, int) and not isinstance(got, bool) else repr(got)
    wanted = f"{want:,}" if isinstance(want, int) and not isinstance(want, bool) else repr(want)
    raise AssertionError(f"{what}: expected {wanted}, got {shown}" + (f". {hint}" if hint else ""))


def _unavailable(name: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ReferenceUnavailable(
            f"{name} is switched off while your function is checked: the exercise asks you to "
            "compute this yourself rather than call tinyprof's own implementation")
    return refuse


def _resolve(dotted: str) -> tuple[Any, str] | None:
    module_name, _, attr = dotted.rpartition(".")
    try:
        owner = importlib.import_module(module_name)
    except ImportError:
        module_path, _, cls = module_name.rpartition(".")
        try:
            owner = getattr(importlib.import_module(module_path), cls)
        except (ImportError, AttributeError):
            return None
    return (owner, attr) if hasattr(owner, attr) else None


@contextmanager
def reference_unavailable(*extra: str) -> Iterator[None]:
    """Within the block, tinyprof's reference functions (and any ``extra`` dotted names, such as
    ``"tinyprof.nn.Module.parameters"``) raise ReferenceUnavailable; all are restored after."""
    saved = []
    for dotted in REFERENCES + extra:
        found = _resolve(dotted)
        if found is None:
            continue
        owner, attr = found
        saved.append((owner, attr, owner.__dict__.get(attr, getattr(owner, attr))))
        setattr(owner, attr, _unavailable(dotted))
    try:
        yield
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)
