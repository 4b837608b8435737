"""The 8×8 digits ship inside tinyprof (tinyprof/data/digits.npz): the same values as
scikit-learn's ``load_digits``, with no scikit-learn needed to read them (issue 26)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from tinyprof import datasets

#: SHA-256 of the stored arrays' bytes, recorded when the file was made from scikit-learn 1.9.1's
#: load_digits(); tinyprof/data/README.md says how.
IMAGES_SHA256 = "8f26b2bd9d135c256808f68f14fdabddde6d9c7f869ae419704b051f0f14b3b3"
LABELS_SHA256 = "8ba4f891220f5e4c9c819638d1602d74b83618f167043c6da52a2a247841ddf0"
#: Images of each digit 0–9 in the UCI test set (optdigits.tes), as the data set's page lists.
UCI_TEST_COUNTS = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_the_shipped_digits_are_the_uci_test_set():
    images, labels = datasets.digits_arrays()
    assert images.shape == (1797, 64) and labels.shape == (1797,)
    assert images.dtype == np.uint8 and labels.dtype == np.uint8
    assert images.min() == 0 and images.max() == 16       # 4×4 blocks of a 32×32 bitmap: 0–16
    assert np.bincount(labels, minlength=10).tolist() == UCI_TEST_COUNTS
    assert hashlib.sha256(images.tobytes()).hexdigest() == IMAGES_SHA256
    assert hashlib.sha256(labels.tobytes()).hexdigest() == LABELS_SHA256


def test_the_shipped_digits_equal_scikit_learns_exactly():
    sklearn_datasets = pytest.importorskip("sklearn.datasets",
                                           reason="scikit-learn is not installed to compare with")
    reference = sklearn_datasets.load_digits()
    images, labels = datasets.digits_arrays()
    assert np.array_equal(images.astype(np.float64), reference.data)
    assert np.array_equal(images.reshape(-1, 8, 8).astype(np.float64), reference.images)
    assert np.array_equal(labels.astype(reference.target.dtype), reference.target)
    split = datasets.digits(seed=0)
    scaled = (reference.data / 16.0).astype(np.float32)   # what digits() computed before
    rows = [np.flatnonzero((scaled == row).all(axis=1))[0] for row in split.x_test[:20]]
    assert np.array_equal(reference.target[rows], split.y_test[:20])


def test_reading_the_digits_needs_no_scikit_learn_or_scipy():
    code = ("import sys; sys.modules['sklearn'] = None; sys.modules['scipy'] = None\n"
            "from tinyprof import datasets\n"
            "split = datasets.digits(seed=0)\n"
            "print(split.x_train.shape, split.x_test.shape, split.x_train.dtype)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "(1347, 64) (450, 64) float32"
