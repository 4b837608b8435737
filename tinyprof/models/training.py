"""Training a small classifier with tinyprof's own backward passes and optimizers, and scoring it.

One epoch: shuffle (seeded), then for each mini-batch: logits = model(x), loss =
CrossEntropyLoss(logits, y), model.backward(loss.backward()), optimizer.step(), zero the grads.
"""

from __future__ import annotations

import numpy as np

from ..nn import CrossEntropyLoss
from ..nn.module import Module
from .optim import Adam


def train_classifier(model: Module, x: np.ndarray, y: np.ndarray, *, epochs: int = 30,
                     batch_size: int = 64, lr: float = 1e-2, seed: int = 0) -> list[float]:
    """Train ``model`` in place with Adam on cross-entropy; returns the mean loss of each
    epoch."""
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"train_classifier needs as many labels as rows, got {len(x)} rows and "
                         f"{len(y)} labels")
    loss, optimizer = CrossEntropyLoss(), Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    history = []
    for _ in range(epochs):
        order, total = rng.permutation(len(x)), 0.0
        for start in range(0, len(x), batch_size):
            rows = order[start:start + batch_size]
            total += loss(model(x[rows]), y[rows]) * len(rows)
            model.backward(loss.backward())
            optimizer.step()
            model.zero_grad()
        history.append(total / len(x))
    return history


def accuracy(model, x: np.ndarray, y: np.ndarray) -> float:
    """Share of rows whose largest logit is the true class: mean(argmax(model(x)) == y)."""
    return float(np.mean(np.argmax(model(x), axis=-1) == np.asarray(y)))


__all__ = ["accuracy", "train_classifier"]
