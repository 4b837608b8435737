"""Leaks graded from outside the student's kernel: the grader's side of ``expect_leak_free``.

``tinyprof.memcheck.expect_leak_free(loop, steps)`` asks whether the student's fixed training
loop computes the clean loop's losses at every step and keeps nothing from step to step. A check
made inside the kernel (tracemalloc, ``/proc/self``) can be patched, or fooled by freeing
memory only around its reads; a slope of memory against time can be flattened (all steps
first, then idle), widened (a square wave) or dodged (a leak that starts after the step counts
the test prints). Here the grade rests on what the loop keeps, as a function of the steps:

- **Memory read from outside.** The grader reads the kernel's memory
  (``SandboxedKernelManager.memory_bytes``): its control group's usage, which counts every
  process of the kernel (a child it started to hold memory) and the files of its tmpfs folders
  (its scratch folder, /tmp); without control groups, the resident set of its process tree from
  ``/proc`` (which misses tmpfs files: the printed method says which).
- **Five runs, at step counts and seeds the kernel learns only when called.** N is drawn
  from 1 to 2 times ``steps`` at every grading, and the loop runs N and 2N steps on a seed
  people type (the chapter's own half the time) and on a seed drawn from 2**31, and two calls
  of N/2 steps in one fork on one of the two, in a random order
  (``tinyprof.memcheck.measure_seeds``); what grows between N and 2N, on either seed, is the
  leak, and what two calls keep beyond one call's is a leak from call to call. A leak that
  starts after the printed step counts, or only at them, or only for the seeds its author
  tries (or only for others), is in the runs.
- **Each run in a fork, held after it returns** (``tinyprof.testing.forked``, one judge call,
  tinyprof switched off). Before the fork the kernel collects its garbage and trims its
  allocator (``tinyprof.memcheck.settle``), then the grader reads the group (the median of three
  reads). The child runs the loop, collects, trims, and waits; the grader reads the group again
  (**kept**), and only then is the child let go and its losses sent back. While the child ran, a
  thread here read the group at random times (exponential gaps, the socket queues no group is
  charged for as read at most :data:`SOCKETS_AGE_S` before; the thread at a niceness of
  :data:`READER_NICENESS` where the grader may set one, so that the loop's processes do not
  keep it from its turns, :func:`favour_thread`); the highest level they stayed at
  (``tinyprof.memcheck.held_level``) is **held**, and a run read fewer than
  ``tinyprof.memcheck.MIN_READINGS`` times (a machine too busy to give the reader its turns)
  is run again. Memory that existed before the call stays
  the parent's: a ballast freed as the leak grows frees nothing, a buffer touched in advance is
  copied page by page as the loop writes it, and both are charged to the group. What a fork
  shares with the kernel instead of copying is the exception: file pages (its tmpfs files,
  the page cache of files on disk) and the kernel's objects (the bytes queued in its pipes,
  socket pairs, named pipes and message queues, its files' inodes). Each of those parts of the
  group (its page cache, tmpfs included; the kernel's memory, ``memory.kmem``; the socket
  queues no group is charged for) counts at no less than it was as the run began
  (:class:`FreedSharedUncredited`), so a loop that truncates or drops a file, reads out a
  pipe or unlinks files the kernel made before the call pays for nothing; the calls that
  move pages into a pipe uncopied (``splice`` and its kin) are refused in the sandbox
  (launcher.py). So does the anonymous memory of the processes the group had as the run
  began (the kernel, and any process an earlier cell started), read from each one's /proc
  status: a process or thread of the kernel that frees a ballast of its own as the fork's
  leak grows pays for nothing either.
- **The grader decides.** Kept and held per step are the differences between the 2N and N
  runs over N, on each seed; each must stay under the tolerance (1 kB a step, the chapter's)
  plus the slack two leak-free runs differ by over N (1.5 MB each), and held under
  ``tinyprof.memcheck.BUDGET``; neither may shrink by as much either (a loop that keeps more
  after N steps than after 2N leaks at step counts the longer run never has: odd ones); the two
  calls of N/2 may keep no more than the N-step run on their seed by the same slack. And the
  loop may leave nothing running: the grader counts the group's tasks (every thread of every
  process; the process tree's from ``/proc`` without a group) before each run and while the
  child is held, and a thread or process the loop started and did not end fails the test (what
  it does once the test is over, a leak that lands minutes later included, is never read). A first
  fork that runs no step comes before the five, so that
  what forking allocates in the kernel the first time is in neither. The losses the kernel
  hands back are checked at every step against a clean loop run here on the same seed, drawn
  at random at every grading (in a process of the grader's, while the kernel's runs go on:
  ``tinyprof.memcheck.CleanLosses``).

What the grader observes: the group's memory before each run, at random times during it, and
after the loop returned and the child settled; the losses. What it cannot: which pages hold what
(a leak paid for by a ballast the loop allocates itself at the start of each run, freed as the
leak grows, looks flat until the ballast outgrows the budget: about 21 MB / 2N, 9 to 18 kB a
step at the chapter's step counts, can hide that way); what a loop writes in place into the
pages of a file that existed before the call (a history in a pre-touched file mapped shared: no
page is copied, none added); work done outside the kernel's group; and a loop that asks
whether it is being tested and behaves only then. Bytes the loop leaves unread
in the kernel's own buffers are in the reading: Unix sockets and pipes are charged to the group,
TCP buffers are added from the group's own counter (cgroup v1, resources.py), and the socket
kinds a kernel does not need (UDP, IPv6, netlink's user protocol, whose queues no group charges:
benchmarks/bench_socket_memory.py) are refused in the sandbox (launcher.py), and the bytes
queued where no group is charged (connections never accepted, routing netlink's replies) are
read from the sandbox's network namespace (resources.py ``uncharged_socket_bytes``); were a
Linux to stop charging one of the others, tests/test_grading_limits.py would fail, not this
check. The sandbox hides what it can of a graded run (the machine's host name, an account for
the kernel's user, the environment variables a kernel needs only, no rlimits of memory and
processes of its own where a control group holds them: kernel/isolation.py), and the seeds are
those a student tries as well as drawn ones; what cannot be hidden is flagged for review, as
unsure, by the static review (``intake.tells``): a fork's process id and its CPU time starting
at 0, the grader's request on the call stack, the sandbox's /proc (its limits, its network of
one loopback, its control group), the environment, the user, the paths. A loop that keys on its
author's own machine (a file only their folder holds, their home's path) cannot be told apart
from honest code that lists a folder: that stays a gap. The fork is the kernel's own act, done
by tinyprof's code there: a kernel that patched it is what the static review and the runtime
check look for (``intake.review``: patched modules, tinyprof's private names).
"""

