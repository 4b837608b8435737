"""``expect_leak_free``: a fixed training loop checked for its outputs and for what it keeps,
the memory read from outside the student's kernel when tinyprof's grader runs the test.

``expect_leak_free(loop, steps)`` draws a step count N from a range the test does not print
(1 to 2 times ``steps``) and two seeds (:func:`draw_seeds`): one people type (the chapter's own
half the time, else 0 to 99 or a favourite such as 1234) and one from 2**31. The loop runs five
times, in a random order: N and 2N steps on each seed, and two calls of N/2 steps, one after the
other, on one of them. Each run yields two numbers, both above the memory read just before it
(after a collection and the allocator's trim):

- **kept**: the memory after the loop returned, its garbage collected and its allocator
  trimmed: what the loop keeps;
- **held**: the highest level the memory stayed at while it ran, read at random times
  (exponential gaps of mean :data:`MEAN_GAP_S`): the highest level it stayed at or above for
  half of some window of :data:`HELD_SPAN_S`, or of :data:`SHORTER_RUN_SHARE` of the shorter
  run of a seed's two when that is less (each reading counting for the time until the next,
  the window anywhere in the run), so a level counts however small its share of the run (a
  leak freed just before the loop returns, after a long idle start), and what is held for a
  few tens of milliseconds does not: a step's temporaries at their peak, or the workers of a
  pool the loop starts.

What grows with the steps is the leak: the growth per step of each is its difference between the
N and 2N runs of a seed divided by N, and the test fails when either exceeds, on either seed,
``tolerance`` (1 kB a step: a fixed loop keeps 32 bytes a step, its list of floats; the
chapter's smallest leak keeps 32 kB) plus what two runs of a leak-free loop differ by anyway,
over N (:data:`KEPT_SLACK` and :data:`HELD_SLACK`, 1.5 MB each: 3 kB a step at most at the
chapter's step counts), or when any run's held memory exceeds :data:`BUDGET`. Memory that
shrinks by as much from N to 2N fails too: a loop keeps the same whatever its step count, and
one that keeps more after N steps leaks at the step counts the longer run never has (2N is even
and at least twice the printed steps). So a loop that
leaks only for the seeds its author tries, or only for others (answering the typed seeds from
a table made in an earlier cell), fails every check. The two seeds are not compared with each
other: a memo the kernel filled for one seed in an earlier direct call (the visible test's
seed 7) is a plateau there and not on the other. A run whose loop raised still counts: its
memory was read before its error travels back, and a growth it shows is the reason given (a
loop that writes what it keeps to files fills the sandbox's scratch folder and raises
``OSError``).
What grows from call to call is a leak too: a loop that keeps something at every call (its
first steps, a cache keyed by the call) keeps it twice in the two calls of N/2 steps and once in
the N-step run on that seed, and the test fails when the two calls keep more than the one by
:data:`KEPT_SLACK` plus ``tolerance`` a step (a leak that grows with the steps keeps the same in
both: N steps either way).
A thread or process the loop leaves running after it returns fails it as well: what it does
once the test is over (a leak that lands minutes later) is in no reading, so a leak-free loop
ends what it starts (the grader counts every thread of every process in the kernel's control
group; a plain kernel counts its Python threads and multiprocessing children,
:class:`TaskCount`).
Anything that does not grow with the steps cancels: a plateau, a memo that filled, the loop's
temporaries, a square wave (its high level is in both runs' held memory), idle time before or
after the steps. The losses the loop returns are checked at every step against the clean loop's
(:func:`tinyprof.leaks.train`, same seed), so a loop that returns early or skips steps fails.

Where the memory is read:

- **under tinyprof's grader** (autograder/run/memory_check.py, through the judge,
  :func:`tinyprof.testing.current_judge`): each run is a fork of the student's kernel
  (:mod:`tinyprof.testing.forked`, tinyprof switched off), held after its loop returns, and the
  grader reads the kernel's control group (every process, and the files of its tmpfs folders)
  from outside. In a fork, memory that existed before the call is the parent's: freeing it
  gives nothing back and writing into it is charged as new pages, so neither a ballast freed as
  the leak grows nor a buffer touched in advance can hide what the loop keeps;
- **elsewhere** (a plain kernel, stock nbgrader): here, in this process, its resident set read
  by a thread, the loop run in this process. That check is the student's own and can be lied
  to (a ballast made in an earlier cell hides a leak from it).

What no reading can see (the limit, in the grader's module docstring too): which bytes are the
leak. A loop knows its step count, so it can keep a pad that shrinks as the steps grow (kept
then stays flat; held still sees the leak grow during the run), or take a ballast at the start
of each run and free it as its leak grows (both stay flat). Only :data:`BUDGET` bounds that:
with the loop's own 19 MB, a ballast of about 21 MB hides a leak of up to 21 MB / 2N, 9 to 18 kB
a step at the chapter's step counts; the chapter's smallest leak (32 kB) cannot hide that way.
"""

