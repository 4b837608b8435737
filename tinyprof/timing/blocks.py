"""How the speed tests time a block of calls: the one rule every measurement of theirs shares.

A speedup is a ratio of per-call times, each read over a *block* of calls, and how a block is
made moves the ratio (issue 46). Before the speed test held the allocator, chapter 08's graded
speed test measured ``load_batch`` against ``load_per_sample`` at 5.1× while ``tp.ab_test``
gave 6.8×: the test's blocks of 28 calls kept 28 outputs of 512 KiB, and once they outgrew what
the memory allocator had kept from the last block, every call's output landed on fresh pages, a
minor page fault per 4 KiB page (about 120 a call, on both sides); the A/B's short blocks
dropped each output before the next call, which got the same memory back and touched no fresh
page. The same cost a call on both sides weighs far more on the faster one.
``benchmarks/bench_block_policy.py`` measures it against the calls per block: on the course's
2-core machine, 28 calls a block with every output kept cost the fast loader 124 faults and 293
µs a call (2.4 µs a fault), 4.6× against 6.9× with each output dropped, while fresh or reused
inputs changed neither side by more than 1 %; with glibc's malloc told to keep what is freed
the kept blocks gave 6.4× (12 faults a call), and with every large block mapped afresh both
ways fell to 2.0×. Whether kept outputs touch fresh pages depended on the allocator's state, so
on what the process ran before: graded in one kernel after other functions, the same float32
``fast_step`` measured 8.4× to 16.2×. The speed test now holds the allocator
(:mod:`.allocator`), so that only its first block touches fresh pages, and counts the faults
all the same.

The speed test's way, used by :func:`tinyprof.timing.speed.measure_speedup` (so by
``expect_faster`` in a kernel), by the grader (``autograder/run/speed.py`` imports
:func:`choose_calls` from :mod:`tinyprof.timing.speed`, which takes it from here) and by
``tp.ab_test(..., blocks="speed test")``:

- **calls per block from the baseline alone** (:func:`choose_calls`), the same for both sides:
  a candidate cannot choose its own block;
- **every output kept** until the block's time has been read (the speed test checks each one),
  and let go outside the timing;
- **fresh inputs**, ``make_inputs(seed)`` with a new seed for every call, made before the block
  and outside its time (the same inputs for both sides); ``tp.ab_test`` may reuse one input;
- the order of a round is the grader's kernels': make the inputs, run the block, let the inputs
  go, check the outputs, let them go, and only then make the next round's inputs (memory freed
  before or after the next inputs are made leaves the allocator in different states, and so
  changes how many fresh pages the next block touches);
- the memory allocator **held** for the whole test (:func:`.allocator.freed_memory_held`):
  what a block frees stays with the process for the next, whatever ran before (glibc only);
- rounds of one block of each side in a random order, by CPU time (``time.process_time``).

Each block's minor page faults are counted (:func:`minor_faults`, ``resource.getrusage``), so
that a result can say from the run whether its calls touched fresh memory.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from .allocator import freed_memory_held

#: Seconds the baseline's block of calls should last at least (longer blocks average out timer
#: noise). The number of calls is chosen from the baseline alone, never from the candidate.
BLOCK_SECONDS = 0.1
#: The largest share of a baseline's block that a request's own handling may take: whatever a
#: kernel saves on handling the grader's requests is at most this much of a block.
REQUEST_SHARE = 0.02
MAX_CALLS = 2048
#: The baseline's blocks over all rounds should take about this long at most.
BASELINE_BUDGET_SECONDS = 5.0


def choose_calls(baseline_seconds: float, rounds: int, request_seconds: float = 0.0) -> int:
    """Calls per block, from the baseline alone (the candidate cannot choose its own block):
    enough that the baseline's block lasts :data:`BLOCK_SECONDS` and that a request's own
    handling (``request_seconds``, what an empty block request costs a clean kernel) is at
    most :data:`REQUEST_SHARE` of it; at most :data:`MAX_CALLS`, and no more than keeps
    rounds × calls × baseline within :data:`BASELINE_BUDGET_SECONDS` (at least 1)."""
    block = max(BLOCK_SECONDS, request_seconds / REQUEST_SHARE)
    wanted = math.ceil(block / max(baseline_seconds, 1e-6))
    affordable = math.floor(BASELINE_BUDGET_SECONDS / max(rounds * baseline_seconds, 1e-6))
    return max(1, min(wanted, MAX_CALLS, affordable))


def qualified_name(fn: Any) -> str:
    """``module.qualname`` of a function (its repr when it has none)."""
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    return f"{module}.{name}" if module and name else repr(fn)


def minor_faults() -> int | None:
    """The process's minor page faults so far (``resource.getrusage``'s ``ru_minflt``: first
    touches of fresh pages, served without reading a disk); None where the operating system
    does not count them (Windows has no ``resource`` module)."""
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def faults_between(before: int | None, after: int | None) -> int | None:
    """``after − before``, or None when either was not counted."""
    return None if before is None or after is None else after - before


@dataclass
class Block:
    """One timed block: its outputs (kept), seconds on its clock and minor page faults."""

    outputs: list
    seconds: float
    faults: int | None


def run_block(side: str, fn: Callable, inputs: list[tuple], clock: Callable[[], float],
              kwargs: dict | None = None) -> Block:
    """``fn(*args, **kwargs)`` for each ``args`` of ``inputs``, one after the other, every
    output kept; timed by ``clock`` and its faults counted outside the timed span. RuntimeError
    naming ``side`` and ``fn`` when a call raises."""
    outputs: list = []
    keep = outputs.append
    extra = kwargs or {}
    faults_before = minor_faults()
    start = clock()
    try:
        for args in inputs:
            keep(fn(*args, **extra))
    except Exception as error:
        raise RuntimeError(f"the {side} ({qualified_name(fn)}) raised {type(error).__name__}: "
                           f"{error}") from error
    seconds = clock() - start
    return Block(outputs, seconds, faults_between(faults_before, minor_faults()))


def fresh_inputs(make_inputs: Callable[[int], Any], seeds: Iterator[int],
                 count: int) -> list[tuple]:
    """``count`` argument tuples ``make_inputs(seed)``, a new seed of ``seeds`` each (a value
    that is not a tuple is one argument)."""
    made = []
    for _ in range(count):
        args = make_inputs(next(seeds))
        made.append(args if isinstance(args, tuple) else (args,))
    return made


#: ``check(candidate_outputs, baseline_outputs, calls_before)``: raises when outputs differ.
Check = Callable[[list, list, int], None]


@dataclass(frozen=True)
class SpeedRounds:
    """Per-call seconds of each side, one per round, the calls a block, and each side's minor
    page faults per call over all its timed blocks (None where not counted)."""

    baseline_seconds: tuple[float, ...]
    candidate_seconds: tuple[float, ...]
    calls: int
    baseline_faults: float | None
    candidate_faults: float | None


@freed_memory_held()
def speed_test_rounds(baseline: Callable, candidate: Callable,
                      make_inputs: Callable[[int], Any], *, rounds: int,
                      calls: int | None = None, seed: int = 0,
                      clock: Callable[[], float] = time.process_time,
                      check: Check | None = None, kwargs: dict | None = None,
                      warmup: int = 1) -> SpeedRounds:
    """The speed test's rounds (the module docstring): ``warmup`` untimed calls of each on
    inputs of their own; then, unless ``calls`` is given, one more untimed call of each from
    which :func:`choose_calls` picks the calls from the baseline's time; then ``rounds`` rounds
    of one block of each side (random order, ``seed``) on ``calls`` fresh inputs, the memory
    allocator held (:func:`~tinyprof.timing.allocator.freed_memory_held`) throughout.
    ``check(candidate_outputs, baseline_outputs, calls_before)`` sees every pair of blocks."""
    seeds = iter(range(seed * 1_000_003 + 1, 2**62))
    for _ in range(warmup):
        inputs = fresh_inputs(make_inputs, seeds, 1)
        warm = (run_block("candidate", candidate, inputs, clock, kwargs),
                run_block("baseline", baseline, inputs, clock, kwargs))
        if check:
            check(warm[0].outputs, warm[1].outputs, 0)
        del warm
    if calls is None:
        inputs = fresh_inputs(make_inputs, seeds, 1)
        once = (run_block("baseline", baseline, inputs, clock, kwargs),
                run_block("candidate", candidate, inputs, clock, kwargs))
        if check:
            check(once[1].outputs, once[0].outputs, 1)
        calls = choose_calls(once[0].seconds, rounds)
        del once
    order = np.random.default_rng(seed)
    times: dict[str, list[float]] = {"baseline": [], "candidate": []}
    faults: dict[str, list[int | None]] = {"baseline": [], "candidate": []}
    for r in range(rounds):
        timed = _round(baseline, candidate, fresh_inputs(make_inputs, seeds, calls), order,
                       clock, kwargs, check, 2 + r * calls)
        for name, (seconds, counted) in timed.items():   # inputs and outputs were let go
            times[name].append(seconds / calls)
            faults[name].append(counted)
    return SpeedRounds(tuple(times["baseline"]), tuple(times["candidate"]), calls,
                       per_call(faults["baseline"], calls), per_call(faults["candidate"], calls))


def _round(baseline: Callable, candidate: Callable, inputs: list[tuple],
           order: np.random.Generator, clock: Callable[[], float], kwargs: dict | None,
           check: Check | None, calls_before: int) -> dict[str, tuple[float, int | None]]:
    """One round: a block of each side on ``inputs`` in a random order, checked; each side's
    (seconds, faults). As in the grader's kernels, the inputs are let go once the blocks have
    run and the outputs once they are checked, before the next round's inputs are made."""
    blocks = {}
    for side in order.permutation(2):
        name, fn = (("baseline", baseline), ("candidate", candidate))[side]
        blocks[name] = run_block(name, fn, inputs, clock, kwargs)
    inputs.clear()
    if check:
        check(blocks["candidate"].outputs, blocks["baseline"].outputs, calls_before)
    return {name: (block.seconds, block.faults) for name, block in blocks.items()}


def per_call(faults: list[int | None], calls: int) -> float | None:
    """The minor faults a call of the median block of ``calls`` calls (None if any was not
    counted, or there were none): the median, as the speedup's times are, so that a first
    block that grew the heap does not speak for the rest."""
    if not faults or any(f is None for f in faults):
        return None
    return float(np.median(faults)) / calls


__all__ = ["BASELINE_BUDGET_SECONDS", "BLOCK_SECONDS", "Block", "MAX_CALLS", "REQUEST_SHARE",
           "SpeedRounds", "choose_calls", "faults_between", "fresh_inputs", "minor_faults",
           "per_call", "qualified_name", "run_block", "speed_test_rounds"]
