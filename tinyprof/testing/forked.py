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
child collects garbage (``gc.freeze`` first, so that the collector does not write to the
parent's objects) and trims its allocator after the loop returns, tells the parent it is ready,
and waits: the grader reads the group's memory then, from outside, and only after that does
the child send the loop's value back and exit.

Nothing here decides anything: the parent only relays the child's value (or the exception the
loop raised, as its class names) to the grader, which reads the memory itself.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import sys
from typing import Any, Callable

#: Seconds the parent waits for the child to say it is ready (the grader's own time-out on the
#: test comes first; this one ends a child whose parent is left waiting).
READY_TIMEOUT_S = 300.0


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
    """A forked child whose loop has returned and whose memory is settled, waiting for
    :meth:`finish`. ``pid``: its process id (in this process's namespace)."""

    def __init__(self, pid: int, go: int, answer: int):
        self.pid, self._go, self._answer = pid, go, answer

    def finish(self) -> Any:
        """Let the child go; the loop's value (or the loop's exception raised here)."""
        try:
            try:
                os.write(self._go, b"g")
            except BrokenPipeError:   # the child is gone: what it left, if anything
                pass
            data = _read_all(self._answer)
        except BaseException:
            _kill(self.pid)
            raise
        finally:
            _close(self._go, self._answer)
            _reap(self.pid)
            gc.unfreeze()
        if not data:
            raise RuntimeError("the loop's process ended without an answer (it exited or "
                               "was killed while the loop ran)")
        kind, payload = pickle.loads(data)   # noqa: S301 - this kernel's own child
        if kind == "raised":
            raise _rebuilt(*payload)
        return payload


class ForkedRun:
    """``ForkedRun(label)(loop, steps, seed, calls=1)``: ``loop(steps, seed)`` run ``calls``
    times, one call after the other, in a forked child, which is then held
    (:class:`HeldChild`) after collecting its garbage and trimming its allocator (module
    docstring); its value is the last call's. ``_label`` names the loop in the grader's
    messages."""

    def __init__(self, label: str = "the loop"):
        self._label = label

    def __call__(self, loop: Callable[[int, int], Any], steps: int, seed: int,
                 calls: int = 1) -> HeldChild:
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        answer_r, answer_w = os.pipe()
        sys.stdout.flush()
        gc.freeze()   # while the child lives, a collection here would write to every object
        pid = os.fork()
        if pid == 0:   # pragma: no cover - the child ends in os._exit
            _close(ready_r, go_w, answer_r)
            _child(loop, steps, seed, max(1, int(calls)), ready_w, go_r, answer_w)
        _close(ready_w, go_r, answer_w)
        try:
            said = _wait_ready(ready_r, READY_TIMEOUT_S)
        except BaseException:
            _kill(pid)
            gc.unfreeze()
            _close(go_w, answer_r)
            raise
        finally:
            _close(ready_r)
        child = HeldChild(pid, go_w, answer_r)
        if not said:
            return _finish_now(child)
        return child


def _finish_now(child: HeldChild) -> Any:
    """A child that ended before it said it was ready: its answer, if it left one."""
    return child.finish()


def _child(loop: Callable, steps: int, seed: int, calls: int, ready: int, go: int,
           answer: int) -> None:
    """The child's life: run (``calls`` times), settle, say ready, wait, answer, exit (never
    returns)."""
    try:
        sys.stdout = sys.stderr = open(os.devnull, "w")   # noqa: SIM115 - ends with the process
        _small_pages()
        gc.freeze()   # the parent's objects are not the collector's to walk (and copy)
        filler = _fill_float_slots()   # noqa: F841 - held while the loop runs
        try:
            for _ in range(calls):
                outcome: tuple = ("value", loop(steps, seed))
        except BaseException as error:  # noqa: BLE001 - relayed to the grader
            outcome = ("raised", _described(error))
        _give_back()
        os.write(ready, b"r")
        os.read(go, 1)
        try:
            data = pickle.dumps(outcome, protocol=5)
        except Exception as error:  # noqa: BLE001 - a value that cannot travel
            data = pickle.dumps(("raised", (["TypeError", "Exception", "BaseException"],
                                            f"the loop's value cannot be sent back: {error}")))
        _write_all(answer, data)
    finally:
        os._exit(0)


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


def _wait_ready(ready: int, timeout: float) -> bool:
    """True when the child said it is ready; False when it ended without a word."""
    chosen, _, _ = select.select([ready], [], [], timeout)
    if not chosen:
        raise TimeoutError(f"the loop did not return within {timeout:.0f} s")
    return os.read(ready, 1) == b"r"


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


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
