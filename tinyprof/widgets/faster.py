"""Chapter 08's explorer: apply any set of the pipeline's fixes, see predicted and measured time."""

from __future__ import annotations

from typing import Collection, Mapping

import ipywidgets as widgets
import numpy as np

from ..faster.analysis import FIX_STAGES, OTHER, STAGES, predicted_seconds, stage_seconds
from ..faster.pipeline import FIXES, check_fixes
from ..plots.describe import described, listing, number
from ..plots.style import FIGSIZE, new_figure, style_axes
from ..units import format_seconds
from .explorer import Explorer, show

#: One colour per stage, the same in every bar.
STAGE_COLORS = ("#8c564b", "#9aa5b1", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#e0e0e0")


def plot_step_times(bars: Mapping[str, Mapping[str, float]], title: str):
    """One horizontal bar per label, stacked by stage and the rest of the step ("other"),
    seconds shown in milliseconds."""
    labels = list(bars)
    fig, ax = new_figure(figsize=(FIGSIZE[0], 0.6 * len(labels) + 1.6))
    left = np.zeros(len(labels))
    for stage, color in zip((*STAGES, OTHER), STAGE_COLORS):
        widths = np.array([bars[label].get(stage, 0.0) * 1e3 for label in labels])
        ax.barh(labels, widths, left=left, color=color, label=stage)
        left += widths
    for y, total in enumerate(left):
        ax.annotate(f" {total:.1f} ms", (total, y), va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, left.max() * 1.15)
    style_axes(ax, title, "time per step (ms), by stage", "")
    ax.grid(False)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    return described(fig, f"Stacked bar chart: {title}.",
                     listing(f"{label} {number(total)} ms" for label, total in zip(labels, left))
                     + ".")


def miss_reason(predicted: Mapping[str, float], measured: Mapping[str, float],
                applied: Collection[str]) -> str:
    """One sentence naming the stage whose predicted time is furthest from its measured one,
    with the fixes that change it and what that suggests: two or more fixes whose savings the
    prediction multiplied (they overlap), one fix that does more or less in the step than
    alone, or none (noise, or a change no fix was charged with)."""
    stage = max(measured, key=lambda s: abs(measured[s] - predicted.get(s, 0.0)))
    gap = measured[stage] - predicted.get(stage, 0.0)
    changers = [fix for fix in FIXES if fix in applied and stage in FIX_STAGES[fix]]
    where = (f"largest gap: {stage}, predicted {format_seconds(predicted.get(stage, 0.0))}, "
             f"measured {format_seconds(measured[stage])} ({'+' if gap >= 0 else '−'}"
             f"{format_seconds(abs(gap))})")
    if len(changers) > 1:
        return (f"{where}: {', '.join(changers)} all change it, and the prediction multiplies "
                "their savings as if each removed its share of what the others left")
    if changers:
        return (f"{where}: {changers[0]} does {'less' if gap > 0 else 'more'} to it in this "
                "step than it did alone on the slow step")
    return f"{where}: no ticked fix changes it (noise, or a side effect of another stage's fix)"


def fixes_explorer(fixes: Collection[str] = FIXES, *, baseline: Mapping[str, float] | None = None,
                   alone: Mapping[str, Mapping[str, float]] | None = None,
                   steps: int = 3) -> Explorer:
    """A checkbox per fix of :data:`tinyprof.faster.pipeline.FIXES`, ``fixes`` ticked first.
    For the ticked set it shows the step time *predicted* from the baseline's stage times and
    each fix measured alone (:func:`tinyprof.faster.analysis.predicted_seconds`), beside the
    time *measured* by profiling ``steps`` steps with exactly those fixes (each set measured
    once, when first ticked). ``baseline`` and ``alone`` (the stage times of no fix and of each
    fix alone, :func:`~tinyprof.faster.analysis.stage_seconds`) are measured when not given.
    The explorer's ``result`` is ``(predicted_seconds, measured_seconds)``."""
    chosen = check_fixes(fixes)
    baseline = dict(baseline) if baseline is not None else stage_seconds((), steps)
    alone = dict(alone) if alone is not None else {}
    for fix in FIXES:
        if fix not in alone:
            alone[fix] = stage_seconds((fix,), steps)
    measured: dict[frozenset, dict[str, float]] = {frozenset(): dict(baseline)}

    def draw(**ticked: bool) -> tuple[float, float]:
        applied = frozenset(fix for fix, on in ticked.items() if on)
        if applied not in measured:
            measured[applied] = stage_seconds(applied, steps)
        predicted_stages = {stage: predicted_seconds({stage: seconds}, alone, applied)
                            for stage, seconds in baseline.items()}
        base, predicted = sum(baseline.values()), sum(predicted_stages.values())
        actual = sum(measured[applied].values())
        names = ", ".join(fix for fix in FIXES if fix in applied) or "none"
        print(f"fixes: {names}\n"
              f"predicted {format_seconds(predicted)} a step ({base / predicted:.2f}× the "
              f"baseline's {format_seconds(base)}), measured {format_seconds(actual)} "
              f"({base / actual:.2f}×): the prediction is {predicted / actual - 1:+.0%} off\n"
              + miss_reason(predicted_stages, measured[applied], applied))
        show(plot_step_times({"baseline": baseline, "predicted": predicted_stages,
                              "measured": measured[applied]},
                             f"Step time with {len(applied)} of {len(FIXES)} fixes"))
        return predicted, actual

    return Explorer(draw, **{fix: widgets.Checkbox(value=fix in chosen, description=fix,
                                                   indent=False)
                             for fix in FIXES})


__all__ = ["fixes_explorer", "miss_reason", "plot_step_times"]
