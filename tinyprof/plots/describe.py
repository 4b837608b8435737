"""Figures that say what they show: a short text description computed from the figure's data
(its title, its axes and the key numbers), for a reader who cannot see the picture.

Every tinyprof plot function returns a :class:`DescribedFigure`, a matplotlib Figure with a
``description``. Displayed in a notebook it sends one output with three representations:

* ``image/png`` with the description as its ``alt`` metadata (the field IPython's
  ``Image(alt=...)`` and nbconvert use);
* ``text/html``, the same PNG as ``<img alt="description">``, which JupyterLab, Colab and the
  book (myst-nb prefers HTML) show, so a screen reader reads the description there;
* ``text/plain``, the description itself, for a plain-text front end.

:func:`figure_description` describes any matplotlib figure: a DescribedFigure by its own
description, any other by its title, axes and labelled data (:func:`describe_axes`).
"""

from __future__ import annotations

import base64
import html
import io
from typing import Iterable

import numpy as np
from matplotlib.figure import Figure


def figure_png(fig) -> bytes:
    """``fig`` as PNG bytes, cropped to what it draws."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def number(value: float) -> str:
    """A number as a reader hears it: whole numbers in full (124,439,808), others to three
    significant digits (6.02, 0.00588, 1,235 from 1,234.6, 1.5e+09)."""
    value = float(value)
    if not np.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if 1e3 <= abs(value) < 1e6:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def listing(items: Iterable[str], limit: int = 6) -> str:
    """"a, b and c"; past ``limit`` items, the first ones and "and N more"."""
    items = list(items)
    if len(items) > limit:
        shown = items[:limit]
        return ", ".join(shown) + f" and {len(items) - limit} more"
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def title_of(ax) -> str:
    """The axes' title, whichever side it sits on, on one line."""
    for loc in ("left", "center", "right"):
        if ax.get_title(loc=loc):
            return " ".join(ax.get_title(loc=loc).split())
    return ""


def describe_axes(ax) -> str:
    """What any matplotlib Axes shows: its title, each axis's label, scale and data range, and
    its labelled lines and series."""
    parts = []
    title = title_of(ax)
    if title:
        parts.append(f"{title}.")
    limits = ax.dataLim
    for name, label, scale, (low, high) in (
            ("x", ax.get_xlabel(), ax.get_xscale(), limits.intervalx),
            ("y", ax.get_ylabel(), ax.get_yscale(), limits.intervaly)):
        if not label and not np.isfinite([low, high]).all():
            continue
        span = f" from {number(low)} to {number(high)}" if np.isfinite([low, high]).all() else ""
        log = ", log scale" if scale == "log" and "log" not in label.lower() else ""
        parts.append(f"{name} axis: {label or 'unlabelled'}{log}{span}.")
    series = []
    for line in ax.get_lines():
        label = line.get_label()
        y = np.asarray(line.get_ydata(), dtype=float)
        if label.startswith("_") or y.size == 0 or not np.isfinite(y).any():
            continue
        if np.nanmin(y) == np.nanmax(y):
            series.append(f"{label} at {number(y[0])}")
        else:
            series.append(f"{label} from {number(y[0])} to {number(y[-1])} "
                          f"({y.size} points)")
    if series:
        parts.append(f"Lines: {listing(series)}.")
    return " ".join(parts)


def figure_description(fig) -> str:
    """``fig``'s description: its own when a tinyprof plot function wrote one, else what
    :func:`describe_axes` reads from each of its panels."""
    own = getattr(fig, "description", None)
    if own:
        return own
    panels = [describe_axes(ax) for ax in fig.axes if ax.get_visible()]
    panels = [p for p in panels if p]
    if len(panels) > 1:
        return f"Figure with {len(panels)} panels. " + " ".join(
            f"Panel {i}: {text}" for i, text in enumerate(panels, 1))
    return "Figure. " + (panels[0] if panels else "No axes.")


def image_html(png: bytes, description: str) -> str:
    """An ``<img>`` of ``png`` with ``description`` as its alt text, as wide as its container
    at most."""
    return (f'<img src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" '
            f'alt="{html.escape(description, quote=True)}" style="max-width:100%">')


def display_bundle(png: bytes, description: str) -> tuple[dict, dict]:
    """(data, metadata) of a figure's notebook output (see the module docstring)."""
    data = {"image/png": base64.b64encode(png).decode("ascii"),
            "text/html": image_html(png, description),
            "text/plain": description}
    return data, {"image/png": {"alt": description}}


class DescribedFigure(Figure):
    """A matplotlib Figure with a text ``description`` of what it shows, which it carries into
    the notebook as its image's alt text. tinyprof's plot functions make these (through
    :func:`tinyprof.plots.style.new_figure`) and set the description from their data; any
    figure code can do the same (``FigureClass=DescribedFigure``)."""

    description: str = ""

    def _repr_mimebundle_(self, include=None, exclude=None):
        return display_bundle(figure_png(self), figure_description(self))

    def _ipython_display_(self) -> None:
        from IPython.display import publish_display_data

        data, metadata = self._repr_mimebundle_()
        publish_display_data(data, metadata)


def described(fig: Figure, *sentences: str) -> Figure:
    """Give ``fig`` the description made of ``sentences`` (empty ones are left out); returns it."""
    fig.description = " ".join(s.strip() for s in sentences if s and s.strip())
    return fig


__all__ = ["DescribedFigure", "describe_axes", "described", "display_bundle",
           "figure_description", "figure_png", "image_html", "listing", "number", "title_of"]
