"""A storage with a first-byte latency and a bandwidth, to compare where the files live.

Reading ``n`` bytes in one request costs

    t(n) = latency + n / bandwidth

on top of the real read. **Simulated**: the files are on this machine's disk (in the page cache
after the first read, so the real read takes microseconds) and :meth:`Storage.read` adds
``time.sleep(t)``; a sleep holds no CPU and releases the GIL, as waiting for a network does.
The presets are orders of magnitude, not measurements of a particular system: a local disk once
cached (:data:`LOCAL_DISK`, nothing added), a network file system (:data:`NETWORK_FS`, 0.5 ms to
the first byte, 100 MB/s) and an object store (:data:`OBJECT_STORE`, 20 ms, 100 MB/s: one
HTTP request per object). :meth:`Storage.read_many` is a batched read: many files in one
request, paying the latency once. :meth:`Storage.listing` lists a folder of images (free: the
metadata of a listing is not what the chapter measures).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


@dataclass(frozen=True)
class Storage:
    """Where the files are read from: ``latency`` seconds to the first byte of each request and
    ``bandwidth`` bytes per second after it (``math.inf``: no cost). Picklable, so worker
    processes read through it too."""

    name: str = "local disk"
    latency: float = 0.0
    bandwidth: float = math.inf

    def __post_init__(self) -> None:
        if self.latency < 0 or not self.bandwidth > 0:
            raise ValueError(f"latency must be ≥ 0 s and bandwidth > 0 B/s, got "
                             f"{self.latency} and {self.bandwidth}")

    def request_seconds(self, nbytes: int, requests: int = 1) -> float:
        """What ``requests`` requests moving ``nbytes`` in total add: requests × latency +
        nbytes / bandwidth."""
        return requests * self.latency + nbytes / self.bandwidth

    def _wait(self, nbytes: int) -> None:
        seconds = self.request_seconds(nbytes)
        if seconds > 0:
            time.sleep(seconds)

    def listing(self, folder: str | os.PathLike) -> list[tuple[Path, int]]:
        """Every ``(path, label)`` of the images under ``folder``, in sample order
        (:func:`~.files.list_image_folder`)."""
        from .files import list_image_folder

        return list_image_folder(folder)

    def read(self, path: str | os.PathLike) -> bytes:
        """The bytes of one file: one request (real read, then the simulated wait)."""
        data = Path(path).read_bytes()
        self._wait(len(data))
        return data

    def read_many(self, paths: Sequence[str | os.PathLike]) -> list[bytes]:
        """The bytes of many files in **one** request (a batched read: the latency once, the
        bytes of all of them), as reading a shard or a range of a packed file does."""
        data = [Path(path).read_bytes() for path in paths]
        self._wait(sum(map(len, data)))
        return data


LOCAL_DISK = Storage("local disk")
NETWORK_FS = Storage("network file system", latency=0.5e-3, bandwidth=100e6)
OBJECT_STORE = Storage("object store", latency=20e-3, bandwidth=100e6)
