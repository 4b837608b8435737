"""The few numeric kernels every layer shares, instrumented so that FLOP counts can be checked.

Every matrix multiply a layer executes, forward or backward, goes through :func:`matmul`.
While a :func:`record_matmuls` block is active, each call is logged with the FLOPs it really
performed, ``2 * prod(batch) * M * N * K`` (one multiply and one add per multiply-accumulate),
so the analytic counts of :mod:`tinyprof.flops` can be compared with what actually ran.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

_recorders: list["MatmulRecord"] = []


@dataclass
class MatmulRecord:
    """The matrix multiplies executed inside one :func:`record_matmuls` block."""

    calls: list[tuple[str, tuple[int, ...], tuple[int, ...], int]] = field(default_factory=list)

    @property
    def flops(self) -> int:
        """Total FLOPs of the recorded multiplies: sum of 2·M·N·K over calls (times batch)."""
        return sum(call[3] for call in self.calls)

    def flops_by_tag(self) -> dict[str, int]:
        """FLOPs per tag (for example ``"forward"`` or ``"backward"``)."""
        totals: dict[str, int] = {}
        for tag, _, _, flops in self.calls:
            totals[tag] = totals.get(tag, 0) + flops
        return totals


_tag_stack: list[str] = ["forward"]


@contextmanager
def record_matmuls() -> Iterator[MatmulRecord]:
    """Record every :func:`matmul` executed inside the block (nesting allowed)."""
    record = MatmulRecord()
    _recorders.append(record)
    try:
        yield record
    finally:
        _recorders.remove(record)


@contextmanager
def tagged(tag: str) -> Iterator[None]:
    """Label the multiplies executed inside the block with ``tag`` in every active record."""
    _tag_stack.append(tag)
    try:
        yield
    finally:
        _tag_stack.pop()


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (numpy broadcasting rules); logs 2·prod(out.shape)·K FLOPs when recording."""
    out = np.matmul(a, b)
    if _recorders:
        flops = 2 * int(out.size) * int(a.shape[-1])
        call = (_tag_stack[-1], tuple(a.shape), tuple(b.shape), flops)
        for record in _recorders:
            record.calls.append(call)
    return out
