"""Scale it up: a quantity against batch size, and Amdahl's law."""

from __future__ import annotations

import textwrap
from typing import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ..amdahl import amdahl_limit, amdahl_speedup
from .describe import described, number
from .style import ACCENT, HIGHLIGHT, MUTED, new_figure, plain_log2_axis, style_axes


def plot_batch_scaling(batch_sizes: Sequence[int], values: Sequence[float], *,
                       quantity: str, unit: str = "", title: str | None = None,
                       per_sample: bool = True, proportional: bool = False) -> Figure:
    """Left: the quantity vs batch size (with ``proportional``, a dashed line proportional to
    the batch through the first point). Right: the same per sample (value / batch).

    A flat right panel means the cost is all per sample (it scales linearly: the left panel's
    points sit on the dashed line, which bends upward only because the batch axis is
    logarithmic); a falling one means a fixed cost is being shared out across a bigger batch.
    """
    batch = np.asarray(batch_sizes, dtype=float)
    vals = np.asarray(values, dtype=float)
    if batch.shape != vals.shape or batch.size == 0:
        raise ValueError(f"plot_batch_scaling needs one value per batch size, got "
                         f"{batch.size} batch sizes and {vals.size} values")
    fig, axes = new_figure(1, 2 if per_sample else 1, squeeze=False)
    ax = axes[0, 0]
    ax.plot(batch, vals, "o-", color=ACCENT, label="measured")
    proportional = proportional and vals[0] > 0 and batch.size > 1
    if proportional:
        ax.plot(batch, vals[0] * batch / batch[0], "--", color=MUTED,
                label="proportional to the batch")
        ax.legend(loc="upper left", frameon=False, fontsize="small")
    plain_log2_axis(ax)
    # The quantity goes in the title (wrapped), the unit on the axis: a long quantity as a
    # y label would run into the neighbouring panel.
    style_axes(ax, _wrapped(title or f"{quantity} vs batch size"), "batch size", unit or quantity)
    if (vals >= 0).all():
        ax.set_ylim(bottom=0, top=max(vals.max() * 1.1, 1e-12))
    if per_sample:
        ax2 = axes[0, 1]
        ax2.plot(batch, vals / batch, "o-", color=HIGHLIGHT)
        plain_log2_axis(ax2)
        style_axes(ax2, _wrapped(f"{quantity} per sample"), "batch size",
                   f"{unit} per sample" if unit else "per sample")
        if (vals >= 0).all():
            ax2.set_ylim(bottom=0, top=max((vals / batch).max() * 1.1, 1e-12))
    fig.tight_layout()
    suffix = f" {unit}" if unit else ""

    def ends(v: np.ndarray, per: str = "") -> str:
        return (f"{number(v[0])}{suffix}{per} at batch {number(batch[0])} to {number(v[-1])}"
                f"{suffix}{per} at batch {number(batch[-1])}")
    growth = (f" ({number(vals[-1] / vals[0])}× for {number(batch[-1] / batch[0])}× the batch)"
              if vals[0] > 0 and batch.size > 1 else "")
    return described(
        fig, f"Line chart: {' '.join((title or f'{quantity} vs batch size').split())}, "
             "batch size on a log scale" + (", a dashed line proportional to the batch through "
                                            "the first point." if proportional else "."),
        f"{quantity[:1].upper()}{quantity[1:]}: {ends(vals)}{growth}.",
        f"Per sample, right panel: {ends(vals / batch, ' per sample')}." if per_sample else "")


def _wrapped(title: str, width: int = 40) -> str:
    """A panel title broken into lines of at most ``width`` characters."""
    return "\n".join(textwrap.wrap(title, width)) or title


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
    fig, ax = new_figure()
    for p in others:
        if abs(p - fraction) > 1e-9:
            curve = np.array([amdahl_speedup(p, f) for f in s])
            ax.plot(s, curve, color=MUTED, lw=1)
            inside = np.nonzero(curve <= top)[0][-1]
            clipped = inside < s.size - 1   # the curve leaves through the top: label below it
            ax.annotate(f"p = {p:g}", (s[inside], curve[inside]), fontsize=8, color=MUTED,
                        xytext=(-10, -4) if clipped else (5, 0), textcoords="offset points",
                        ha="right" if clipped else "left", va="center", annotation_clip=False)
    ax.plot(s, [amdahl_speedup(fraction, f) for f in s], color=ACCENT, lw=2,
            label=f"{part}: p = {fraction:.0%} of the {quantity}")
    if np.isfinite(limit):
        ax.axhline(limit, color=ACCENT, ls="--", lw=1, label=f"ceiling 1/(1−p) = {limit:.2f}×")
    if factor is not None:
        gain = amdahl_speedup(fraction, factor)
        ax.plot([factor], [gain], "o", color=HIGHLIGHT, zorder=3,
                label=f"{factor:g}× {adjective} → {gain:.2f}× overall")
    plain_log2_axis(ax, "×")
    ax.set_ylim(1.0, top)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    style_axes(ax, f"Amdahl's law: {verb} {part}", f"{noun} of that part (s)", f"overall {noun}")
    # Below the axes, so that it covers no curve; the p labels sit at the curves' ends.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize=9,
              frameon=False)
    fig.tight_layout()
    ceiling = (f"its ceiling 1/(1 − p) is {limit:.2f}×" if np.isfinite(limit)
               else "with p = 100% there is no ceiling")
    point = (f" Making it {factor:g}× {adjective} gives {amdahl_speedup(fraction, factor):.2f}× "
             "overall." if factor is not None else "")
    faint = [f"{p:g}" for p in others if abs(p - fraction) > 1e-9]
    return described(
        fig, f"Amdahl's law: {verb} {part}.",
        f"Overall {noun} against the {noun} s of that part, 1× to {max_factor:g}× (log scale), "
        f"for p = {fraction:.0%} of the {quantity}: {ceiling}.{point}",
        f"Grey curves for p = {', '.join(faint)}." if faint else "")


def plot_scaling(scaling, quantity: str = "latency") -> Figure:
    """:func:`plot_batch_scaling` of a :class:`~tinyprof.scaling.BatchScaling`: its median
    ``"latency"`` (ms), ``"throughput"`` (samples/s) or peak ``"memory"`` (MB) per batch size."""
    if quantity == "latency":
        values = [m * 1e3 for m in scaling.median_seconds]
        return plot_batch_scaling(scaling.batch_sizes, values, quantity="median latency",
                                  unit="ms")
    if quantity == "throughput":
        return plot_batch_scaling(scaling.batch_sizes, scaling.throughput, quantity="throughput",
                                  unit="samples/s", per_sample=False)
    if quantity == "memory":
        if any(p is None for p in scaling.peak_bytes):
            raise ValueError("plot_scaling(scaling, 'memory'): memory was not measured "
                             "(batch_scaling(..., memory=False))")
        return plot_batch_scaling(scaling.batch_sizes, [p / 1e6 for p in scaling.peak_bytes],
                                  quantity="peak memory", unit="MB")
    raise ValueError(f"plot_scaling: quantity must be 'latency', 'throughput' or 'memory', "
                     f"got {quantity!r}")
