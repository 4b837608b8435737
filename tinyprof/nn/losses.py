"""Losses: each returns a scalar from forward and the gradient of that scalar from backward."""

from __future__ import annotations

import numpy as np


class CrossEntropyLoss:
    """mean over rows of −log softmax(logits)[target]; d/dlogits = (softmax − onehot) / rows.

    Computed in the logits' dtype as log Σ exp(s) − s[target] with s = logits − max (no float64
    copy of the logits). Forward saves the probabilities (rows × classes) and the targets;
    backward turns the saved probabilities into the gradient in place and releases them.
    """

    def __call__(self, logits: np.ndarray, targets: np.ndarray) -> float:
        return self.forward(logits, targets)

    def forward(self, logits: np.ndarray, targets: np.ndarray) -> float:
        flat = logits.reshape(-1, logits.shape[-1])
        targets = np.asarray(targets).reshape(-1)
        if targets.shape[0] != flat.shape[0]:
            raise ValueError(f"CrossEntropyLoss: {flat.shape[0]} rows of logits but "
                             f"{targets.shape[0]} targets")
        if not np.issubdtype(flat.dtype, np.floating):
            flat = flat.astype(np.float64)
        rows = np.arange(flat.shape[0])
        shifted = flat - flat.max(axis=-1, keepdims=True)
        picked = shifted[rows, targets]
        probs = np.exp(shifted, out=shifted)
        total = probs.sum(axis=-1, keepdims=True)
        probs /= total
        self._probs, self._targets, self._shape = probs, targets, logits.shape
        return float(np.mean(np.log(total[:, 0], dtype=np.float64) - picked))

    def backward(self) -> np.ndarray:
        grad, targets = _pop_saved(self, "_probs", "_targets")
        grad[np.arange(grad.shape[0]), targets] -= 1.0
        grad /= grad.shape[0]
        return grad.reshape(self._shape)


class MSELoss:
    """mean((prediction − target)²); d/dprediction = 2·(prediction − target) / size."""

    def __call__(self, prediction: np.ndarray, target: np.ndarray) -> float:
        return self.forward(prediction, target)

    def forward(self, prediction: np.ndarray, target: np.ndarray) -> float:
        if prediction.shape != np.shape(target):
            raise ValueError(f"MSELoss: prediction {prediction.shape} and target "
                             f"{np.shape(target)} differ in shape")
        self._diff = prediction - target
        return float(np.mean(np.square(self._diff), dtype=np.float64))

    def backward(self) -> np.ndarray:
        (diff,) = _pop_saved(self, "_diff")
        return (2.0 * diff / diff.size).astype(diff.dtype, copy=False)


def _pop_saved(loss, *names: str) -> tuple:
    """The arrays a loss's forward saved, released (as :meth:`Module.pop_saved` does)."""
    values = tuple(getattr(loss, name, None) for name in names)
    if any(value is None for value in values):
        raise RuntimeError(f"{type(loss).__name__}.backward needs a forward first: backward "
                           "frees what forward saved, so call the loss again first")
    for name in names:
        setattr(loss, name, None)
    return values
