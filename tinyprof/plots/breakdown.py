"""Where a quantity goes: bars per part, shares against x, memory by component."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from matplotlib import colormaps, rcParams
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .describe import described, listing, number, title_of
from .style import ACCENT, FIGSIZE, HIGHLIGHT, MUTED, new_figure, style_axes


def plot_breakdown(labels: Sequence[str], values: Sequence[float], *, quantity: str,
                   unit: str = "", title: str | None = None) -> Figure:
    """A horizontal bar per part, largest first, with its share of the total."""
    order = np.argsort(values)
    labels = [labels[i] for i in order]
    vals = np.asarray(values, dtype=float)[order]
    total = vals.sum()
    fig, ax = new_figure(figsize=(FIGSIZE[0], 0.45 * len(labels) + 1.2))
    bars = ax.barh(labels, vals, color=ACCENT)
    for bar, v in zip(bars, vals):
        share = v / total if total else 0.0
        ax.annotate(f" {share:.1%}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    va="center", fontsize=8)
    verb = "go" if quantity.endswith("s") else "goes"   # the parameters go, the memory goes
    style_axes(ax, title or f"Where the {quantity} {verb}",
               f"{quantity} ({unit})" if unit else quantity, "")
    ax.grid(False)
    fig.tight_layout()
    largest = [f"{label} {number(v)} ({v / total if total else 0.0:.1%})"
               for label, v in zip(labels[::-1], vals[::-1])]
    measure = f"{quantity} in {unit}" if unit else quantity
    return described(fig, f"Bar chart: {title_of(ax)}.",
                     f"{len(vals)} parts ({measure}), largest first: {listing(largest)}.",
                     f"Total {number(total)}{f' {unit}' if unit else ''}.")


def plot_shares(xs: Sequence[float], parts: Mapping[str, Sequence[float]], *, xlabel: str,
                quantity: str, marks: Sequence[tuple[float, str]] = (),
                title: str | None = None) -> Figure:
    """Stacked shares vs x: each part's fraction of the total, part / Σ parts, at every x.

    The first part is drawn at the bottom in the accent colour (it is the one the figure is
    about); ``marks`` are (x, label) pairs drawn as vertical lines, e.g. a chosen setting and
    a break-even point. The x axis is logarithmic (base 2).
    """
    x = np.asarray(xs, dtype=float)
    values = np.array([np.asarray(v, dtype=float) for v in parts.values()])
    if values.ndim != 2 or values.shape[1] != x.size or x.size == 0:
        raise ValueError(f"plot_shares needs one value per x for every part, got {x.size} x "
                         f"values and parts of lengths {[len(v) for v in parts.values()]}")
    totals = values.sum(axis=0)
    shares = 100.0 * values / np.where(totals > 0, totals, 1.0)
    colors = [ACCENT] + [colormaps["Greys"](0.25 + 0.5 * i / max(len(parts) - 1, 1))
                         for i in range(len(parts) - 1)]
    fig, ax = new_figure()
    ax.stackplot(x, shares, labels=list(parts), colors=colors, alpha=0.9)
    for i, (position, label) in enumerate(marks):
        ax.axvline(position, color=HIGHLIGHT if i == 0 else "black", ls="-" if i == 0 else "--",
                   lw=1.5, label=label)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlim(x.min(), x.max())
    ax.set_ylim(0, 100)
    style_axes(ax, title or f"Where the {quantity} go", xlabel, f"share of {quantity} (%)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    fig.tight_layout()

    def at(i: int) -> str:
        return (f"at {number(x[i])}: " + ", ".join(f"{name} {shares[j, i]:.1f}%"
                                                   for j, name in enumerate(parts)))
    return described(
        fig, f"Stacked area chart: {title_of(ax)}.",
        f"Each part's share of the {quantity} against {xlabel}, {number(x.min())} to "
        f"{number(x.max())} (log scale); {at(0)}; {at(x.size - 1)}.",
        f"Marked: {listing(label for _, label in marks)}." if marks else "")


#: One colour per training-memory component, the same in every memory figure: the fixed costs
#: (parameters, gradients, optimizer state) in blues and greys, the per-sample activations in
#: orange. Other component names get the next colour of matplotlib's cycle.
MEMORY_COLORS = {"parameters": ACCENT, "gradients": "#6baed6", "optimizer state": MUTED,
                 "activations": "#ff7f0e"}


def plot_memory_breakdown(bars: Mapping[str, Mapping[str, float]], *, unit: str = "MB",
                          peaks: Mapping[str, float] | None = None,
                          budget: float | None = None, ymax: float | None = None,
                          title: str | None = None) -> Figure:
    """One stacked bar per entry of ``bars``: label → {component: value in ``unit``}.

    Components are stacked bottom-up in the order they first appear, each in one colour across
    all bars (:data:`MEMORY_COLORS`), and each bar carries its total Σ components on top.
    ``peaks`` (label → value) marks the highest memory seen while that bar's step ran, which
    is above the total when the step allocates temporaries; ``budget`` draws a horizontal
    line; ``ymax`` fixes the y axis, so a widget that redraws keeps one scale.
    """
    if not bars:
        raise ValueError("plot_memory_breakdown needs at least one bar")
    peaks = dict(peaks or {})
    unknown = sorted(set(peaks) - set(bars))
    if unknown:
        raise ValueError(f"plot_memory_breakdown: peaks for bars that do not exist: {unknown}; "
                         f"bars are {list(bars)}")
    components = list(dict.fromkeys(name for parts in bars.values() for name in parts))
    for label, parts in bars.items():
        negative = {name: v for name, v in parts.items() if v < 0}
        if negative:
            raise ValueError(f"plot_memory_breakdown: bar {label!r} has negative parts {negative}")
    cycle = iter(rcParams["axes.prop_cycle"].by_key()["color"])
    colors = {name: MEMORY_COLORS.get(name) or next(cycle) for name in components}
    x = np.arange(len(bars))
    fig, ax = new_figure()
    bottom = np.zeros(len(bars))
    stacks = []
    for name in components:
        heights = np.array([float(parts.get(name, 0.0)) for parts in bars.values()])
        stacks.append(ax.bar(x, heights, 0.6, bottom=bottom, color=colors[name], label=name))
        bottom += heights
    for i, total in enumerate(bottom):
        ax.annotate(f"{total:#.3g} {unit}", (x[i], total), xytext=(0, 3),
                    textcoords="offset points", ha="center", fontsize=9)
    for n, (label, value) in enumerate(peaks.items()):
        i = list(bars).index(label)
        ax.hlines(value, x[i] - 0.4, x[i] + 0.4, color="black", lw=2,
                  label=None if n else "peak during the step")
    if budget is not None:
        ax.axhline(budget, color=HIGHLIGHT, ls="--", lw=1.5, label=f"budget {budget:.3g} {unit}")
    ax.set_xticks(x, list(bars))
    highest = max([*bottom, *peaks.values(), budget or 0.0])
    ax.set_ylim(0, ymax if ymax is not None else 1.15 * highest or 1.0)
    style_axes(ax, title or "Memory by component", "", f"memory ({unit})")
    ax.grid(False, axis="x")
    lines = [h for h in ax.get_legend_handles_labels()[0] if h not in stacks]
    ax.legend(handles=stacks[::-1] + lines, loc="center left", bbox_to_anchor=(1.01, 0.5),
              fontsize=9, frameon=False)  # legend top to bottom, as the stack reads
    fig.tight_layout()

    def bar(i: int, label: str) -> str:
        shown = ", ".join(f"{name} {number(v)}" for name, v in bars[label].items())
        peak = f", peak during the step {number(peaks[label])}" if label in peaks else ""
        return f"{label}: {shown}; total {number(bottom[i])} {unit}{peak}"
    return described(
        fig, f"Stacked bar chart: {title_of(ax)}.",
        f"Memory in {unit} by component ({listing(components)}), bottom to top.",
        "; ".join(bar(i, label) for i, label in enumerate(bars)) + ".",
        f"Budget line at {number(budget)} {unit}." if budget is not None else "")
