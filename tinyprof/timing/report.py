"""Functions of LatencyStats: a histogram figure and a side-by-side comparison table."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..table import Table
from ..units import TIME_UNITS, format_seconds
from .stats import LatencyStats

_MARKERS = (("p50", "-"), ("p95", "--"), ("p99", ":"))


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit (name, seconds per unit) that shows ``seconds`` as a number ≥ 1: ms, µs or ns."""
    for unit, scale in TIME_UNITS:
        if abs(seconds) >= scale:
            return unit, scale
    return TIME_UNITS[-1]


def plot_latency(stats: LatencyStats, *, ax=None, bins: int | str = "auto"):
    """Histogram of the samples with p50, p95 and p99 marked and the median's 95% CI shaded.

    Returns the matplotlib Figure (drawn on ``ax`` when given); never calls ``plt.show()``.
    """
    if not isinstance(stats, LatencyStats):
        raise TypeError(f"plot_latency needs a LatencyStats, got {type(stats).__name__}")
    from matplotlib.figure import Figure

    from ..plots import ACCENT, FIGSIZE, HIGHLIGHT, MUTED

    if ax is None:
        fig = Figure(figsize=FIGSIZE)
        ax = fig.subplots()
    else:
        fig = ax.figure
    unit, scale = time_unit(stats.median)
    ax.hist(np.asarray(stats.samples) / scale, bins=bins, color=ACCENT, alpha=0.75)
    ax.axvspan(stats.ci[0] / scale, stats.ci[1] / scale, color=MUTED, alpha=0.35,
               label=f"95% CI of median {format_seconds(stats.ci[0])}–"
                     f"{format_seconds(stats.ci[1])}")
    for key, style in _MARKERS:
        value = getattr(stats, key)
        ax.axvline(value / scale, color=HIGHLIGHT, ls=style, lw=1.5,
                   label=f"{key} {format_seconds(value)}")
    loops = f" × {stats.loops:,} loops" if stats.loops > 1 else ""
    ax.set_title(f"{stats.name or 'latency'}: {stats.n} samples{loops}", fontsize=11, loc="left")
    ax.set_xlabel(f"time per call ({unit})")
    ax.set_ylabel("samples")
    ax.legend(fontsize=8, frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig


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
