"""Chapter 5's wing: what limits each layer.

- :mod:`.roofline`: this machine's measured roofline (compute and memory roofs, cache roofs,
  the cost of one numpy call);
- :mod:`.layer_profiler`: every layer's forward and backward calls, timed, self and total;
- :mod:`.placement`: each profiled layer's FLOPs and bytes from its shapes, placed on the
  roofline (``place_layers``, ``layer_work``, ``profile_step``);
- :mod:`.torch_profiler` and :mod:`.torch_placement`: the same for torch modules, forward and
  backward (``tinyprof.pytorch``; loaded when used, never importing torch themselves).

Layers: this wing imports from ``timing`` and below; ``bench`` may import from it.
"""

from .layer_profiler import LayerCall, LayerProfiler, LayerRow, overhead_per_call
from .placement import LayerWork, layer_work, place_layers, profile_step, work_by_path
from .roofline import CacheLevel, MachinePeaks, machine_peaks

__all__ = ["CacheLevel", "LayerCall", "LayerProfiler", "LayerRow", "LayerWork", "MachinePeaks",
           "layer_work", "machine_peaks", "overhead_per_call", "place_layers", "profile_step",
           "work_by_path"]
