"""``expect_busy_device``: a fixed input loop graded on how busy it keeps the device, its wall
time measured from outside the student's kernel when tinyprof's grader runs the test.

The work is a :class:`PipelineTask`: ``steps`` batches of ``batch_size`` PNG files, each file read
through a storage with ``latency`` seconds to its first byte, decoded and augmented
(:class:`tinyprof.loading.ImageFolder`), and a device step that holds for ``kernel_seconds``
(:meth:`PipelineTask.step`: a ``time.sleep``, a kernel that takes no host CPU, as a GPU's does
not) and returns a number computed from the batch. Both waits are sleeps, so the CPU load of the
grading machine barely moves the wall time, and the grade is stable beside other jobs.

``expect_busy_device(loop)`` draws a seed, writes a **fresh** data set for it (the digits with
pixel noise drawn from the seed, one epoch: every sample is read once, so nothing read before
the call helps), has ``loop(task)`` run, and then:

- **the outputs, in full**: ``loop`` returns one number per step, in step order, each the
  device step's value on that step's batch; they are checked against values computed here from
  the seed (no files needed: the decoder is exact). A loop that drops, skips, reorders or
  fakes batches fails, whatever its time;
- **the wall time**: under tinyprof's grader (autograder/run/pipeline_check.py, through the
  judge, :func:`tinyprof.testing.current_judge`) the grader times the call's round trip from
  outside the kernel; elsewhere (a plain kernel, stock nbgrader) it is timed here, in the
  student's own process, and can be lied to;
- **the physical floor**: the device runs one step at a time, so the run cannot take less than
  steps × kernel_seconds plus one storage latency (the first batch's first byte), whatever the
  prefetching, workers or batched reads. A wall below it means the sleeps or the clock were
  changed: the test fails and the instructor is told (:class:`ImpossiblyFast`'s ``review``);
- **the tier**: device utilization = steps × kernel_seconds / wall must reach ``at_least``.
"""

from __future__ import annotations

import math
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

# The Prefetcher's probe (§9.5) lives in its own module; the chapter reaches it from here.
from .prefetchcheck import PATIENCE, check_prefetcher, drive_prefetcher

#: The graded task's defaults: 24 batches of 16 files, 1 ms to each file's first byte, 40 ms of
#: device time per step. Loading a batch one file at a time takes ≈ 17 ms, so the loop as given
#: keeps the device busy ≈ 40 / 57 ≈ 70 % of the time; overlapping loading with compute, or
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


class ImpossiblyFast(AssertionError):
    """The run took less than its physical floor: a failure, with a sentence for the
    instructor's review (the sleeps or the clock were changed)."""

    def __init__(self, message: str, review: str):
        super().__init__(message)
        self.review = [review]


def task_arrays(seed: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` images (uint8 pixel counts 0–16, (count, 8, 8)) and labels of the task of
    ``seed``: distinct digits drawn from the seed, with pixel noise of −2 … +2 drawn from it."""
    from .models.datasets import digits_arrays

    images, labels = digits_arrays()
    rng = np.random.default_rng([int(seed), 9])
    chosen = rng.choice(len(labels), size=count, replace=False)
    noise = rng.integers(-2, 3, size=(count, 8, 8))
    noisy = np.clip(images[chosen].reshape(count, 8, 8).astype(np.int64) + noise, 0, 16)
    return noisy.astype(np.uint8), labels[chosen].astype(np.int64)


def step_value(x: np.ndarray, y: np.ndarray, seed: int) -> float:
    """What the device's step returns for a batch: a projection of its pixels on weights drawn
    from the seed, plus its labels' sum (so a batch's content and its labels both count)."""
    weights = np.random.default_rng([int(seed), 7]).normal(size=x.shape[-1])
    return float(np.asarray(x, dtype=np.float64).sum(axis=0) @ weights + int(np.sum(y)))


@dataclass(frozen=True)
class PipelineTask:
    """One graded run's work: its files are under ``folder`` (written by :func:`prepare`)."""

    folder: str
    seed: int
    steps: int = STEPS
    batch_size: int = BATCH
    latency: float = LATENCY
    kernel_seconds: float = KERNEL_SECONDS

    @property
    def samples(self) -> int:
        return self.steps * self.batch_size

    def storage(self):
        """The storage the files are read through: ``latency`` to each request's first byte."""
        from .loading.storage import Storage

        return Storage("network file system", latency=self.latency)

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
        :func:`step_value` of it. Run it on a :class:`tinyprof.loading.Device`, one at a
        time."""
        time.sleep(self.kernel_seconds)
        return step_value(batch.x, batch.y, self.seed)

    def floor_seconds(self) -> float:
        """The least wall time any loop can take: every device step in turn, after the first
        byte of the first read."""
        return self.steps * self.kernel_seconds + self.latency


def prepare(task: PipelineTask) -> PipelineTask:
    """Write ``task``'s files (one PNG per sample, in class folders under ``task.folder``)."""
    from .loading.files import write_images

    images, labels = task_arrays(task.seed, task.samples)
    write_images(task.folder, images, labels)
    return task


def expected_values(task: PipelineTask) -> list[float]:
    """Each step's :func:`step_value`, computed from the seed without reading a file."""
    from .loading.dataset import SIDE, augment

    images, labels = task_arrays(task.seed, task.samples)
    values = []
    for step, indices in enumerate(task.plan()):
        rng = np.random.default_rng([task.seed, step])
        shifted = [augment(images[i], rng) for i in indices]
        x = np.stack(shifted).reshape(len(indices), SIDE * SIDE).astype(np.float32) / 16
        values.append(step_value(x, labels[indices], task.seed))
    return values


@dataclass(frozen=True)
class BusyCheck:
    """What a graded run measured: the task, its wall time and who timed it."""

    task: PipelineTask
    wall_seconds: float
    timed_by: str

    @property
    def utilization(self) -> float:
        return self.task.steps * self.task.kernel_seconds / self.wall_seconds

    def describe(self) -> str:
        t = self.task
        return (f"{t.steps} steps of {t.batch_size} files ({t.latency * 1e3:g} ms to each "
                f"request's first byte, {t.kernel_seconds * 1e3:g} ms of device time a step) "
                f"took {self.wall_seconds * 1e3:.0f} ms, timed by {self.timed_by}: the device "
                f"was busy {self.utilization:.0%} of it (the floor is "
                f"{t.floor_seconds() * 1e3:.0f} ms).")


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
    """Fail unless every step's value is right, the wall is above the floor and the
    utilization reaches ``at_least`` (module docstring)."""
    wrong = first_wrong_step(got, expected_values(task))
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
        got, wall = judge.measure_pipeline(loop, task)
        timed_by = "the grader, from outside your kernel"
    else:
        got, wall = _here(loop, task)
        timed_by = "this kernel (not by a grader)"
    return verdict(task, got, BusyCheck(task, wall, timed_by), at_least)


def _here(loop: Callable, task: PipelineTask) -> tuple[Any, float]:
    """The run in this process (no grader), timed here; the task's files removed after."""
    prepare(task)
    try:
        started = time.perf_counter()
        got = loop(task)
        return got, time.perf_counter() - started
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


__all__ = ["AT_LEAST", "BATCH", "FOLDER", "KERNEL_SECONDS", "LATENCY", "STEPS", "BusyCheck",
           "ImpossiblyFast", "PATIENCE", "PipelineTask", "check_prefetcher", "drive_prefetcher",
           "expect_busy_device", "expected_values", "first_wrong_step", "prepare", "remove",
           "step_value", "task_arrays", "verdict"]
