"""Chapter 08's training pipeline: slow but correct, with eight bottlenecks a person could write.

One SGD step of a digit classifier, in six stages (each a :class:`Stage` module, so that the
per-layer profiler gives each a row):

1. ``read``: the data set (the 8×8 digits, ``tinyprof/data/digits.npz``) read from storage:
   the file opened and decompressed;
2. ``statistics``: the data set's robust per-pixel centre and scale (median, 5th–95th
   percentile spread) for normalising;
3. ``load``: each sample upscaled to 16×16, shifted by its augmentation offset and normalised,
   and the batch's labels gathered;
4. ``hidden``: h = x·W1 + b1 and a = GELU(h) (tanh form), with GELU'(h) kept for backward;
5. ``loss``: logits z = a·W2 + b2 and the cross-entropy against label-smoothed targets, with
   its gradient dz;
6. ``update``: the backward matmuls and SGD with weight decay, w ← w − lr·(g + λ·w).

The eight bottlenecks, each named after its fix (:data:`FIXES`, in the order chapter 08
introduces them; which pays most is measured, never assumed: :mod:`.analysis` forecasts each):

- ``quiet_logging``: every sample's pixels are formatted into a debug message, an f-string
  built even though the debug level is off; only cProfile shows it (numpy's array printing);
- ``cached_statistics``: the percentiles (a sort of every pixel's column) are recomputed every
  step although the data set never changes;
- ``cached_dataset``: the data set is read from storage (opened, decompressed) every step,
  although it fits in memory and never changes;
- ``cube_by_multiplying``: the GELU's cube is written ``x ** 3``, numpy's general power
  function for every element, where ``x * x * x`` is two multiplies;
- ``in_place``: the GELU and its derivative are chains of temporaries, a fresh array (fresh
  pages from the operating system) per operator, and the update copies the weights before it
  changes them; the fix works in place in a few buffers;
- ``vectorised_loading``: the batch is loaded one sample at a time in a Python loop;
- ``batched_loss``: the loss and its gradient are computed one sample at a time (ten-element
  arrays: all overhead);
- ``float32``: everything is float64, twice the bytes of float32, whose rounding (about 1e-7
  relative) is far below what one SGD step needs.

:func:`step` runs one step with any set of fixes; :func:`slow_step` is the step with none (the
baseline), :func:`fast_step` the step with all. :func:`make_inputs` draws fresh weights and a
fresh batch (``make_activations``, ``make_logits`` and ``make_load_inputs`` do the same for the
single stages). Every version computes the same loss and new weights, to float32 rounding: a fix
changes where the time goes, never the answer (``tests/test_faster.py`` checks each one).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Callable, Collection

import numpy as np

from ..models.datasets import digits_arrays
from ..nn.module import Module

#: The fixes, in the order chapter 08 introduces them (not an order of size: that is measured).
FIXES = ("quiet_logging", "cached_statistics", "cached_dataset", "cube_by_multiplying",
         "in_place", "vectorised_loading", "batched_loss", "float32")
#: Upscaling factor of the 8×8 digits (16×16 = 256 inputs).
SCALE = 2
SIDE = 8 * SCALE
FEATURES = SIDE * SIDE
#: The largest augmentation shift, in pixels, either way.
MAX_SHIFT = 2
HIDDEN = 512
CLASSES = 10
BATCH = 256
LEARNING_RATE = 0.05
WEIGHT_DECAY = 1e-4
#: Label smoothing: this share of each target is spread evenly over the classes.
SMOOTHING = 0.1
#: √(2/π) of the GELU's tanh form.
GELU_C = float(np.sqrt(2.0 / np.pi))
#: The debug log the slow loader formats its messages for (off unless a caller turns it on).
LOG = logging.getLogger(__name__)


def check_fixes(fixes: Collection[str]) -> frozenset[str]:
    """``fixes`` as a frozenset, refusing names that are not in FIXES."""
    if isinstance(fixes, str):
        raise TypeError(f"fixes is a collection of names, not one string: write ({fixes!r},)")
    unknown = sorted(set(fixes) - set(FIXES))
    if unknown:
        raise ValueError(f"unknown fix {', '.join(map(repr, unknown))}: the fixes are "
                         f"{', '.join(FIXES)}")
    return frozenset(fixes)


# --- inputs ------------------------------------------------------------------------------------

def init_weights(seed: int = 0) -> dict[str, np.ndarray]:
    """Fresh float32 weights: ``W1`` (256, HIDDEN), ``b1``, ``W2`` (HIDDEN, 10), ``b2``, drawn
    from N(0, 1/fan_in) (biases small, not zero, so that a missing bias term shows)."""
    rng = np.random.default_rng(seed)
    return {
        "W1": (rng.standard_normal((FEATURES, HIDDEN)) / np.sqrt(FEATURES)).astype(np.float32),
        "b1": (0.01 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "W2": (rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN)).astype(np.float32),
        "b2": (0.01 * rng.standard_normal(CLASSES)).astype(np.float32),
    }


def make_batch(seed: int = 0, size: int = BATCH) -> dict[str, np.ndarray]:
    """A batch: ``indices`` into the digits (int64) and each sample's ``shifts`` (rows,
    columns) in [−MAX_SHIFT, MAX_SHIFT] (int64, shape (size, 2))."""
    rng = np.random.default_rng(seed)
    count = cached_dataset()[0].shape[0]
    return {"indices": rng.integers(0, count, size=size),
            "shifts": rng.integers(-MAX_SHIFT, MAX_SHIFT + 1, size=(size, 2))}


def make_inputs(seed: int = 0, size: int = BATCH) -> tuple[dict, dict]:
    """``(weights, batch)`` for one step, both drawn from ``seed``: the arguments of
    :func:`slow_step` and of any faster version of it."""
    return init_weights(seed), make_batch(seed + 1, size)


def make_activations(seed: int = 0, size: int = BATCH) -> tuple[np.ndarray]:
    """``(h,)``: pre-activations (size, HIDDEN) float64 as the hidden layer makes them, the
    argument of :func:`gelu_slow`."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((size, HIDDEN)),)