from __future__ import annotations

import bisect
import math
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

#: Growth per step a leak-free loop may show, kept or held: far above its history of floats
#: (32 bytes a step), far below the smallest planted leak (the hook's 32 kB).
TOLERANCE = 1024
#: What two runs of a leak-free loop may differ by besides, kept and held: the kernel's own
#: memory moves between the runs (its requests, its threads), and the fork's copies of its
#: pages with it (measured in a graded chapter-10 notebook: up to 1 MB apart).
KEPT_SLACK = 1536 * 1024
HELD_SLACK = 1536 * 1024
#: Memory a run may hold above the kernel's before it (its held level): the chapter's
#: loop holds about 19 MB in a fork (its data, weights, memo, a step's temporaries, and the
#: pages of the kernel it writes to), a ring buffer of 32 reconstructions 6 MB more.
BUDGET = 40 * 2**20
#: Mean seconds between two memory readings while a loop runs (drawn at random: exponential).
MEAN_GAP_S = 0.004
#: Seconds of which a level must last half to be held: longer than what starting a pool of
#: workers holds before the steps (a multiprocessing Pool(2) in chapter 10's loop: 6 to 9 MB for
#: 40 to 60 ms, measured, so five readings in a row at MEAN_GAP_S caught it in some runs and not
#: in others: held 17 MB or 25 MB; longer on a busy machine), shorter than the steps of the
#: N-step run (about 0.6 ms each, 180 at least; the two runs of a seed share the span,
#: :func:`held_alike`). A leak freed at the return then shows in full in the difference of the two
#: runs' held levels while the shorter run's steps last at least half a span (each run's level
#: misses the leak's last half span, the longer run's by as much). A 90th percentile over the
#: run, as held was before, let an idle prelude of ten times the steps' time put the steps'
#: readings above it (tests/redteam_leak_free.py); time, not a count of readings, so a reader
#: starved while the memory is high does not shorten the level either.
HELD_SPAN_S = 0.25
#: The share of the shorter run of a seed's two that their common span is at most
#: (:func:`held_alike`): a level then counts if it lasts three eighths of that run. Half (the
#: span until s18) held the 41 ms a Pool(4) that normalises the batches lives in a 149 ms run
#: of 156 steps, 30 MB, and not in its 312-step twin: 'held 7.0 MB more after 156 steps than
#: after 312'. A whole run would weigh its start and its end (the fork's first pages, the trim
#: after the loop) as much as its steps: an honest 227-step run, read as a whole, held 2.2 MB
#: less than its 454-step twin (its reader starved while the fork's pages came in).
SHORTER_RUN_SHARE = 0.75
#: Readings a run needs for its held memory to count: the first ones come before the loop's
#: process has its memory (a fork's first 15 MB in chapter 10), so a run read once or twice,
#: on a machine too busy to give the reader its turns, would hold "0 B". A run read fewer times
#: than this, and fewer than a quarter of the times its length gives at :data:`MEAN_GAP_S` (a
#: run that lasted a few milliseconds is not a starved reader's), is run again, up to WATCHES
#: times in all; the last one counts.
MIN_READINGS = 8
WATCHES = 3
#: The seeds chapter 10 prints (the loop's default, the visible test's call), and the seeds
#: people type (0 to 99, and a few favourites): one run pair of every check uses one of them,
#: so that a loop that leaks only for the seeds its author tries is measured leaking.
PRINTED_SEEDS = (0, 7)
TYPED_SEEDS = (*range(100), 123, 321, 777, 1234, 2024, 2025, 2026, 4321, 12345, 31337, 54321)


def draw_seeds(rng: random.Random) -> tuple[int, int]:
    """The check's two seeds: ``typed``, one of :data:`PRINTED_SEEDS` half the time and of
    :data:`TYPED_SEEDS` otherwise, and ``drawn`` from 2**31; the loop runs N and 2N steps on
    each, so a loop that leaks only for typed seeds, or only for others (answering typed seeds
    from a table computed in an earlier cell), grows on one of them."""
    typed = rng.choice(PRINTED_SEEDS if rng.random() < 0.5 else TYPED_SEEDS)
    drawn = rng.randrange(2**31)
    while drawn in TYPED_SEEDS:
        drawn = rng.randrange(2**31)
    return typed, drawn


