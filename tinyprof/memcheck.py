"""``expect_leak_free``: a fixed training loop checked for its outputs and for leaks, the
memory read from outside the student's kernel when tinyprof's grader runs the test.

``expect_leak_free(loop, steps)`` draws a seed, computes the losses a clean loop of ``steps``
steps produces from it (:func:`tinyprof.leaks.train`), and has ``loop(steps, seed)`` run:

- **under tinyprof's grader** (autograder/run/memory_check.py, through the judge,
  :func:`tinyprof.testing.current_judge`): the loop runs in the student's kernel, tinyprof
  switched off, while a thread of the grader reads the kernel's memory (its control group:
  every process and the files of its tmpfs folders) at random times the kernel cannot know.
  Before the run the kernel is asked to give back the memory its allocator keeps
  (:func:`settle`), so that a leak cannot hide in free memory left by earlier cells;
- **elsewhere** (a plain kernel, stock nbgrader): here, in this process, a thread reading this
  process's resident set the same way. That check is the student's own and can be lied to.

The growth per step with its interval comes from the readings
(:func:`tinyprof.leaks.growth.growth_over_run`); the test fails when the interval's lower end
exceeds ``tolerance`` bytes per step, or when the losses the loop returns differ from the clean
loop's at any step (a loop that skipped steps or returned early).
"""

from __future__ import annotations

import gc
import math
import random
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

#: Growth per step a leak-free loop may show: far above its history of floats (32 bytes a
#: step), far below the smallest planted leak (the hook's 32 kB).
TOLERANCE = 8 * 1024
#: Mean seconds between two memory readings (drawn at random: exponential gaps).
MEAN_GAP_S = 0.004


def settle(_seed: int = 0) -> int:
    """Collect cycles and have the C allocator return its free memory to the system
    (:func:`tinyprof.leaks.measure.give_back`); the resident bytes after (0 without /proc)."""
    from .leaks.measure import give_back

    return give_back() or 0


@dataclass(frozen=True)
class LeakCheck:
    """What the memory readings of one run say: growth per step with its interval, how many
    readings and spans it rests on, the run's length and seconds, and how memory was read."""

    growth: Any            # tinyprof.leaks.Growth
    readings: int
    steps: int
    seconds: float
    before: int
    peak: int
    method: str

    def describe(self) -> str:
        from .units import format_bytes

        return (f"memory while the loop ran {self.steps} steps ({self.seconds:.2f} s, "
                f"{self.readings} readings at random times, {self.growth.n} spans after the "
                f"first quarter) grows {self.growth.describe()}; highest "
                f"{format_bytes(self.peak - self.before)} above the start. Read from "
                f"{self.method}.")


def sample_while(read: Callable[[], int], run: Callable[[], Any], steps: int, method: str,
                 seed: int | None = None) -> tuple[Any, LeakCheck]:
    """``run()``'s value, and a :class:`LeakCheck` from ``read()`` called by a thread at random
    times (exponential gaps of mean :data:`MEAN_GAP_S`) while it ran."""
    from .leaks.growth import growth_over_run

    rng, stop, readings = random.Random(seed), threading.Event(), []

    def sampler() -> None:
        while not stop.is_set():
            readings.append((time.monotonic(), read()))
            stop.wait(min(0.05, rng.expovariate(1.0 / MEAN_GAP_S)))

    before = read()
    thread = threading.Thread(target=sampler, daemon=True)
    start = time.monotonic()
    thread.start()
    try:
        value = run()
    finally:
        end = time.monotonic()
        stop.set()
        thread.join()
    kept = [(t, m) for t, m in readings if start <= t <= end]
    found = growth_over_run([t for t, _ in kept], [m for _, m in kept], start, end, steps,
                            tolerance=TOLERANCE)
    peak = max([m for _, m in kept] + [before])
    return value, LeakCheck(found, len(kept), steps, end - start, before, peak, method)


def first_wrong_step(got: Any, want: Sequence[float], rtol: float) -> str | None:
    """The sentence naming the first step whose loss ``got`` lacks or gets wrong; None when
    every step matches."""
    if not isinstance(got, (list, tuple)):
        return (f"the loop returned a {type(got).__name__}, not the list of its {len(want)} "
                "losses")
    for step, wanted in enumerate(want):
        if step >= len(got):
            return (f"the loop returned {len(got)} losses for {len(want)} steps: it stopped "
                    "early or skipped steps")
        value = got[step]
        if not isinstance(value, (float, int)) or isinstance(value, bool):
            return (f"loss {step} is a {type(value).__name__}, not a float: keep "
                    "float(loss) in the history, not the array")
        if not math.isclose(value, wanted, rel_tol=rtol, abs_tol=1e-12):
            return (f"step {step}: loss {value!r}, expected {wanted!r} (the clean loop's, same "
                    "seed): the fixed loop must compute what the leaky one computes, every step")
    if len(got) > len(want):
        return f"the loop returned {len(got)} losses for {len(want)} steps"
    return None


def current_judge() -> Any:
    from .testing import current_judge as judge

    return judge()


def expect_leak_free(loop: Callable[[int, int], Sequence[float]], steps: int = 300, *,
                     tolerance: float = TOLERANCE, rtol: float = 1e-7) -> LeakCheck:
    """Assert that ``loop(steps, seed)`` returns the clean loop's losses, every step, and that
    memory does not grow while it runs: the lower end of the 95 % interval of the growth per
    step is at most ``tolerance`` bytes (module docstring). Prints what was measured; returns
    the :class:`LeakCheck`."""
    from .leaks.loop import train

    seed = random.SystemRandom().randrange(2**31)
    want = train(steps, seed)
    judge = current_judge()
    if judge is not None:
        got, check = judge.measure_leaks(loop, steps=steps, seed=seed)
    else:
        got, check = _here(loop, steps, seed, sys._getframe(1).f_globals)
    wrong = first_wrong_step(got, want, rtol)
    if wrong:
        raise AssertionError(wrong)
    print(check.describe())
    if check.growth.low > tolerance:
        from .units import format_bytes

        raise AssertionError(
            f"memory grows {format_bytes(check.growth.slope)} a step while the loop runs (95% "
            f"interval from {format_bytes(check.growth.low)}), above the {format_bytes(tolerance)}"
            " a leak-free loop may show: something is still kept at every step (a history of "
            "arrays, a memo whose keys never repeat, a hook's list, a reference cycle)")
    return check


def _here(loop: Callable, steps: int, seed: int, namespace: dict) -> tuple[Any, LeakCheck]:
    """The check in this process (no grader): its resident set read by a thread."""
    from .leaks.measure import rss_bytes
    from .testing import Switch

    settle()

    def run() -> Any:
        with Switch((), namespace):
            return loop(steps, seed)

    gc.collect()
    return sample_while(lambda: rss_bytes() or 0, run, steps,
                        "this process's resident set, read in this kernel (not by a grader)")


__all__ = ["MEAN_GAP_S", "TOLERANCE", "LeakCheck", "current_judge", "expect_leak_free",
           "first_wrong_step", "sample_while", "settle"]
