"""An A/B test re-judged: as if it had stopped earlier, or with another noise band."""

from __future__ import annotations

from typing import Callable

import ipywidgets as widgets

from ..plots import plot_ab
from ..timing import LatencyStats
from ..timing.abtest import ABResult, ab_test
from .explorer import Explorer, show


def ab_explorer(baseline: Callable, candidate: Callable, *args, rounds: int = 60,
                noise_band: float = 0.05, seed: int = 0) -> Explorer:
    """One interleaved :func:`tinyprof.ab_test` of ``rounds`` rounds, re-judged by two sliders:
    as if it had stopped after fewer rounds, and with another noise band. Nothing is re-timed
    when a slider moves. The explorer's ``result`` is the :class:`~tinyprof.abtest.ABResult` of
    the chosen setting."""

    full = ab_test(baseline, candidate, *args, rounds=rounds, seed=seed)

    def first(stats, n):
        return LatencyStats.from_samples(stats.samples[:n], loops=stats.loops, name=stats.name)

    def draw(used: int, band: float):
        result = ABResult.from_samples(first(full.baseline, used), first(full.candidate, used),
                                       noise_band=band, seed=seed)
        print(result)
        show(plot_ab(result))
        return result

    return Explorer(
        draw,
        used=widgets.IntSlider(value=rounds, min=5, max=rounds, step=5,
                               description="rounds used", continuous_update=False),
        band=widgets.FloatSlider(value=noise_band, min=0.0, max=0.3, step=0.01,
                                 description="noise band (±)", continuous_update=False,
                                 readout_format=".0%"))