def settle(_seed: int = 0) -> int:
    """Collect cycles and have the C allocator return its free memory to the system
    (:func:`tinyprof.leaks.measure.give_back`); the resident bytes after (0 without /proc)."""
    from .leaks.measure import give_back

    return give_back() or 0


def step_counts(steps: int, rng: random.Random) -> tuple[int, int]:
    """The two runs' step counts: N drawn from 1 to 2 times ``steps``, and 2N (so that the
    longer run always goes well past the step count the test prints)."""
    low = max(1, int(steps))
    n = rng.randint(low, 2 * low)
    return n, 2 * n


@dataclass(frozen=True)
class Run:
    """One run's memory, in bytes above the reading just before it: ``kept`` after the loop
    returned (collected and trimmed), ``held`` the highest level (:func:`held_level`) of the
    ``readings`` taken while it ran for ``seconds``; ``left``: threads and processes the loop
    started and left running after it returned (when counted)."""

    steps: int
    kept: float
    held: float
    readings: int
    seconds: float
    left: int = 0
    #: The readings as (time, bytes above the reading before), and when the run ended: held
    #: is read from them again over the span of the other run of its pair (:func:`held_alike`).
    trace: tuple[tuple[float, float], ...] = ()
    ended: float = 0.0

    def held_over(self, span: float) -> Run:
        """This run with held read from its trace over ``span`` (:func:`held_level`). Built
        here, not by ``dataclasses.replace``: tinyprof switched off refuses a Run built from
        outside its own code (tinyprof.testing.switch)."""
        return Run(self.steps, self.kept, held_level(self.trace, self.ended, span),
                   self.readings, self.seconds, self.left, self.trace, self.ended)


@dataclass(frozen=True)
class TaskCount:
    """How the threads of the loop's process are counted: ``read()`` counts them all (every
    process's), and a run adds ``held`` of its own while its loop is held after returning
    (the grader's fork: its one thread)."""

    read: Callable[[], int]
    held: int = 0

    def least(self, times: int = 3, gap_s: float = 0.01) -> int:
        """The least of ``times`` counts ``gap_s`` apart: a thread the loop joined just before
        it returned may take a moment to leave the system's count."""
        counts = []
        for attempt in range(times):
            if attempt:
                time.sleep(gap_s)
            counts.append(self.read())
        return min(counts)


