"""The hand-off to the grader: each helper that a grader can take over asks who is judging.

A grader that runs the test cells itself, outside the student's kernel
(autograder/run/judge.py), does so within ``judged_by(judge)``: there :func:`expect_faster` and
:func:`reference_unavailable` leave their work to the judge (:class:`Judging`: ``switch`` and
``measure_speed``), and :func:`current_judge` tells any other helper (chapter 10's leak test)
that it may hand over too. Without a judge (a plain kernel, stock nbgrader) each does its work
here: the switch in this kernel, and the speed measured in this process.

``expect_faster(candidate, baseline, make_inputs, at_least)`` grades a speed-up: the candidate
and the baseline run in interleaved rounds on fresh inputs, every output is checked against the
baseline's, and the test passes when the 95 % interval's lower bound reaches ``at_least``. Under
tinyprof's grader each side runs in its own kernel and is timed from outside (autograder/run/
speed.py).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from typing import Any, Callable, ContextManager, Iterator, Protocol

from .switch import Switch

#: Set by :func:`judged_by` while the grader's judge runs a test cell outside the student's
#: kernel.
_JUDGE: contextvars.ContextVar[Any] = contextvars.ContextVar("tinyprof_judge", default=None)


class Judging(Protocol):
    """What a grader that runs the test cells itself (autograder/run/judge.py's ``Judge``) offers
    the helpers while it judges (:func:`judged_by`): the test runs in the grader, the
    student's code in the student's kernel."""

    def switch(self, extra: tuple[str, ...]) -> ContextManager[None]:
        """A context manager: ``reference_unavailable(*extra)`` opened in the student's
        kernel around the calls the test's ``with`` block makes there."""

    def measure_speed(self, candidate: Any, baseline: Callable, make_inputs: Callable,
                      *, rounds: int, rtol: float, atol: float) -> Any:
        """:func:`expect_faster`'s measurement, made by the grader: a
        :class:`~tinyprof.timing.speed.Speedup` (or an object with its ``tier_line``,
        ``reaches`` and ``describe``); AssertionError when an output differs."""


@contextlib.contextmanager
def judged_by(judge: Judging) -> Iterator[Judging]:
    """Within the block, :func:`reference_unavailable` and :func:`expect_faster` leave their
    work to ``judge`` (:class:`Judging`), a grader that runs the test cell outside the
    student's kernel: ``reference_unavailable(*extra)`` is ``judge.switch(extra)``, and
    ``expect_faster`` uses ``judge.measure_speed``. The previous judge (usually none) is back
    after the block; blocks nest, and each thread or task sees its own (a context variable)."""
    token = _JUDGE.set(judge)
    try:
        yield judge
    finally:
        _JUDGE.reset(token)


def current_judge() -> Any:
    """The judge of the enclosing :func:`judged_by` block in this thread or task, or None when
    the test runs in the student's kernel."""
    return _JUDGE.get()


#: Speed measurements made in this kernel (no grader), so that a chapter's tier cells (2×, 4×,
#: 6×) share one: measurement key → (the objects measured, kept alive, and the result).
_SPEED: dict[tuple, tuple[tuple, Any]] = {}


def expect_faster(candidate: Callable, baseline: Callable, make_inputs: Callable[[int], tuple],
                  at_least: float = 2.0, *, rounds: int = 11, rtol: float = 1e-4,
                  atol: float = 1e-6) -> Any:
    """Assert that ``candidate`` computes what ``baseline`` computes, faster by ``at_least``:
    the lower bound of the 95 % bootstrap interval of median(baseline) / median(candidate),
    over ``rounds`` interleaved rounds of calls on fresh inputs ``make_inputs(seed)``
    (:func:`tinyprof.timing.speed.measure_speedup`). Prints what was measured; returns the
    :class:`~tinyprof.timing.speed.Speedup`. The same three functions measured again (another
    tier) reuse the measurement.

    The candidate must not call tinyprof: it is run once with tinyprof switched off
    (:func:`reference_unavailable`) before it is timed, and, under the grader, throughout."""
    judge = _JUDGE.get()
    if judge is not None:
        result = judge.measure_speed(candidate, baseline, make_inputs, rounds=rounds,
                                     rtol=rtol, atol=atol)
    else:
        result = _speed_here(candidate, baseline, make_inputs, rounds, rtol, atol,
                             sys._getframe(1).f_globals)
    print(result.tier_line(at_least))
    if not result.reaches(at_least):
        raise AssertionError(f"not {at_least:g}× faster with 95% confidence: {result.describe()}")
    return result


def _speed_here(candidate: Callable, baseline: Callable, make_inputs: Callable[[int], tuple],
                rounds: int, rtol: float, atol: float, namespace: dict) -> Any:
    """The measurement in this kernel, once per key (see :data:`_SPEED`)."""
    from ..timing.speed import first_difference, measure_speedup

    code = getattr(candidate, "__code__", None)
    key = _speed_key(candidate, baseline, make_inputs, rounds, rtol, atol)
    if key in _SPEED:
        return _SPEED[key][1]
    args = make_inputs(2**40)
    want = baseline(*args)
    with Switch((), namespace, watch=True):
        got = candidate(*args)
    found = first_difference(got, want, rtol, atol)
    if found:
        raise AssertionError(f"{found}; a faster version must compute what the baseline "
                             "computes")
    result = measure_speedup(candidate, baseline, make_inputs, rounds=rounds, rtol=rtol,
                             atol=atol)
    _SPEED[key] = ((candidate, code, baseline, make_inputs), result)
    return result


def _speed_key(candidate: Callable, baseline: Callable, make_inputs: Callable, rounds: int,
               rtol: float, atol: float) -> tuple:
    code = getattr(candidate, "__code__", None)
    return (id(candidate), id(code), id(baseline), id(make_inputs), rounds, rtol, atol)


def speed_measured(candidate: Callable, baseline: Callable, make_inputs: Callable[[int], tuple],
                   *, rounds: int = 11, rtol: float = 1e-4, atol: float = 1e-6) -> Any:
    """The :class:`~tinyprof.timing.speed.Speedup` that :func:`expect_faster` measured in this
    kernel for these three functions (the same objects, the candidate's code unchanged) and
    settings, or None when it measured none (it has not run on them, or a grader measured
    them from outside). Chapter 08 prints it beside an A/B of the same two functions: the number
    the speed test cells printed in this kernel, not another measurement of it (under a grader
    the grade comes from the grader's own)."""
    found = _SPEED.get(_speed_key(candidate, baseline, make_inputs, rounds, rtol, atol))
    return None if found is None else found[1]


def reference_unavailable(*extra: str, namespace: dict | None = None) -> Any:
    """Within the block, every route of :func:`routes` (and any ``extra`` dotted names, such as
    ``"numpy.percentile"`` or a data table like ``"tinyprof.memory.training.STATE_SLOTS"``)
    raises ReferenceUnavailable when the notebook uses it; all are restored after. The switch
    changes code, not only names: a function's code is swapped for a gate, so references taken
    before the block (default arguments, containers), numpy's extras reached through another
    numpy module, and copies made by reflection reach the gate too.

    On entry, test helpers the notebook rebound are put back, and TamperingDetected is raised
    when notebook code was planted in tinyprof, builtins, sys.modules or IPython's hooks.
    ``namespace`` is the notebook's (default: the caller's globals).

    When the grader runs the test itself (autograder/run/judge.py, :func:`judged_by`), the
    block is opened in the student's kernel around the calls the test makes there, and nothing
    is switched off here."""
    judge = _JUDGE.get()
    return Switch(extra, namespace, watch=True) if judge is None else judge.switch(extra)
