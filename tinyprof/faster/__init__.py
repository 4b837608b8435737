"""Chapter 08's wing: make it faster. :mod:`.pipeline` is a slow but correct training step with
six planted bottlenecks and their fixes; ``tp.faster.slow_step`` is the baseline chapter 08's
speed tests measure against. :mod:`.analysis` measures its stages (time, FLOPs and bytes) and
predicts what a set of fixes buys with Amdahl's law."""

from . import analysis, pipeline
from .pipeline import FIXES, fast_step, make_inputs, slow_step, stages, step

__all__ = ["FIXES", "analysis", "fast_step", "make_inputs", "pipeline", "slow_step", "stages",
           "step"]