@dataclass(frozen=True)
class LeakCheck:
    """The runs of one check (``short``: N steps, ``long``: 2N, both on ``seeds[0]``; ``other``
    and ``other_long``: N and 2N steps on ``seeds[1]``, when measured; ``repeated``: two calls
    of ``repeated.steps`` steps in one process on ``repeated_seed``, when measured) and how
    memory was read; ``kept_per_step`` and ``held_per_step`` are the differences of the first
    two over N."""

    short: Run
    long: Run
    method: str
    tolerance: float = TOLERANCE
    budget: float = BUDGET
    other: Run | None = None
    other_long: Run | None = None
    seeds: tuple[int, ...] = ()
    repeated: Run | None = None
    repeated_seed: int | None = None

    def __post_init__(self) -> None:
        if (self.other is None) != (self.other_long is None) or \
                self.other is not None and len(self.seeds) != 2:
            raise ValueError("a check on another seed has its two runs and names both seeds")
        if self.repeated is not None and self._single_call() is None:
            raise ValueError("a check with two calls names a seed it ran N steps on")

    def _single_call(self) -> Run | None:
        """The N-step run on the seed of the two calls (None when there is none)."""
        if self.repeated_seed is None or not self.seeds:
            return None
        if self.repeated_seed == self.seeds[0]:
            return self.short
        return self.other if self.repeated_seed == self.seeds[-1] else None

    def runs(self) -> list[Run]:
        """Every run measured, the two calls' included."""
        return [run for run in (self.short, self.long, self.other, self.other_long,
                                self.repeated) if run is not None]

    @property
    def kept_per_step(self) -> float:
        return (self.long.kept - self.short.kept) / (self.long.steps - self.short.steps)

    @property
    def held_per_step(self) -> float:
        return (self.long.held - self.short.held) / (self.long.steps - self.short.steps)

    def describe(self) -> str:
        from .units import format_bytes as size

        def signed(value: float) -> str:
            return ("−" if value < 0 else "") + size(abs(value))

        seed = f" on seed {self.seeds[0]}" if self.seeds else ""
        text = (f"the loop ran {self.short.steps} and {self.long.steps} steps{seed} "
                f"({self.short.seconds:.2f} s and {self.long.seconds:.2f} s, "
                f"{self.short.readings} and {self.long.readings} readings at random times): "
                f"kept after it returned {signed(self.short.kept)} and "
                f"{signed(self.long.kept)}, {signed(self.kept_per_step)}/step; held while "
                f"it ran {signed(self.short.held)} and {signed(self.long.held)}, "
                f"{signed(self.held_per_step)}/step")
        if self.other is not None and self.other_long is not None:
            text += (f". On seed {self.seeds[1]}: kept {signed(self.other.kept)} and "
                     f"{signed(self.other_long.kept)}, held {signed(self.other.held)} and "
                     f"{signed(self.other_long.held)}")
        if self.repeated is not None:
            text += (f". Two calls of {self.repeated.steps} steps in one process on seed "
                     f"{self.repeated_seed} kept {signed(self.repeated.kept)}")
        most = max(run.left for run in self.runs())
        left = (f"{most} thread(s) or process(es) left running after it returned" if most
                else "nothing left running after it returned")
        return (f"{text}. Allowed at these step counts: {size(self.limit(KEPT_SLACK))}/step "
                f"({self.limit_text(KEPT_SLACK)}); {left}. Read from {self.method}.")

    def limit(self, slack: float) -> float:
        """Growth a step the runs may show: the tolerance plus ``slack`` (what two leak-free
        runs differ by anyway) spread over N steps."""
        return self.tolerance + slack / self.short.steps

    def limit_text(self, slack: float) -> str:
        from .units import format_bytes as size

        return f"{size(self.tolerance)} a step plus {size(slack)} over {self.short.steps} steps"

    def failure(self) -> str | None:
        """The sentence saying why the loop is not leak-free; None when it is."""
        from .units import format_bytes as size

        steps = f"{self.short.steps} and {self.long.steps} steps"
        if self.kept_per_step > self.limit(KEPT_SLACK):
            return (f"what the loop keeps after it returns grows {size(self.kept_per_step)} a "
                    f"step ({size(self.short.kept)} after {self.short.steps} steps, "
                    f"{size(self.long.kept)} after {self.long.steps}), above the "
                    f"{size(self.limit(KEPT_SLACK))} a leak-free loop may keep at these step "
                    f"counts ({self.limit_text(KEPT_SLACK)}): something is still kept at every "
                    "step (a history of arrays, a memo whose keys never repeat, a hook's list, "
                    "a reference cycle)")
        if self.held_per_step > self.limit(HELD_SLACK):
            return (f"memory grows {size(self.held_per_step)} a step while the loop runs "
                    f"(held {size(self.short.held)} and {size(self.long.held)} over {steps}), "
                    f"above the {size(self.limit(HELD_SLACK))} a leak-free loop may show at "
                    f"these step counts ({self.limit_text(HELD_SLACK)}): something is kept from "
                    "step to step, even if it is freed before the loop returns")
        runs = [run for run in (self.long, self.short, self.other, self.other_long) if run]
        fuller = max(runs, key=lambda run: run.held)
        if fuller.held > self.budget:
            return (f"memory grows {size(fuller.held)} while the loop runs "
                    f"{fuller.steps} steps, above the {size(self.budget)} the loop needs "
                    "(its data, weights, memo and one step's arrays)")
        left = max(self.runs(), key=lambda run: run.left)
        if left.left > 0:
            return (f"the loop left {left.left} thread{'s' if left.left > 1 else ''} or "
                    f"process{'es' if left.left > 1 else ''} running after it returned (in the "
                    f"run of {left.steps} steps): what they do later is never in the readings, "
                    "so a leak-free loop ends everything it starts before it returns (join its "
                    "threads, close its prefetcher and its worker pool)")
        return (self.shrink_failure(self.short, self.long, self.seeds[0] if self.seeds else None)
                or self.seed_failure() or self.call_failure())

    def call_failure(self) -> str | None:
        """Why what the loop keeps grows from call to call (two calls of N/2 steps keep more
        than one call of N, on the same seed); None when it does not, or was not measured."""
        from .units import format_bytes as size

        once = self._single_call()
        if self.repeated is None or once is None:
            return None
        grown = self.repeated.kept - once.kept
        if grown <= KEPT_SLACK + self.tolerance * once.steps:
            return None
        return (f"what the loop keeps grows {size(grown)} from one call to the next (on seed "
                f"{self.repeated_seed}, two calls of {self.repeated.steps} steps in one "
                f"process kept {size(self.repeated.kept)}, one call of {once.steps} steps "
                f"{size(once.kept)}): something is kept at every call (its first steps, a "
                "list or a cache outside the loop that is never cleared), so a kernel that "
                "trains again and again fills up")


    def seed_failure(self) -> str | None:
        """Why the loop is not leak-free on the other seed (its N and 2N runs, as the first
        two: a loop that leaks only for seeds other than those people type, or that answers
        those from a table, grows there); None when it is, or was not run."""
        from .units import format_bytes as size

        if self.other is None or self.other_long is None:
            return None
        short, long, seed = self.other, self.other_long, self.seeds[1]
        shrunk = self.shrink_failure(short, long, seed)
        if shrunk:
            return shrunk
        steps = long.steps - short.steps
        for what, grown, slack in (("keeps after it returns", long.kept - short.kept,
                                    KEPT_SLACK),
                                   ("holds while it runs", long.held - short.held, HELD_SLACK)):
            if grown / steps > self.tolerance + slack / short.steps:
                return (f"on seed {seed}, what the loop {what} grows {size(grown / steps)} a "
                        f"step ({short.steps} and {long.steps} steps), above the "
                        f"{size(self.tolerance)} a leak-free loop may keep (on seed "
                        f"{self.seeds[0]} it did not): a fixed loop keeps nothing from step to "
                        "step, whatever its seed")
        return None

    def shrink_failure(self, short: Run, long: Run, seed: int | None) -> str | None:
        """Why memory that shrinks from the N-step run to the 2N-step one is not a leak-free
        loop's (a loop keeps the same whatever its step count; one that keeps more in its
        shorter run leaks at step counts the longer run never has: at odd ones, or below 800);
        None when it does not shrink beyond what growth may show."""
        from .units import format_bytes as size

        steps = long.steps - short.steps
        on_seed = f"on seed {seed}, " if seed is not None else ""
        for what, change, slack in (("keeps after it returns", long.kept - short.kept,
                                     KEPT_SLACK),
                                    ("holds while it runs", long.held - short.held, HELD_SLACK)):
            if -change / steps > self.tolerance + slack / short.steps:
                return (f"{on_seed}what the loop {what} is {size(-change)} more after "
                        f"{short.steps} steps than after {long.steps}: a loop that keeps "
                        "nothing from step to step keeps the same whatever its step count, so "
                        "something is kept at some step counts and not at others")
        return None


