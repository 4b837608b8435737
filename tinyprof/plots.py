"""The shared "Scale it up" figures: batch scaling and Amdahl's law, one look in every chapter.

Every function returns a matplotlib Figure and never calls ``plt.show()``; a notebook displays
the returned figure, a script saves it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from .amdahl import amdahl_limit, amdahl_speedup

ACCENT = "#1f77b4"
MUTED = "#9aa5b1"
HIGHLIGHT = "#d62728"
FIGSIZE = (9.0, 3.6)


def _plain_log2_axis(ax, suffix: str = "") -> None:
    """A base-2 log x axis labelled 1, 2, 4, … (with ``suffix``) instead of 2⁰, 2¹, 2²."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{suffix}"))


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
    _plain_log2_axis(ax)
    _style(ax, title or f"{quantity} vs batch size", "batch size", label)
    if (vals >= 0).all():
        ax.set_ylim(bottom=0, top=max(vals.max() * 1.1, 1e-12))
    if per_sample:
        ax2 = axes[0, 1]
        ax2.plot(batch, vals / batch, "o-", color=HIGHLIGHT)
        _plain_log2_axis(ax2)
        _style(ax2, f"{quantity} per sample", "batch size", f"{label} / sample")
        if (vals >= 0).all():
            ax2.set_ylim(bottom=0)
    fig.tight_layout()
    return fig


def amdahl_words(quantity: str = "time") -> tuple[str, str, str]:
    """(verb, adjective, noun) for Amdahl's law over ``quantity``: time is sped up, gets faster
    and the gain is a speedup; any other quantity (memory) is shrunk, gets smaller, a reduction."""
    if quantity == "time":
        return "speeding up", "faster", "speedup"
    return "shrinking", "smaller", "reduction"


def plot_amdahl(fraction: float, factor: float | None = None, *, part: str = "the dominant part",
                max_factor: float = 64.0, others: Sequence[float] = (0.5, 0.9, 0.99),
                quantity: str = "time") -> Figure:
    """Overall speedup 1 / ((1 − p) + p/s) as the improved part gets s× faster.

    Draws the curve for ``fraction`` with its ceiling 1/(1 − p), faint curves for other
    fractions for comparison, and marks the point s = ``factor`` when given. ``quantity`` is
    what p is a share of ("time", or e.g. "memory": then the part gets s× smaller and the
    overall gain is a reduction).
    """
    verb, adjective, noun = amdahl_words(quantity)
    s = np.geomspace(1.0, max_factor, 200)
    limit = amdahl_limit(fraction)
    top = max_factor if not np.isfinite(limit) else min(max_factor, max(4.0, 1.6 * limit))
    fig, ax = plt.subplots(figsize=FIGSIZE)
    for p in others:
        if abs(p - fraction) > 1e-9:
            curve = np.array([amdahl_speedup(p, f) for f in s])
            ax.plot(s, curve, color=MUTED, lw=1)
            inside = np.nonzero(curve <= top)[0][-1]
            ax.annotate(f"p={p:g}", (s[inside], curve[inside]), fontsize=8, color=MUTED,
                        xytext=(-4, 4), textcoords="offset points", ha="right")
    ax.plot(s, [amdahl_speedup(fraction, f) for f in s], color=ACCENT, lw=2,
            label=f"{part}: p = {fraction:.0%} of the {quantity}")
    if np.isfinite(limit):
        ax.axhline(limit, color=ACCENT, ls="--", lw=1, label=f"ceiling 1/(1−p) = {limit:.2f}×")
    if factor is not None:
        gain = amdahl_speedup(fraction, factor)
        ax.plot([factor], [gain], "o", color=HIGHLIGHT, zorder=3,
                label=f"{factor:g}× {adjective} → {gain:.2f}× overall")
    _plain_log2_axis(ax, "×")
    ax.set_ylim(1.0, top)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    _style(ax, f"Amdahl's law: {verb} {part}", f"{noun} of that part (s)", f"overall {noun}")
    ax.legend(loc="lower right", fontsize=9, frameon=False)
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
    verb = "go" if quantity.endswith("s") else "goes"   # the parameters go, the memory goes
    _style(ax, title or f"Where the {quantity} {verb}",
           f"{quantity} ({unit})" if unit else quantity, "")
    ax.grid(False)
    fig.tight_layout()
    return fig


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
    colors = [ACCENT] + [plt.cm.Greys(0.25 + 0.5 * i / max(len(parts) - 1, 1))
                         for i in range(len(parts) - 1)]
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.stackplot(x, shares, labels=list(parts), colors=colors, alpha=0.9)
    for i, (position, label) in enumerate(marks):
        ax.axvline(position, color=HIGHLIGHT if i == 0 else "black", ls="-" if i == 0 else "--",
                   lw=1.5, label=label)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlim(x.min(), x.max())
    ax.set_ylim(0, 100)
    _style(ax, title or f"Where the {quantity} go", xlabel, f"share of {quantity} (%)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    fig.tight_layout()
    return fig


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
    cycle = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    colors = {name: MEMORY_COLORS.get(name) or next(cycle) for name in components}
    x = np.arange(len(bars))
    fig, ax = plt.subplots(figsize=FIGSIZE)
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
    _style(ax, title or "Memory by component", "", f"memory ({unit})")
    ax.grid(False, axis="x")
    lines = [h for h in ax.get_legend_handles_labels()[0] if h not in stacks]
    ax.legend(handles=stacks[::-1] + lines, loc="center left", bbox_to_anchor=(1.01, 0.5),
              fontsize=9, frameon=False)  # legend top to bottom, as the stack reads
    fig.tight_layout()
    return fig


def plot_latency_log(stats, *, ax=None, bins: int = 40) -> Figure:
    """:func:`tinyprof.plot_latency`'s histogram (p50, p95, p99 and the median's 95% CI) on a
    logarithmic time axis, so that the bulk of the calls and a tail 100× slower both show.

    ``bins`` geometric bins span the fastest to the slowest sample; the axis is labelled with
    plain numbers. Falls back to plot_latency's linear axis when a sample is 0 s or all samples
    are equal (no geometric bins exist then). Returns the Figure; never calls ``plt.show()``.
    """
    from matplotlib.ticker import LogFormatter

    from .timing import plot_latency, time_unit

    if stats.min <= 0 or stats.max <= stats.min:
        return plot_latency(stats, ax=ax)
    _, scale = time_unit(stats.median)
    fig = plot_latency(stats, ax=ax, bins=np.geomspace(stats.min, stats.max, bins + 1) / scale)
    axis = fig.axes[0] if ax is None else ax
    axis.set_xscale("log")
    axis.xaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    axis.xaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1.2, 0.5)))
    return fig