def make_logits(seed: int = 0, size: int = BATCH) -> tuple[np.ndarray, np.ndarray]:
    """``(z, labels)``: logits (size, 10) float64 and labels, the arguments of
    :func:`loss_per_sample`."""
    rng = np.random.default_rng(seed)
    return 3 * rng.standard_normal((size, CLASSES)), rng.integers(0, CLASSES, size=size)


def make_load_inputs(seed: int = 0, size: int = BATCH) -> tuple:
    """``(images, indices, shifts, centre, scale)``: the arguments of :func:`load_fast` (the
    digits as stored, a fresh batch, and the data set's statistics in float64)."""
    batch = make_batch(seed, size)
    return (cached_dataset()[0], batch["indices"], batch["shifts"], *cached_statistics())


# --- stages 1 and 2: read, statistics ----------------------------------------------------------

def read_dataset() -> tuple[np.ndarray, np.ndarray]:
    """The digits ``(images (1797, 64) uint8, labels (1797,) uint8)`` read from storage: the
    ``.npz`` file opened and its two arrays decompressed, as every call of
    :func:`tinyprof.models.datasets.digits_arrays` does."""
    return digits_arrays()


_DATASET: list[tuple[np.ndarray, np.ndarray]] = []


def cached_dataset() -> tuple[np.ndarray, np.ndarray]:
    """:func:`read_dataset`, read from storage once and then kept in memory (about 117 kB)."""
    if not _DATASET:
        _DATASET.append(read_dataset())
    return _DATASET[0]

def upscale(images: np.ndarray) -> np.ndarray:
    """8×8 images (…, 64) as 16×16 images (…, 16, 16): each pixel repeated SCALE × SCALE."""
    square = images.reshape(images.shape[:-1] + (8, 8))
    return square.repeat(SCALE, axis=-2).repeat(SCALE, axis=-1)


