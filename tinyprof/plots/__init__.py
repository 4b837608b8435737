"""Figures: every function returns a matplotlib Figure made by :func:`.style.new_figure` (one
figure policy: made by pyplot and closed at once, so drawing changes no global state) and never
calls ``plt.show()``; a notebook cell that ends with the figure displays it, a script saves it.
One look in every chapter (:mod:`.style`), and a text description of what each figure shows,
computed from its data, which a notebook and the book give its image as alt text
(:mod:`.describe`).

* batch scaling and Amdahl's law (:mod:`.scaling`);
* where a quantity goes (:mod:`.breakdown`);
* latency samples and confidence intervals (:mod:`.latency`);
* the roofline (:mod:`.roofline`);
* A/B tests and benchmark suites (:mod:`.comparison`);
* a run's timeline, one lane per thread (:mod:`.timeline`, chapter 09).
"""

from .breakdown import MEMORY_COLORS, plot_breakdown, plot_memory_breakdown, plot_shares
from .comparison import plot_ab, plot_performance_comparison
from .describe import DescribedFigure, describe_axes, described, figure_description
from .latency import plot_ci_funnel, plot_latency, plot_latency_log
from .roofline import BOUND_COLORS, plot_roofline
from .scaling import amdahl_words, plot_amdahl, plot_batch_scaling, plot_scaling
from .style import (
    ACCENT,
    FIGSIZE,
    HIGHLIGHT,
    MUTED,
    new_figure,
    plain_log2_axis,
    plain_log_axis,
    style_axes,
)
from .timeline import EVENT_COLORS, plot_timeline

__all__ = [
    "ACCENT", "BOUND_COLORS", "DescribedFigure", "FIGSIZE", "HIGHLIGHT", "MEMORY_COLORS", "MUTED",
    "amdahl_words", "describe_axes", "described", "figure_description", "new_figure",
    "plain_log2_axis", "plain_log_axis", "plot_ab", "plot_amdahl", "plot_batch_scaling",
    "plot_breakdown", "plot_ci_funnel", "plot_latency", "plot_latency_log", "plot_memory_breakdown",
    "plot_performance_comparison", "plot_roofline", "plot_scaling", "plot_shares",
    "plot_timeline", "EVENT_COLORS", "style_axes",
]
