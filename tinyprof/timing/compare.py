"""Comparing LatencyStats: a verdict for two, a side-by-side table for several.

The comparison vocabulary is one for the whole library: a change is :data:`FASTER`,
:data:`SLOWER` or :data:`NO_CHANGE` (:class:`Comparison` here, :class:`tinyprof.ab_test`'s
``ABResult``; a regression check names them "improved", "regressed" and "unchanged").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..table import Table
from ..units import format_interval, format_percent, format_ratio, format_seconds
from .stats import LatencyStats

FASTER, SLOWER, NO_CHANGE = "faster", "slower", "no change"
#: Every verdict a comparison of two timings gives.
VERDICTS = (FASTER, SLOWER, NO_CHANGE)


@dataclass(frozen=True)
class Comparison:
    """``other`` measured against ``baseline``: their median ratio and a verdict.

    ``ratio`` = other.median / baseline.median (below 1 is faster) and ``speedup`` = its
    inverse. ``verdict`` is "faster" or "slower" only when the two bootstrap 95% CIs of the
    median do not overlap, a conservative rule (non-overlap implies a difference at well beyond
    95% confidence); overlapping intervals give "no change". An A/B test with a p-value and
    a noise band is :func:`tinyprof.ab_test` (chapter 6).
    """

    baseline: LatencyStats
    other: LatencyStats

    @property
    def ratio(self) -> float:
        """other.median / baseline.median."""
        return self.other.median / self.baseline.median

    @property
    def speedup(self) -> float:
        """baseline.median / other.median."""
        return self.baseline.median / self.other.median

    @property
    def verdict(self) -> str:
        """FASTER, SLOWER or NO_CHANGE (see the class docstring)."""
        if self.other.ci[1] < self.baseline.ci[0]:
            return FASTER
        if self.other.ci[0] > self.baseline.ci[1]:
            return SLOWER
        return NO_CHANGE

    def __str__(self) -> str:
        name = self.other.name or "other"
        base = self.baseline.name or "baseline"
        return (f"{name} vs {base}: median {format_seconds(self.other.median)} vs "
                f"{format_seconds(self.baseline.median)} ({self.ratio:.2f}×): {self.verdict}")


def compare(baseline: LatencyStats, other: LatencyStats) -> Comparison:
    """:class:`Comparison` of ``other`` against ``baseline`` (two LatencyStats, e.g. a saved
    baseline loaded with :meth:`LatencyStats.load` and a new measurement)."""
    for name, value in (("baseline", baseline), ("other", other)):
        if not isinstance(value, LatencyStats):
            raise TypeError(f"compare: {name} must be a LatencyStats, got {type(value).__name__}")
    return Comparison(baseline, other)


def compare_latency(*stats: LatencyStats, labels: Sequence[str] | None = None) -> Table:
    """One row per measurement, each compared with the first (the baseline).

    Each row is :func:`compare` of the baseline with that measurement: ``ratio`` = median /
    baseline median (below 1 is faster) and its verdict.
    """
    if not stats or not all(isinstance(s, LatencyStats) for s in stats):
        raise TypeError("compare_latency needs one or more LatencyStats")
    labels = list(labels) if labels is not None else [s.name or f"#{i}" for i, s in
                                                      enumerate(stats)]
    if len(labels) != len(stats):
        raise ValueError(f"compare_latency: {len(labels)} labels for {len(stats)} measurements")
    base = stats[0]
    rows = [[label, s.median, s.ci, s.p95, s.iqr, s.cv, compare(base, s).ratio,
             "baseline" if i == 0 else compare(base, s).verdict, len(s.warnings)]
            for i, (label, s) in enumerate(zip(labels, stats, strict=True))]
    formats = {c: format_seconds for c in ("median", "p95", "IQR")}
    formats["95% CI"] = format_interval
    formats["CV"] = format_percent
    formats["ratio"] = format_ratio
    return Table(["name", "median", "95% CI", "p95", "IQR", "CV", "ratio", "verdict",
                  "warnings"], rows, title=f"Latency compared with {labels[0]}",
                 formats=formats)