def _median_read(read: Callable[[], int], times: int = 3) -> float:
    return float(statistics.median(read() for _ in range(times)))


def measure_run(read: Callable[[], int], run: Callable[[], Any], steps: int,
                rng: random.Random, tasks: TaskCount | None = None,
                sample: Callable[[], int] | None = None) -> tuple[Any, Run]:
    """``run()``'s value and its :class:`Run`: ``read()`` once before (median of three), by a
    thread at random times while ``run()`` runs (``sample()`` when given: a cheaper reading),
    and once after it returned (``run`` returns once the loop's memory is settled); ``tasks``
    counted before and after, when given."""
    stop, readings = threading.Event(), []
    gaps = random.Random(rng.getrandbits(64))
    sample = sample or read

    def sampler() -> None:
        while not stop.is_set():
            readings.append((time.monotonic(), sample()))
            stop.wait(min(0.05, gaps.expovariate(1.0 / MEAN_GAP_S)))

    before = _median_read(read)
    tasks_before = tasks.least() if tasks else 0
    thread = threading.Thread(target=sampler, daemon=True)
    start = time.monotonic()
    thread.start()
    try:
        value = run()
    finally:
        seconds = time.monotonic() - start
        stop.set()
        thread.join()
    end = time.monotonic()
    kept = _median_read(read) - before
    trace = tuple((when, found - before) for when, found in readings or [(start, before)])
    left = max(0, tasks.least() - tasks_before - tasks.held) if tasks else 0
    return value, Run(int(steps), kept, held_level(trace, end), len(readings), seconds, left,
                      trace, end)