#: Marker colour of each roofline bound.
BOUND_COLORS = {"compute": ACCENT, "memory": "#ff7f0e", "overhead": MUTED}


def plot_roofline(peaks, points: Sequence[Mapping] = (), *, label_top: int = 5,
                  title: str | None = None) -> Figure:
    """The roofline min(peak FLOP/s, intensity × bandwidth) on log-log axes, with the measured
    cache roofs dashed, and ``points`` placed on it.

    ``points`` are rows of :func:`tinyprof.bottlenecks.place_layers` (``to_records()``): each
    needs "intensity" and "achieved" (FLOP/s) and may have "bound", "phase", "name" and
    "share"; forward calls are circles, backward squares, coloured by bound. The ``label_top``
    points with the largest share are named. Points with no FLOPs cannot sit on log axes and
    are counted in the title instead.
    """
    shown = [p for p in points if p["intensity"] > 0 and p["achieved"] > 0
             and np.isfinite(p["intensity"])]
    intensities = [p["intensity"] for p in shown] + [peaks.ridge_intensity]
    low = min(0.01, min(intensities) / 2)
    high = max(1000.0, max(intensities) * 2)
    x = np.geomspace(low, high, 400)
    fig, ax = plt.subplots(figsize=(FIGSIZE[0], 4.6))
    ax.plot(x, np.minimum(peaks.flops_per_second, x * peaks.bytes_per_second), color="black",
            lw=2, label=f"roofline: {peaks.flops_per_second / 1e9:.0f} GFLOP/s, "
                        f"{peaks.bytes_per_second / 1e9:.0f} GB/s")
    for name, rate in getattr(peaks, "cache_roofs", ()):
        ax.plot(x, np.minimum(peaks.flops_per_second, x * rate), color=MUTED, lw=1, ls="--",
                label=f"{name} roof {rate / 1e9:.0f} GB/s")
    ax.axvline(peaks.ridge_intensity, color=MUTED, lw=0.8, ls=":")
    for bound, color in BOUND_COLORS.items():
        for phase, marker in (("forward", "o"), ("backward", "s")):
            chosen = [p for p in shown if p.get("bound", "compute") == bound
                      and p.get("phase", "forward") == phase]
            if chosen:
                ax.scatter([p["intensity"] for p in chosen], [p["achieved"] for p in chosen],
                           color=color, marker=marker, s=36, zorder=3, alpha=0.85,
                           label=f"{bound}-bound, {phase}")
    ranked = sorted(shown, key=lambda p: p.get("share", 0.0), reverse=True)[:label_top]
    for p in ranked:
        ax.annotate(f"{p.get('name', '')} {p.get('phase', '')[:3]}".strip(),
                    (p["intensity"], p["achieved"]), xytext=(5, -3), textcoords="offset points",
                    fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(bottom=min([p["achieved"] for p in shown] + [low * peaks.bytes_per_second]) / 2,
                top=peaks.flops_per_second * 3)
    missing = len(points) - len(shown)
    note = f" ({missing} not shown: no FLOPs counted)" if missing else ""
    _style(ax, (title or "Roofline of this machine") + note, "arithmetic intensity (FLOPs/byte)",
           "FLOP/s")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def plot_ab(result) -> Figure:
    """An A/B result (:class:`tinyprof.abtest.ABResult`) in two panels. Left: every per-call
    sample of each side (jittered), with its median. Right: the speedup with its 95 % interval,
    the no-change line at 1× and the noise band shaded around it."""
    from .timing import time_unit

    unit, scale = time_unit(max(result.baseline.median, result.candidate.median))
    fig, (left, right) = plt.subplots(1, 2, figsize=FIGSIZE, gridspec_kw={"width_ratios": [3, 2]})
    jitter = np.random.default_rng(0)
    for i, (stats, color) in enumerate(((result.baseline, MUTED), (result.candidate, ACCENT))):
        values = np.asarray(stats.samples) / scale
        left.scatter(i + jitter.uniform(-0.15, 0.15, values.size), values, s=10, color=color,
                     alpha=0.6)
        left.hlines(stats.median / scale, i - 0.3, i + 0.3, color="black", lw=2)
    left.set_xticks([0, 1], [result.baseline.name or "baseline",
                             result.candidate.name or "candidate"])
    left.set_yscale("log")  # a few descheduled rounds sit far above the rest
    _style(left, "Per-call time, one dot per round", "", f"time per call ({unit}, log scale)")
    low, high = result.ci
    band = (1 / (1 + result.noise_band), 1 + result.noise_band)
    right.axvspan(*band, color=MUTED, alpha=0.3, label=f"noise band ±{result.noise_band:.0%}")
    right.axvline(1.0, color="black", lw=1)
    right.errorbar([result.speedup], [0], xerr=[[result.speedup - low], [high - result.speedup]],
                   fmt="o", color=HIGHLIGHT, capsize=6, label="speedup, 95% CI")
    span = max(high, band[1]) - min(low, band[0])
    right.set_xlim(min(low, band[0]) - 0.2 * span, max(high, band[1]) + 0.2 * span)
    right.set_yticks([])
    right.xaxis.set_major_locator(MaxNLocator(4))
    right.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.2f}×"))
    _style(right, f"Verdict: {result.verdict} (p = {result.p_value:.2g})",
           "median(baseline) / median(candidate)", "")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), fontsize=8, frameon=False,
                 ncol=2)
    fig.tight_layout()
    return fig