def dataset_statistics(images: np.ndarray, dtype: type = np.float64
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Robust per-pixel centre and scale of the whole upscaled data set ``images`` (N, 64),
    shapes (256,): the median, and the spread between the 5th and 95th percentiles plus one
    pixel count (of 16), so that a pixel blank in almost every image does not blow up the few
    where it is not. Percentiles sort every pixel's column: the costliest statistics to
    recompute."""
    pixels = upscale(images).reshape(-1, FEATURES).astype(dtype)
    low, centre, high = np.percentile(pixels, [5, 50, 95], axis=0).astype(dtype)
    return centre, high - low + dtype(1)


_STATISTICS: dict[type, tuple[np.ndarray, np.ndarray]] = {}


def cached_statistics(dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """:func:`dataset_statistics` of the digits, computed once per dtype (the data set never
    changes)."""
    if dtype not in _STATISTICS:
        _STATISTICS[dtype] = dataset_statistics(cached_dataset()[0], dtype)
    return _STATISTICS[dtype]


def shift_image(image: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """``image`` (16, 16) moved down ``dy`` and right ``dx`` pixels, zeros shifted in."""
    moved = np.roll(image, (dy, dx), axis=(0, 1))
    if dy > 0:
        moved[:dy] = 0
    elif dy < 0:
        moved[dy:] = 0
    if dx > 0:
        moved[:, :dx] = 0
    elif dx < 0:
        moved[:, dx:] = 0
    return moved


def load_slow(images: np.ndarray, indices: np.ndarray, shifts: np.ndarray,
              centre: np.ndarray, scale: np.ndarray, dtype: type = np.float64,
              eager_log: bool = True) -> np.ndarray:
    """The batch (len(indices), 256) of ``images`` (the digits as stored, (N, 64) uint8), one
    sample at a time: upscale, shift, (x − centre) / scale; each sample's pixels formatted into
    a debug message (eagerly, when ``eager_log``)."""
    rows = []
    for i, (index, (dy, dx)) in enumerate(zip(indices, shifts)):
        image = shift_image(upscale(images[index]).astype(dtype), int(dy), int(dx))
        if eager_log:
            LOG.debug(f"sample {i}: digit {index} shifted by ({dy}, {dx}):\n{images[index]}")
        else:
            LOG.debug("sample %d: digit %d shifted by (%d, %d):\n%s", i, index, dy, dx,
                      images[index])
        rows.append((image.reshape(-1) - centre) / scale)
    return np.stack(rows)


def load_per_sample(images: np.ndarray, indices: np.ndarray, shifts: np.ndarray,
                    centre: np.ndarray, scale: np.ndarray, dtype: type = np.float64
                    ) -> np.ndarray:
    """:func:`load_slow` with its logging quiet: the per-sample Python loop alone (the baseline
    that a vectorised loader is timed against)."""
    return load_slow(images, indices, shifts, centre, scale, dtype, eager_log=False)


def load_fast(images: np.ndarray, indices: np.ndarray, shifts: np.ndarray,
              centre: np.ndarray, scale: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """The same batch in a few whole-array operations: the upscaled images padded by MAX_SHIFT
    zeros, and each sample's 16×16 window read with one gather (row r of the shifted image is
    row r − dy of the original)."""
    upscaled = upscale(images[indices]).astype(dtype)
    padded = np.pad(upscaled, ((0, 0), (MAX_SHIFT, MAX_SHIFT), (MAX_SHIFT, MAX_SHIFT)))
    offsets = np.arange(SIDE)
    rows = (offsets[None, :] - shifts[:, :1] + MAX_SHIFT)[:, :, None]
    cols = (offsets[None, :] - shifts[:, 1:] + MAX_SHIFT)[:, None, :]
    batch = padded[np.arange(len(indices))[:, None, None], rows, cols]
    return (batch.reshape(len(indices), FEATURES) - centre) / scale


# --- stage 2: model ----------------------------------------------------------------------------

def gelu_slow(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GELU(x) = ½·x·(1 + tanh(c·(x + 0.044715·x³))) and its derivative
    ½·(1 + t) + ½·x·(1 − t²)·c·(1 + 3·0.044715·x²), written as the formulas read."""
    t = np.tanh(GELU_C * (x + 0.044715 * x ** 3))
    y = 0.5 * x * (1 + t)
    dy = 0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * GELU_C * (1 + 3 * 0.044715 * x ** 2)
    return y, dy


