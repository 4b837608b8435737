"""Leave a model as it was after measuring it: gradients, saved activations and, if asked, weights.

Profiling runs real forward and backward passes (and sometimes optimizer steps) on a user's
model. Without care that would add into the user's ``.grad`` arrays, drop the activations a
pending ``backward`` needs, or train the model. Every measurement in tinyprof runs inside
:class:`KeptState`, the one place that saves and restores all three.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .module import Module, Parameter


class KeptState:
    """Context manager: inside, every parameter's ``.grad`` is None (a measured backward starts
    from zero); on exit, even after an error, the model is as it was on entry.

    Saved on entry and put back on exit:

    * each parameter's ``.grad`` (the same array object, not a copy);
    * each layer's saved-for-backward state, its private (``_``-prefixed) attributes: those a
      measurement set are removed, those it replaced are put back;
    * with ``weights=True``, a copy of each parameter's values (an optimizer step changes them),
      also available mid-measurement through :meth:`restore_weights`.
    """

    def __init__(self, model: Module, *, weights: bool = False):
        if not isinstance(model, Module):
            raise TypeError(f"KeptState needs a tinyprof Module, got {type(model).__name__}")
        self.model = model
        self.params: list[Parameter] = list(model.parameters())
        self._grads = [param.grad for param in self.params]
        self._weights = [np.array(p.data, copy=True) for p in self.params] if weights else None
        self._saved = [(module, _private(module)) for _, module in model.named_modules()]

    def __enter__(self) -> "KeptState":
        for param in self.params:
            param.grad = None
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.restore()

    def restore_weights(self) -> None:
        """Put the parameters' values back as they were on entry (needs ``weights=True``)."""
        if self._weights is None:
            raise RuntimeError("KeptState(model) kept no weights: use KeptState(model, "
                               "weights=True) to restore them")
        for param, data in zip(self.params, self._weights, strict=True):
            np.copyto(param.data, data)

    def restore(self) -> None:
        """Gradients, saved activations and (if kept) weights as on entry."""
        if self._weights is not None:
            self.restore_weights()
        for param, grad in zip(self.params, self._grads, strict=True):
            param.grad = grad
        for module, saved in self._saved:
            for key in [key for key in _private(module) if key not in saved]:
                delattr(module, key)
            for key, value in saved.items():
                setattr(module, key, value)


def _private(module: Module) -> dict[str, Any]:
    return {key: value for key, value in vars(module).items() if key.startswith("_")}


__all__ = ["KeptState"]
