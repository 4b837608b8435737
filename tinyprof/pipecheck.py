"""``expect_busy_device``: a fixed input loop graded on how busy it keeps the device, the device
and the storage served by tinyprof's grader when it runs the test.

The work is a :class:`PipelineTask`: ``steps`` batches of ``batch_size`` PNG files, each file read
through a storage with ``latency`` seconds to its first byte, decoded and augmented
(:class:`tinyprof.loading.ImageFolder`), and a device step that holds for ``kernel_seconds``
(:meth:`PipelineTask.step`: a kernel that takes no host CPU, as a GPU's does not) and returns a
number computed from the batch. Both waits are sleeps, so the CPU load of the grading machine
barely moves the wall time, and the grade is stable beside other jobs.

``expect_busy_device(loop)`` has ``loop(task)`` run on a fresh data set and checks that it
returned the device's value of every step, in step order, and kept the device busy at least
``at_least`` of the run. Where the task lives decides who can be believed:

- **under tinyprof's grader** (autograder/run/pipeline_check.py, through the judge,
  :func:`tinyprof.testing.current_judge`) the storage and the device are the grader's: the task
  the loop gets holds only the address of a Unix socket in the folder the kernel shares with
  its grader (:attr:`PipelineTask.address`). The data set exists only behind that storage
  (:class:`ServedStorage`: a listing, and each request's bytes after its latency, slept by the
  grader); each step's value needs weights the grader never sends; the device runs the steps
  one at a time, in order, and only on the batch its storage served for that step, and records
  its own busy time against the time it waited for the storage (:class:`BusyCheck`). Nothing
  the kernel reports enters the verdict but the values it returns, checked against the ones
  the device handed out;
- **elsewhere** (a plain kernel, stock nbgrader) everything runs here, as in the chapter: the
  files are written in this kernel for the seed, the device is a sleep, the expected values are
  computed from the seed and the wall is timed here, from the first read
  (:class:`MarkedStorage`) to the call's return, in the student's own process, where it can be
  lied to. The physical floor (the device's steps one at a time, after the
  first byte of the first read) catches a changed clock or skipped sleeps there
  (:class:`ImpossiblyFast`'s ``review``).

The wire between a :class:`ServedStorage` (or a served task's :meth:`PipelineTask.step`) and the
grader is :func:`send_message` / :func:`receive_message`: a JSON header and raw byte strings,
each prefixed by its length, size-capped, never a pickle.
"""

from __future__ import annotations

import json
import math
import os
import random
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .loading.storage import Storage

# The Prefetcher's probe (§9.5) lives in its own module; the chapter reaches it from here.
from .prefetchcheck import PATIENCE, check_prefetcher, drive_prefetcher

