"""Small real data sets that ship inside a package, so nothing is downloaded at run time.

:func:`digits` is scikit-learn's copy of the UCI handwritten digits (1,797 images of 8×8 pixels,
values 0–16, ten classes). scikit-learn is needed for it alone (Colab has it; elsewhere
``pip install scikit-learn``); ``import tinyprof`` never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Split:
    """Training and held-out arrays: images as float rows, labels as int64 class ids."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def __repr__(self) -> str:
        return (f"Split(train {self.x_train.shape} → {len(np.unique(self.y_train))} classes, "
                f"test {self.x_test.shape})")


def digits(test_fraction: float = 0.25, seed: int = 0, dtype=np.float32) -> Split:
    """The 8×8 digits as 64 features scaled to [0, 1] (pixel / 16), shuffled with ``seed`` and
    split so that ``test_fraction`` of every class is held out (a stratified split)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    try:
        from sklearn.datasets import load_digits
    except ImportError as missing:
        raise ImportError("tinyprof.datasets.digits reads scikit-learn's copy of the digits: "
                          "pip install scikit-learn") from missing
    data = load_digits()
    x, y = (data.data / 16.0).astype(dtype), data.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    test = np.zeros(y.size, dtype=bool)
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        test[members[:int(round(test_fraction * members.size))]] = True
    train_order, test_order = rng.permutation(np.flatnonzero(~test)), np.flatnonzero(test)
    return Split(x[train_order], y[train_order], x[test_order], y[test_order])


__all__ = ["Split", "digits"]
