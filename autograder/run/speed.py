"""Speed graded from outside the student's kernel: the grader's side of ``expect_faster``.

A speed test (``tinyprof.testing.expect_faster(candidate, baseline, make_inputs, at_least)``)
asks whether the student's function computes what a tinyprof baseline computes, faster. Timing
it inside the student's kernel, as nbgrader would, lets the kernel decide its own grade (a
patched clock, a slowed-down baseline, work done while the other side is timed). Here:

- **Two kernels.** The candidate runs in the student's kernel; the baseline runs in a clean
  kernel of its own (:class:`ReferenceKernel`), sandboxed like the student's but holding no
  student code: it imports only the baseline, by name, from tinyprof.
- **Fresh inputs.** Every call gets new inputs ``make_inputs(seed)``, the seeds drawn here at
  random at every grading; each kernel makes the same inputs from them (no megabytes cross the
  wire, and a student's kernel that makes them wrongly gets wrong outputs); a remembered
  output is a wrong output.
- **The memory allocator held** in both kernels (``tinyprof.timing.allocator``, from the
  first ``time`` request of :mod:`tinyprof.remote`; the student's kernel settles it when the
  test's switch closes): a block's outputs are kept until checked, and whether the
  next block's land on fresh pages must not depend on what the notebook freed before.
- **CPU time, read from outside.** Each round times a block of ``calls`` calls on each side, in
  a random order, by the CPU time of each kernel's control group, read by the grader (all the
  kernel's processes and threads). Without control groups it is each kernel's process tree,
  read from ``/proc``; the printed method says which.
- **Only the function's work is charged.** The student's kernel handles the grader's requests
  itself, and a cell can make that handling cheaper (its shell handlers, its session's
  serialisation, its comm manager, all reachable from ``get_ipython().kernel``); a grade must
  not depend on it. So ``calls`` is chosen from the baseline alone (the clean kernel's second
  call), never from the candidate's time, with blocks long enough that a request's own handling
  is at most :data:`~tinyprof.timing.speed.REQUEST_SHARE` of a block
  (:func:`~tinyprof.timing.speed.choose_calls`): a candidate cannot force one call per block
  and turn a request's saving into a per-call one. A side is charged its block less what a
  block request of no calls costs the *clean* kernel (the tare), never a credit from the
  student's kernel's own handling. The candidate is also charged, part by part (making the
  inputs, reading the outputs back, the rest of the round: :data:`PARTS`), whatever that part
  typically cost its kernel beyond what it cost the clean kernel (the median over the rounds),
  each part on its own, so that a saving on one request never pays for work done in another:
  work left to finish an output while the grader reads it (a thread, a lazy reader) is charged
  to its kernel. And the runtime check of the switch (:mod:`tinyprof.testing.integrity`)
  refuses a kernel whose request handling is not ipykernel's own.
- **Every element of every output checked.** After each block, the grader draws positions and
  a seed, and each kernel reads every output array back at those positions and projects all
  its elements on :data:`SKETCHES` random weight vectors drawn from the seed (``pick``,
  :mod:`tinyprof.remote`): a side that skipped work cannot know in advance which elements are
  read, and work an output put off (computed when read, by a thread, by a replaced reader) is
  done inside the round, where the rest's excess is charged, or the output is wrong. The
  candidate's samples must match the baseline's on the same inputs, and its projections lie
  within the bound that follows from the tolerance (``first_difference`` and ``Sampled`` of
  :mod:`tinyprof.timing.speed`). Outputs that are not plain
  data (exact ``np.ndarray``, numbers, containers of them) are refused, decided here from what
  the kernel hands back (:func:`_refusal`), never from the kernel's code, which the student
  can replace.
- **tinyprof switched off** in the student's kernel for the whole measurement (the switch of
  ``reference_unavailable``), so that the candidate cannot call the library's fixed version;
  its first (warm-up) block, whose time is not used, also runs under the switch's profile hook,
  which sees a switched-off code run however it was reached (the timed blocks never do: the
  hook slows every Python call).
- **The verdict** is the grader's: the bootstrap interval of median(baseline) /
  median(candidate) over the rounds, against the test's tier.

One measurement per (candidate, baseline, make_inputs) and notebook run: the tier cells of a
chapter (2×, 4×, 6×) share it. benchmarks/bench_speed_grading.py measures how far the
grader's speedup lies from the same measurement made inside a kernel, and from ``tp.ab_test``.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import tempfile
import time
from typing import Any, Callable

import numpy as np
from jupyter_core.utils import run_sync

from tinyprof import wire
from tinyprof.timing.speed import (
    Sampled,
    Speedup,
    check_outputs,
    choose_calls,
    qualified_name,
)

from .channel import ChannelError, ExpressionFailed, KernelChannel

#: Elements read back from each output array per call (they name an element that differs).
PICKS = 256
#: Random projections of all of each output array's elements read back per call (every
#: element enters the check: work an output put off is done when they are computed).
SKETCHES = 1
#: The one type of array a speed test's output may hold, as the kernel names it.
PLAIN_ARRAY = "numpy.ndarray"
#: Seconds the clean kernel may take for one request (the library's own code: a backstop only).
REFERENCE_WALL_S = 300.0
START_TIMEOUT_S = 120.0
#: Empty block requests timed in the clean kernel before the rounds (and one after each) to
#: learn what a request itself costs.
TARE_REQUESTS = 5
#: A block is never counted as taking less than this (CPU clocks tick in micro- to
#: milliseconds).
MIN_SECONDS = 1e-4
CONTROL_GROUPS = "the CPU time of each kernel's control group, read by the grader"
PROCESS_TREES = ("the CPU time of each kernel's processes, read by the grader from /proc (no "
                 "control groups on this machine)")


class ReferenceKernel:
    """A clean, sandboxed kernel for baselines, and the channel to it (channel.py): started
    on first use, shut down by :meth:`close`. ``send`` has it evaluate one expression (a
    judge's request)."""

    def __init__(self, make_manager: Callable[[], Any]):
        self._make_manager = make_manager
        self.km = None
        self.channel: KernelChannel | None = None
        self._folder: tempfile.TemporaryDirectory | None = None
        #: Wall-clock seconds spent waiting for this kernel (not charged to the student's test).
        self.wall_spent = 0.0

    def start(self) -> None:
        if self.km is not None:
            return
        began = time.monotonic()
        try:
            self._start()
        finally:
            self.wall_spent += time.monotonic() - began

    def _start(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="tinyprof-reference-")
        self.km = self._make_manager()
        run_sync(self.km.start_kernel)(cwd=self._folder.name)
        kc = self.km.client()
        kc.start_channels()
        run_sync(kc.wait_for_ready)(timeout=START_TIMEOUT_S)
        self.channel = KernelChannel(self.km, kc)
        self.send(wire.IMPORT_REMOTE)

    def cpu_seconds(self) -> float:
        return self.km.cpu_seconds()

    def send(self, expression: str, cleanup: bool = False) -> str | None:
        """The ``text/plain`` of ``expression``'s value in the clean kernel (the channel's
        execute route: a speed test's requests are timed alike in both kernels)."""
        from .judge import KernelError

        began = time.monotonic()
        try:
            return self.channel.ask(expression, wall_s=REFERENCE_WALL_S)
        except ExpressionFailed as failed:
            raise KernelError(f"the clean kernel could not evaluate the grader's request "
                              f"({failed})") from None
        except ChannelError as failed:
            raise KernelError(f"the clean kernel gave no answer to the grader's request "
                              f"({failed})") from None
        finally:
            self.wall_spent += time.monotonic() - began

    def close(self) -> None:
        if self.km is None:
            return
        try:
            if self.channel is not None:
                self.channel.kc.stop_channels()
            run_sync(self.km.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        finally:
            self.km.remove_sockets()
            self.km = self.channel = None
            if self._folder is not None:
                self._folder.cleanup()
                self._folder = None


class SpeedBench:
    """Measures speed tests for one run of a notebook: ``student_cpu`` reads the student's
    kernel's CPU seconds, ``reference`` is the clean kernel."""

    def __init__(self, student_cpu: Callable[[], float], reference: ReferenceKernel,
                 control_groups: Callable[[], bool]):
        self.student_cpu = student_cpu
        self.reference = reference
        self.control_groups = control_groups
        self._measured: dict[tuple, Speedup] = {}

    def measure(self, judge: Any, candidate: Any, baseline: Callable,
                make_inputs: Callable[[int], tuple], rounds: int, rtol: float,
                atol: float) -> Speedup:
        """The speedup of ``candidate`` (a handle on the student's function) over
        ``baseline`` (a tinyprof function, run in the clean kernel); AssertionError naming
        the call and element when an output differs."""
        from .judge import Judge, Kernel, handle_key

        if type(candidate) is not Kernel:
            raise TypeError("expect_faster times a function of the student's notebook: pass "
                            f"it by its name, got {type(candidate).__name__}")
        _check_importable(baseline)
        _check_importable(make_inputs)
        key = (handle_key(candidate), qualified_name(baseline), qualified_name(make_inputs), rounds,
               rtol, atol)
        if key not in self._measured:
            self.reference.start()
            clean = Judge(self.reference.send)
            with judge.switch(()):
                self._measured[key] = self._rounds(judge, clean, candidate, baseline,
                                                   make_inputs, rounds, rtol, atol)
        return self._measured[key]

    def _rounds(self, judge, clean, candidate, baseline, make_inputs, rounds, rtol, atol
                ) -> Speedup:
        rng = np.random.default_rng()   # fresh inputs every grading: nothing to learn
        sides = {"candidate": (judge, candidate), "baseline": (clean, baseline)}
        for made in range(2):   # a warm-up call each, then a call each to choose ``calls``
            times = self._round(sides, make_inputs, [_seed(rng)], rng, made, rtol, atol)
        tares = [self._empty_block(clean, baseline, make_inputs) for _ in range(TARE_REQUESTS)]
        tare = float(np.median(tares))
        # from the baseline alone: the candidate's own time never chooses its block
        calls = choose_calls(max(times["baseline"]["block"] - tare, MIN_SECONDS), rounds,
                             request_seconds=tare)
        made, spent = 2, []
        for _ in range(rounds):
            spent.append(self._round(sides, make_inputs, [_seed(rng) for _ in range(calls)],
                                     rng, made, rtol, atol))
            tares.append(self._empty_block(clean, baseline, make_inputs))
            made += calls
        tare = float(np.median(tares))
        per_call = {side: tuple(seconds / calls for seconds in charged(spent, side, tare))
                    for side in ("candidate", "baseline")}
        method = CONTROL_GROUPS if self.control_groups() else PROCESS_TREES
        return Speedup(qualified_name(baseline), per_call["baseline"], per_call["candidate"],
                       calls, method)

    def _empty_block(self, clean: Any, baseline: Callable, make_inputs: Callable) -> float:
        """The CPU seconds a block request of no calls costs the clean kernel: the request's
        own handling, which both sides pay alike and which is no part of either function's
        time. Measured in the clean kernel only (before the rounds, and after each), so that
        the student's kernel cannot inflate what is taken off its blocks."""
        kept = clean.make(make_inputs, [])
        before = self.reference.cpu_seconds()
        clean.time_calls(baseline, kept)
        return self.reference.cpu_seconds() - before

    def _round(self, sides: dict, make_inputs: Callable, seeds: list[int],
               rng: np.random.Generator, made: int, rtol: float, atol: float
               ) -> dict[str, dict[str, float]]:
        """One round: each side makes the inputs of ``seeds`` in its kernel, then runs its
        block of calls on them, the sides in a random order; then both hand back samples of
        their outputs, which are checked. Each kernel's CPU seconds in each part of the round
        (:data:`PARTS`): making the inputs (``make``), the block of calls (``block``), reading
        the outputs back (``pick``), and the rest (``other``: whatever the kernel did while
        the grader talked to the other kernel, a thread finishing outputs included)."""
        clocks = {"candidate": self.student_cpu, "baseline": self.reference.cpu_seconds}
        start = {side: clock() for side, clock in clocks.items()}
        parts: dict[str, dict[str, float]] = {side: {} for side in clocks}
        outputs = {}
        for side in rng.permutation(["candidate", "baseline"]):
            asker, target = sides[side]
            with _charged_to(parts[side], "make", clocks[side]):
                kept = asker.make(make_inputs, seeds)
            with _charged_to(parts[side], "block", clocks[side]):
                # the warm-up block, whose time is not used, runs under the switch's hook
                outputs[side] = asker.time_calls(target, kept, watched=made == 0
                                                 and side == "candidate")
        fractions = rng.random(PICKS).tolist()   # drawn once both blocks have run
        seed = int(rng.integers(0, 2**62))
        picked = {}
        for side in rng.permutation(["candidate", "baseline"]):
            with _charged_to(parts[side], "pick", clocks[side]):
                picked[side] = _read_back(sides[side][0].pick(outputs[side], fractions, seed,
                                                              SKETCHES), fractions)
        for side, clock in clocks.items():
            parts[side]["other"] = clock() - start[side] - sum(parts[side].values())
        for side in ("baseline", "candidate"):
            refused = _refusal(picked[side], made)
            if refused:
                raise AssertionError(refused)
        check_outputs(picked["candidate"], picked["baseline"], made, rtol, atol)
        return parts


#: The parts of a round besides the block; each is charged to the candidate on its own for
#: what it cost the student's kernel beyond the clean kernel (:func:`charged`).
PARTS = ("make", "pick", "other")


@contextlib.contextmanager
def _charged_to(parts: dict[str, float], part: str, clock: Callable[[], float]):
    """Adds the CPU seconds ``clock`` counts during the block to ``parts[part]``."""
    before = clock()
    try:
        yield
    finally:
        parts[part] = parts.get(part, 0.0) + clock() - before


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, 2**62))


