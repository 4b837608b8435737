"""Latency figures: the samples' histogram (linear or log time) and how a median's
confidence interval narrows with the number of samples."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from ..timing import LatencyStats
from ..units import format_interval, format_seconds, time_unit
from .describe import described
from .style import ACCENT, HIGHLIGHT, MUTED, new_figure, plain_log_axis

_MARKERS = (("p50", "-"), ("p95", "--"), ("p99", ":"))


def plot_latency(stats: LatencyStats, *, ax=None, bins: int | str = "auto"):
    """Histogram of the samples with p50, p95 and p99 marked and the median's 95% CI shaded.

    Returns the matplotlib Figure (drawn on ``ax`` when given); never calls ``plt.show()``.
    Its description (:func:`latency_words`) is set when the figure is its own.
    """
    if not isinstance(stats, LatencyStats):
        raise TypeError(f"plot_latency needs a LatencyStats, got {type(stats).__name__}")
    own = ax is None
    if own:
        fig, ax = new_figure()
    else:
        fig = ax.figure
    unit, scale = time_unit(stats.median)
    ax.hist(np.asarray(stats.samples) / scale, bins=bins, color=ACCENT, alpha=0.75)
    ax.axvspan(stats.ci[0] / scale, stats.ci[1] / scale, color=MUTED, alpha=0.35,
               label=f"95% CI of median {format_interval(stats.ci)}")
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
    return described(fig, latency_words(stats)) if own else fig


def latency_words(stats: LatencyStats, log: bool = False) -> str:
    """What :func:`plot_latency`'s histogram shows, in words: the samples, p50, p95, p99, the
    median's 95% CI and the fastest and slowest call."""
    loops = f" × {stats.loops:,} loops" if stats.loops > 1 else ""
    return (f"Histogram of time per call: {stats.name or 'latency'}, {stats.n} samples{loops}"
            f"{', log time axis' if log else ''}. p50 {format_seconds(stats.p50)}, p95 "
            f"{format_seconds(stats.p95)}, p99 {format_seconds(stats.p99)}; 95% CI of the median "
            f"{format_seconds(stats.ci[0])} to {format_seconds(stats.ci[1])}; fastest "
            f"{format_seconds(stats.min)}, slowest {format_seconds(stats.max)}.")


def plot_latency_log(stats, *, ax=None, bins: int = 40) -> Figure:
    """:func:`tinyprof.plot_latency`'s histogram (p50, p95, p99 and the median's 95% CI) on a
    logarithmic time axis, so that the bulk of the calls and a tail 100× slower both show.

    ``bins`` geometric bins span the fastest to the slowest sample; the axis is labelled with
    plain numbers. Falls back to plot_latency's linear axis when a sample is 0 s or all samples
    are equal (no geometric bins exist then). Returns the Figure; never calls ``plt.show()``.
    """
    if stats.min <= 0 or stats.max <= stats.min:
        return plot_latency(stats, ax=ax)
    _, scale = time_unit(stats.median)
    fig = plot_latency(stats, ax=ax, bins=np.geomspace(stats.min, stats.max, bins + 1) / scale)
    axis = fig.axes[0] if ax is None else ax
    plain_log_axis(axis, "x")
    return described(fig, latency_words(stats, log=True)) if ax is None else fig


def plot_ci_funnel(ax, sizes: Sequence[int], stats: Sequence[LatencyStats], current: int) -> None:
    """On ``ax``: the median and its 95% CI of the first n samples for each n in ``sizes``
    (``stats[i]`` = the LatencyStats of the first ``sizes[i]`` samples), ``current``
    highlighted, beside the ±1/√n narrowing extrapolated from the last interval."""
    unit, scale = time_unit(stats[-1].median)

    n = np.asarray(sizes, dtype=float)
    medians = np.array([s.median for s in stats]) / scale
    lows, highs = (np.array([s.ci[i] for s in stats]) / scale for i in (0, 1))
    ax.fill_between(n, lows, highs, color=ACCENT, alpha=0.25, label="95% CI of the median")
    ax.plot(n, medians, "o-", color=ACCENT, ms=4, label="median of the first n")
    final, half = medians[-1], (highs[-1] - lows[-1]) / 2
    ax.plot(n, final + half * np.sqrt(n[-1] / n), ls="--", color=MUTED, lw=1,
            label="±1/√n from the last CI")
    ax.plot(n, final - half * np.sqrt(n[-1] / n), ls="--", color=MUTED, lw=1)
    i = list(sizes).index(current)
    ax.errorbar([current], [medians[i]], yerr=[[medians[i] - lows[i]], [highs[i] - medians[i]]],
                fmt="o", color=HIGHLIGHT, capsize=4, zorder=3, label=f"n = {current}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(n, [str(size) for size in sizes])
    ax.minorticks_off()
    # Frame the intervals of n ≥ 20: a handful of samples with one slow call can give a CI many
    # times wider than the rest, which would flatten them all; such a band runs off the top.
    framed = n >= 20 if np.count_nonzero(n >= 20) >= 2 else np.ones(n.size, dtype=bool)
    low, high = lows[framed].min(), highs[framed].max()
    pad = max(high - low, 0.01 * final)
    ax.set_ylim(max(0.0, low - 0.5 * pad), high + 1.5 * pad)
    ax.set_title("The median's 95% CI vs number of samples", fontsize=11, loc="left")
    ax.set_xlabel("samples n")
    ax.set_ylabel(f"time per call ({unit})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def ci_funnel_words(sizes: Sequence[int], stats: Sequence[LatencyStats], current: int) -> str:
    """What :func:`plot_ci_funnel` shows, in words: the median's 95% CI at the fewest samples,
    at ``current`` and at all of them."""
    def at(i: int) -> str:
        low, high = stats[i].ci
        return (f"n = {sizes[i]}: median {format_seconds(stats[i].median)}, 95% CI "
                f"{format_seconds(low)} to {format_seconds(high)}")
    shown = sorted({0, list(sizes).index(current), len(sizes) - 1})
    return ("The median's 95% CI against the number of samples n (log scale, "
            f"{sizes[0]} to {sizes[-1]}), beside a ±1/√n narrowing: "
            + "; ".join(at(i) for i in shown) + f". Highlighted: n = {current}.")
