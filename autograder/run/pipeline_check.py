"""Input pipelines graded from outside the student's kernel: the grader's side of
``expect_busy_device``.

``tinyprof.pipecheck.expect_busy_device(loop)`` asks whether the student's fixed input loop
gives every step's right value, in order, and keeps the device busy. Whatever the kernel
reports about that (a clock, a sleep, a storage's read, a device's step) it can change: a loop
that computed the values itself and slept to the floor, that ran steps side by side in threads,
or whose storage skipped its latency kept full marks when the kernel held the data, the device
and the clock. Here the grader holds all three. For each graded call, :class:`ServedPipeline`
(threads of this grading worker) listens on a Unix socket in the one folder the sandbox shares
with its grader (the kernel's ZeroMQ socket folder, autograder/kernel/isolation.py), reachable
from the kernel and from the processes it starts, and nowhere else:

- **The data exist only behind the grader's storage.** The data set is drawn here from a seed
  the kernel never gets (its own digits and pixel noise) and served as PNG bytes: a listing,
  then each request's bytes after its latency, slept here (``tinyprof.pipecheck.ServedStorage``
  is the kernel's end). A loop can overlap requests (threads, worker processes, batched reads)
  but not skip them: there is no other copy of the pixels.
- **Each step's value needs the grader's device.** The value projects the batch on weights
  drawn from another seed the kernel never gets; the loop's returned values are checked against
  the ones the device handed out, in step order.
- **The device runs one step at a time, in order, on the batch its storage served.** A step
  that arrives while another holds, out of turn, beyond the last step, with a batch that is not
  exactly that step's (its files as served, decoded and augmented) or before those files were
  served, is refused, and the test scores 0 with the grader's own sentence.
- **Utilization is the device's own record**: the seconds it held steps, against the time it
  waited for the storage: idle while a read was in its latency (from the request's arrival
  here, on this clock), from the moment the grader called the loop until it returned. That
  wait is what the chapter's fixes remove (the loop as given waits 16 × 1 ms a step: 40 / 56 ≈
  71 %). Other idle time (no read in its latency: the host decoding, threads waking in two
  processes, a busy machine's scheduling) is charged only beyond
  ``tinyprof.pipecheck.OTHER_IDLE_STEPS`` steps' time before a step;
  ``tinyprof.pipecheck.START_UP_SECONDS`` more before the first (the call reaching the kernel,
  a thread starting: at most 89 ms beside 10 CPU hogs), and
  the time from the call to the first read by a process the call started, up to
  ``tinyprof.pipecheck.WORKER_START_SECONDS``, when that read came before the first step (a
  spawned worker imports numpy, Pillow and tinyprof: the course's reached the first step at
  most 0.44 s after the call there). Which process made a read is the grader's observation:
  each connection's peer credentials, set by the OS at connect, against the processes running
  when the call began. After the last step until the loop returned, idle
  time is charged beyond ``tinyprof.pipecheck.SHUT_DOWN_SECONDS`` (workers ending: at most
  131 ms). A device left idle still fails, a loaded machine does not fail an honest loop.
  Measured at a load of 7 to 12 on 2 cores (other graders running): honest loops lost 20 to 40
  points of wall-clock utilization, while their storage waits stayed under 6 % of the run;
  with one step's time allowed, the solution once graded 79.9 % (its kernel off the CPU for
  more than 40 ms between some steps), hence two.
- **tinyprof switched off except the chapter's tools.** The call runs inside the judge's switch
  (``reference_unavailable``, as a leak test's does), with ``tinyprof.loading`` left on: the
  Device, Prefetcher, Workers and ImageFolder are what the chapter teaches the loop to use.

*Not covered*: how the loop overlaps its requests is its own (a thread per file, or the whole
epoch in one request, both pay the storage); idle time that is not a storage wait, up to two
steps' time before each step (250 ms more before the first, 500 ms after the last until the
loop returns), is not charged, so a loop whose reads are overlapped may also idle that long for
other reasons (it gains nothing: the reads are what the test asks to hide). A worker's start-up
is the grader's guess from what it sees (a new process's first read): a loop that pauses before
a new process's first read (in that process, or in the kernel before it reads on a connection
such a process made) gets the pause free, up to 1.5 s.
A kernel that hogs the machine's CPU slows the grader's threads too, which only lowers its own
utilization.
"""

