"""The Chrome trace event format: what ``tp.Profiler`` and chapter 09's timeline export.

A trace is a JSON object ``{"traceEvents": [...], "displayTimeUnit": "ms"}`` (the format
``torch.profiler`` writes; Perfetto and chrome://tracing open it). Each timed span is a
*complete* event ``{"name", "ph": "X", "ts", "dur", "pid", "tid"}`` with ``ts`` (start) and
``dur`` (duration) in **microseconds**: ts = (start − origin) × 10⁶, dur = (end − start) × 10⁶
for perf_counter seconds. Each thread (lane) is named by a *metadata* event
``{"name": "thread_name", "ph": "M", "pid", "tid", "args": {"name": ...}}``. Events of one
thread must nest (a child inside its parent), which a trace of context managers does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

MICROSECONDS = 1e6


def complete_event(name: str, start: float, end: float, *, origin: float, tid: int,
                   pid: int | None = None, cat: str | None = None,
                   args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A complete ("X") event for a span from ``start`` to ``end`` (seconds on the clock of
    ``origin``): ts = (start − origin) × 10⁶ µs, dur = (end − start) × 10⁶ µs."""
    event: dict[str, Any] = {"name": name, "ph": "X", "ts": (start - origin) * MICROSECONDS,
                             "dur": (end - start) * MICROSECONDS,
                             "pid": os.getpid() if pid is None else pid, "tid": tid}
    if cat is not None:
        event["cat"] = cat
    if args:
        event["args"] = dict(args)
    return event


def thread_names(names: Mapping[int, str], pid: int | None = None) -> list[dict[str, Any]]:
    """One ``thread_name`` metadata ("M") event per tid, so each lane is labelled."""
    pid = os.getpid() if pid is None else pid
    return [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
            for tid, name in names.items()]


def chrome_trace(events: Iterable[dict[str, Any]], names: Mapping[int, str],
                 pid: int | None = None) -> dict[str, Any]:
    """The trace object: the lanes' names first, then the complete events in the given order."""
    return {"traceEvents": thread_names(names, pid) + list(events), "displayTimeUnit": "ms"}


def write_chrome_trace(path: str | os.PathLike, trace: Mapping[str, Any]) -> Path:
    """Write ``trace`` as JSON to ``path`` (open it in https://ui.perfetto.dev or
    chrome://tracing) and return the path."""
    path = Path(path)
    path.write_text(json.dumps(trace), encoding="utf-8")
    return path