def held_level(readings: Sequence[tuple[float, float]], end: float,
               span: float = HELD_SPAN_S) -> float:
    """The highest level the memory stayed at or above for half of some ``span`` (half of the
    whole run, when it was shorter), from ``readings`` as (time, value) in the order taken,
    each one the memory until the next (the last one until ``end``). Every window of the run
    counts, wherever it starts: the best one starts or ends where a reading does (or at
    ``end``), so those are the windows tried, not only the ones a reading starts (a reader
    starved for 75 ms while the memory rose left a short run no window starting at a reading
    that fitted the level the run ended at: held 2.2 MB below its 2N run's, s18)."""
    times = [when for when, _ in readings]
    span = max(min(span, end - times[0]), 1e-9)
    starts = {when for when in times if when + span <= end}
    starts.update(when - span for when in (*times[1:], end) if when - span >= times[0])
    return max(_level_for_half(readings, times, end, start, start + span)
               for start in starts)


def held_alike(short: Run, long: Run) -> tuple[Run, Run]:
    """The N and 2N runs of a seed with held read over one span: :data:`HELD_SPAN_S`, or
    :data:`SHORTER_RUN_SHARE` of the shorter run when that is less. A run shorter than a span
    read as a whole would hold its start and its end at a share the longer run's span does not:
    an honest loop's 150 steps held 2 MB less than its 300. A leak the loop frees as it returns
    shows in full either way, the steps filling the windows (module docstring)."""
    if not (short.trace and long.trace):
        return short, long
    span = min(HELD_SPAN_S, *((run.ended - run.trace[0][0]) * SHORTER_RUN_SHARE
                              for run in (short, long)))
    return short.held_over(span), long.held_over(span)


def _level_for_half(readings: Sequence[tuple[float, float]], times: list[float], end: float,
                    start: float, finish: float) -> float:
    """The highest value the memory was at or above for half the time from ``start`` to
    ``finish``."""
    first = max(0, bisect.bisect_right(times, start) - 1)   # the reading in force at start
    last = bisect.bisect_left(times, finish, lo=first)
    bounds = [*times[first + 1:last], finish] if last < len(times) else [*times[first + 1:], end]
    spans = sorted(((value, min(until, finish) - max(when, start)) for (when, value), until in
                    zip(readings[first:last], bounds)), reverse=True)
    half, covered = sum(length for _, length in spans) / 2, 0.0
    for value, length in spans:
        covered += length
        if covered >= half:
            return float(value)
    return float(spans[-1][0])


def measure_twice(read: Callable[[], int], settle_now: Callable[[], Any],
                  start: Callable[[int], Any], finish: Callable[[Any], Any], steps: int,
                  method: str, rng: random.Random) -> tuple[dict[int, Any], LeakCheck]:
    """The two runs of a check (N and 2N steps, :func:`step_counts`, in a random order):
    ``settle_now()`` before each, ``start(n)`` runs the loop and returns once its memory is
    settled, ``finish(started)`` its value after the memory after was read. The values by step
    count, and the :class:`LeakCheck`."""
    n, twice = step_counts(steps, rng)
    values, runs = _measure(read, settle_now, {n: lambda: start(n), twice: lambda: start(twice)},
                            finish, rng)
    return values, LeakCheck(*held_alike(runs[n], runs[twice]), method)


def measure_seeds(read: Callable[[], int], settle_now: Callable[[], Any],
                  start: Callable[[int, int, int], Any], finish: Callable[[Any], Any],
                  counts: tuple[int, int], seeds: tuple[int, int], method: str,
                  rng: random.Random, tasks: TaskCount | None = None,
                  sample: Callable[[], int] | None = None) -> tuple[
                      dict[tuple[int, int], Any], LeakCheck]:
    """The five runs of a check, in a random order: N and 2N steps (``counts``,
    :func:`step_counts`) on each of ``seeds`` (:func:`draw_seeds`), and two calls of N/2 steps
    on one of them, drawn; ``start(n, seed, calls)`` runs ``calls`` calls of the loop, one after
    the other, otherwise as in :func:`measure_twice`; ``tasks`` counts the threads the loop
    leaves running; ``sample`` reads while a loop runs (:func:`measure_run`). The values by
    (step count, seed) (the two calls': the last one's), and the :class:`LeakCheck`."""
    n, twice = counts
    typed, drawn = seeds
    half, again = n // 2, rng.choice(seeds)
    plan = {(count, seed): (lambda count=count, seed=seed: start(count, seed, 1))
            for seed in (typed, drawn) for count in (n, twice)}
    plan[half, again] = lambda: start(half, again, 2)
    values, runs = _measure(read, settle_now, plan, finish, rng, tasks, sample)
    for seed in seeds:
        runs[n, seed], runs[twice, seed] = held_alike(runs[n, seed], runs[twice, seed])
    return values, LeakCheck(runs[n, typed], runs[twice, typed], method,
                             other=runs[n, drawn], other_long=runs[twice, drawn],
                             seeds=(typed, drawn), repeated=runs[half, again],
                             repeated_seed=again)


