"""The roofline of this machine with every profiled layer placed on it."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from .style import ACCENT, FIGSIZE, MUTED, style_axes

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
    style_axes(ax, (title or "Roofline of this machine") + note,
               "arithmetic intensity (FLOPs/byte)", "FLOP/s")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig
