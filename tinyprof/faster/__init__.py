"""Chapter 08's wing: make it faster. :mod:`.pipeline` is a slow but correct training step with
six planted bottlenecks and their fixes; ``tp.faster.slow_step`` is the baseline chapter 08's
speed tests measure against."""

from . import pipeline
from .pipeline import FIXES, fast_step, make_inputs, slow_step, stages, step

__all__ = ["FIXES", "fast_step", "make_inputs", "pipeline", "slow_step", "stages", "step"]
