"""Comparing LatencyStats: a verdict for two, a side-by-side table for several."""

from __future__ import annotations

from typing import Sequence

from ..table import Table
from ..units import format_seconds
from .stats import LatencyStats


def _verdict(baseline: LatencyStats, other: LatencyStats) -> str:
    """'faster'/'slower' when the medians' 95% CIs do not overlap, else 'within noise'."""
    if other.ci[1] < baseline.ci[0]:
        return "faster"
    if other.ci[0] > baseline.ci[1]:
        return "slower"
    return "within noise"


def compare_latency(*stats: LatencyStats, labels: Sequence[str] | None = None) -> Table:
    """One row per measurement, each compared with the first (the baseline).

    ``ratio`` = median / baseline median (below 1 is faster). ``verdict`` says "faster" or
    "slower" only when the two bootstrap CIs of the median do not overlap, a conservative
    rule (non-overlap implies a difference at well beyond 95% confidence); overlapping CIs
    give "within noise". A proper A/B test with effect sizes is chapter 6's subject.
    """
    if not stats or not all(isinstance(s, LatencyStats) for s in stats):
        raise TypeError("compare_latency needs one or more LatencyStats")
    labels = list(labels) if labels is not None else [s.name or f"#{i}" for i, s in
                                                      enumerate(stats)]
    if len(labels) != len(stats):
        raise ValueError(f"compare_latency: {len(labels)} labels for {len(stats)} measurements")
    base = stats[0]
    rows = [[label, s.median, s.ci, s.p95, s.iqr, s.cv, s.median / base.median,
             "baseline" if i == 0 else _verdict(base, s), len(s.warnings)]
            for i, (label, s) in enumerate(zip(labels, stats, strict=True))]
    formats = {c: format_seconds for c in ("median", "p95", "IQR")}
    formats["95% CI"] = lambda ci: f"{format_seconds(ci[0])} – {format_seconds(ci[1])}"
    formats["CV"] = lambda cv: f"{cv:.1%}"
    formats["ratio"] = lambda r: f"{r:.2f}×"
    return Table(["name", "median", "95% CI", "p95", "IQR", "CV", "ratio", "verdict",
                  "warnings"], rows, title=f"Latency compared with {labels[0]}",
                 formats=formats)