def _measure(read: Callable[[], int], settle_now: Callable[[], Any],
             plan: dict[Any, Callable[[], Any]], finish: Callable[[Any], Any],
             rng: random.Random, tasks: TaskCount | None = None,
             sample: Callable[[], int] | None = None) -> tuple[dict[Any, Any],
                                                              dict[Any, Run]]:
    """Each run of ``plan`` (key → its start), in a random order, its memory read around it;
    the values (a run whose ``finish`` raised as :class:`Raised`) and :class:`Run` by key. A
    key is a step count or a (step count, seed) pair. A run the reader had too few turns in
    (:data:`MIN_READINGS`) is run again, up to :data:`WATCHES` times in all; the last counts."""
    keys = list(plan)
    rng.shuffle(keys)
    values, runs = {}, {}
    for key in keys:
        steps = key[0] if isinstance(key, tuple) else key
        for _ in range(WATCHES):
            settle_now()
            started, runs[key] = measure_run(read, plan[key], steps, rng, tasks, sample)
            try:
                values[key] = finish(started)
            except Exception as error:  # noqa: BLE001 - judged with the memory (Raised)
                values[key] = Raised(error)
            if not _unwatched(runs[key]):
                break
    return values, runs


def _unwatched(run: Run) -> bool:
    """Whether the reader had too few turns while ``run`` ran (:data:`MIN_READINGS`)."""
    return run.readings < min(MIN_READINGS, run.seconds / (4 * MEAN_GAP_S))


@dataclass(frozen=True)
class Raised:
    """A run whose loop raised ``error`` after its memory was read. The memory still counts: a
    loop that writes what it keeps to files fills the sandbox's scratch folder and raises
    ``OSError`` in its longer run, and its growth is the reason to give, not the error."""

    error: Exception


def raise_for_raised(got: dict[int, Any], check: LeakCheck) -> None:
    """If a run raised (:class:`Raised`): the growth its memory shows when it shows one, with
    the run's error after it; the error itself otherwise (and always for the grader's own
    verdicts, a tampering or an unavailable reference). Nothing when every run returned."""
    from .testing import ReferenceUnavailable, TamperingDetected

    raised = [(n, value.error) for n, value in sorted(got.items()) if isinstance(value, Raised)]
    if not raised:
        return
    key, error = raised[0]
    failed = check.failure()
    if failed and not isinstance(error, (TamperingDetected, ReferenceUnavailable)):
        raise AssertionError(f"{failed}; the {_run_name(key)} run also raised "
                             f"{type(error).__name__}") from error
    raise error


def _run_name(key: Any) -> str:
    """``700-step`` for a step count, ``700-step (seed 7)`` for a (step count, seed) pair."""
    if isinstance(key, tuple):
        return f"{key[0]}-step (seed {key[1]})"
    return f"{key}-step"


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


