"""The report's figures: matplotlib (Agg) drawn into PNG bytes, each with the alt text that
says what it shows (the counts themselves), embedded in the page as a ``data:`` image so that
the page opens from the file system with nothing beside it."""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass

#: Inches and dots per inch of every figure (small: a page holds one per exercise).
SIZE = (4.2, 2.4)
DPI = 80


@dataclass(frozen=True)
class Figure:
    png: bytes
    alt: str

    def img(self) -> str:
        data = base64.b64encode(self.png).decode("ascii")
        return f'<img src="data:image/png;base64,{data}" alt="{html.escape(self.alt)}">'


def _axes():
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure as MplFigure

    figure = MplFigure(figsize=SIZE, dpi=DPI, layout="constrained")
    return figure, figure.add_subplot()


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def points_histogram(name: str, points: float, histogram: tuple[tuple[float, int], ...]
                     ) -> Figure:
    """A bar per score reached, its height the number of students who scored it."""
    figure, axes = _axes()
    scores = [score for score, _ in histogram]
    counts = [count for _, count in histogram]
    width = max(points, 1) / 12
    axes.bar(scores, counts, width=width, color="#1f5f99")
    axes.set_xlim(-width, max(points, max(scores, default=0)) + width)
    axes.set_xlabel(f"points (of {points:g})")
    axes.set_ylabel("students")
    axes.set_title(name, fontsize=9)
    said = ", ".join(f"{score:g} points: {count}" for score, count in histogram) or "no scores"
    return Figure(_png(figure), f"Histogram of the points scored on {name} (of {points:g}), "
                                f"students per score: {said}.")


def measured_histogram(name: str, unit: str, values: list[float], tiers: tuple[float, ...],
                       per_tier: list[str]) -> Figure:
    """The distribution of what a speed, busy-device or leak test measured, each tier a
    dashed line; ``per_tier`` says how many students each tier holds (for the alt text)."""
    figure, axes = _axes()
    axes.hist(values, bins=min(20, max(5, len(values) // 3)), color="#5f7f1f")
    for tier in tiers:
        axes.axvline(tier, color="#b30000", linestyle="--", linewidth=1.2)
        axes.annotate(f"tier {tier:g}", (tier, 1), xycoords=("data", "axes fraction"),
                      ha="left", va="top", fontsize=8, color="#b30000")
    axes.set_xlabel(unit)
    axes.set_ylabel("students")
    axes.set_title(name, fontsize=9)
    low, high = (min(values), max(values)) if values else (0.0, 0.0)
    middle = sorted(values)[len(values) // 2] if values else 0.0
    above = "; ".join(per_tier)
    return Figure(_png(figure), f"Histogram of the {unit} measured on {name} for "
                                f"{len(values)} student(s): from {low:.3g} to {high:.3g}, median "
                                f"{middle:.3g}" + (f"; {above}" if above else "") + ".")
