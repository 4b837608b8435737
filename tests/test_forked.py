"""The fork a leak-check run lives in (tinyprof.testing.forked), run here: it is held after its
loop returned, until it is let go, and only its answer says that the loop returned."""

from __future__ import annotations

import os
import stat
import time

import pytest

from tinyprof.testing.forked import ForkedRun


def _losses(steps: int, seed: int) -> list[float]:
    return [float(seed + k) for k in range(steps)]


def test_a_held_child_lives_until_it_is_let_go_and_gives_the_loops_value():
    held = ForkedRun()(_losses, 3, 10)
    os.kill(held.pid, 0)   # alive, held: the grader reads its memory now
    assert held.finish() == [10.0, 11.0, 12.0]
    with pytest.raises(ProcessLookupError):
        os.kill(held.pid, 0)


def test_the_loops_exception_is_raised_by_finish():
    def raising(steps: int, seed: int) -> list:
        raise ValueError(f"bad step count {steps}")

    held = ForkedRun()(raising, 4, 0)
    with pytest.raises(ValueError, match="bad step count 4"):
        held.finish()


def _new_pipes(before: set[int]) -> list[int]:
    """The pipes this process has that were not open in ``before`` (the fork's: a loop would
    take them all, but pytest's own pipes are not this test's to write to)."""
    found = []
    for fd in set(range(3, 256)) - before:
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                found.append(fd)
        except OSError:
            pass
    return found


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


def test_only_the_answer_says_the_loop_returned():
    """A loop that writes to the grader's pipes cannot end the readings before its steps ran
    (the red team's early_ready_after_a_plateau): the child is held only once its answer is in,
    and an answer the loop wrote into is no answer."""
    before = _open_fds()

    def signals_every_pipe_then_runs(steps: int, seed: int) -> list[float]:
        for fd in _new_pipes(before):
            os.write(fd, b"r")
        time.sleep(0.3)
        return _losses(steps, seed)

    start = time.monotonic()
    held = ForkedRun()(signals_every_pipe_then_runs, 3, 0)
    assert time.monotonic() - start >= 0.3
    with pytest.raises(Exception):  # noqa: B017, PT011 - the answer begins with the loop's "r"
        held.finish()


def test_a_child_that_closes_the_answer_early_gives_no_answer():
    before = _open_fds()

    def closes_every_pipe(steps: int, seed: int) -> list[float]:
        for fd in _new_pipes(before):
            os.close(fd)
        return _losses(steps, seed)

    with pytest.raises(RuntimeError, match="ended without an answer"):
        ForkedRun()(closes_every_pipe, 3, 0)
