"""FLOP counting by shape propagation (``tinyprof.flops``).

* :func:`count_flops` — matmul FLOPs of a forward (or, ``backward=True``, a backward) pass.
* :func:`flop_report` — the per-layer table (FLOPs, MACs, elementwise work, % of total).
* :func:`flops_by_layer` — the same rows as plain :class:`LayerCount` objects.
* :func:`register_flops` — the FLOP formula of your own layer (its shapes first, with
  :func:`tinyprof.shapes.register_shape` or :func:`tinyprof.shapes.register_container`).
* :func:`measure_matmul_flops` — the matmul FLOPs that really execute, to check the counts.
* :func:`gflops_per_second`, :func:`arithmetic_intensity` — rates built on FLOP counts.
* :mod:`.torch_counter` and :mod:`.torch_formulas` — the same counts for a ``torch.nn.Module``,
  operator by operator, in the same :class:`LayerCount` rows and table (:mod:`.report`);
  ``tinyprof.pytorch`` names them, loaded when used.

Convention: a FLOP is one add or one multiply; a multiply-accumulate is 2 FLOPs.
"""

from . import formulas
from .attention import GPT_FLOP_PARTS, AttentionShare, attention_share, gpt_flop_parts
from .counter import count_flops, flop_report, flops_by_layer
from .measure import ExecutedFlops, measure_matmul_flops
from .rates import arithmetic_intensity, gflops_per_second
from .registry import (
    FLOP_FORMULAS,
    NO_WORK,
    LayerFlops,
    MissingFlopFormulaError,
    no_own_work,
    register_flops,
    unregister,
)
from .report import LayerCount

__all__ = [
    "FLOP_FORMULAS", "GPT_FLOP_PARTS", "NO_WORK", "AttentionShare", "attention_share",
    "gpt_flop_parts", "ExecutedFlops", "LayerCount", "LayerFlops",
    "MissingFlopFormulaError", "arithmetic_intensity", "count_flops", "flop_report",
    "flops_by_layer", "formulas", "gflops_per_second", "measure_matmul_flops", "no_own_work",
    "register_flops", "unregister",
]
