"""How sure is a median: a slider over the number of timing samples used."""

from __future__ import annotations

from typing import Sequence

import ipywidgets as widgets
import numpy as np

from ..plots import new_figure, plot_ci_funnel, plot_latency_log
from ..plots.describe import described
from ..plots.latency import ci_funnel_words, latency_words
from ..timing import LatencyStats
from ..units import format_seconds
from .explorer import Explorer, show


def doubling_sizes(total: int, start: int = 5) -> list[int]:
    """start, 2·start, 4·start, … below ``total``, then ``total`` itself (at least 2 each)."""
    sizes, n = [], max(2, min(start, total))
    while n < total:
        sizes.append(n)
        n *= 2
    return sizes + [total]


def latency_ci_explorer(samples: Sequence[float], *, name: str = "") -> Explorer:
    """How sure is a median? A slider over n, the number of timing samples used.

    ``samples`` are per-call times in seconds, in the order they were measured (collect them
    once, e.g. ``measure_latency(...).samples``). For each n on the slider (5, 10, 20, … and
    all of them) the :class:`~tinyprof.LatencyStats` of the *first* n samples is computed when
    the widget is built, so moving the slider only redraws. Left: their histogram with p50,
    p95, p99 and the median's bootstrap 95% CI on a log time axis
    (:func:`tinyprof.plots.plot_latency_log`), so that a long tail and the bulk both show.
    Right: the median and its CI for every n, beside the ∝ 1/√n narrowing that a CI follows.
    The explorer's ``result`` is the LatencyStats of the first n samples.
    """

    values = np.asarray(samples, dtype=float).ravel()
    if values.size < 2:
        raise ValueError(f"latency_ci_explorer needs at least 2 samples to bootstrap a "
                         f"confidence interval, got {values.size}")
    sizes = doubling_sizes(values.size)
    stats = [LatencyStats.from_samples(values[:n], name=name) for n in sizes]

    def draw(n: int) -> LatencyStats:
        here = stats[sizes.index(n)]
        low, high = here.ci
        width = f"{(high - low) / here.median:.1%}" if here.median > 0 else "n/a"
        print(f"first {n} of {values.size} samples: median {format_seconds(here.median)}, "
              f"95% CI [{format_seconds(low)}, {format_seconds(high)}], width {width} of "
              "the median")
        fig, (left, right) = new_figure(1, 2, figsize=(11.0, 3.8))
        plot_latency_log(here, ax=left)
        plot_ci_funnel(right, sizes, stats, n)
        fig.tight_layout()
        logarithmic = left.get_xscale() == "log"    # linear when a sample is 0 s
        show(described(fig, "Two panels. Left:", latency_words(here, log=logarithmic),
                       "Right:", ci_funnel_words(sizes, stats, n)))
        return here

    return Explorer(draw, n=widgets.SelectionSlider(
        options=sizes, value=sizes[-1], description="samples used (n)",
        continuous_update=False))
