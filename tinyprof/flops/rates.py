"""Rates built on FLOP counts: achieved GFLOP/s and arithmetic intensity (FLOPs per byte)."""

from __future__ import annotations


def gflops_per_second(flops: float, seconds: float) -> float:
    """Achieved throughput: flops / seconds / 10⁹ (e.g. 2·1024³ FLOPs in 10.1 ms ≈ 212.6)."""
    if not 0 < seconds < float("inf"):   # also refuses NaN
        raise ValueError(f"gflops_per_second needs a positive time in seconds, got {seconds}")
    if not 0 <= flops < float("inf"):
        raise ValueError(f"gflops_per_second needs a non-negative FLOP count, got {flops}")
    return flops / seconds / 1e9


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved to or from memory: flops / bytes (a roofline's x axis)."""
    if not 0 < bytes_moved < float("inf"):   # also refuses NaN
        raise ValueError(f"arithmetic_intensity needs a positive byte count, got {bytes_moved}")
    if not 0 <= flops < float("inf"):
        raise ValueError(f"arithmetic_intensity needs a non-negative FLOP count, got {flops}")
    return flops / bytes_moved
