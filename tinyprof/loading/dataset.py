"""The data set read from files: list, read, decode, augment, batch.

:class:`ImageFolder` lists ``folder/<label>/<index>.png`` once; a batch of indices is then

    read (storage: bytes per file)  →  decode (Pillow: 8×8 pixel counts)
        →  augment (a random shift of −1, 0 or +1 pixel per axis and a random flip)  →  batch

giving ``x`` (B, 64) float32 pixel counts / 16 and ``y`` (B,) int64 labels. The augmentation of
batch ``step`` draws from ``numpy.random.default_rng([seed, step])``, so a batch is the same
whoever loads it (this thread, another thread, a worker process) and in whatever order.
With a :class:`~.timeline.Timeline` each stage of each batch is recorded as an event of the
thread that ran it; the timeline stays behind when the data set is sent to a worker process.
"""

from __future__ import annotations

import os
from typing import Iterator, NamedTuple, Sequence

import numpy as np

from .files import SIDE, decode_png, list_image_folder
from .storage import LOCAL_DISK, Storage
from .timeline import Timeline, null_span


class Batch(NamedTuple):
    """One step's batch: ``x`` (B, 64) float32 in [0, 1], ``y`` (B,) int64, and which ``step``."""

    x: np.ndarray
    y: np.ndarray
    step: int


def augment(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Shift by (dy, dx) ∈ {−1, 0, 1}² with zero fill, then flip left-right with probability ½
    (draws: dy, dx, flip, in that order)."""
    dy, dx = rng.integers(-1, 2, size=2)
    flip = rng.random() < 0.5
    shifted = np.zeros_like(image)
    rows = slice(max(dy, 0), SIDE + min(dy, 0))
    cols = slice(max(dx, 0), SIDE + min(dx, 0))
    shifted[rows, cols] = image[max(-dy, 0):SIDE - max(dy, 0), max(-dx, 0):SIDE - max(dx, 0)]
    return shifted[:, ::-1] if flip else shifted


def batch_plan(samples: int, batch_size: int, steps: int, seed: int = 0) -> list[np.ndarray]:
    """The indices of each of ``steps`` batches: a seeded shuffle of the samples, reshuffled
    each epoch (pass over all of them)."""
    rng = np.random.default_rng(seed)
    order: list[int] = []
    while len(order) < steps * batch_size:
        order.extend(rng.permutation(samples).tolist())
    return [np.array(order[k * batch_size:(k + 1) * batch_size]) for k in range(steps)]


class ImageFolder:
    """The files under ``folder`` read through ``storage`` (which lists them too), decoded,
    augmented and batched.

    ``batched_reads=True`` reads each batch's files in one request (:meth:`Storage.read_many`)
    instead of one request per file."""

    def __init__(self, folder: str | os.PathLike, storage: Storage = LOCAL_DISK, *,
                 augment: bool = True, seed: int = 0, batched_reads: bool = False,
                 timeline: Timeline | None = None):
        listing = getattr(storage, "listing", None)   # a storage of the student's own may lack it
        listed = listing(folder) if listing is not None else list_image_folder(folder)
        self.paths = [path for path, _ in listed]
        self.labels = np.array([label for _, label in listed], dtype=np.int64)
        self.storage, self.augment, self.seed = storage, augment, seed
        self.batched_reads, self.timeline = batched_reads, timeline

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        """Sample ``index`` as a map-style data set gives it (what ``torch.utils.data.DataLoader``
        indexes): its (64,) float32 pixels / 16, read and decoded, not augmented, and its
        label."""
        image = self.decoded([int(index)])[0]
        return image.reshape(SIDE * SIDE).astype(np.float32) / 16, int(self.labels[int(index)])

    def __getstate__(self) -> dict:
        return {**self.__dict__, "timeline": None}   # a timeline stays in its process

    def read(self, indices: Sequence[int]) -> list[bytes]:
        """The files' bytes: one request per file, or one for all with ``batched_reads``."""
        paths = [self.paths[i] for i in indices]
        if self.batched_reads:
            return self.storage.read_many(paths)
        return [self.storage.read(path) for path in paths]

    def decoded(self, indices: Sequence[int]) -> list[np.ndarray]:
        """Read then decode: the (8, 8) uint8 pixel counts of each sample."""
        with null_span(self.timeline, "read"):
            data = self.read(indices)
        with null_span(self.timeline, "decode"):
            return [decode_png(item) for item in data]

    def batch(self, indices: Sequence[int], step: int = 0) -> Batch:
        """Batch ``step`` of these sample indices: decoded, augmented (seeded by
        [seed, step]) and stacked."""
        images = self.decoded(indices)
        with null_span(self.timeline, "augment"):
            if self.augment:
                rng = np.random.default_rng([self.seed, step])
                images = [augment(image, rng) for image in images]
            x = np.stack(images).reshape(len(images), SIDE * SIDE).astype(np.float32) / 16
        return Batch(x, self.labels[np.asarray(indices, dtype=np.int64)], step)

    def batches(self, batch_size: int, steps: int) -> Iterator[Batch]:
        """``steps`` batches of :func:`batch_plan`, loaded one after the other in this thread."""
        for step, indices in enumerate(batch_plan(len(self), batch_size, steps, self.seed)):
            yield self.batch(indices, step)
