"""Chapter 10's explorer: run the loop with any set of leaks and watch its memory per step."""

from __future__ import annotations

from typing import Collection, Mapping, Sequence

import ipywidgets as widgets
import numpy as np

from ..leaks.growth import growth_per_step
from ..leaks.loop import LEAKS, Trainer, check_leaks, collector_off, leak_bytes_per_step
from ..leaks.measure import StepMemory, give_back, memory_per_step
from ..plots.describe import described, listing, number
from ..plots.style import ACCENT, HIGHLIGHT, MUTED, new_figure, style_axes
from ..units import format_bytes
from .explorer import Explorer, show

#: Steps the growth fit leaves out: the memo of a leak-free loop fills in its first 16.
WARMUP = 20
TOLERANCE = 1024
COLORS = (ACCENT, HIGHLIGHT, "#2ca02c", "#ff7f0e", "#9467bd", MUTED)


def plot_memory_per_step(series: Mapping[str, Sequence[float]], title: str,
                         ylabel: str = "memory above the start (MB)"):
    """One line per label: bytes after each step, shown in MB."""
    fig, ax = new_figure()
    for (label, values), color in zip(series.items(), COLORS):
        ax.plot(np.arange(1, len(values) + 1), np.asarray(values, dtype=float) / 1e6,
                color=color, label=label, linewidth=1.6)
    style_axes(ax, title, "step", ylabel)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    fig.tight_layout()
    return described(fig, f"Line chart: {title}.", listing(
        f"{label} ends at {number(values[-1] / 1e6)} MB" for label, values in series.items()
        if len(values)) + ".")


def run_with(leaks: Collection[str], steps: int, gc_off: bool = True, batch: int = 32,
             memo_limit: int | None = None) -> StepMemory:
    """Memory per step of a fresh :class:`~tinyprof.leaks.loop.Trainer` with ``leaks``, the
    allocator's free memory given back first (so RSS starts from what is live)."""
    give_back()
    trainer = Trainer(check_leaks(leaks), seed=0, batch=batch, memo_limit=memo_limit)
    if gc_off:
        with collector_off():
            return memory_per_step(trainer.step, steps)
    return memory_per_step(trainer.step, steps)


def leaks_explorer(leaks: Collection[str] = ("history", "cache"), steps: int = 100,
                   gc_off: bool = True) -> Explorer:
    """A checkbox per leak of :data:`~tinyprof.leaks.loop.LEAKS` and for the collector; a
    slider of steps. Each setting is measured once (live bytes and RSS after every step) and
    drawn, with the growth per step, its interval and verdict, beside the planted bytes."""
    chosen = set(check_leaks(leaks))
    measured: dict[tuple, StepMemory] = {}

    def draw(steps: int, collector_off: bool, **ticked: bool) -> dict:
        on = tuple(leak for leak in LEAKS if ticked[leak])
        key = (on, steps, collector_off)
        if key not in measured:
            measured[key] = run_with(on, steps, gc_off=collector_off)
        memory = measured[key]
        planted = sum(leak_bytes_per_step(leak) for leak in on)
        live = growth_per_step(memory.live, WARMUP, TOLERANCE)
        print(f"leaks: {', '.join(on) or 'none'}; collector {'off' if collector_off else 'on'}; "
              f"planted {format_bytes(planted)}/step")
        print(f"live (tracemalloc): {live}")
        series = {"live (tracemalloc)": memory.live}
        if memory.rss is not None:
            print(f"resident set (RSS): {growth_per_step(memory.rss, WARMUP, TOLERANCE)}")
            series["resident set (RSS)"] = memory.rss
        show(plot_memory_per_step(series, f"Memory per step, leaks: {', '.join(on) or 'none'}"))
        return {"leaks": on, "live": live, "planted": planted}

    checks = {leak: widgets.Checkbox(value=leak in chosen, description=leak) for leak in LEAKS}
    return Explorer(
        draw,
        steps=widgets.IntSlider(value=steps, min=WARMUP + 10, max=200, step=10,
                                description="steps", continuous_update=False),
        collector_off=widgets.Checkbox(value=gc_off, description="collector off"),
        **checks)


__all__ = ["leaks_explorer", "plot_memory_per_step", "run_with"]
