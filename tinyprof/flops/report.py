"""One row per layer or module, and its table: the record both FLOP counters return.

The numpy counter (:mod:`tinyprof.flops.counter`, a row per layer of the shape walk) and the
torch counter (:mod:`tinyprof.flops.torch_counter`, a row per module of one traced forward
pass) fill the same :class:`LayerCount`, and :func:`flop_table` prints either's rows with the
same columns, so a numpy model and its torch twin print side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..table import Table
from ..units import format_si


@dataclass(frozen=True)
class LayerCount:
    """One layer's (or torch module's) counted work for one input shape (see
    :class:`~tinyprof.flops.LayerFlops` for the fields); for a torch module, the work of its own
    operators (or of its formula) summed over its calls."""

    name: str
    type: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    matmul: int
    elementwise: int
    grad_input: int
    grad_weight: int
    note: str = ""

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the forward matmuls: matmul / 2."""
        return self.matmul // 2

    @property
    def backward(self) -> int:
        """Backward matmul FLOPs: grad_input + grad_weight."""
        return self.grad_input + self.grad_weight


def total_flops(rows: Sequence[LayerCount], backward: bool = False) -> int:
    """Σ matmul FLOPs of ``rows``, forward or (``backward=True``) backward: ``count_flops``."""
    return sum(row.backward if backward else row.matmul for row in rows)


def flop_table(rows: Sequence[LayerCount], backward: bool, model_name: str,
               input_text: str) -> Table:
    """The per-layer FLOP table of ``rows``, whose ``flops`` column sums to
    :func:`total_flops`. Forward columns: name, type, output shape, flops (matmul), macs,
    elementwise, % flops. Backward columns: name, type, output shape, grad input, grad weight,
    flops, % flops. Titled "``model_name`` on ``input_text``: … FLOPs forward (matmul)"."""
    total = total_flops(rows, backward)

    def share(flops: int) -> float:
        return 100.0 * flops / total if total else 0.0

    if backward:
        columns = ["name", "type", "output shape", "grad input", "grad weight", "flops",
                   "% flops"]
        body = [[r.name, r.type, r.output_shape, r.grad_input, r.grad_weight, r.backward,
                 share(r.backward)] for r in rows]
        footer = ["total", "", "", sum(r.grad_input for r in rows),
                  sum(r.grad_weight for r in rows), total, 100.0 if total else 0.0]
    else:
        columns = ["name", "type", "output shape", "flops", "macs", "elementwise", "% flops"]
        body = [[r.name, r.type, r.output_shape, r.matmul, r.macs, r.elementwise,
                 share(r.matmul)] for r in rows]
        footer = ["total", "", "", total, total // 2, sum(r.elementwise for r in rows),
                  100.0 if total else 0.0]
    direction = "backward" if backward else "forward"
    title = f"{model_name} on {input_text}: {format_si(total, 'FLOPs')} {direction} (matmul)"
    return Table(columns, body, title=title, footer=footer,
                 formats={"% flops": lambda v: f"{v:.1f}%"})


__all__ = ["LayerCount", "flop_table", "total_flops"]
