"""A loop run in a fork of this process and held there after it returns: the kernel's side of
``expect_leak_free``'s measurement (tinyprof/memcheck.py, autograder/run/memory_check.py).
Part of the grading machinery (``tinyprof.testing``): the grader's request calls it while
tinyprof is switched off, and what it runs is the student's loop.

*Threat*: memory that existed before the call and is released during it. A loop can pay for
what it keeps with a ballast made in an earlier cell and freed bit by bit, or write what it
keeps into a buffer touched in advance: the process's memory then stays flat however much the
loop keeps, and no reading of it, however made, can tell.

*Defence*: the loop runs in a child forked from this process. Every page the parent had is
shared with the child and stays the parent's: freeing a ballast in the child gives back nothing
(the parent still holds its pages), and writing into a page that existed before copies it, a
new page charged to the child. So the child's memory, counted by the kernel's control group
beside the parent's, grows by every page the loop writes and keeps, whatever it freed. The
child makes its allocator's policy the same in every run (:func:`_steady_allocator`), and
after the loop returns collects garbage (``gc.freeze`` first, so that the collector does not
write to the parent's objects), trims the allocator, sends the loop's value back and waits: the
grader reads the group's memory then, from outside, and only after that is the child let go.
The answer, read to its end, is the sign that the loop returned: a signal the loop could send
itself (a byte down an inherited pipe) would let it end the readings early and run its steps
after them (tests/redteam_leak_free.py's early_ready_after_a_plateau), and an answer the loop
sends itself needs the losses of every step, so its steps were read.

Nothing here decides anything: the parent only relays the child's value (or the exception the
loop raised, as its class names) to the grader, which reads the memory itself.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import sys
import time
from typing import Any, Callable

#: Seconds the parent waits for the child's answer (the grader's own time-out on the test comes
#: first; this one ends a child whose parent is left waiting).
READY_TIMEOUT_S = 300.0
#: ``mallopt`` parameter numbers (glibc's malloc.h), and glibc's initial mmap threshold.
M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8
MMAP_THRESHOLD = 128 * 1024


def no_steps(steps: int, seed: int) -> list:
    """A loop that runs no step: a first fork with it warms up what forking allocates in this
    process the first time (the module, the request's path), which would otherwise count in
    the first measured run only."""
    return []


class LoopFailed(Exception):
    """The loop raised in the child: ``names`` are its exception's class and bases."""

    def __init__(self, names: list[str], text: str):
        super().__init__(text)
        self.names = names


class HeldChild:
    """A forked child whose loop has returned, whose answer is in and whose memory is settled,
    waiting for :meth:`finish`. ``pid``: its process id (in this process's namespace)."""

    def __init__(self, pid: int, go: int, answer: bytes):
        self.pid, self._go, self._answer = pid, go, answer

    def finish(self) -> Any:
        """Let the child go; the loop's value (or the loop's exception raised here)."""
        try:
            try:
                os.write(self._go, b"g")
            except BrokenPipeError:   # the child is gone
                pass
        except BaseException:
            _kill(self.pid)
            raise
        finally:
            _close(self._go)
            _reap(self.pid)
            gc.unfreeze()
        if not self._answer:
            raise RuntimeError("the loop's process ended without an answer (it exited or "
                               "was killed while the loop ran, or closed the grader's pipe)")
        kind, payload = pickle.loads(self._answer)   # noqa: S301 - this kernel's own child
        if kind == "raised":
            raise _rebuilt(*payload)
        return payload


class ForkedRun:
    """``ForkedRun(label)(loop, steps, seed, calls=1)``: ``loop(steps, seed)`` run ``calls``
    times, one call after the other, in a forked child, which is then held
    (:class:`HeldChild`) after collecting its garbage, trimming its allocator and sending its
    answer (module docstring); its value is the last call's. ``_label`` names the loop in the
    grader's messages."""

    def __init__(self, label: str = "the loop"):
        self._label = label

    def __call__(self, loop: Callable[[int, int], Any], steps: int, seed: int,
                 calls: int = 1) -> HeldChild:
        go_r, go_w = os.pipe()
        answer_r, answer_w = os.pipe()
        sys.stdout.flush()
        gc.freeze()   # while the child lives, a collection here would write to every object
        pid = os.fork()
        if pid == 0:   # pragma: no cover - the child ends in os._exit
            _close(go_w, answer_r)
            _child(loop, steps, seed, max(1, int(calls)), go_r, answer_w)
        _close(go_r, answer_w)
        try:
            answer = _read_answer(answer_r, READY_TIMEOUT_S)
        except BaseException:
            _kill(pid)
            gc.unfreeze()
            _close(go_w)
            raise
        finally:
            _close(answer_r)
        child = HeldChild(pid, go_w, answer)
        if not answer:
            return _finish_now(child)
        return child


def _finish_now(child: HeldChild) -> Any:
    """A child that ended without an answer: the reason, raised now."""
    return child.finish()


def _child(loop: Callable, steps: int, seed: int, calls: int, go: int, answer: int) -> None:
    """The child's life: run (``calls`` times), settle, answer, wait, exit (never returns)."""
    try:
        sys.stdout = sys.stderr = open(os.devnull, "w")   # noqa: SIM115 - ends with the process
        _small_pages()
        _steady_allocator()
        gc.freeze()   # the parent's objects are not the collector's to walk (and copy)
        filler = _fill_float_slots()   # noqa: F841 - held while the loop runs
        try:
            for _ in range(calls):
                outcome: tuple = ("value", loop(steps, seed))
        except BaseException as error:  # noqa: BLE001 - relayed to the grader
            outcome = ("raised", _described(error))
        _give_back()
        _write_all(answer, _pickled(outcome))
        os.close(answer)   # the answer is in: the grader reads the memory now
        os.read(go, 1)
    finally:
        os._exit(0)


def _pickled(outcome: tuple) -> bytes:
    try:
        return pickle.dumps(outcome, protocol=5)
    except Exception as error:  # noqa: BLE001 - a value that cannot travel
        return pickle.dumps(("raised", (["TypeError", "Exception", "BaseException"],
                                        f"the loop's value cannot be sent back: {error}")))


def _described(error: BaseException) -> tuple:
    """The loop's exception as it travels: its class names, its text, and its pickle when it
    has one (tinyprof's own exceptions, the built-in ones)."""
    try:
        whole = pickle.dumps(error, protocol=5)
    except Exception:  # noqa: BLE001 - an exception that cannot travel whole
        whole = None
    return [c.__name__ for c in type(error).__mro__], str(error)[:500], whole


def _give_back() -> None:
    """Collect cycles and have glibc return its free memory (``malloc_trim(0)``); here, not
    through :func:`tinyprof.leaks.measure.give_back`: this module is the grader's, and the
    switch refuses tinyprof's routes to it."""
    import ctypes

    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _fill_float_slots() -> list[float]:
    """Floats that fill every free slot of the parent's partly used pools of their size class
    (counted by ``sys._debugmallocstats``): kept for the run, so that the loop's floats (its
    history) go to new pools, 32 bytes each, instead of each one into a free slot of a page of
    the parent's, which the write copies whole (4 kB for a float: the history of a fixed loop
    would look like a leak). The same filling before both runs: it cancels."""
    size_class = (sys.getsizeof(0.5) - 1) // 16
    free = _free_blocks().get(size_class, 0)
    return [float(i) + 0.5 for i in range(free + 128)]   # + the float free list


def _free_blocks() -> dict[int, int]:
    """Free blocks in partly used pools, by size class, from ``sys._debugmallocstats`` (which
    writes to file descriptor 2); empty without it."""
    import tempfile

    if not hasattr(sys, "_debugmallocstats"):
        return {}
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            sys._debugmallocstats()
            os.dup2(saved, 2)
            captured.seek(0)
            text = captured.read().decode("ascii", "replace")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 5 and all(f.isdigit() for f in fields):
            found[int(fields[0])] = int(fields[4])
    return found


def _small_pages() -> None:
    """No transparent huge pages for this process from now on (``prctl(PR_SET_THP_DISABLE)``,
    Linux): a 2 MB page taken or kept whole would move what the loop keeps by 2 MB at random,
    several kB a step over a few hundred steps."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _steady_allocator() -> None:
    """glibc's allocator made the same for every run (``mallopt``): the mmap threshold fixed
    at glibc's initial 128 kB, so that an array that size or larger is mapped afresh and given
    back whole when freed, in every run alike (glibc raises the threshold each time such an
    array is freed, so where the next one lands depends on the run before); and no arena beyond
    the first, which holds only in a process no second thread has allocated in yet (glibc fixes
    the number of arenas then). A kernel's threads have, so the grader's sandbox starts the
    kernel with one arena (``MALLOC_ARENA_MAX``, autograder/kernel/isolation.py): the threads a
    loop starts here then allocate where ``malloc_trim`` gives memory back, not in an arena of
    the kernel's whose top it keeps (a Pool(4) made in each call kept 2.8 MB more over two
    calls than over one)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(M_ARENA_MAX, 1)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):
        pass


