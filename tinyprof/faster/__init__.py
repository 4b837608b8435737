"""Chapter 08's wing: make it faster. ``pipeline`` is a slow but correct training step with six
planted bottlenecks and their fixes; ``analysis`` measures its stages (time, FLOPs and bytes)
and predicts what a set of fixes buys with Amdahl's law."""

from . import analysis, pipeline

__all__ = ["analysis", "pipeline"]
