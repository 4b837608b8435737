"""Caching decoded samples in memory: read and decode each file once, augment every time.

:class:`CachedImageFolder` keeps each sample's decoded (8, 8) uint8 pixels in a dict after its
first read; later batches skip the storage and the decoder (the augmentation still runs, so
each epoch sees new shifts and flips). What it costs is memory, measured as chapter 03 does
(:func:`cache_bytes`: tracemalloc's retained bytes of filling the cache, Pillow already
loaded) against the data alone:

    data bytes = samples × 64 (one byte per pixel);

the rest is per-object overhead (an ndarray header and a dict entry per sample), which is why
caching many small arrays costs several times their data.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..memory.trace import MemoryMeasurement, measure_memory
from .dataset import ImageFolder
from .files import decode_png
from .timeline import null_span


class CachedImageFolder(ImageFolder):
    """An :class:`~.dataset.ImageFolder` that reads and decodes each sample once."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cache: dict[int, np.ndarray] = {}

    def decoded(self, indices: Sequence[int]) -> list[np.ndarray]:
        """Cached samples from memory; the others read (in one go), decoded and kept."""
        missing = sorted({int(i) for i in indices} - self.cache.keys())
        if missing:
            with null_span(self.timeline, "read"):
                data = self.read(missing)
            with null_span(self.timeline, "decode"):
                self.cache.update(zip(missing, (decode_png(item) for item in data)))
        return [self.cache[int(i)] for i in indices]

    def fill(self) -> "CachedImageFolder":
        """Read and decode every sample now (an epoch's worth of reads up front)."""
        self.decoded(range(len(self)))
        return self


def cache_bytes(dataset: CachedImageFolder) -> MemoryMeasurement:
    """Fill the (empty) cache under tracemalloc: ``retained_bytes`` is what the cache keeps
    (compare with ``len(dataset) × 64`` bytes of pixels). tracemalloc counts every thread's
    allocations: measure where no other thread allocates meanwhile (a loader left running by
    an earlier cell would be counted too)."""
    if dataset.cache:
        raise ValueError("cache_bytes measures filling an empty cache: make a new "
                         "CachedImageFolder")
    decode_png(dataset.storage.read(dataset.paths[0]))  # Pillow's first use loads its plugins
    return measure_memory(dataset.fill)