class CleanLosses:
    """The clean loop's losses (:func:`tinyprof.leaks.train`) for ``steps`` steps on each of
    ``seeds``, computed in a process of its own, started at once, while the student's loop runs:
    the grader waits for them only after its runs (with one BLAS thread: beside busy kernels,
    numpy's threads made the steps ten times slower, 1 ms a step alone, 10 to 19 ms here). In
    this process if that process fails."""

    CODE = ("import json, sys\nfrom tinyprof.leaks.loop import train\n"
            "for seed in sys.argv[2:]:\n"
            "    print(json.dumps(train(int(sys.argv[1]), int(seed))), flush=True)\n")

    def __init__(self, steps: int, seeds: Sequence[int]) -> None:
        import os
        import subprocess

        self.steps, self.seeds = int(steps), [int(seed) for seed in seeds]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1"}
        try:
            self._process: Any = subprocess.Popen(
                [sys.executable, "-c", self.CODE, str(self.steps), *map(str, self.seeds)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self._process = None
        self._losses: dict[int, list[float]] | None = None

    def of(self, seed: int) -> list[float]:
        """The clean losses on ``seed`` (one of the seeds given), all ``steps`` of them."""
        if self._losses is None:
            self._losses = self._collect()
        return self._losses[seed]

    def close(self) -> None:
        """Stop the process if it still runs (a check that failed before it needed it)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.communicate()

    def _collect(self) -> dict[int, list[float]]:
        import json
        import subprocess

        from .leaks.loop import train

        if self._process is not None:
            try:
                out, _ = self._process.communicate(timeout=300)
                rows = [json.loads(line) for line in out.splitlines()]
                if self._process.returncode == 0 and len(rows) == len(self.seeds):
                    return {seed: [float(x) for x in row] for seed, row in zip(self.seeds, rows)}
            except (ValueError, subprocess.SubprocessError):
                self.close()
        return {seed: train(self.steps, seed) for seed in self.seeds}


def current_judge() -> Any:
    from .testing import current_judge as judge

    return judge()


def expect_leak_free(loop: Callable[[int, int], Sequence[float]], steps: int = 300, *,
                     tolerance: float = TOLERANCE, rtol: float = 1e-7) -> LeakCheck:
    """Assert that ``loop(n, seed)`` returns the clean loop's losses, every step, for two step
    counts N and 2N drawn around ``steps``, each on a seed people type and on a drawn seed
    (:func:`draw_seeds`), and that neither what it keeps after it returns nor what it holds
    while it runs grows by more than ``tolerance`` bytes a step between N and 2N, on either
    seed (module docstring). Prints what was measured; returns the
    :class:`LeakCheck`."""
    from .leaks.loop import train

    rng = random.Random(random.SystemRandom().getrandbits(64))
    seeds = draw_seeds(rng)
    counts = step_counts(steps, rng)
    judge = current_judge()
    if judge is None:
        got, check = _here(loop, counts, seeds, rng, sys._getframe(1).f_globals)
        want = {seed: train(counts[1], seed) for seed in seeds}
    else:
        clean = CleanLosses(counts[1], seeds)   # computed while the student's loop runs
        try:
            got, check = judge.measure_leaks(loop, counts=counts, seeds=seeds, rng=rng)
            want = {seed: clean.of(seed) for seed in seeds}
        finally:
            clean.close()
    check = replace(check, tolerance=tolerance)
    raise_for_raised(got, check)
    for n, seed in sorted(got):
        wrong = first_wrong_step(got[n, seed], want[seed][:n], rtol)
        if wrong:
            raise AssertionError(f"{n} steps on seed {seed}: {wrong}")
    print(check.describe())
    failed = check.failure()
    if failed:
        raise AssertionError(failed)
    return check


def _threads_and_children() -> int:
    """This process's Python threads and its multiprocessing children: what a loop can leave
    running that a plain kernel sees (the grader counts every task of the kernel's group)."""
    import multiprocessing

    return threading.active_count() + len(multiprocessing.active_children())


def _here(loop: Callable, counts: tuple[int, int], seeds: tuple[int, int], rng: random.Random,
          namespace: dict) -> tuple[dict[tuple[int, int], Any], LeakCheck]:
    """The check in this process (no grader): its resident set read by a thread. A first run of
    two steps comes before the measured ones: what the loop allocates once and keeps (its
    imports, a module's cache: 4 MB for ``tinyprof.leaks.train`` in a fresh process) would
    otherwise count in whichever run comes first. Under the grader each run is a fork, which
    allocates it anew: it cancels between the runs."""
    from .leaks.measure import rss_bytes, small_pages
    from .testing import Switch

    def start(n: int, seed: int, calls: int = 1) -> Any:
        for _ in range(calls):
            value = loop(n, seed)
        settle()
        return value

    with small_pages(), Switch((), namespace):   # opened once: its first opening allocates
        start(2, seeds[0])
        return measure_seeds(lambda: rss_bytes() or 0, settle, start, lambda value: value,
                             counts, seeds, "this process's resident set, read in this kernel "
                             "(not by a grader)", rng, TaskCount(_threads_and_children))


__all__ = ["BUDGET", "HELD_SLACK", "HELD_SPAN_S", "KEPT_SLACK", "MEAN_GAP_S",
           "PRINTED_SEEDS", "SHORTER_RUN_SHARE", "TOLERANCE", "TYPED_SEEDS", "CleanLosses",
           "LeakCheck", "Raised", "Run", "TaskCount", "current_judge", "draw_seeds",
           "expect_leak_free", "first_wrong_step", "measure_run", "measure_seeds",
           "measure_twice", "raise_for_raised", "settle", "step_counts"]