from __future__ import annotations

import bisect
import os
import random
import secrets
import socket
import struct
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tinyprof.pipecheck import (
    OTHER_IDLE_STEPS,
    SHUT_DOWN_SECONDS,
    START_UP_SECONDS,
    WORKER_START_SECONDS,
    BusyCheck,
    PipelineTask,
    device_weights,
    expected_batch,
    receive_message,
    send_message,
    step_value,
    task_arrays,
)

#: Connections served at once (threads and worker processes each open their own).
MAX_CONNECTIONS = 32
#: What the switch leaves on around the graded call: the chapter's own tools.
CHAPTER_TOOLS = ("tinyprof.loading",)


class Refused(AssertionError):
    """The grader's device refused a step: the test's failure, in the grader's words."""


class ServedPipeline:
    """The storage and the device of one graded call, served on a Unix socket in ``folder``
    (module docstring). ``check()`` after the call: what the device recorded."""

    def __init__(self, task: PipelineTask, folder: Path):
        from tinyprof.loading.files import encode_png, sample_path
        from tinyprof.loading.storage import Storage

        draw = random.SystemRandom()
        images, labels = task_arrays(draw.randrange(2**31), task.samples)
        self.task, self.weights = task, device_weights(draw.randrange(2**31))
        self.storage = Storage("network file system", latency=task.latency)
        paths = [str(sample_path(task.folder, label, index)) for index, label in enumerate(labels)]
        self.files = {path: encode_png(image) for path, image in zip(paths, images)}
        self.listed = [[path, int(label)] for path, label in zip(paths, labels)]
        self.plan = task.plan()
        self.batches = [expected_batch(images, labels, indices, task.seed, step)
                        for step, indices in enumerate(self.plan)]
        self.needed = [{paths[i] for i in indices} for indices in self.plan]
        self.lock, self.device = threading.Lock(), threading.Lock()
        self.called: float | None = None     # when the loop was called: see start_call()
        self.known: frozenset[int] = frozenset()   # the processes running at the call
        self.worker_read: float | None = None   # the first read by a process the call started
        self.first_read: float | None = None
        self.returned: float | None = None   # when the loop's call returned, set by the bench
        self.served: dict[str, float] = {}
        self.requests: list[tuple[float, float]] = []   # each read: arrival, + its latency
        self.steps: list[tuple[float, float, float]] = []   # (start, end, value) per step
        self.running: int | None = None
        self.refusal: str | None = None
        self.connections: set[socket.socket] = set()
        self.threads: list[threading.Thread] = []
        self.closed = False
        self.address = str(Path(folder) / f"pipeline-{secrets.token_hex(4)}.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.address)
        self._hand_over(Path(folder))
        self.listener.listen(MAX_CONNECTIONS)
        self.listener.settimeout(0.1)
        self._start(self._accept, "pipeline storage")

    def start_call(self) -> None:
        """Mark the loop's call beginning: its window opens now, and a process not running now
        that reads before the first step is a worker the call started."""
        self.known = running_processes()
        self.called = time.perf_counter()

    def _hand_over(self, folder: Path) -> None:
        """Give the socket to the folder's owner (the kernel's uid, which must connect to it).
        Never through a link: the kernel owns the folder and could put one at the socket's
        path, so the owner is changed with ``lchown``, never the mode with ``chmod``."""
        owner = folder.stat().st_uid
        if os.geteuid() == 0 and owner != 0:
            os.chown(self.address, owner, -1, follow_symlinks=False)

    # -- serving ---------------------------------------------------------------------------

    def _start(self, target: Any, name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                if self.closed or len(self.connections) >= MAX_CONNECTIONS:
                    conn.close()
                    continue
                self.connections.add(conn)
            self._start(self._serve, "pipeline connection", conn)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(None)
        # a connection made before the call names no worker (its process may be gone by then)
        reader = peer_process(conn) if self.called is not None else None
        try:
            while not self.closed:
                try:
                    header, blobs = receive_message(conn, max_blobs=2)
                except (OSError, ValueError, ConnectionError):
                    return
                answer, data = self._answer(header, blobs, reader)
                send_message(conn, answer, data)
        except OSError:
            return
        finally:
            with self.lock:
                self.connections.discard(conn)
            conn.close()

    def _answer(self, header: dict, blobs: list[bytes],
                reader: int | None) -> tuple[dict, list[bytes]]:
        op = header.get("op")
        if op == "list":
            return {"files": self.listed}, []
        if op == "read":
            return self._read(header.get("paths"), reader)
        if op == "step":
            return self._step(header, blobs), []
        return {"error": f"no request {str(op)[:40]!r}"}, []

    def _read(self, paths: Any, reader: int | None) -> tuple[dict, list[bytes]]:
        """One storage request (by process ``reader``): the files' bytes after its latency,
        slept here."""
        arrived = time.perf_counter()
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            return {"error": "a read names a list of paths"}, []
        missing = [p for p in paths if p not in self.files]
        if missing:
            return {"error": f"no such file: {missing[0][:200]}"}, []
        with self.lock:
            if self.first_read is None:
                self.first_read = arrived
            if self.worker_read is None and paths and not self.steps and \
                    self.called is not None and reader is not None and reader not in self.known:
                self.worker_read = arrived
        data = [self.files[p] for p in paths]
        wait = self.storage.request_seconds(sum(map(len, data)))
        if wait > 0:
            time.sleep(wait)
        served = time.perf_counter()
        with self.lock:
            self.requests.append((arrived, arrived + wait))   # the storage's own time
            for path in paths:
                self.served.setdefault(path, served)
        return {}, data

    def _step(self, header: dict, blobs: list[bytes]) -> dict:
        """One device step: checked, then held for the task's kernel time, one at a time."""
        step = header.get("step")
        if not self.device.acquire(blocking=False):
            return self._refuse(f"step {step} reached the device while step {self.running} was "
                                "running: the device runs one step at a time (submit every "
                                "step to one Device, and wait for each in turn)")
        try:
            self.running = step
            wrong = self.refusal or self._wrong_batch(step, header, blobs)
            if wrong:
                return self._refuse(wrong)
            x, y = self.batches[step]
            start = time.perf_counter()
            time.sleep(self.task.kernel_seconds)
            value = step_value(x, y, self.weights)
            self.steps.append((start, time.perf_counter(), value))
            return {"value": value}
        finally:
            self.running = None
            self.device.release()

    def _wrong_batch(self, step: Any, header: dict, blobs: list[bytes]) -> str | None:
        """Why the device cannot run ``step`` on this batch, or None."""
        turn = len(self.steps)
        if type(step) is not int or step != turn:
            return (f"the device was handed step {step!r} when step {turn} was next: it runs "
                    "the steps in order, each once" if turn < self.task.steps else
                    f"the device was handed a step after its {turn} steps had run")
        want_x, want_y = self.batches[step]
        if header.get("x") != list(want_x.shape) or header.get("y") != list(want_y.shape) or \
                len(blobs) != 2 or len(blobs[0]) != want_x.nbytes or \
                len(blobs[1]) != want_y.nbytes or \
                not np.array_equal(np.frombuffer(blobs[0], np.float32).reshape(want_x.shape),
                                   want_x) or \
                not np.array_equal(np.frombuffer(blobs[1], np.int64), want_y):
            return (f"step {step}: the batch the device received is not that step's files as "
                    "the storage served them, decoded and augmented (every batch is checked)")
        with self.lock:
            unread = sorted(self.needed[step] - self.served.keys())
        if unread:
            return (f"step {step}: its batch reached the device before its files were read from "
                    f"the task's storage ({len(unread)} never were)")
        return None

    def _refuse(self, why: str) -> dict:
        with self.lock:
            if self.refusal is None:
                self.refusal = why
        return {"error": why}

    def close(self) -> None:
        """Stop serving: the listener, every connection, their threads; the socket removed."""
        with self.lock:
            self.closed = True
            connections = list(self.connections)
        self.listener.close()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in self.threads:
            thread.join(timeout=1.0)
        Path(self.address).unlink(missing_ok=True)

    # -- the record ------------------------------------------------------------------------

    def check(self) -> BusyCheck:
        """What the device recorded, as a :class:`~tinyprof.pipecheck.BusyCheck`; Refused when
        it refused a step or ran fewer than the task's steps."""
        if self.refusal:
            raise Refused(f"the grader's device refused a step: {self.refusal}; this test "
                          "scores 0")
        done = len(self.steps)
        if done < self.task.steps:
            raise Refused(f"the grader's device ran {done} of the {self.task.steps} steps: every "
                          "batch must reach the device (task.step), in order")
        busy = sum(end - start for start, end, _ in self.steps)
        wall = (self.returned or self.steps[-1][1]) - self.opened()
        waited, charged = self.idle_seconds()
        return BusyCheck(self.task, wall, "the grader's storage and device, from the call "
                         "until it returned", busy, tuple(value for *_, value in self.steps),
                         waited, charged)

    def opened(self) -> float:
        """When the device's window opened: the loop's call (the first read when the call was
        not marked, as when a test drives the storage directly)."""
        return self.called if self.called is not None else self.first_read

    def start_up_seconds(self) -> float:
        """The idle time free before the first step beyond the two steps' allowance: the
        start-up, and when a process the call started read a file before the first step, the
        time from the call to that read (the worker starting), up to WORKER_START_SECONDS."""
        if self.worker_read is None or self.called is None:
            return START_UP_SECONDS
        return START_UP_SECONDS + min(WORKER_START_SECONDS, self.worker_read - self.called)

    def idle_seconds(self) -> tuple[float, float]:
        """The device's idle time before its steps: (waiting for the storage, charged). Before
        each step, the idle time while a read was in flight is charged in full, the rest beyond
        OTHER_IDLE_STEPS × kernel_seconds, and before the first step (counted from the call)
        beyond start_up_seconds() more; after the last step until the loop returned, the idle
        time beyond SHUT_DOWN_SECONDS (workers ending)."""
        allowance = OTHER_IDLE_STEPS * self.task.kernel_seconds
        reads = _union(self.requests)
        ends = [self.opened()] + [end for _, end, _ in self.steps[:-1]]
        waited = charged = 0.0
        for step, (idle_from, (start, _, _)) in enumerate(zip(ends, self.steps)):
            waiting = _covered(reads, idle_from, start)
            free = allowance + (self.start_up_seconds() if step == 0 else 0.0)
            waited += waiting
            charged += waiting + max(0.0, start - idle_from - waiting - free)
        if self.returned is not None:
            charged += max(0.0, self.returned - self.steps[-1][1] - SHUT_DOWN_SECONDS)
        return waited, charged


def running_processes() -> frozenset[int]:
    """The ids of the processes running now, as this process sees them (``/proc``)."""
    return frozenset(int(name) for name in os.listdir("/proc") if name.isdigit())


def peer_process(conn: socket.socket) -> int | None:
    """The id of the process that connected ``conn`` (its credentials, kept by the kernel
    since the connect: the process cannot name another), or None where they cannot be read."""
    try:
        pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                        struct.calcsize("3i")))
    except (OSError, AttributeError):
        return None
    return pid or None


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of ``intervals`` as disjoint intervals, in order."""
    merged: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _covered(merged: list[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of [start, end] covered by the disjoint, ordered intervals ``merged``."""
    total = 0.0
    for a, b in merged[max(0, bisect.bisect_right(merged, (start,)) - 1):]:
        if a >= end:
            break
        total += max(0.0, min(b, end) - max(a, start))
    return total


class PipelineBench:
    """Serves ``expect_busy_device``'s storage and device for one kernel, on a socket in
    ``folder`` (the folder the kernel shares with its grader)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def measure(self, judge: Any, loop: Any, task: PipelineTask) -> tuple[Any, BusyCheck]:
        """The values ``loop(task)`` returned in the kernel, the task served from here, and
        what the grader's device recorded."""
        served = ServedPipeline(task, self.folder)
        try:
            with judge.switch((), keep=CHAPTER_TOOLS):
                try:
                    served.start_call()
                    got = loop(replace(task, address=served.address))
                    served.returned = time.perf_counter()
                except Exception:
                    if served.refusal:   # the loop failed because the device refused
                        served.check()
                    raise
        finally:
            served.close()
        return got, served.check()


__all__ = ["CHAPTER_TOOLS", "MAX_CONNECTIONS", "PipelineBench", "Refused", "ServedPipeline"]
