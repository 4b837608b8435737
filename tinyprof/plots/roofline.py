"""The roofline of this machine with every profiled layer placed on it."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from .describe import described, listing, number, title_of
from .style import ACCENT, FIGSIZE, MUTED, new_figure, style_axes

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
    fig, ax = new_figure(figsize=(FIGSIZE[0], 4.6))
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
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(bottom=min([p["achieved"] for p in shown] + [low * peaks.bytes_per_second]) / 2,
                top=peaks.flops_per_second * 3)
    ranked = sorted(shown, key=lambda p: p.get("share", 0.0), reverse=True)[:label_top]
    _label_points(ax, ranked)
    missing = len(points) - len(shown)
    note = f" ({missing} not shown: no FLOPs counted)" if missing else ""
    style_axes(ax, (title or "Roofline of this machine") + note,
               "arithmetic intensity (FLOPs/byte)", "FLOP/s")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    return described(fig, *roofline_words(peaks, shown, ranked, title_of(ax)))


def roofline_words(peaks, shown: Sequence[Mapping], ranked: Sequence[Mapping],
                   title: str) -> list[str]:
    """What :func:`plot_roofline` shows, in words: the roofs, the ridge, how many points are
    bound by what, and where the named (largest-share) points sit."""
    caches = [f"{name} {rate / 1e9:.0f} GB/s" for name, rate in getattr(peaks, "cache_roofs", ())]
    counts = {bound: sum(p.get("bound", "compute") == bound for p in shown)
              for bound in BOUND_COLORS}

    def point(p: Mapping) -> str:
        name = f"{p.get('name', '')} {p.get('phase', '')}".strip() or "a point"
        share = f", {p['share']:.0%} of the time" if "share" in p else ""
        return (f"{name} at {number(p['intensity'])} FLOPs/byte and "
                f"{p['achieved'] / 1e9:.3g} GFLOP/s ({p.get('bound', 'compute')}-bound{share})")
    return [f"Roofline chart, log-log: {title}.",
            "FLOP/s against arithmetic intensity (FLOPs/byte). Compute roof "
            f"{peaks.flops_per_second / 1e9:.0f} GFLOP/s, memory roof "
            f"{peaks.bytes_per_second / 1e9:.0f} GB/s, ridge at "
            f"{number(peaks.ridge_intensity)} FLOPs/byte"
            + (f"; cache roofs {listing(caches)}." if caches else "."),
            f"{len(shown)} points: " + ", ".join(f"{n} {bound}-bound"
                                                 for bound, n in counts.items() if n) + "."
            if shown else "",
            f"Named: {'; '.join(point(p) for p in ranked)}." if ranked else ""]


#: Short names of the phases in point labels (the marker shape says it too).
PHASE_ABBREVIATIONS = {"forward": "fwd", "backward": "bwd"}
_LABEL_LINE_PT, _LABEL_CHAR_PT = 9.0, 4.2   # a 7-point label's line height and character width


def _label_points(ax, points: Sequence[Mapping]) -> None:
    """Name each point ("h.0.attn fwd") just right of it; a label that would cover one placed
    before it moves down a line at a time, with a thin line back to its point, so points on the
    same spot get a readable list."""
    (x_low, x_high), (y_low, y_high) = ax.get_xlim(), ax.get_ylim()
    box = ax.get_position()
    width = ax.figure.get_figwidth() * 72 * box.width     # the axes' size in points
    height = ax.figure.get_figheight() * 72 * box.height
    placed: list[tuple[float, float, float]] = []          # (left, right, baseline) in points
    for p in points:
        text = f"{p.get('name', '')} {PHASE_ABBREVIATIONS.get(p.get('phase', ''), '')}".strip()
        x = width * np.log(p["intensity"] / x_low) / np.log(x_high / x_low)
        y = height * np.log(p["achieved"] / y_low) / np.log(y_high / y_low)
        left, right, baseline = x + 5, x + 5 + _LABEL_CHAR_PT * len(text), y - 3
        while any(left < other_right and other_left < right
                  and abs(baseline - other_baseline) < _LABEL_LINE_PT
                  for other_left, other_right, other_baseline in placed):
            baseline -= _LABEL_LINE_PT
        placed.append((left, right, baseline))
        moved = baseline < y - 3                             # a thin line leads back to it
        ax.annotate(text, (p["intensity"], p["achieved"]), xytext=(5, baseline - y),
                    textcoords="offset points", fontsize=7,
                    arrowprops={"arrowstyle": "-", "lw": 0.5, "color": MUTED} if moved else None)
