"""The look every tinyprof figure shares: colours, size and axis styling."""

from __future__ import annotations

from matplotlib.ticker import FuncFormatter

ACCENT = "#1f77b4"
MUTED = "#9aa5b1"
HIGHLIGHT = "#d62728"
FIGSIZE = (9.0, 3.6)


def plain_log2_axis(ax, suffix: str = "") -> None:
    """A base-2 log x axis labelled 1, 2, 4, … (with ``suffix``) instead of 2⁰, 2¹, 2²."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{suffix}"))


def style_axes(ax, title: str, xlabel: str, ylabel: str) -> None:
    """Title at the left, labels, a light major grid, no top or right spine."""
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