def _rebuilt(names: list[str], text: str, whole: bytes | None = None) -> BaseException:
    """The loop's exception, as the grader knows it: itself when it travelled whole, else the
    built-in class of that name, else a :class:`LoopFailed` named as its class."""
    import builtins

    if whole is not None:
        try:
            found = pickle.loads(whole)   # noqa: S301 - this kernel's own child
            if isinstance(found, BaseException):
                return found
        except Exception:  # noqa: BLE001, S110 - rebuilt from its names below
            pass

    found = getattr(builtins, names[0], None) if names else None
    if isinstance(found, type) and issubclass(found, Exception):
        try:
            return found(text)
        except Exception:  # noqa: BLE001, S110 - a built-in with another signature
            pass
    return _named(names)(names, text)


def _named(names: list[str]) -> type:
    """A :class:`LoopFailed` subclass named as the loop's exception, so that the kernel's
    answer names the class the student's code raised."""
    return type(names[0] if names else "LoopFailed", (LoopFailed,), {})


def _read_answer(fd: int, timeout: float) -> bytes:
    """The child's answer, read to its end (the child closes its side once the loop returned
    and its memory is settled); empty when it ended without one."""
    deadline, chunks = time.monotonic() + timeout, []
    while True:
        chosen, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not chosen:
            raise TimeoutError(f"the loop did not return within {timeout:.0f} s")
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _close(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _kill(pid: int) -> None:
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


__all__ = ["READY_TIMEOUT_S", "ForkedRun", "HeldChild", "LoopFailed", "no_steps"]
