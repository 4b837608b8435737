"""Leaks graded from outside the student's kernel: the grader's side of ``expect_leak_free``.

``tinyprof.memcheck.expect_leak_free(loop, steps)`` asks whether the student's fixed training
loop computes the clean loop's losses at every step and keeps nothing from step to step. A check
made inside the kernel (tracemalloc, ``/proc/self``) can be patched, or fooled by freeing
memory only around its reads. Here:

- **Memory read from outside.** While the kernel runs ``loop(steps, seed)`` (one judge call,
  tinyprof switched off), a thread of the grader reads the kernel's memory
  (``SandboxedKernelManager.memory_bytes``): its control group's usage, which counts every
  process of the kernel (a child it started to hold memory) and the files of its tmpfs folders
  (its scratch folder, /tmp); without control groups, the resident set of its process tree from
  ``/proc`` (which misses tmpfs files: the printed method says which).
- **At times the kernel cannot know.** The gaps between reads are drawn here at random
  (exponential, mean :data:`tinyprof.memcheck.MEAN_GAP_S`); nothing the kernel prints or
  answers decides a read. A ``gc.collect()`` or ``del`` timed for the reads has no reads to
  time; memory freed and taken again every few steps is not a leak, and is not graded as one.
- **The grader fits.** The readings after the first quarter of the run, in twelve spans of
  time, each its median (:func:`tinyprof.leaks.growth.growth_over_run`); the slope with its 95 %
  interval, in bytes per step (the run's seconds per step). The verdict, the tolerance and the
  expected losses are the grader's; the losses the kernel hands back are checked at every step
  against a clean loop run here on the same seed, drawn at random at every grading, so a loop
  that returns early or skips steps fails.
- **Free memory given back first.** Before the run the kernel is asked to collect cycles and
  return its allocator's free memory to the system (``tinyprof.memcheck.settle``), so that
  memory freed by earlier cells does not absorb a leak. A kernel that refuses keeps only what it
  had freed (the limit, on the instructors' page).
"""

from __future__ import annotations

from typing import Any, Callable

from tinyprof.memcheck import LeakCheck, sample_while, settle


class LeakBench:
    """Measures ``expect_leak_free`` for one test: ``read`` gives the kernel's memory now,
    ``method`` says how it is read."""

    def __init__(self, read: Callable[[], int], method: Callable[[], str]):
        self.read = read
        self.method = method

    def measure(self, judge: Any, loop: Any, steps: int, seed: int) -> tuple[Any, LeakCheck]:
        """The losses ``loop(steps, seed)`` returned in the kernel, and the memory readings'
        :class:`~tinyprof.memcheck.LeakCheck`."""
        from .judge import Kernel

        if type(loop) is not Kernel:
            raise TypeError("expect_leak_free runs a function of the student's notebook: pass it "
                            f"by its name, got {type(loop).__name__}")
        judge.make(settle, [0])
        with judge.switch(()):
            return sample_while(self.read, lambda: loop(int(steps), int(seed)), int(steps),
                                self.method())


__all__ = ["LeakBench"]
