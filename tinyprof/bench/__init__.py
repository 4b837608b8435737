"""Chapter 6's wing: benchmarking variants of a model side by side, and checking them later.

- :mod:`.suite`: ``benchmark_suite`` measures named variants in interleaved rounds (time, memory,
  accuracy) and saves the result as a baseline;
- :mod:`.regression`: ``check_regression`` compares a later suite with a saved baseline;
- :mod:`.reports`: Markdown and HTML reports of a suite (its figure needs matplotlib, so this
  module is loaded only when used);
- :mod:`.classic`: the classic ``Timer``, ``MemoryTracker`` and ``@profile`` helpers.

Layers: this wing imports from ``timing``, ``bottlenecks`` and below, never the other way.
"""

from .classic import MemoryTracker, Timer, profile
from .regression import RegressionReport, VariantCheck, check_regression
from .suite import SuiteResult, VariantResult, benchmark_suite

__all__ = ["MemoryTracker", "RegressionReport", "SuiteResult", "Timer", "VariantCheck",
           "VariantResult", "benchmark_suite", "check_regression", "profile"]
