"""The few numeric kernels every layer shares, instrumented so that FLOP counts can be checked.

Every matrix multiply a layer executes, forward or backward, goes through :func:`matmul`.
While a :func:`record_matmuls` block is active, each call is logged with the FLOPs it really
performed, ``2 * prod(batch) * M * N * K`` (one multiply and one add per multiply-accumulate),
so the analytic counts of :mod:`tinyprof.flops` can be compared with what actually ran.
Calls are labelled with a tag (:func:`tagged`, e.g. ``"forward"``/``"backward"``) and a scope
(:func:`scoped`, e.g. the dotted name of the layer that ran them).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

import numpy as np


class MatmulCall(NamedTuple):
    """One executed multiply: its tag, the two operand shapes and the FLOPs it performed."""

    tag: str
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    flops: int


@dataclass
class MatmulRecord:
    """The matrix multiplies executed inside one :func:`record_matmuls` block.

    ``calls[i]`` ran inside scope ``scopes[i]`` (``""`` when no :func:`scoped` block was active).
    """

    calls: list[MatmulCall] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)

    @property
    def flops(self) -> int:
        """Total FLOPs of the recorded multiplies: sum of 2·M·N·K over calls (times batch)."""
        return sum(call.flops for call in self.calls)

    def flops_by_tag(self) -> dict[str, int]:
        """FLOPs per tag (for example ``"forward"`` or ``"backward"``)."""
        totals: dict[str, int] = {}
        for call in self.calls:
            totals[call.tag] = totals.get(call.tag, 0) + call.flops
        return totals

    def flops_by_scope(self, tag: str | None = None) -> dict[str, int]:
        """FLOPs per innermost scope, counting only calls with ``tag`` when one is given."""
        totals: dict[str, int] = {}
        for call, scope in zip(self.calls, self.scopes, strict=True):
            if tag is None or call.tag == tag:
                totals[scope] = totals.get(scope, 0) + call.flops
        return totals


_recorders: list[MatmulRecord] = []
_tag_stack: list[str] = ["forward"]
_scope_stack: list[str] = [""]


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


@contextmanager
def scoped(scope: str) -> Iterator[None]:
    """Attribute the multiplies executed inside the block to ``scope`` (the innermost wins)."""
    _scope_stack.append(scope)
    try:
        yield
    finally:
        _scope_stack.pop()


def mm_flops(rows: int, inner: int, cols: int) -> int:
    """FLOPs of a (rows × inner) · (inner × cols) matrix multiply: 2·rows·inner·cols, one
    multiply and one add per multiply-accumulate. The one place this product is written: the
    FLOP formulas (:mod:`tinyprof.flops.formulas`) and :func:`matmul`'s record both use it."""
    return 2 * int(rows) * int(inner) * int(cols)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (numpy broadcasting rules); logs mm_flops(out.size, K, 1) = 2·prod(out.shape)·K
    FLOPs when recording (every output element is a K-long dot product)."""
    out = np.matmul(a, b)
    if _recorders:
        flops = mm_flops(out.size, a.shape[-1], 1)
        call = MatmulCall(_tag_stack[-1], tuple(a.shape), tuple(b.shape), flops)
        for record in _recorders:
            record.calls.append(call)
            record.scopes.append(_scope_stack[-1])
    return out
