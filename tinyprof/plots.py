"""The shared "Scale it up" figures: batch scaling and Amdahl's law, one look in every chapter.

Every function returns a matplotlib Figure and never calls ``plt.show()``; a notebook displays
the returned figure, a script saves it.
"""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from .amdahl import amdahl_limit, amdahl_speedup

ACCENT = "#1f77b4"
MUTED = "#9aa5b1"
HIGHLIGHT = "#d62728"
FIGSIZE = (9.0, 3.6)


def _style(ax, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def plot_batch_scaling(batch_sizes: Sequence[int], values: Sequence[float], *,
                       quantity: str, unit: str = "", title: str | None = None,
                       per_sample: bool = True) -> Figure:
    """Left: the quantity vs batch size. Right: the same per sample (value / batch).

    A flat right panel means the cost is all per sample (it scales linearly); a falling one
    means a fixed cost is being shared out across a bigger batch.
    """
    batch = np.asarray(batch_sizes, dtype=float)
    vals = np.asarray(values, dtype=float)
    if batch.shape != vals.shape or batch.size == 0:
        raise ValueError(f"plot_batch_scaling needs one value per batch size, got "
                         f"{batch.size} batch sizes and {vals.size} values")
    label = f"{quantity} ({unit})" if unit else quantity
    fig, axes = plt.subplots(1, 2 if per_sample else 1, figsize=FIGSIZE, squeeze=False)
    ax = axes[0, 0]
    ax.plot(batch, vals, "o-", color=ACCENT)
    ax.set_xscale("log", base=2)
    _style(ax, title or f"{quantity} vs batch size", "batch size", label)
    if per_sample:
        ax2 = axes[0, 1]
        ax2.plot(batch, vals / batch, "o-", color=HIGHLIGHT)
        ax2.set_xscale("log", base=2)
        _style(ax2, f"{quantity} per sample", "batch size", f"{label} / sample")
    fig.tight_layout()
    return fig


def plot_amdahl(fraction: float, factor: float | None = None, *, part: str = "the dominant part",
                max_factor: float = 64.0, others: Sequence[float] = (0.5, 0.9, 0.99)) -> Figure:
    """Overall speedup 1 / ((1 − p) + p/s) as the improved part gets s× faster.

    Draws the curve for ``fraction`` with its ceiling 1/(1 − p), faint curves for other
    fractions for comparison, and marks the point s = ``factor`` when given.
    """
    s = np.geomspace(1.0, max_factor, 200)
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for p in others:
        if abs(p - fraction) > 1e-9:
            ax.plot(s, [amdahl_speedup(p, f) for f in s], color=MUTED, lw=1)
            ax.annotate(f"p={p:g}", (s[-1], amdahl_speedup(p, s[-1])), fontsize=8, color=MUTED,
                        xytext=(3, 0), textcoords="offset points", va="center")
    ax.plot(s, [amdahl_speedup(fraction, f) for f in s], color=ACCENT, lw=2,
            label=f"{part}: p = {fraction:.0%} of the time")
    limit = amdahl_limit(fraction)
    if np.isfinite(limit):
        ax.axhline(limit, color=ACCENT, ls="--", lw=1, label=f"ceiling 1/(1−p) = {limit:.2f}×")
    if factor is not None:
        gain = amdahl_speedup(fraction, factor)
        ax.plot([factor], [gain], "o", color=HIGHLIGHT, zorder=3,
                label=f"{factor:g}× faster → {gain:.2f}× overall")
    ax.set_xscale("log", base=2)
    _style(ax, f"Amdahl's law: speeding up {part}", "speedup of that part (s)", "overall speedup")
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    fig.tight_layout()
    return fig


def plot_breakdown(labels: Sequence[str], values: Sequence[float], *, quantity: str,
                   unit: str = "", title: str | None = None) -> Figure:
    """A horizontal bar per part, largest first, with its share of the total."""
    order = np.argsort(values)
    labels = [labels[i] for i in order]
    vals = np.asarray(values, dtype=float)[order]
    total = vals.sum()
    fig, ax = plt.subplots(figsize=(FIGSIZE[0], 0.45 * len(labels) + 1.2))
    bars = ax.barh(labels, vals, color=ACCENT)
    for bar, v in zip(bars, vals):
        share = v / total if total else 0.0
        ax.annotate(f" {share:.1%}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    va="center", fontsize=8)
    _style(ax, title or f"Where the {quantity} goes", f"{quantity} ({unit})" if unit else quantity,
           "")
    ax.grid(False)
    fig.tight_layout()
    return fig