#: The graded task's defaults: 24 batches of 16 files, 1 ms to each file's first byte, 40 ms of
#: device time per step. Loading a batch one file at a time takes ≈ 17 ms (16 reads of at least
#: 1 ms), so the loop as given keeps the device busy ≈ 40 / 57 ≈ 70 % of the time (at most
#: 40 / 56 ≈ 71 %, the chapter's bound); overlapping loading with compute, or
#: reading each batch in one request, brings it to ≈ 94 % quiet and ≈ 90 % beside four CPU hogs
#: (with 30 ms of device time a prefetching loop fell to 78 % there: each of a batch's 16
#: wake-ups waits for a core, and 30 ms left too little room).
STEPS, BATCH, LATENCY, KERNEL_SECONDS = 24, 16, 1e-3, 0.04
#: The tier a fixed loop must reach.
AT_LEAST = 0.8
#: Where the task's files go, under the notebook's folder (one sub-folder per seed).
FOLDER = "pipeline_check"
#: Seconds of timer slack allowed under the physical floor.
SLACK = 5e-4
#: Under the grader, the device's idle time before a step that is not spent waiting for the
#: storage (no read in its latency: the host decoding, threads waking, a busy machine's
#: scheduling) is charged only beyond this many device steps' time (see :class:`BusyCheck`).
#: One step's time was not enough at a load of 8 on 2 cores: the solution's kernel, one control
#: group among many, was off the CPU for more than 40 ms between some steps (graded 79.9 %).
OTHER_IDLE_STEPS = 2.0
#: Under the grader, the device's idle time before its first step, from the loop's call, that
#: is not spent waiting for the storage is charged beyond this many seconds (and the two steps'
#: time above): the call reaching the kernel, the listing, a thread starting. Measured beside 10
#: CPU hogs on 2 cores: loops without a worker process reached their first step at most 89 ms
#: after the call (a warm pool 59 ms, the solution's Prefetcher 89 ms); a loop that pauses
#: before its first step, before or after its first request, is charged for the pause.
START_UP_SECONDS = 0.25
#: Under the grader, the device's idle time before its first step is counted from the loop's
#: call, and when a process the call started reads a file before the first step (a worker: the
#: grader knows each connection's process), the time from the call to that first read is free
#: too, up to this many seconds: a spawned worker imports numpy, Pillow and tinyprof before it.
#: The course's two process workers reached their first step 0.19-0.21 s after the call quiet
#: and at most 0.44 s beside 10 CPU hogs on 2 cores (loops without a worker: at most 0.09 s);
#: this leaves room for a load of 12.
WORKER_START_SECONDS = 1.5
#: Under the grader, the device's idle time after its last step until the loop returns is
#: charged beyond this many seconds: worker processes shutting down took at most 131 ms beside
#: 10 CPU hogs; a loop that idles seconds after its last step is charged for them.
SHUT_DOWN_SECONDS = 0.5


class ImpossiblyFast(AssertionError):
    """The run took less than its physical floor: a failure, with a sentence for the
    instructor's review (the sleeps or the clock were changed)."""

    def __init__(self, message: str, review: str):
        super().__init__(message)
        self.review = [review]