from __future__ import annotations

import os
import random
import threading
from typing import Any, Callable

from tinyprof.memcheck import LeakCheck, TaskCount, measure_seeds, settle
from tinyprof.testing.forked import ForkedRun, no_steps

#: Seconds a reading of the socket queues no control group is charged for
#: (``resources.uncharged_socket_bytes``, 9 ms of CPU) serves the readings taken while a loop
#: runs (:meth:`FreedSharedUncredited.sampled`; the rest of a reading costs 0.05 ms). Read at
#: every sample, it held the sampler to one reading in 13 ms, and a short run under load to one
#: or two, all before the fork: "held 0 B" against the longer run's 15 MB, a false failure.
SOCKETS_AGE_S = 0.05


#: The niceness the thread reading memory while a loop runs asks for (the lowest is -20): a
#: reading costs 0.05 ms in 4 ms, so the thread takes next to nothing from anyone, and waking
#: it preempts the loop's processes. At the default 0, beside a CPU hog and a pool of 4 the
#: loop started, the reader waited up to 150 ms for its turn; each reading counts until the
#: next, so the pool's 30 MB or the fork's first pages stood for that long in one run's held
#: level and not in its twin's (three honest loops lost in one pass, s18).
READER_NICENESS = -10
_favoured = threading.local()


def favour_thread() -> None:
    """Give the calling thread :data:`READER_NICENESS`, once per thread; where the grader may
    not (no ``CAP_SYS_NICE``), it keeps its own (the readings then wait their turn)."""
    if getattr(_favoured, "tried", False):
        return
    _favoured.tried = True
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), READER_NICENESS)
    except (OSError, AttributeError):
        pass


