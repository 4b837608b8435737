"""Input pipelines graded from outside the student's kernel: the grader's side of
``expect_busy_device``.

``tinyprof.pipecheck.expect_busy_device(loop)`` asks whether the student's fixed input loop
gives every step's right value, in order, and keeps the device busy. The work is made of waits
(each file's first-byte latency, each device step's kernel time: sleeps), so CPU load on the
grading machine barely moves it. Inside the kernel the clock and the sleeps can be patched;
here:

- **Fresh work.** The task's data set is written in the kernel for a seed drawn at every grading
  (one request, before the timed one): nothing read or cached by earlier cells helps, and the
  expected values are computed here from the seed.
- **Timed from outside.** The loop runs as one call (one request); its wall time is the
  request's round trip on the grader's clock, which the kernel cannot change. The round trip
  only adds (the request, the answer), so the utilization steps × kernel time / wall is never
  flattered.
- **The physical floor.** However the loop overlaps its work (prefetching, workers, batched
  reads), the device runs its steps one at a time: wall ≥ steps × kernel time + the first
  read's latency. A wall below it means the waits were skipped or the clock changed: the test
  scores 0 and says so to the instructor (``tinyprof.pipecheck.ImpossiblyFast``).
- **Outputs in full.** Every step's value is checked (tinyprof.pipecheck.verdict), so a loop
  that drops, skips or reorders batches, or hands the device empty ones, gains nothing.

*Not covered*: a loop that reads the files around the task's storage (skipping its latency,
inside the kernel) looks like one that prefetches; the floor still holds it to the device's
time. The instructors' page says so.
"""

from __future__ import annotations

import time
from typing import Any


def measure(judge: Any, loop: Any, task: Any) -> tuple[Any, float]:
    """Write ``task``'s files in the kernel, then time ``loop(task)`` there from here: the
    values it returned, and the call's wall seconds on this clock."""
    from tinyprof.pipecheck import prepare

    judge.make(prepare, [task])
    started = time.perf_counter()
    got = loop(task)
    return got, time.perf_counter() - started


__all__ = ["measure"]
