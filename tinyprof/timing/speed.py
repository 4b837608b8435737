"""Is a rewrite faster, and does it still compute the same thing? Speed on fresh inputs.

:func:`ab_test` times two functions on one fixed input. A function that is meant to replace
another must also give the same answers, and a fixed input invites remembering the answer.
:func:`measure_speedup` therefore:

- draws **fresh inputs** for every call, ``make_inputs(seed)`` with a new seed each time (a
  tuple of positional arguments), so that a remembered output is a wrong output;
- runs ``rounds`` interleaved rounds, each timing a block of ``calls`` calls of each function
  (the same inputs for both) in a random order, so that drift hits both alike (chapter 06),
  by the process's CPU time unless ``clock`` says otherwise;
- checks **every output** against the baseline's on the same inputs (:func:`first_difference`:
  arrays and numbers within ``rtol``/``atol``, structure, shapes and keys exactly);
- reports the **speedup** median(baseline) / median(candidate) of the per-call times, its 95 %
  bootstrap interval (:func:`tinyprof.timing.abtest.bootstrap_ratio_ci`), and how the time was
  read (:class:`Speedup`).

A first call of each, on inputs of its own, is a warm-up (checked, not timed). ``calls`` is
chosen from a second, untimed call of the baseline unless given (the candidate's is checked,
never used: a candidate that chose its own block could make it as short as it likes): enough
calls that the baseline's block lasts :data:`BLOCK_SECONDS`, at most :data:`MAX_CALLS`, and no
more than keeps the baseline's share of the whole measurement within
:data:`BASELINE_BUDGET_SECONDS` (:func:`choose_calls`).

How a block is made (calls from the baseline, every output kept, fresh inputs) is the rule of
:mod:`tinyprof.timing.blocks`, which ``tp.ab_test(..., blocks="speed test")`` shares: a block's
outputs that pile up can land on fresh pages, a cost a call that moves the ratio with the calls
a block, so the minor page faults a call of each side are recorded too (:class:`Speedup`).

The autograder measures the same way, with each function in its own kernel and each block timed
by that kernel's CPU time read from outside it (``autograder/run/speed.py``); a :class:`Speedup` is
the record both produce, and :meth:`Speedup.tier_line` the sentence both print.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

import numpy as np

from ..units import format_interval, format_seconds
from .abtest import MIN_ROUNDS, SPEED_TEST, ABResult, bootstrap_ratio_ci
from .blocks import (
    BASELINE_BUDGET_SECONDS,
    BLOCK_SECONDS,
    MAX_CALLS,
    REQUEST_SHARE,
    choose_calls,
    qualified_name,
    speed_test_rounds,
)
from .stats import LatencyStats

RTOL, ATOL = 1e-4, 1e-6


@dataclass(frozen=True)
class Speedup:
    """A speed measurement: per-call seconds of each side, one sample per round."""

    baseline_name: str
    baseline_seconds: tuple[float, ...]
    candidate_seconds: tuple[float, ...]
    calls: int
    method: str
    #: Minor page faults per call of the baseline and the candidate, where this process counted
    #: them (a measurement made here; the grader's record has none).
    faults: tuple[float | None, float | None] = (None, None)

    @property
    def rounds(self) -> int:
        return len(self.candidate_seconds)

    @property
    def speedup(self) -> float:
        """median(baseline) / median(candidate): above 1 the candidate is faster."""
        return float(np.median(self.baseline_seconds) / np.median(self.candidate_seconds))

    @cached_property
    def ci(self) -> tuple[float, float]:
        """The 95 % bootstrap interval of the speedup."""
        return bootstrap_ratio_ci(self.baseline_seconds, self.candidate_seconds)

    def reaches(self, at_least: float) -> bool:
        """Whether the interval's lower bound clears ``at_least``."""
        return self.ci[0] >= at_least

    def describe(self) -> str:
        low, high = self.ci
        return (f"{self.speedup:.2f}× faster than {self.baseline_name} "
                f"(95% CI {format_interval((low, high), 'ratio')}; "
                f"{format_seconds(float(np.median(self.baseline_seconds)))} → "
                f"{format_seconds(float(np.median(self.candidate_seconds)))} a call; "
                f"{self.rounds} interleaved rounds of {self.calls} calls on fresh inputs, "
                f"timed by {self.method}{self._faults_note()})")

    def _faults_note(self) -> str:
        if None in self.faults:
            return ""
        return (f"; {self.faults[0]:,.0f} and {self.faults[1]:,.0f} page faults a call, every "
                "output kept")

    def tier_line(self, at_least: float) -> str:
        reached = "reached" if self.reaches(at_least) else "NOT reached (the CI's lower bound "\
            f"is {self.ci[0]:.2f}×)"
        return f"speed: {self.describe()}. Tier {at_least:g}×: {reached}."

    def record(self) -> dict:
        """Plain data for a report: the speedup, its interval and how it was measured."""
        low, high = self.ci
        return {"speedup": round(self.speedup, 4), "ci": [round(low, 4), round(high, 4)],
                "rounds": self.rounds, "calls": self.calls, "method": self.method,
                "baseline": self.baseline_name}

    def as_ab_result(self, candidate_name: str = "candidate") -> ABResult:
        """The same samples as an :class:`~tinyprof.timing.abtest.ABResult` (its Mann–Whitney
        test and verdict; blocks made the speed test's way, fresh inputs), so that it can be
        printed and compared beside ``tp.ab_test``'s (:mod:`tinyprof.timing.agreement`)."""
        clock = "cpu" if self.method == CLOCKS[time.process_time] else "wall"
        sides = [LatencyStats.from_samples(samples, loops=self.calls, name=name)
                 for samples, name in ((self.baseline_seconds,
                                        self.baseline_name.rsplit(".", 1)[-1]),
                                       (self.candidate_seconds, candidate_name))]
        return ABResult.from_samples(*sides, clock=clock, blocks=SPEED_TEST, fresh_inputs=True,
                                     faults=self.faults)

    def __str__(self) -> str:
        return f"Speedup: {self.describe()}"

    __repr__ = __str__