def plot_performance_comparison(results) -> Figure:
    """A benchmark suite (:class:`tinyprof.suite.SuiteResult`) in one figure of three panels:
    median time per call with its 95 % interval, peak memory of a forward pass (parameter bytes
    as a hatched inner bar), and accuracy; the baseline in grey, the other variants in blue."""
    variants = list(results.variants)
    names = [v.name for v in variants]
    colors = [MUTED if v.name == results.baseline else ACCENT for v in variants]
    y = np.arange(len(variants))
    fig, axes = plt.subplots(1, 3, figsize=(FIGSIZE[0] + 2, 0.5 * len(variants) + 1.8),
                             sharey=True)
    from .timing import time_unit

    unit, scale = time_unit(max(v.latency.median for v in variants))
    medians = np.array([v.latency.median for v in variants]) / scale
    errors = np.array([[v.latency.median - v.latency.ci[0], v.latency.ci[1] - v.latency.median]
                       for v in variants]).T / scale
    axes[0].barh(y, medians, xerr=errors, color=colors, capsize=3)
    for i, median in enumerate(medians):
        axes[0].annotate(f" {median:.3g}", (median, i), va="center", fontsize=8)
    wide = medians.max() / medians.min() > 20
    if wide:  # a variant many times slower (float16 on a CPU) would flatten the others
        axes[0].set_xscale("log")
    _style(axes[0], "Time per call (95% CI)", f"median ({unit}{', log scale' if wide else ''})",
           "")
    peaks = np.array([v.peak_bytes for v in variants]) / 1e6
    axes[1].barh(y, peaks, color=colors)
    stored = [v.parameter_bytes or 0 for v in variants]
    axes[1].barh(y, np.array(stored) / 1e6, height=0.4, color="none", edgecolor="black",
                 hatch="//", label="parameters stored")
    axes[1].legend(loc="lower right", fontsize=8, frameon=False)
    _style(axes[1], "Memory", "MB (peak of a forward pass)", "")
    scores = [v.accuracy if v.accuracy is not None else np.nan for v in variants]
    axes[2].barh(y, np.array(scores) * 100, color=colors)
    for i, score in enumerate(scores):
        if np.isfinite(score):
            axes[2].annotate(f" {score:.1%}", (score * 100, i), va="center", fontsize=8)
    axes[2].set_xlim(0, 110)
    _style(axes[2], "Accuracy (held out)", "%", "")
    axes[0].set_yticks(y, names)
    axes[0].invert_yaxis()
    for ax in axes:
        ax.grid(True, axis="x", alpha=0.3)
        ax.grid(False, axis="y")
    fig.tight_layout()
    return fig
