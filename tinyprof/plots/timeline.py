"""A run's timeline: one lane per thread, each event a bar from its start to its end, so the
device's idle gaps (where it waits for input) are the white space on its lane."""

from __future__ import annotations

from typing import Any, Sequence

from matplotlib.figure import Figure

from .describe import described, number
from .style import ACCENT, FIGSIZE, HIGHLIGHT, MUTED, new_figure, style_axes

#: Colours of the events chapter 09's loop records; any other name is drawn muted.
EVENT_COLORS = {"compute": ACCENT, "load": "#ff7f0e", "read": "#8c564b", "decode": "#e377c2",
                "augment": "#bcbd22", "wait for batch": HIGHLIGHT, "synchronize": MUTED}


def plot_timeline(events: Sequence[Any], *, title: str = "Timeline",
                  busy_lane: str = "device", figsize: tuple[float, float] = FIGSIZE) -> Figure:
    """Draw ``events`` (objects with ``name``, ``lane``, ``start`` and ``end`` in seconds, as
    :class:`tinyprof.loading.Event`): a row per lane in the order the lanes first appear, time in
    ms from the first start; nested events are drawn thinner on top of their parents. The
    description gives the ``compute`` time on ``busy_lane``."""
    fig, ax = new_figure(figsize=figsize)
    origin = min(e.start for e in events)
    lanes = list(dict.fromkeys(e.lane for e in events))
    shown: set[str] = set()
    open_ends: dict[str, list[float]] = {lane: [] for lane in lanes}   # per lane, a stack
    for event in sorted(events, key=lambda e: (e.start, -(e.end - e.start))):
        stack = open_ends[event.lane]
        while stack and stack[-1] <= event.start:
            stack.pop()
        height = 0.7 if not stack else 0.35       # inside an open event: drawn thinner
        stack.append(event.end)
        label = event.name if event.name not in shown else None
        shown.add(event.name)
        ax.barh(lanes.index(event.lane), (event.end - event.start) * 1e3,
                left=(event.start - origin) * 1e3, height=height,
                color=EVENT_COLORS.get(event.name, MUTED), label=label, edgecolor="white",
                linewidth=0.3)
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    # Below the axes, so that no lane's events are hidden behind it.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), fontsize="small",
              ncol=min(len(shown), 7), frameon=False)
    style_axes(ax, title, "time (ms)", "")
    wall = max(e.end for e in events) - origin
    busy = sum(e.end - e.start for e in events if e.lane == busy_lane and e.name == "compute")
    share = (f"The {busy_lane} computes for {number(busy * 1e3)} ms of them." if busy else "")
    return described(fig, f"Timeline chart, a lane per thread: {title}, {len(lanes)} lanes "
                          f"({', '.join(lanes)}) over {number(wall * 1e3)} ms.", share)