def charged(spent: list[dict[str, dict[str, float]]], side: str, tare: float) -> list[float]:
    """A side's CPU seconds for each round of ``spent``: its block less what a request's own
    handling costs the *clean* kernel (``tare``), never the student's kernel's (which a cell can
    make cheaper: whatever it saves is at most :data:`~tinyprof.timing.speed.REQUEST_SHARE` of
    a block, :func:`~tinyprof.timing.speed.choose_calls`); plus, for the candidate, what the
    other parts of a round (:data:`PARTS`: making the inputs, reading the outputs back, the
    rest) typically cost its kernel beyond what they cost the clean kernel, the larger of two
    readings:

    - **part by part**: each part's median excess over the rounds, when positive, added up, so
      that what the student's kernel saves on one request (cheaper handling of the make) never
      pays for work done in another (outputs finished while they are read back);
    - **round by round**: the median over the rounds of each round's excess summed over its
      parts, so that work moved to a different part in each round (the make in some, the
      read-back in others: no part's median moves) is charged in every round it was done.

    Medians, not each round's own excess, because the two kernels' parts differ by a few
    milliseconds of noise either way, and charging only the rounds where the noise went against
    the candidate would bias every speedup down; work a kernel moves out of its blocks in most
    rounds still moves the medians by as much."""
    extra = 0.0
    if side == "candidate":
        excess = [{part: times["candidate"][part] - times["baseline"][part] for part in PARTS}
                  for times in spent]
        by_part = sum(max(0.0, float(np.median([round_[part] for round_ in excess])))
                      for part in PARTS)
        by_round = max(0.0, float(np.median([sum(round_.values()) for round_ in excess])))
        extra = max(by_part, by_round)
    return [max(times[side]["block"] - tare, MIN_SECONDS) + extra for times in spent]