def gelu_multiplied(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gelu_slow` with the cube written ``x * x * x`` (two multiplies; ``x ** 3`` calls
    the general power function for every element) and nothing else changed: one new array per
    operator."""
    t = np.tanh(GELU_C * (x + 0.044715 * (x * x * x)))
    y = 0.5 * x * (1 + t)
    dy = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * (x * x))
    return y, dy


def gelu_in_place(x: np.ndarray, cube_by_multiplying: bool = True
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The same GELU and derivative worked out in place in three buffers (``out=``, ``*=``,
    ``+=``), x³ as x²·x; with ``cube_by_multiplying=False``, x³ from numpy's power function
    (into a buffer), as :func:`gelu_slow` computes it."""
    x2 = x * x
    if cube_by_multiplying:
        t = x2 * x
    else:
        t = np.power(x, 3)
    t *= 0.044715
    t += x
    t *= GELU_C
    np.tanh(t, out=t)                      # t = tanh(c·(x + 0.044715·x³))
    dy = t * t
    np.subtract(1, dy, out=dy)             # 1 − t²
    dy *= x
    dy *= GELU_C * 0.5
    x2 *= 3 * 0.044715
    x2 += 1
    dy *= x2                               # ½·x·(1 − t²)·c·(1 + 3·0.044715·x²)
    t += 1
    t *= 0.5                               # ½·(1 + t)
    dy += t
    y = t
    y *= x
    return y, dy


def gelu_fast(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The GELU and its derivative with both fixes: the cube by multiplying, in place in three
    buffers (:func:`gelu_in_place`)."""
    return gelu_in_place(x)


def gelu_for(fixes: Collection[str]) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The GELU that ``fixes`` call for: ``cube_by_multiplying`` and ``in_place`` each change
    it, alone or together."""
    multiply, in_place = "cube_by_multiplying" in fixes, "in_place" in fixes
    if in_place:
        return gelu_fast if multiply else partial(gelu_in_place, cube_by_multiplying=False)
    return gelu_multiplied if multiply else gelu_slow


def hidden_layer(weights: dict, x: np.ndarray, gelu=gelu_slow
                 ) -> tuple[np.ndarray, np.ndarray]:
    """a = GELU(x·W1 + b1) (n, HIDDEN) and GELU'(h), kept for the backward pass."""
    return gelu(x @ weights["W1"] + weights["b1"])


def targets(labels: np.ndarray, dtype: type) -> np.ndarray:
    """Label-smoothed targets (n, 10): SMOOTHING spread over the classes, the rest on the
    label."""
    t = np.full((labels.size, CLASSES), SMOOTHING / CLASSES, dtype=dtype)
    t[np.arange(labels.size), labels] += 1 - SMOOTHING
    return t


def loss_batched(z: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of softmax(z) (z: (n, 10) logits) against label-smoothed targets t
    and its gradient: loss = −mean Σ t·log softmax(z), dz = (softmax(z) − t) / n."""
    n = z.shape[0]
    shifted = z - z.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    t = targets(labels, z.dtype)
    dz = np.exp(log_p)
    dz -= t
    dz /= n
    return float(-(t * log_p).sum() / n), dz


def loss_per_sample(z: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """The same loss and gradient, one sample (one row of ``z``) at a time."""
    n = z.shape[0]
    total = 0.0
    dz = np.empty_like(z)
    for i in range(n):
        row = z[i] - z[i].max()
        log_p = row - np.log(np.exp(row).sum())
        t = np.full(CLASSES, SMOOTHING / CLASSES, dtype=z.dtype)
        t[labels[i]] += 1 - SMOOTHING
        total += -(t * log_p).sum()
        dz[i] = (np.exp(log_p) - t) / n
    return float(total / n), dz


def backward(weights: dict, x: np.ndarray, a: np.ndarray, da_dh: np.ndarray,
             dz: np.ndarray) -> dict:
    """Gradients of the MLP from dz: dW2 = aᵀ·dz, db2 = Σ dz, dh = (dz·W2ᵀ) ⊙ GELU'(h),
    dW1 = xᵀ·dh, db1 = Σ dh."""
    dh = (dz @ weights["W2"].T) * da_dh
    return {"W1": x.T @ dh, "b1": dh.sum(axis=0), "W2": a.T @ dz, "b2": dz.sum(axis=0)}


# --- stage 3: update ---------------------------------------------------------------------------

def sgd_slow(weights: dict, grads: dict) -> dict:
    """w − lr·(g + λ·w) for every weight, on a copy of the weights made first (to be safe)."""
    new = {name: w.copy() for name, w in weights.items()}
    for name in new:
        new[name] = new[name] - LEARNING_RATE * (grads[name] + WEIGHT_DECAY * new[name])
    return new


def sgd_fast(weights: dict, grads: dict) -> dict:
    """The same update in place in each gradient's buffer: (1 − lr·λ)·w − lr·g."""
    new = {}
    for name, w in weights.items():
        g = grads[name]
        g *= -LEARNING_RATE
        g += (1 - LEARNING_RATE * WEIGHT_DECAY) * w
        new[name] = g
    return new


# --- the step ----------------------------------------------------------------------------------

class Stage(Module):
    """One stage of the step as a module, so that tinyprof's per-layer profiler (chapter 05)
    gives each stage a row: its ``forward`` calls ``fn`` on whatever it is given."""

    def __init__(self, name: str, fn: Callable[..., Any]):
        self.name, self.fn = name, fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)

    def __repr__(self) -> str:
        return f"Stage({self.name!r}, {getattr(self.fn, '__name__', self.fn)!r})"


def stages(fixes: Collection[str] = ()) -> dict[str, Stage]:
    """The step's six stages with ``fixes`` applied, in the order they run: ``read`` (the data
    set from storage), ``statistics``, ``load`` (the batch and its labels), ``hidden`` (x·W1 +
    b1 and the GELU), ``loss`` (the output layer's logits, the loss and dz) and ``update`` (the
    backward matmuls and SGD)."""
    fixes = check_fixes(fixes)
    dtype = np.float32 if "float32" in fixes else np.float64
    gelu = gelu_for(fixes)
    if "vectorised_loading" in fixes:
        load = load_fast
    else:
        def load(*args):
            return load_slow(*args, eager_log="quiet_logging" not in fixes)
    loss = loss_batched if "batched_loss" in fixes else loss_per_sample
    sgd = sgd_fast if "in_place" in fixes else sgd_slow
    read = cached_dataset if "cached_dataset" in fixes else read_dataset

    def statistics(images):
        if "cached_statistics" in fixes:
            return cached_statistics(dtype)
        return dataset_statistics(images, dtype)

    def load_batch(images, labels, indices, shifts, centre, scale):
        return load(images, indices, shifts, centre, scale, dtype), labels[indices].astype(np.int64)

    def output_and_loss(weights, a, labels):
        return loss(a @ weights["W2"] + weights["b2"], labels)

    def update(weights, x, a, da_dh, dz):
        return sgd(weights, backward(weights, x, a, da_dh, dz))

    return {"read": Stage("read", read),
            "statistics": Stage("statistics", statistics),
            "load": Stage("load", load_batch),
            "hidden": Stage("hidden", lambda w, x: hidden_layer(w, x, gelu)),
            "loss": Stage("loss", output_and_loss),
            "update": Stage("update", update)}


def step(weights: dict, batch: dict, fixes: Collection[str] = ()) -> tuple[float, dict]:
    """One training step on ``batch`` from ``weights``, with the named ``fixes`` (FIXES)
    applied: ``(loss, new_weights)``. The caller's weights and batch are never changed."""
    return run(stages(fixes), weights, batch, np.float32 if "float32" in fixes else np.float64)


def run(parts: dict[str, Stage], weights: dict, batch: dict, dtype: type
        ) -> tuple[float, dict]:
    """One step through ``parts`` (:func:`stages`), the weights as ``dtype`` (converted when
    they are not; no update writes into them)."""
    images, labels = parts["read"].forward()
    centre, scale = parts["statistics"].forward(images)
    x, y = parts["load"].forward(images, labels, batch["indices"], batch["shifts"], centre,
                                 scale)
    model = {name: np.asarray(w, dtype=dtype) for name, w in weights.items()}
    a, da_dh = parts["hidden"].forward(model, x)
    loss, dz = parts["loss"].forward(model, a, y)
    return loss, parts["update"].forward(model, x, a, da_dh, dz)


def slow_step(weights: dict, batch: dict) -> tuple[float, dict]:
    """The baseline: one training step with none of the fixes."""
    return step(weights, batch)


def fast_step(weights: dict, batch: dict) -> tuple[float, dict]:
    """One training step with every fix."""
    return step(weights, batch, FIXES)


__all__ = ["BATCH", "FIXES", "HIDDEN", "Stage", "backward", "cached_dataset", "cached_statistics",
           "check_fixes", "dataset_statistics", "fast_step", "gelu_fast", "gelu_for",
           "gelu_in_place", "gelu_multiplied", "gelu_slow", "hidden_layer", "init_weights",
           "load_fast", "load_per_sample", "load_slow", "loss_batched", "loss_per_sample",
           "make_activations", "make_batch", "make_inputs", "make_load_inputs", "make_logits",
           "read_dataset", "run", "sgd_fast", "sgd_slow", "slow_step", "stages", "step",
           "upscale"]