#: How unlikely a sketch of an output within tolerance is to lie outside its bound (for each
#: sketch; Hoeffding's inequality, :meth:`Sampled.sketch_bound`).
SKETCH_FALSE_ALARM = 1e-12


@dataclass(frozen=True)
class Sampled:
    """What a grader reads back of a large output instead of the whole array: its elements at
    some flat ``positions``, and ``sketch``, projections ``Σ_i r_ji · x_i`` of all its elements
    on random signs r_ji = ±1 (the positions and signs drawn after the output was computed),
    with ``l1 = Σ_i |x_i|`` and ``l2 = Σ_i x_i²``, from which the baseline's bound follows
    (:meth:`sketch_bound`)."""

    shape: tuple[int, ...]
    positions: tuple[int, ...]
    values: np.ndarray
    sketch: np.ndarray | None = None
    l1: float = 0.0
    l2: float = 0.0

    def sketch_bound(self, rtol: float, atol: float) -> float:
        """How far another array's sketch may lie from this one's (on the same weights) when
        each of its n elements g_i is within ``δ_i = atol + rtol·|x_i|`` of this one's: the
        differences e_i = g_i − x_i are fixed before the weights are drawn, each
        ``|r_ji e_i| ≤ δ_i``, so by Hoeffding's inequality
        ``P(|Σ_i r_ji e_i| ≥ t) ≤ 2·exp(−t² / (2·Σ_i δ_i²))``
        with Σ_i δ_i² = n·atol² + 2·atol·rtol·l1 + rtol²·l2; t is taken where that is
        :data:`SKETCH_FALSE_ALARM`, plus float64 rounding (1e-9 · l1)."""
        n = math.prod(self.shape)
        spread = n * atol**2 + 2 * atol * rtol * self.l1 + rtol**2 * self.l2
        return math.sqrt(2 * math.log(2 / SKETCH_FALSE_ALARM) * spread) + 1e-9 * self.l1