class _Refused:
    """An output the kernel could not read back as plain data: its type, as the kernel named
    it, or None for an object the kernel kept (a handle)."""

    def __init__(self, type_name: str | None):
        self.type_name = type_name


def _read_back(value: Any, fractions: list[float]) -> Any:
    """An answer to ``pick`` with each ``("sampled", "numpy.ndarray", shape, values, sketch,
    l1, l2)`` as a Sampled whose positions the grader computes itself from the shape (the
    kernel's claim is not used), and anything that is not plain data (``("refused", name)``,
    a handle on a kernel's object) as a _Refused."""
    from .judge import Kernel, KernelError

    if type(value) is Kernel:
        return _Refused(None)
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "refused":
        return _Refused(str(value[1])[:120])
    if isinstance(value, tuple) and len(value) == 7 and value[0] == "sampled":
        _, kind, shape, values, sketch, l1, l2 = value
        if kind != PLAIN_ARRAY:
            return _Refused(str(kind)[:120])
        try:
            shape = tuple(int(d) for d in shape)
            values, sketch = (np.asarray(v, dtype=np.float64).reshape(-1)
                              for v in (values, sketch))
            l1, l2 = float(l1), float(l2)
        except (TypeError, ValueError):
            raise KernelError("the kernel's sampled output is not a list of numbers") from None
        size = math.prod(shape)
        positions = tuple(int(u * size) for u in fractions) if size else ()
        return Sampled(shape, positions, values, sketch, l1, l2)
    if isinstance(value, list):
        return [_read_back(item, fractions) for item in value]
    if isinstance(value, tuple):
        return tuple(_read_back(item, fractions) for item in value)
    if isinstance(value, dict):
        return {key: _read_back(item, fractions) for key, item in value.items()}
    return value


