"""The look every tinyprof figure shares: colours, size and axis styling, and how a figure is
made (:func:`new_figure`, the one figure policy)."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import FuncFormatter

ACCENT = "#1f77b4"
MUTED = "#9aa5b1"
HIGHLIGHT = "#d62728"
FIGSIZE = (9.0, 3.6)


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] = FIGSIZE,
               **subplots):
    """``(figure, axes)`` for every tinyprof figure, made one way: ``plt.subplots(nrows, ncols,
    figsize=figsize, **subplots)`` (FIGSIZE by default; ``squeeze``, ``sharey``,
    ``gridspec_kw``, ...), which loads the backend a notebook displays figures with, then
    ``plt.close(fig)``: pyplot forgets the figure at once, and the figure keeps an Agg canvas
    (``fig.canvas.draw()``, ``get_renderer()``, ``savefig`` work as on any figure).

    So drawing changes no global state (pyplot's list of open figures stays as the caller left
    it, and a figure nobody keeps is freed like any object), and a figure shows once: in a
    notebook when a cell ends with it (``fig = tp.plots.plot_roofline(...)``, then ``fig``), in
    an explorer through :func:`tinyprof.widgets.show`; a script saves it with ``fig.savefig``.
    Nothing calls ``plt.show()``."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from .describe import DescribedFigure

    subplots.setdefault("FigureClass", DescribedFigure)   # alt text from its data (describe.py)
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, **subplots)
    plt.close(fig)
    FigureCanvasAgg(fig)   # closing left a bare canvas: give it one that draws (get_renderer)
    return fig, axes


def plain_log2_axis(ax, suffix: str = "") -> None:
    """A base-2 log x axis labelled 1, 2, 4, … (with ``suffix``) instead of 2⁰, 2¹, 2²."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}{suffix}"))


def plain_log_axis(ax, which: str = "x") -> None:
    """A base-10 log axis (``which`` is "x" or "y") labelled 0.3, 200, 1000, … instead of
    3×10⁻¹, 2×10², 10³: a time axis reads in the unit its label names. Ticks between powers of
    ten are labelled while the axis spans at most half a decade, and 2, 3 and 5 × 10ᵏ while it
    spans at most 1.2 decades, so a short axis still has numbers and a long one is not crowded."""
    getattr(ax, f"set_{which}scale")("log")
    axis = getattr(ax, f"{which}axis")

    def minor_label(value: float, _) -> str:
        low, high = sorted(axis.get_view_interval())
        decades = np.log10(high / low) if low > 0 else np.inf
        mantissa = round(value / 10 ** np.floor(np.log10(value) + 1e-9))
        shown = decades <= 0.5 or (decades <= 1.2 and mantissa in (2, 3, 5))
        return f"{value:g}" if shown else ""

    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(FuncFormatter(minor_label))


def style_axes(ax, title: str, xlabel: str, ylabel: str) -> None:
    """Title at the left, labels, a light major grid, no top or right spine."""
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
