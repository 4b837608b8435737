"""Interactive explorers built from core ipywidgets (works with ipywidgets 7.7 and 8).

Each returns an :class:`~tinyprof.widgets.explorer.Explorer`: its controls, and an output area
that already holds the text and figures of the initial state, so the state shows without a
kernel too. Moving a control redraws from numbers computed when the explorer was built, or
measures the new setting once (memory, roofline).
"""

from ..flops import GPT_FLOP_PARTS, AttentionShare
from .abtest import ab_explorer
from .explorer import Explorer, show
from .faster import fixes_explorer
from .latency import latency_ci_explorer
from .leaks import leaks_explorer
from .memory import memory_breakdown_explorer
from .pipeline import pipeline_explorer
from .roofline import roofline_explorer
from .scaling import amdahl_explorer, batch_scaling_explorer
from .transformer import attention_share_explorer, transformer_explorer

__all__ = [
    "GPT_FLOP_PARTS", "AttentionShare", "Explorer", "ab_explorer", "amdahl_explorer",
    "attention_share_explorer", "batch_scaling_explorer", "fixes_explorer", "latency_ci_explorer",
    "leaks_explorer",
    "memory_breakdown_explorer", "pipeline_explorer", "roofline_explorer", "show",
    "transformer_explorer",
]