def task_arrays(seed: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` images (uint8 pixel counts 0–16, (count, 8, 8)) and labels of the data set
    of ``seed``: distinct digits drawn from the seed, with pixel noise of −2 … +2 drawn from it."""
    from .models.datasets import digits_arrays

    images, labels = digits_arrays()
    rng = np.random.default_rng([int(seed), 9])
    chosen = rng.choice(len(labels), size=count, replace=False)
    noise = rng.integers(-2, 3, size=(count, 8, 8))
    noisy = np.clip(images[chosen].reshape(count, 8, 8).astype(np.int64) + noise, 0, 16)
    return noisy.astype(np.uint8), labels[chosen].astype(np.int64)


def device_weights(seed: int) -> np.ndarray:
    """The device's weights for ``seed``: 64 normal draws (the grader's are drawn from a seed it
    never sends)."""
    from .loading.files import SIDE

    return np.random.default_rng([int(seed), 7]).normal(size=SIDE * SIDE)


def step_value(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> float:
    """What the device's step returns for a batch: a projection of its pixels on the device's
    ``weights``, plus its labels' sum (so a batch's content and its labels both count)."""
    return float(np.asarray(x, dtype=np.float64).sum(axis=0) @ weights + int(np.sum(y)))


def expected_batch(images: np.ndarray, labels: np.ndarray, indices: np.ndarray, seed: int,
                   step: int) -> tuple[np.ndarray, np.ndarray]:
    """Step ``step``'s batch (x (B, 64) float32, y (B,) int64) as ImageFolder makes it from the
    files of ``indices``: decoded exactly, augmented with ``default_rng([seed, step])``."""
    from .loading.dataset import SIDE, augment

    rng = np.random.default_rng([int(seed), int(step)])
    shifted = [augment(images[i], rng) for i in indices]
    x = np.stack(shifted).reshape(len(indices), SIDE * SIDE).astype(np.float32) / 16
    return x, labels[np.asarray(indices, dtype=np.int64)]


@dataclass(frozen=True)
class PipelineTask:
    """One graded run's work. Here (``address`` None) its files are under ``folder`` (written by
    :func:`prepare`) and its device is a sleep; under the grader ``address`` is the grader's
    socket, which serves the files (``folder`` is then only their paths' prefix) and runs the
    device. ``seed`` shuffles the batches and seeds their augmentation either way."""

    folder: str
    seed: int
    steps: int = STEPS
    batch_size: int = BATCH
    latency: float = LATENCY
    kernel_seconds: float = KERNEL_SECONDS
    address: str | None = None

    @property
    def samples(self) -> int:
        return self.steps * self.batch_size

    def storage(self) -> Storage:
        """The storage the files are read through: ``latency`` to each request's first byte."""
        if self.address is not None:
            return ServedStorage("network file system", latency=self.latency,
                                 address=self.address)
        return MarkedStorage("network file system", latency=self.latency,
                             marker=str(Path(self.folder) / FIRST_READ))

    def dataset(self, batched_reads: bool = False):
        """The files as a :class:`tinyprof.loading.ImageFolder` (augmented, seeded by the
        task's seed)."""
        from .loading.dataset import ImageFolder

        return ImageFolder(self.folder, self.storage(), seed=self.seed,
                           batched_reads=batched_reads)

    def plan(self) -> list[np.ndarray]:
        """The indices of each step's batch: one epoch, shuffled by the seed."""
        from .loading.dataset import batch_plan

        return batch_plan(self.samples, self.batch_size, self.steps, self.seed)

    def batches(self, batched_reads: bool = False):
        """The loader: a generator of the steps' batches, each read, decoded and augmented when
        it is asked for, in the calling thread."""
        dataset = self.dataset(batched_reads)
        for step, indices in enumerate(self.plan()):
            yield dataset.batch(indices, step)

    def step(self, batch: Any) -> float:
        """The device's step on ``batch``: holds for ``kernel_seconds``, then returns
        :func:`step_value` of it. Run it on a :class:`tinyprof.loading.Device`, one at a time,
        in step order (the grader's device refuses a step that overlaps another or comes out
        of turn)."""
        if self.address is not None:
            return _served_step(self.address, batch)
        time.sleep(self.kernel_seconds)
        return step_value(batch.x, batch.y, device_weights(self.seed))

    def floor_seconds(self) -> float:
        """The least wall time any loop can take: every device step in turn, after the first
        byte of the first read."""
        return self.steps * self.kernel_seconds + self.latency


#: The file in which a task run here notes the time of its first read.
FIRST_READ = ".first_read"


@dataclass(frozen=True)
class MarkedStorage(Storage):
    """A storage that notes the moment of its first read in the file ``marker`` (so a worker
    process's read counts too): a run here is timed from its first read, so starting workers is
    not counted (the grader times a run from the call, and allows a worker its start-up)."""

    marker: str = ""

    def read(self, path: str | os.PathLike) -> bytes:
        self._mark()
        return super().read(path)

    def read_many(self, paths: Sequence[str | os.PathLike]) -> list[bytes]:
        self._mark()
        return super().read_many(paths)

    def _mark(self) -> None:
        if not self.marker or os.path.exists(self.marker):
            return
        try:
            descriptor = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except OSError:   # another thread or process noted it first
            return
        with os.fdopen(descriptor, "w") as note:
            note.write(repr(time.time()))


def first_read_time(task: PipelineTask) -> float | None:
    """When a task run here first read a file (:class:`MarkedStorage`), or None."""
    try:
        return float((Path(task.folder) / FIRST_READ).read_text())
    except (OSError, ValueError):
        return None


# -- the wire to the grader's storage and device ---------------------------------------------

#: Caps on one message: its JSON header, each byte string, and how many it carries.
MAX_HEADER, MAX_BLOB, MAX_BLOBS = 1 << 16, 1 << 20, 4096


def send_message(sock: socket.socket, header: dict, blobs: Sequence[bytes] = ()) -> None:
    """One message: ``header`` as JSON (with the count of ``blobs``), then each blob; every part
    is its length (4 bytes, big-endian) and its bytes."""
    parts = [json.dumps({**header, "blobs": len(blobs)}).encode(), *blobs]
    sock.sendall(b"".join(len(part).to_bytes(4, "big") + bytes(part) for part in parts))


def receive_message(sock: socket.socket,
                    max_blobs: int = MAX_BLOBS) -> tuple[dict, list[bytes]]:
    """The next message's header and (at most ``max_blobs``) blobs; ValueError when it breaks
    a cap or is not a JSON object, ConnectionError when the other end closed."""
    header = json.loads(_part(sock, MAX_HEADER))
    count = header.get("blobs") if isinstance(header, dict) else None
    if type(count) is not int or not 0 <= count <= max_blobs:
        raise ValueError("a message's header must be a JSON object with its count of blobs")
    return header, [_part(sock, MAX_BLOB) for _ in range(count)]


def _part(sock: socket.socket, limit: int) -> bytes:
    size = int.from_bytes(_exactly(sock, 4), "big")
    if size > limit:
        raise ValueError(f"a part of {size} bytes (at most {limit})")
    return _exactly(sock, size)


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 16))
        if not chunk:
            raise ConnectionError("the other end closed the connection")
        data += chunk
    return bytes(data)


class _Connections:
    """This process's connections to the grader's socket: one per request in flight (threads
    and worker processes each get their own), idle ones reused."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[str, list[socket.socket]] = {}
        self.pid = os.getpid()

    def ask(self, address: str, header: dict, blobs: Sequence[bytes] = ()) -> tuple[dict, list]:
        """Send one request to the grader at ``address``; its answer. RuntimeError when the
        grader refused it."""
        sock = self._take(address)
        try:
            send_message(sock, header, blobs)
            answer, data = receive_message(sock)
        except BaseException:
            sock.close()
            raise
        with self.lock:
            self.idle.setdefault(address, []).append(sock)
        if "error" in answer:
            raise RuntimeError(f"the grader's {header.get('op')} refused: {answer['error']}")
        return answer, data

    def _take(self, address: str) -> socket.socket:
        with self.lock:
            if self.pid != os.getpid():   # a forked child: its parent's sockets are not its own
                self.idle, self.pid = {}, os.getpid()
            for other in [a for a in self.idle if a != address]:   # an earlier test's grader
                for sock in self.idle.pop(other):
                    sock.close()
            if self.idle.get(address):
                return self.idle[address].pop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            raise
        return sock


_CONNECTIONS = _Connections()


@dataclass(frozen=True)
class ServedStorage(Storage):
    """The grader's storage, reached at ``address``: the files exist only there. A request's
    latency is slept by the grader before it answers; picklable, so worker processes read
    through it too (each opens its own connections)."""

    address: str = ""

    def listing(self, folder: str | os.PathLike) -> list[tuple[Path, int]]:
        answer, _ = _CONNECTIONS.ask(self.address, {"op": "list"})
        return [(Path(path), int(label)) for path, label in answer["files"]]

    def read(self, path: str | os.PathLike) -> bytes:
        return self.read_many([path])[0]

    def read_many(self, paths: Sequence[str | os.PathLike]) -> list[bytes]:
        _, data = _CONNECTIONS.ask(self.address, {"op": "read", "paths": [str(p) for p in paths]})
        return data


def _served_step(address: str, batch: Any) -> float:
    """The grader's device on ``batch``: it checks the batch, holds, and returns the value."""
    x = np.ascontiguousarray(batch.x, dtype=np.float32)
    y = np.ascontiguousarray(batch.y, dtype=np.int64)
    answer, _ = _CONNECTIONS.ask(
        address, {"op": "step", "step": int(batch.step), "x": list(x.shape), "y": list(y.shape)},
        [x.tobytes(), y.tobytes()])
    return float(answer["value"])


# -- the check ---------------------------------------------------------------------------------

def prepare(task: PipelineTask) -> PipelineTask:
    """Write ``task``'s files (one PNG per sample, in class folders under ``task.folder``)."""
    from .loading.files import write_images

    images, labels = task_arrays(task.seed, task.samples)
    write_images(task.folder, images, labels)
    return task


def expected_values(task: PipelineTask) -> list[float]:
    """Each step's :func:`step_value` of the task run here, computed from the seed without
    reading a file."""
    images, labels = task_arrays(task.seed, task.samples)
    weights = device_weights(task.seed)
    return [step_value(*expected_batch(images, labels, indices, task.seed, step), weights)
            for step, indices in enumerate(task.plan())]


@dataclass(frozen=True)
class BusyCheck:
    """What a graded run measured: the task, its wall time, who timed it, and, when the
    grader's device ran the steps, its busy time and the values it handed out (in step
    order)."""

    task: PipelineTask
    wall_seconds: float
    timed_by: str
    busy_seconds: float | None = None
    values: tuple[float, ...] | None = None
    storage_wait_seconds: float | None = None
    charged_idle_seconds: float | None = None

    @property
    def utilization(self) -> float:
        """Here: steps × kernel_seconds / wall. Under the grader: busy / (busy + charged idle),
        where the charged idle is the device's idle time while a read was in flight (waiting
        for the storage: what the chapter's fixes remove), plus any other idle time beyond
        :data:`OTHER_IDLE_STEPS` steps' time before a step, :data:`START_UP_SECONDS` more
        before the first from the call (and the time until a worker process the call started
        first read, up to :data:`WORKER_START_SECONDS`), and :data:`SHUT_DOWN_SECONDS` after
        the last until the loop returned (so a device left idle still fails, while start-up,
        shut-down and a busy machine's slower thread wake-ups do not fail an honest loop)."""
        if self.busy_seconds is None or self.charged_idle_seconds is None:
            return self.task.steps * self.task.kernel_seconds / self.wall_seconds
        return self.busy_seconds / (self.busy_seconds + self.charged_idle_seconds)

    def describe(self) -> str:
        t = self.task
        head = (f"{t.steps} steps of {t.batch_size} files ({t.latency * 1e3:g} ms to each "
                f"request's first byte, {t.kernel_seconds * 1e3:g} ms of device time a step) "
                f"took {self.wall_seconds * 1e3:.0f} ms, timed by {self.timed_by}")
        if self.storage_wait_seconds is None:
            return (f"{head}: the device was busy {self.utilization:.0%} of it (the floor is "
                    f"{t.floor_seconds() * 1e3:.0f} ms).")
        other = self.charged_idle_seconds - self.storage_wait_seconds
        return (f"{head}; the device waited {self.storage_wait_seconds * 1e3:.0f} ms for the "
                f"storage and idled {other * 1e3:.0f} ms more than it may for other reasons "
                f"({OTHER_IDLE_STEPS * t.kernel_seconds * 1e3:g} ms before a step, "
                f"{START_UP_SECONDS * 1e3:g} ms more from the call to the first, "
                f"plus up to {WORKER_START_SECONDS:g} s until a worker process the call "
                "started first read, "
                f"{SHUT_DOWN_SECONDS * 1e3:g} ms after the last): it was busy "
                f"{self.utilization:.0%} of the time it was not idle otherwise.")


def first_wrong_step(got: Any, want: Sequence[float]) -> str | None:
    """The sentence naming the first step whose value ``got`` lacks or gets wrong; None when
    every step matches."""
    if not isinstance(got, (list, tuple)):
        return (f"the loop returned a {type(got).__name__}, not the list of its {len(want)} "
                "step values")
    for step, wanted in enumerate(want):
        if step >= len(got):
            return (f"the loop returned {len(got)} values for {len(want)} steps: every batch "
                    "must reach the device, in order")
        value = got[step]
        if not isinstance(value, (float, int)) or isinstance(value, bool) or \
                not math.isclose(value, wanted, rel_tol=1e-9, abs_tol=1e-9):
            return (f"step {step}: the device returned {value!r}, expected {wanted!r} (that "
                    "step's batch, read, decoded and augmented): batches dropped, reordered or "
                    "not loaded in full")
    if len(got) > len(want):
        return f"the loop returned {len(got)} values for {len(want)} steps"
    return None


def verdict(task: PipelineTask, got: Any, check: BusyCheck, at_least: float) -> BusyCheck:
    """Fail unless every step's value is right (the grader's device's values, or those computed
    here from the seed), the wall is above the floor and the utilization reaches ``at_least``
    (module docstring)."""
    want = list(check.values) if check.values is not None else expected_values(task)
    wrong = first_wrong_step(got, want)
    if wrong:
        raise AssertionError(wrong)
    floor = task.floor_seconds()
    if check.wall_seconds < floor - SLACK:
        raise ImpossiblyFast(
            f"the loop took {check.wall_seconds * 1e3:.1f} ms, less than the "
            f"{floor * 1e3:.1f} ms its device needs ({task.steps} steps of "
            f"{task.kernel_seconds * 1e3:g} ms, one at a time): the storage's or the device's "
            "waits were skipped, or the clock changed; this test scores 0",
            f"the pipeline loop ran below its physical floor ({check.wall_seconds:.4f} s < "
            f"{floor:.4f} s): time.sleep, the clock or the task's waits were changed")
    print(check.describe())
    if check.utilization < at_least:
        raise AssertionError(
            f"the device was busy {check.utilization:.0%} of the run, below the {at_least:.0%} "
            "this test asks: the device still waits for input (load the next batch while the "
            "device computes this one, with a Prefetcher, or read a batch in one request)")
    return check


def expect_busy_device(loop: Callable[[PipelineTask], Sequence[float]], *,
                       at_least: float = AT_LEAST, steps: int = STEPS,
                       seed: int | None = None) -> BusyCheck:
    """Assert that ``loop(task)`` returns the right value for every step, in order, and keeps
    the device busy at least ``at_least`` of its wall time (module docstring). Prints what was
    measured; returns the :class:`BusyCheck`."""
    seed = random.SystemRandom().randrange(2**31) if seed is None else int(seed)
    from .testing import current_judge

    task = PipelineTask(f"{FOLDER}/{seed}", seed, steps=int(steps))
    judge = current_judge()
    if judge is not None:
        got, check = judge.measure_pipeline(loop, task)
    else:
        got, wall = _here(loop, task)
        check = BusyCheck(task, wall, "this kernel (not by a grader)")
    return verdict(task, got, check, at_least)


def _here(loop: Callable, task: PipelineTask) -> tuple[Any, float]:
    """The run in this process (no grader), timed here from its first read (so starting workers
    is not counted); the task's files removed after."""
    prepare(task)
    try:
        started = time.time()
        got = loop(task)
        ended = time.time()
        return got, ended - max(started, first_read_time(task) or started)
    finally:
        remove(task)


def remove(task: PipelineTask) -> None:
    """Delete the task's files (and its folder, and :data:`FOLDER` when it is left empty)."""
    import shutil

    shutil.rmtree(task.folder, ignore_errors=True)
    try:
        os.rmdir(Path(task.folder).parent)
    except OSError:
        pass


__all__ = ["AT_LEAST", "BATCH", "FIRST_READ", "FOLDER", "KERNEL_SECONDS", "LATENCY",
           "OTHER_IDLE_STEPS", "PATIENCE", "SHUT_DOWN_SECONDS", "START_UP_SECONDS", "STEPS",
           "WORKER_START_SECONDS",
           "BusyCheck", "ImpossiblyFast", "MarkedStorage", "PipelineTask", "ServedStorage",
           "check_prefetcher", "device_weights", "drive_prefetcher", "expect_busy_device",
           "expected_batch", "expected_values", "first_read_time", "first_wrong_step", "prepare",
           "receive_message", "remove", "send_message", "step_value", "task_arrays", "verdict"]
