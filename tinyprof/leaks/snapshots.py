"""Where memory grows: two tracemalloc snapshots compared by line, or by traceback.

``after.compare_to(before, "lineno")`` groups the live blocks of each snapshot by the line that
allocated them and returns one ``StatisticDiff`` per line, sorted by the size of the change:
``size_diff`` (bytes more now), ``count_diff`` (blocks more now), ``size`` and ``count``
(now). ``"traceback"`` groups by the whole call stack of the allocation (as deep as
``tracemalloc.start(nframe)`` recorded), which tells two callers of one line apart.

A snapshot names where a block was **allocated**, not who keeps it: a history that keeps each
step's output shows as the line that computed the output. The chapter then asks the kept
object who refers to it (``gc.get_referrers``), or reads the loop for a container that grows.

Filters: the comparison leaves out tracemalloc's own blocks and the import machinery
(:data:`NOISE`), whose blocks are not the program's.
"""

from __future__ import annotations

import linecache
import tracemalloc
from dataclasses import dataclass
from typing import Iterable, Sequence

#: Files whose blocks are tracemalloc's or the import system's, not the program's.
NOISE = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>",
         "<unknown>", tracemalloc.__file__)


@dataclass(frozen=True)
class LineGrowth:
    """One line's (or one traceback's) growth between two snapshots: ``frames`` is the stack
    of (file, line), the allocating line first."""

    frames: tuple[tuple[str, int], ...]
    size_diff: int
    count_diff: int
    size: int

    @property
    def filename(self) -> str:
        return self.frames[0][0]

    @property
    def lineno(self) -> int:
        return self.frames[0][1]

    @property
    def where(self) -> str:
        return f"{self.filename}:{self.lineno}"

    def source(self) -> str:
        """The allocating line's text, where the file can be read."""
        return linecache.getline(self.filename, self.lineno).strip()


def filtered(snapshot: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    """``snapshot`` without the blocks of :data:`NOISE`."""
    return snapshot.filter_traces([tracemalloc.Filter(False, name) for name in NOISE])


def top_growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, n: int = 5,
               key: str = "lineno") -> list[LineGrowth]:
    """The ``n`` lines (``key="lineno"``) or tracebacks (``"traceback"``) whose live bytes grew
    most from ``before`` to ``after``, largest first (lines that shrank or stayed are left
    out)."""
    if key not in ("lineno", "traceback"):
        raise ValueError(f"key must be 'lineno' or 'traceback', got {key!r}")
    diffs = filtered(after).compare_to(filtered(before), key)
    grown = [d for d in diffs if d.size_diff > 0]
    grown.sort(key=lambda d: d.size_diff, reverse=True)
    return [LineGrowth(tuple((f.filename, f.lineno) for f in reversed(d.traceback)), d.size_diff,
                       d.count_diff, d.size) for d in grown[:n]]


def snapshot_of(blocks: Iterable[tuple[str, int, int]] | Iterable[tuple[Sequence, int]]
                ) -> tracemalloc.Snapshot:
    """A snapshot holding exactly ``blocks``: each ``(file, line, size)`` (one frame) or
    ``(frames, size)`` with ``frames`` a sequence of (file, line), the allocating one first.
    For tests and exercises with known answers."""
    traces, depth = [], 1
    for block in blocks:
        if len(block) == 3:
            frames, size = ((block[0], int(block[1])),), int(block[2])
        else:
            frames, size = tuple((str(f), int(line)) for f, line in block[0]), int(block[1])
        depth = max(depth, len(frames))
        traces.append((0, size, frames, len(frames)))
    return tracemalloc.Snapshot(traces, depth)


__all__ = ["NOISE", "LineGrowth", "filtered", "snapshot_of", "top_growth"]
