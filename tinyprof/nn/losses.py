"""Losses: each returns a scalar from forward and the gradient of that scalar from backward."""

from __future__ import annotations

import numpy as np

from .checks import array, floating


class CrossEntropyLoss:
    """mean over rows of −log softmax(logits)[target]; d/dlogits = (softmax − onehot) / rows.

    Computed in the logits' dtype as log Σ exp(s) − s[target] with s = logits − max (no float64
    copy of the logits). Forward saves the probabilities (rows × classes) and the targets;
    backward turns the saved probabilities into the gradient in place and releases them.
    """

    def __call__(self, logits: np.ndarray, targets: np.ndarray) -> float:
        return self.forward(logits, targets)

    def forward(self, logits: np.ndarray, targets: np.ndarray) -> float:
        logits = floating("CrossEntropyLoss", "logits", logits)
        targets = array("CrossEntropyLoss", "targets", targets)
        if logits.ndim < 1 or logits.shape[-1] < 1:
            raise ValueError("CrossEntropyLoss: logits need a class axis, got shape "
                             f"{logits.shape}")
        flat = logits.reshape(-1, logits.shape[-1])
        if not np.issubdtype(targets.dtype, np.integer):
            raise TypeError(f"CrossEntropyLoss: targets are class ids and must be integers, got "
                            f"dtype {targets.dtype}")
        targets = targets.reshape(-1)
        if targets.shape[0] != flat.shape[0]:
            raise ValueError(f"CrossEntropyLoss: {flat.shape[0]} rows of logits but "
                             f"{targets.shape[0]} targets")
        if flat.shape[0] == 0:
            raise ValueError("CrossEntropyLoss: empty batch (no rows): the mean over no rows is "
                             "undefined")
        classes = flat.shape[1]
        if targets.min() < 0 or targets.max() >= classes:
            bad = targets[(targets < 0) | (targets >= classes)][0]
            raise ValueError(f"CrossEntropyLoss: target {bad} is not a class id: there are "
                             f"{classes} classes, ids 0 to {classes - 1}")
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
        prediction = floating("MSELoss", "prediction", prediction)
        target = array("MSELoss", "target", target)
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
