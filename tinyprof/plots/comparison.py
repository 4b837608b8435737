"""Comparisons: an A/B test's samples and verdict, and a benchmark suite's variants."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..units import format_bytes, format_seconds, time_unit
from .describe import described, listing
from .style import ACCENT, FIGSIZE, HIGHLIGHT, MUTED, new_figure, plain_log_axis, style_axes


def plot_ab(result) -> Figure:
    """An A/B result (:class:`tinyprof.abtest.ABResult`) in two panels. Left: every per-call
    sample of each side (jittered), with its median. Right: the speedup with its 95 % interval,
    the no-change line at 1× and the noise band shaded around it."""
    unit, scale = time_unit(max(result.baseline.median, result.candidate.median))
    fig, (left, right) = new_figure(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    jitter = np.random.default_rng(0)
    for i, (stats, color) in enumerate(((result.baseline, MUTED), (result.candidate, ACCENT))):
        values = np.asarray(stats.samples) / scale
        left.scatter(i + jitter.uniform(-0.15, 0.15, values.size), values, s=10, color=color,
                     alpha=0.6)
        left.hlines(stats.median / scale, i - 0.3, i + 0.3, color="black", lw=2)
    left.set_xticks([0, 1], [result.baseline.name or "baseline",
                             result.candidate.name or "candidate"])
    plain_log_axis(left, "y")  # a few descheduled rounds sit far above the rest
    style_axes(left, "Per-call time, one dot per round", "", f"time per call ({unit}, log scale)")
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
    style_axes(right, f"Verdict: {result.verdict} (p = {result.p_value:.2g})",
               "median(baseline) / median(candidate)", "")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), fontsize=8, frameon=False,
                 ncol=2)
    fig.tight_layout()
    sides = [f"{stats.name or side} median {format_seconds(stats.median)} "
             f"({len(stats.samples)} rounds)"
             for side, stats in (("baseline", result.baseline), ("candidate", result.candidate))]
    return described(
        fig, "A/B test in two panels.",
        f"Left: per-call time, one dot per round, log scale: {listing(sides)}.",
        f"Right: speedup median(baseline) / median(candidate) = {result.speedup:.2f}× with "
        f"95% interval {low:.2f}× to {high:.2f}×, beside the no-change line at 1× and a noise "
        f"band of ±{result.noise_band:.0%}. Verdict: {result.verdict} "
        f"(p = {result.p_value:.2g}).")


def plot_performance_comparison(results) -> Figure:
    """A benchmark suite (:class:`tinyprof.suite.SuiteResult`) in one figure of three panels:
    median time per call with its 95 % interval, peak memory of a forward pass (parameter bytes
    as a hatched inner bar), and accuracy; the baseline in grey, the other variants in blue."""
    variants = list(results.variants)
    names = [v.name for v in variants]
    colors = [MUTED if v.name == results.baseline else ACCENT for v in variants]
    y = np.arange(len(variants))
    fig, axes = new_figure(1, 3, figsize=(FIGSIZE[0] + 2, 0.5 * len(variants) + 1.8),
                           sharey=True)
    unit, scale = time_unit(max(v.latency.median for v in variants))
    medians = np.array([v.latency.median for v in variants]) / scale
    errors = np.array([[v.latency.median - v.latency.ci[0], v.latency.ci[1] - v.latency.median]
                       for v in variants]).T / scale
    axes[0].barh(y, medians, xerr=errors, color=colors, capsize=3)
    for i, median in enumerate(medians):
        axes[0].annotate(f" {median:.3g}", (median, i), va="center", fontsize=8)
    wide = medians.max() / medians.min() > 20
    if wide:  # a variant many times slower (float16 on a CPU) would flatten the others
        plain_log_axis(axes[0], "x")
    style_axes(axes[0], "Time per call (95% CI)", f"median ({unit}{', log scale' if wide else ''})",
               "")
    peaks = np.array([v.peak_bytes for v in variants]) / 1e6
    axes[1].barh(y, peaks, color=colors)
    stored = [v.parameter_bytes or 0 for v in variants]
    axes[1].barh(y, np.array(stored) / 1e6, height=0.4, color="none", edgecolor="black",
                 hatch="//", label="parameters stored")
    axes[1].legend(loc="lower right", fontsize=8, frameon=False)
    style_axes(axes[1], "Memory", "MB (peak of a forward pass)", "")
    scores = [v.accuracy if v.accuracy is not None else np.nan for v in variants]
    axes[2].barh(y, np.array(scores) * 100, color=colors)
    for i, score in enumerate(scores):
        if np.isfinite(score):
            axes[2].annotate(f" {score:.1%}", (score * 100, i), va="center", fontsize=8)
    axes[2].set_xlim(0, 110)
    style_axes(axes[2], "Accuracy (held out)", "%", "")
    axes[0].set_yticks(y, names)
    axes[0].invert_yaxis()
    for ax in axes:
        ax.grid(True, axis="x", alpha=0.3)
        ax.grid(False, axis="y")
    fig.tight_layout()

    def variant(v) -> str:
        low, high = v.latency.ci
        stored = f" (parameters {format_bytes(v.parameter_bytes)})" if v.parameter_bytes else ""
        accuracy = f", accuracy {v.accuracy:.1%}" if v.accuracy is not None else ""
        return (f"{v.name}{' (baseline)' if v.name == results.baseline else ''}: median time "
                f"{format_seconds(v.latency.median)} (95% CI {format_seconds(low)} to "
                f"{format_seconds(high)}), peak memory {format_bytes(v.peak_bytes)}{stored}"
                f"{accuracy}")
    return described(
        fig, f"Benchmark suite of {len(variants)} variants in three panels: time per call, "
             "peak memory of a forward pass, held-out accuracy.",
        "; ".join(variant(v) for v in variants) + ".")