def first_difference(got: Any, want: Any, rtol: float = RTOL, atol: float = ATOL,
                     where: str = "output") -> str | None:
    """None when ``got`` matches ``want`` (numbers and arrays within ``|g − w| ≤ atol + rtol·|w|``,
    NaN matching NaN; tuples, lists and dicts item by item with the same length and keys);
    otherwise a sentence naming the first place that differs (``where[1]['W1'][3, 7]``)."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return f"{where} should be a dict with keys {sorted(map(str, want))}, got {_kind(got)}"
        for key in want:
            found = first_difference(got[key], want[key], rtol, atol, f"{where}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"{where} should be a sequence of {len(want)} items, got {_kind(got)}"
        for i, (g, w) in enumerate(zip(got, want)):
            found = first_difference(g, w, rtol, atol, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(want, Sampled):
        return _sampled_difference(got, want, rtol, atol, where)
    return _array_difference(got, want, rtol, atol, where)


def _sampled_difference(got: Any, want: Sampled, rtol: float, atol: float,
                        where: str) -> str | None:
    if not isinstance(got, Sampled):
        return f"{where} should be an array of shape {want.shape}, got {_kind(got)}"
    if got.shape != want.shape or len(got.values) != len(want.values):
        return f"{where} should have shape {want.shape}, got {got.shape}"
    close = np.isclose(got.values, want.values, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return _sketch_difference(got, want, rtol, atol, where)
    k = int(np.flatnonzero(~close)[0])
    index = np.unravel_index(want.positions[k], want.shape)
    return (f"{where}[{', '.join(map(str, index))}] is {got.values[k]:.6g} where the baseline "
            f"gives {want.values[k]:.6g} ({int((~close).sum())} of the {close.size} elements "
            "checked differ)")


def _sketch_difference(got: Sampled, want: Sampled, rtol: float, atol: float,
                       where: str) -> str | None:
    """None when ``got``'s sketches lie within the bound of ``want``'s (:class:`Sampled`);
    where ``want``'s are not finite (the baseline's output holds NaN or infinities) only an
    equal sketch matches, and the sampled elements decide."""
    if want.sketch is None:
        return None
    size = math.prod(want.shape)
    if got.sketch is None or got.sketch.shape != want.sketch.shape:
        return f"{where}: the kernel did not read back all {size:,} of its elements"
    bound = want.sketch_bound(rtol, atol)
    finite = np.isfinite(want.sketch) & math.isfinite(bound)
    with np.errstate(invalid="ignore"):
        near = np.abs(got.sketch - want.sketch) <= bound
    same = (got.sketch == want.sketch) | (np.isnan(got.sketch) & np.isnan(want.sketch))
    fine = np.where(finite, near, same)
    if fine.all():
        return None
    j = int(np.flatnonzero(~fine)[0])
    return (f"{where} differs from the baseline's outside the elements read back one by one: "
            f"a sum of all its {size:,} elements on random weights (drawn after the calls ran) "
            f"is {got.sketch[j]:.6g} where the baseline's is {want.sketch[j]:.6g}, further "
            f"apart than rtol={rtol:g} and atol={atol:g} allow ({bound:.3g})")


def _array_difference(got: Any, want: Any, rtol: float, atol: float, where: str) -> str | None:
    try:
        g = np.asarray(got, dtype=np.float64)
        w = np.asarray(want, dtype=np.float64)
    except (TypeError, ValueError):
        return None if got == want else f"{where}: expected {want!r}, got {_kind(got)}"
    if g.shape != w.shape:
        return f"{where} should have shape {w.shape}, got {g.shape}"
    close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    flat = int(np.flatnonzero(~close.ravel())[0])
    index = np.unravel_index(flat, w.shape) if w.shape else ()
    at = f"{where}[{', '.join(map(str, index))}]" if index else where
    return (f"{at} is {g.ravel()[flat]:.6g} where the baseline gives {w.ravel()[flat]:.6g} "
            f"({int((~close).sum()):,} of {close.size:,} elements differ)")


def _kind(value: Any) -> str:
    shape = getattr(value, "shape", None)
    return f"an array of shape {shape}" if isinstance(shape, tuple) else type(value).__name__


#: How each clock is named in a Speedup's description.
CLOCKS = {time.process_time: "the CPU time of this process (time.process_time)",
          time.perf_counter: "wall-clock time in this process (time.perf_counter)"}


def measure_speedup(candidate: Callable, baseline: Callable, make_inputs: Callable[[int], tuple],
                    *, rounds: int = 11, calls: int | None = None, seed: int = 0,
                    rtol: float = RTOL, atol: float = ATOL,
                    clock: Callable[[], float] = time.process_time) -> Speedup:
    """Time ``candidate`` against ``baseline`` in this process, as the module docstring says,
    checking every output. ``clock`` is CPU time by default, as the grader's is (other programs
    on the machine slow the wall clock far more than the CPU time a call needs; threads' CPU
    time counts, so parallelism buys nothing); ``time.perf_counter`` for wall-clock time.
    Raises AssertionError naming the call and the first differing element when an output
    differs, ValueError for fewer than MIN_ROUNDS rounds, and RuntimeError naming the side when
    a function raises."""
    if rounds < MIN_ROUNDS:
        raise ValueError(f"measure_speedup: rounds must be ≥ {MIN_ROUNDS} for an interval worth "
                         f"having, got {rounds}")

    def check(candidate_outputs: list, baseline_outputs: list, calls_before: int) -> None:
        check_outputs(candidate_outputs, baseline_outputs, calls_before, rtol, atol)

    timed = speed_test_rounds(baseline, candidate, make_inputs, rounds=rounds, calls=calls,
                              seed=seed, clock=clock, check=check)
    return Speedup(qualified_name(baseline), timed.baseline_seconds, timed.candidate_seconds,
                   timed.calls, CLOCKS.get(clock, qualified_name(clock)),
                   (timed.baseline_faults, timed.candidate_faults))


def check_outputs(candidate: list, baseline: list, calls_before: int, rtol: float = RTOL,
                  atol: float = ATOL) -> None:
    """AssertionError naming the first call (numbered after ``calls_before`` earlier ones) whose
    output differs from the baseline's on the same inputs, and where (:func:`first_difference`)."""
    if len(candidate) != len(baseline):
        raise AssertionError(f"the candidate returned {len(candidate)} outputs for "
                             f"{len(baseline)} calls")
    for i, (got, want) in enumerate(zip(candidate, baseline)):
        found = first_difference(got, want, rtol, atol)
        if found:
            raise AssertionError(f"call {calls_before + i + 1} (fresh inputs): {found}; a faster "
                                 "version must compute what the baseline computes")


__all__ = ["BASELINE_BUDGET_SECONDS", "BLOCK_SECONDS", "MAX_CALLS", "REQUEST_SHARE", "Sampled",
           "Speedup", "check_outputs", "choose_calls", "first_difference", "measure_speedup",
           "qualified_name"]
