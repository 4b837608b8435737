"""Small real data sets that ship inside the package, so nothing is downloaded at run time.

:func:`digits` is the 8×8 handwritten digits: 1,797 images of 64 pixels (values 0–16), ten
classes. They are the test set of the UCI *Optical Recognition of Handwritten Digits* data
(``optdigits.tes``) as scikit-learn ships it (``sklearn.datasets.load_digits``), stored unchanged
as ``tinyprof/data/digits.npz`` (uint8 ``images`` of shape (1797, 64) and ``labels``, about
45 KB). Source: E. Alpaydin and C. Kaynak (1998), UCI Machine Learning Repository,
https://doi.org/10.24432/C50P49; licence: CC BY 4.0. ``tinyprof/data/README.md`` has the details,
and a test checks the arrays against scikit-learn's wherever scikit-learn is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

#: The number of images and of pixels per image in the digits data.
DIGITS_SHAPE = (1797, 64)


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
    images, labels = digits_arrays()
    x, y = (images / 16.0).astype(dtype), labels.astype(np.int64)
    rng = np.random.default_rng(seed)
    test = np.zeros(y.size, dtype=bool)
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        test[members[:int(round(test_fraction * members.size))]] = True
    train_order, test_order = rng.permutation(np.flatnonzero(~test)), np.flatnonzero(test)
    return Split(x[train_order], y[train_order], x[test_order], y[test_order])


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The digits as stored: ``images`` (1797, 64) uint8 pixel counts 0–16 (row-major 8×8) and
    ``labels`` (1797,) uint8 digits 0–9, in the order of ``sklearn.datasets.load_digits``."""
    source = resources.files("tinyprof") / "data" / "digits.npz"
    try:
        with source.open("rb") as file, np.load(file) as stored:
            images, labels = stored["images"], stored["labels"]
    except (OSError, KeyError) as problem:
        raise FileNotFoundError(f"tinyprof's copy of the digits ({source}) is missing or damaged "
                                "(reinstall tinyprof; pyproject.toml ships tinyprof/data/*.npz)"
                                ) from problem
    if images.shape != DIGITS_SHAPE or labels.shape != DIGITS_SHAPE[:1]:
        raise ValueError(f"{source}: expected images {DIGITS_SHAPE} and labels "
                         f"({DIGITS_SHAPE[0]},), got {images.shape} and {labels.shape}")
    return images, labels


__all__ = ["DIGITS_SHAPE", "Split", "digits", "digits_arrays"]
