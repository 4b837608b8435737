"""Is this a torch object? Answered without importing torch.

A ``torch.nn.Module`` or a tensor can only exist once torch has been imported, so when
``"torch"`` is not in ``sys.modules`` the answer is no and torch stays unloaded; otherwise the
question is a plain ``isinstance`` against torch's own classes (never a class-name string).
The numpy entry points (``tp.count_parameters``, ``tp.count_flops``, ``tp.parameter_table``,
``tp.Profiler``, ``tp.ab_test``) ask here before dispatching to the torch modules, so this probe
sits on the ground floor of the layer table, below every wing that asks (it was
``tinyprof.pytorch.dispatch``, still an alias of this module).
"""

from __future__ import annotations

import sys
from functools import wraps
from typing import Any, Callable


def torch_loaded() -> bool:
    """True once some code has imported torch (this module never does)."""
    return "torch" in sys.modules


def is_torch_module(obj: Any) -> bool:
    """True for an instance of ``torch.nn.Module`` (False, and torch not imported, otherwise)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def is_torch_module_type(obj: Any) -> bool:
    """True for a subclass of ``torch.nn.Module`` (False, and torch not imported, otherwise)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, type) and issubclass(obj, torch.nn.Module)


def uses_cuda(*objects: Any) -> bool:
    """True when this process has started CUDA (then any callable may launch GPU work, a closure
    over a GPU model included), or when one of ``objects`` is a CUDA tensor, a module with a
    CUDA parameter or buffer, or a callable bound to such a module (a tuple or list is looked
    into, one level). Always False on a CPU-only build of torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if torch.cuda.is_initialized():
        return True
    for obj in objects:
        items = obj if isinstance(obj, (tuple, list)) else (obj,)
        for item in items:
            item = getattr(item, "__self__", item)   # a bound method: its module
            if isinstance(item, torch.Tensor) and item.is_cuda:
                return True
            if isinstance(item, torch.nn.Module) and any(
                    t.is_cuda for t in (*item.parameters(), *item.buffers())):
                return True
    return False


def synchronized(fn: Callable, *args: Any) -> Callable:
    """``fn`` itself when nothing involved is on a CUDA device; otherwise a wrapper whose every
    call waits for the device (``torch.cuda.synchronize()``) before returning."""
    if not uses_cuda(fn, args):
        return fn
    torch = sys.modules["torch"]

    @wraps(fn)
    def waited(*call_args: Any, **call_kwargs: Any) -> Any:
        result = fn(*call_args, **call_kwargs)
        torch.cuda.synchronize()
        return result

    return waited


__all__ = ["is_torch_module", "is_torch_module_type", "synchronized", "torch_loaded",
           "uses_cuda"]