def _refusal(outputs: list, calls_before: int) -> str | None:
    """The sentence refusing the first output of ``outputs`` (one per call) that holds
    something other than plain numpy arrays, numbers, None, strings and tuples, lists and
    dicts of them; None when there is none. Decided here, from what the kernel handed back:
    an object of another type can put off its work until it is read, outside the calls the
    grader times."""
    def first(value: Any, where: str) -> tuple[str, str | None] | None:
        if isinstance(value, _Refused):
            return where, value.type_name
        items = value.items() if isinstance(value, dict) else \
            enumerate(value) if isinstance(value, (list, tuple)) else ()
        for key, item in items:
            found = first(item, f"{where}[{key!r}]")
            if found:
                return found
        return None

    for i, output in enumerate(outputs):
        found = first(output, "output")
        if found:
            where, type_name = found
            what = f"a {type_name}" if type_name else "an object that is not plain data"
            return (f"call {calls_before + i + 1}: {where} is {what}; a speed test takes plain "
                    "numpy arrays (exact type numpy.ndarray), numbers, and tuples, lists and "
                    "dicts of them, because any other object (an ndarray subclass, an object "
                    "with __array__) can put off its work until it is read, outside the calls "
                    "that are timed: return np.asarray(...) of your result")
    return None


def _check_importable(function: Callable) -> None:
    """Each kernel imports the baseline and the input maker by name: each must be a function at
    the top of an importable module (tinyprof's)."""
    module, _, name = qualified_name(function).rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        found = None
    if found is not function:
        raise TypeError(f"expect_faster's baseline and make_inputs must be functions defined "
                        f"at the top of an importable module (each kernel imports them by "
                        f"name), got {function!r}")


__all__ = ["ReferenceKernel", "SpeedBench"]