class FreedSharedUncredited:
    """The kernel's memory (``read``) with each part a run's fork does not own (``shared``, by
    kind: file pages, the kernel's objects such as pipe and socket buffers, inodes and message
    queues, the socket queues no group is charged for, all of which a fork shares with the
    kernel instead of copying; and the memory of the kernel's earlier processes) counted at no
    less than its first reading since :meth:`new_run`: what a run frees of what was there as it
    began was the kernel's, and paid for nothing. What a run adds to a part counts while it
    lasts and not after: the kernel memory of the worker processes a loop starts (their page
    tables and stacks, 1.5 to 2.9 MB for a pool of 4, s18), counted at its most until s18, was
    in what the loop kept when a reading caught its peak and not when none did, 2.6 MB apart.
    ``read(sockets_age=...)`` says how old its reading of the uncharged socket queues may be
    (:meth:`sampled`)."""

    def __init__(self, read: Callable[..., int], shared: Callable[[], dict[str, int]],
                 begin: Callable[[], None] = lambda: None):
        self.read, self.shared, self.begin = read, shared, begin
        self._first: dict[str, int] = {}
        self._lock = threading.Lock()

    def new_run(self) -> None:
        """A run begins: ``begin()`` (the group marks the processes it has now), and each part's
        next reading is its first."""
        self.begin()
        with self._lock:
            self._first = {}

    def __call__(self) -> int:
        return self._counted(self.read())

    def sampled(self) -> int:
        """A reading while a loop runs: as a call, with the socket queues as read at most
        :data:`SOCKETS_AGE_S` ago. The thread that reads is put first (:func:`favour_thread`)."""
        favour_thread()
        return self._counted(self.read(sockets_age=SOCKETS_AGE_S))

    def _counted(self, total: int) -> int:
        parts = self.shared()   # after the total: what is freed in between is counted twice
        with self._lock:
            for kind, now in parts.items():
                self._first.setdefault(kind, now)
            return total + sum(max(0, self._first[kind] - now) for kind, now in parts.items())


class LeakBench:
    """Measures ``expect_leak_free`` for one test: ``read`` gives the kernel's memory now,
    ``method`` says how it is read, ``tasks`` counts the threads of all the kernel's processes
    (None: not counted), ``shared`` the parts of ``read`` a run's fork does not own, by kind
    (None: none counted), ``begin`` marks the kernel's processes as a run begins."""

    def __init__(self, read: Callable[[], int], method: Callable[[], str],
                 tasks: Callable[[], int] | None = None,
                 shared: Callable[[], dict[str, int]] | None = None,
                 begin: Callable[[], None] = lambda: None):
        self.read = FreedSharedUncredited(read, shared or dict, begin)
        self.method = method
        self.tasks = tasks

    def measure(self, judge: Any, loop: Any, counts: tuple[int, int], seeds: tuple[int, int],
                rng: random.Random | None = None) -> tuple[dict[tuple[int, int], Any],
                                                           LeakCheck]:
        """The losses ``loop(n, seed)`` returned in the kernel for each run, by (step count,
        seed), and the :class:`~tinyprof.memcheck.LeakCheck` of the five runs (module
        docstring)."""
        from .judge import Kernel

        if type(loop) is not Kernel:
            raise TypeError("expect_leak_free runs a function of the student's notebook: pass it "
                            f"by its name, got {type(loop).__name__}")
        fork = ForkedRun(loop._label)
        rng = rng or random.Random(random.SystemRandom().getrandbits(64))
        with judge.switch(()):
            judge.call(fork, None, (no_steps, 0, 0), {}).finish()   # a first fork: warm-up
            return measure_seeds(
                self.read, lambda: (judge.make(settle, [0]), self.read.new_run()),
                lambda n, seed, calls: judge.call(fork, None,
                                                  (loop, int(n), int(seed), int(calls)), {}),
                lambda held: held.finish(), (int(counts[0]), int(counts[1])),
                (int(seeds[0]), int(seeds[1])),
                self.method(), rng, TaskCount(self.tasks, held=1) if self.tasks else None,
                sample=self.read.sampled)


__all__ = ["READER_NICENESS", "SOCKETS_AGE_S", "FreedSharedUncredited", "LeakBench",
           "favour_thread"]
