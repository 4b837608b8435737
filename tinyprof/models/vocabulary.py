"""The names a caller may give a loss or an optimizer, and what each one keeps.

One place for the words ``"cross_entropy"``, ``"mse"``, ``"sgd"``, ``"momentum"`` and ``"adam"``
that the memory formulas (:mod:`tinyprof.memory`), the batch-size search and the chapters
accept: how to build each, and how many parameter-sized state arrays an optimizer keeps per
parameter (k = 0 for SGD, 1 for momentum's velocity, 2 for Adam's two moments).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..nn import CrossEntropyLoss, MSELoss
from .optim import SGD, Adam, Optimizer

#: How to build each named optimizer, and how many parameter-sized arrays it keeps per parameter.
OPTIMIZERS: dict[str, Callable[[list], Optimizer]] = {
    "sgd": lambda params: SGD(params, lr=0.01),
    "momentum": lambda params: SGD(params, lr=0.01, momentum=0.9),
    "adam": lambda params: Adam(params, lr=1e-3),
}
STATE_SLOTS = {"sgd": 0, "momentum": 1, "adam": 2}
LOSSES: dict[str, Callable[[], Any]] = {"cross_entropy": CrossEntropyLoss, "mse": MSELoss}


def make_loss(loss: Any) -> Any:
    """None → CrossEntropyLoss(); "cross_entropy" / "mse"; or a loss object used as given."""
    if loss is None:
        return CrossEntropyLoss()
    if isinstance(loss, str):
        if loss not in LOSSES:
            raise ValueError(f"loss: unknown name {loss!r}; choose from {sorted(LOSSES)} or "
                             "pass a loss object")
        return LOSSES[loss]()
    if not (callable(loss) and hasattr(loss, "backward")):
        raise TypeError(f"loss must be a name or an object with __call__ and backward(), got "
                        f"{type(loss).__name__}")
    return loss


def optimizer_kind(optimizer: str | Optimizer) -> str:
    """"sgd", "momentum" or "adam" for a name or an SGD/Adam instance."""
    if isinstance(optimizer, str):
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer: unknown name {optimizer!r}; choose from "
                             f"{list(OPTIMIZERS)} or pass an Optimizer")
        return optimizer
    if isinstance(optimizer, Adam):
        return "adam"
    if isinstance(optimizer, SGD):
        return "momentum" if optimizer.momentum else "sgd"
    if isinstance(optimizer, Optimizer):
        raise ValueError(f"optimizer: no state formula for {type(optimizer).__name__}; "
                         f"use one of {list(OPTIMIZERS)}, SGD or Adam")
    raise TypeError(f"optimizer must be a name {list(OPTIMIZERS)} or an Optimizer, got "
                    f"{type(optimizer).__name__}")


def random_targets(loss: Any, output: np.ndarray, seed: int = 1) -> np.ndarray:
    """Class ids in [0, C) over the output's last axis for cross-entropy, else normal values."""
    rng = np.random.default_rng(seed)
    if isinstance(loss, CrossEntropyLoss):
        return rng.integers(0, output.shape[-1], size=output.shape[:-1])
    return rng.standard_normal(output.shape).astype(output.dtype)


__all__ = ["LOSSES", "OPTIMIZERS", "STATE_SLOTS", "make_loss", "optimizer_kind",
           "random_targets"]
