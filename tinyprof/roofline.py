"""A roofline measured on this machine: how fast it multiplies, how fast it moves bytes.

Attainable FLOP/s at arithmetic intensity I (FLOPs per byte moved) is
``min(peak_flops, I × bandwidth)``. Below the ridge point ``peak_flops / bandwidth`` a kernel is
memory-bound (bytes limit it), above it compute-bound. Both peaks are measured here, by timing a
large float32 matmul and a large array copy; nothing is assumed about the hardware.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .units import format_si


@dataclass(frozen=True)
class MachinePeaks:
    """Measured peak compute (FLOP/s) and memory bandwidth (bytes/s) of this machine."""

    flops_per_second: float
    bytes_per_second: float

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per byte where the two roofs meet: peak FLOP/s ÷ bandwidth."""
        return self.flops_per_second / self.bytes_per_second

    def attainable(self, intensity: float) -> float:
        """min(peak FLOP/s, intensity × bandwidth)."""
        return min(self.flops_per_second, intensity * self.bytes_per_second)

    def bound(self, intensity: float) -> str:
        """"memory" below the ridge point, "compute" at or above it."""
        return "compute" if intensity >= self.ridge_intensity else "memory"

    def __str__(self) -> str:
        return (f"peak {format_si(self.flops_per_second, 'FLOP/s')}, bandwidth "
                f"{format_si(self.bytes_per_second, 'B/s')}, ridge at "
                f"{self.ridge_intensity:.1f} FLOPs/byte")


def best_seconds(fn, repeats: int = 5) -> float:
    """The fastest of ``repeats`` timed calls after one untimed call: the run least disturbed by
    a busy machine, and for peaks what the machine *can* do."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def measure_peak_flops(n: int = 1024, repeats: int = 5) -> float:
    """FLOP/s of an n×n by n×n float32 matmul: 2·n³ FLOPs over the fastest of ``repeats``."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    return 2.0 * n**3 / best_seconds(lambda: a @ b, repeats)


def measure_bandwidth(nbytes: int = 64 * 2**20, repeats: int = 5) -> float:
    """Bytes/s of copying an ``nbytes`` array (far larger than the caches): 2·nbytes moved
    (one read, one write) over the fastest of ``repeats``."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    return 2.0 * src.nbytes / best_seconds(lambda: np.copyto(dst, src), repeats)


@lru_cache(maxsize=1)
def machine_peaks() -> MachinePeaks:
    """This machine's roofline, measured once per process (about half a second)."""
    return MachinePeaks(measure_peak_flops(), measure_bandwidth())
