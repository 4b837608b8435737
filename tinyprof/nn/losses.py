"""Losses: each returns a scalar from forward and the gradient of that scalar from backward."""

from __future__ import annotations

import numpy as np

from .attention import softmax


class CrossEntropyLoss:
    """mean over rows of −log softmax(logits)[target]; d/dlogits = (softmax − onehot) / rows."""

    def __call__(self, logits: np.ndarray, targets: np.ndarray) -> float:
        return self.forward(logits, targets)

    def forward(self, logits: np.ndarray, targets: np.ndarray) -> float:
        flat = logits.reshape(-1, logits.shape[-1])
        targets = np.asarray(targets).reshape(-1)
        if targets.shape[0] != flat.shape[0]:
            raise ValueError(f"CrossEntropyLoss: {flat.shape[0]} rows of logits but "
                             f"{targets.shape[0]} targets")
        probs = softmax(flat.astype(np.float64))
        self._probs, self._targets, self._shape = probs, targets, logits.shape
        self._dtype = logits.dtype
        rows = np.arange(flat.shape[0])
        return float(-np.log(probs[rows, targets] + 1e-300).mean())

    def backward(self) -> np.ndarray:
        grad = self._probs.copy()
        grad[np.arange(grad.shape[0]), self._targets] -= 1.0
        grad /= grad.shape[0]
        return grad.reshape(self._shape).astype(self._dtype)


class MSELoss:
    """mean((prediction − target)²); d/dprediction = 2·(prediction − target) / size."""

    def __call__(self, prediction: np.ndarray, target: np.ndarray) -> float:
        return self.forward(prediction, target)

    def forward(self, prediction: np.ndarray, target: np.ndarray) -> float:
        if prediction.shape != np.shape(target):
            raise ValueError(f"MSELoss: prediction {prediction.shape} and target "
                             f"{np.shape(target)} differ in shape")
        self._diff = prediction - target
        return float(np.mean(self._diff.astype(np.float64) ** 2))

    def backward(self) -> np.ndarray:
        return (2.0 * self._diff / self._diff.size).astype(self._diff.dtype)
