"""Red team of chapter 09's last exercise, ``train_fast(task)`` graded by
``tinyprof.pipecheck.expect_busy_device``: loops written to get the points without keeping the
grader's device busy or without paying the storage's latency, and the different fixes a good
student writes (issue 45, item 2 and item 6).

**The contract.** ``train_fast(task)`` returns every step's device value, in order, for a task
of ``steps`` batches read through a storage with a first-byte latency, decoded, augmented, and
run on the device one step at a time (``task.batches()``, ``task.dataset(batched_reads=...)``,
``task.plan()``, ``task.step(batch)``, ``task.storage()``; tinyprof.loading's ``Device``,
``Prefetcher``, ``Workers``), and keeps the device busy at least 80 % of the wall time. The
grader observes the device's clock and the reads itself: a loop that does not keep the grader's
device busy, or that skips the storage's latency, gets no points.

Every entry is the code a student puts in the ``train_fast`` answer cell, after the chapter's
set-up cells (``np``, ``tp``, ``time``, ``threading``, ``queue``, ``Device``, ``ImageFolder``,
``LOCAL_DISK`` ... are imported there). ``CHEATS`` must score 0 on ``test_train_fast``;
``HONEST`` must keep its points. Each cheat's docstring names its class of weakness:

- *the device's clock is the kernel's* (no device at all, a device whose kernels are not the
  steps, steps side by side in threads, processes or two devices, the wall padded with a sleep
  just past the physical floor): ``values_from_the_seed_and_a_sleep``,
  ``steps_side_by_side_in_threads``, ``steps_on_two_devices``,
  ``steps_in_worker_processes``, ``device_padded_with_repeated_steps``;
- *what the grader does not charge* (at s6-device e54ffe9: idle time after a batch's files
  were served, up to 10 ms a step; at c836fb2: the device's idle time while no read is in
  flight, up to a step's time before each step and all of it before the first step):
  ``serial_loop_after_a_warm_up_read``, ``host_work_hidden_in_the_idle_allowance``,
  ``long_pause_before_the_first_step``;
- *the reads are the kernel's* (the storage's latency skipped):
  ``storage_read_replaced_through_its_class``,
  ``files_read_around_the_storage``, ``own_image_folder_on_local_disk``,
  ``task_copied_without_latency``, ``storage_swapped_in_the_data_set``;
- *when a step begins* (the grader's wire is public: a step's request opened before its batch
  is read): ``step_opened_before_its_batch_is_read``;
- *the run's ends* (since the start-up allowance: idle time before the first request, after
  the listing, after the last step): ``pause_before_the_first_request``,
  ``pause_after_the_listing``, ``idle_after_the_last_step``.

``HONEST`` adds ``thread_pool_of_loaders`` (a ThreadPoolExecutor of four loaders, four batches
ahead, a request per file).
"""

from __future__ import annotations

#: The task's values computed in the kernel without tinyprof's functions (its digits file read
#: with numpy, its formulas written out): the seed is all a loop needs if nothing else holds
#: the values.
OWN_VALUES = '''
import os

import numpy as np


def _own_values(task):
    path = os.path.join(os.path.dirname(tp.__file__), "data", "digits.npz")
    with np.load(path) as stored:
        images, labels = stored["images"], stored["labels"]
    count = task.steps * task.batch_size
    rng = np.random.default_rng([int(task.seed), 9])
    chosen = rng.choice(len(labels), size=count, replace=False)
    noise = rng.integers(-2, 3, size=(count, 8, 8))
    noisy = np.clip(images[chosen].reshape(count, 8, 8).astype(np.int64) + noise, 0, 16)
    images, labels = noisy.astype(np.uint8), labels[chosen].astype(np.int64)
    order_rng = np.random.default_rng(task.seed)
    order = []
    while len(order) < count:
        order.extend(order_rng.permutation(count).tolist())
    weights = np.random.default_rng([int(task.seed), 7]).normal(size=64)
    values = []
    for step in range(task.steps):
        indices = np.array(order[step * task.batch_size:(step + 1) * task.batch_size])
        rng = np.random.default_rng([task.seed, step])
        shifted = [_shift(images[i], rng) for i in indices]
        x = np.stack(shifted).reshape(len(indices), 64).astype(np.float32) / 16
        total = x.astype(np.float64).sum(axis=0) @ weights
        values.append(float(total + int(labels[indices].sum())))
    return values


def _shift(image, rng):
    dy, dx = rng.integers(-1, 2, size=2)
    flip = rng.random() < 0.5
    out = np.zeros_like(image)
    out[max(dy, 0):8 + min(dy, 0), max(dx, 0):8 + min(dx, 0)] = \\
        image[max(-dy, 0):8 - max(dy, 0), max(-dx, 0):8 - max(dx, 0)]
    return out[:, ::-1] if flip else out
'''

#: Sleep until ``started`` + a hair over the task's physical floor.
PAD = '''

def _pad_to_the_floor(task, started, margin=1.04):
    floor = task.steps * task.kernel_seconds + task.latency
    left = floor * margin - (time.perf_counter() - started)
    if left > 0:
        time.sleep(left)
'''

#: The files of the task read straight from the disk, decoded with Pillow and augmented: every
#: batch without a request to the task's storage.
OWN_READS = '''
import io
from pathlib import Path

from PIL import Image


def _direct_batches(task):
    paths = sorted(Path(task.folder).glob("*/*.png"), key=lambda p: int(p.stem))
    labels = np.array([int(p.parent.name) for p in paths], dtype=np.int64)
    for step, indices in enumerate(task.plan()):
        rng = np.random.default_rng([task.seed, step])
        images = []
        for i in indices:
            with Image.open(io.BytesIO(paths[i].read_bytes())) as image:
                pixels = np.asarray(image.convert("L"), dtype=np.uint8) // np.uint8(15)
            images.append(tp.loading.augment(pixels, rng))
        x = np.stack(images).reshape(len(indices), 64).astype(np.float32) / 16
        yield tp.loading.Batch(x, labels[indices], step)
'''

#: The loop as given, on a loader named LOADER and steps run by STEP.
SERIAL = '''

def train_fast(task):
    values = []
    with Device() as device:
        for batch in LOADER:
            values.append(device.submit(lambda b=batch: STEP(b)).result())
    return values
'''


def _serial(loader: str, step: str = "task.step", before: str = "") -> str:
    return before + SERIAL.replace("LOADER", loader).replace("STEP", step)


CHEATS = {
    "values_from_the_seed_and_a_sleep": OWN_VALUES + PAD + '''

def train_fast(task):
    """The device's clock is the kernel's: no Device and no file read; the values computed
    from the seed, the wall padded with a sleep just past the floor."""
    started = time.perf_counter()
    values = _own_values(task)
    _pad_to_the_floor(task, started)
    return values
''',

    "steps_side_by_side_in_threads": PAD + '''
from concurrent.futures import ThreadPoolExecutor


def train_fast(task):
    """The device's clock is the kernel's: every step at once in threads, on batches read in one
    request each, the wall padded with a sleep."""
    started = time.perf_counter()
    batches = list(task.batches(batched_reads=True))
    with ThreadPoolExecutor(len(batches)) as pool:
        values = list(pool.map(task.step, batches))
    _pad_to_the_floor(task, started)
    return values
''',

    "steps_on_two_devices": PAD + '''

def train_fast(task):
    """The device's clock is the kernel's: two Devices, each one step at a time, take the steps
    in turn (half the device time), the wall padded with a sleep."""
    started = time.perf_counter()
    with tp.loading.Prefetcher(task.batches(batched_reads=True), 4) as batches, \\
            Device() as even, Device() as odd:
        futures = [(even if batch.step % 2 == 0 else odd).submit(lambda b=batch: task.step(b))
                   for batch in batches]
        values = [future.result() for future in futures]
    _pad_to_the_floor(task, started)
    return values
''',

    "steps_in_worker_processes": PAD + '''
from concurrent.futures import ProcessPoolExecutor


def train_fast(task):
    """The device's clock is the kernel's (scope: child processes): four worker processes each
    run a quarter of the steps at the same time, the wall padded with a sleep."""
    started = time.perf_counter()
    batches = list(task.batches(batched_reads=True))
    with ProcessPoolExecutor(4) as pool:
        values = list(pool.map(task.step, batches))
    _pad_to_the_floor(task, started)
    return values
''',

    "serial_loop_after_a_warm_up_read": '''

def train_fast(task):
    """The grader's hand-off allowance rests on when a file was first served: one request for
    every file, thrown away, then the loop as given (a request per file), whose waits for the
    storage now look like hand-offs of batches already read."""
    task.dataset(batched_reads=True).read(range(task.samples))
    values = []
    with Device() as device:
        for batch in task.batches():
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "device_padded_with_repeated_steps": '''

def train_fast(task):
    """The device's clock is the kernel's: the loop as given, but while the host loads the next
    batch the device runs the last step again, so it never looks idle."""
    values, filler = [], None
    with Device() as device:
        batches = task.batches()
        last = None
        while True:
            if last is not None:
                filler = device.submit(lambda b=last: task.step(b))
            try:
                batch = next(batches)
            except StopIteration:
                break
            if filler is not None:
                filler.result()
            values.append(device.submit(lambda b=batch: task.step(b)).result())
            last = batch
    return values
''',

    "storage_read_replaced_through_its_class": '''
from pathlib import Path


def _read_at_once(self, path):
    return Path(path).read_bytes()


def train_fast(task):
    """The reads are the kernel's: the storage class, bound to a name first, gets a read that
    returns the file with no first-byte wait; then the loop as given."""
    storage_class = type(task.storage())
    storage_class.read = _read_at_once
    values = []
    with Device() as device:
        for batch in task.batches():
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "files_read_around_the_storage": OWN_READS + _serial(
        "_direct_batches(task)").replace('def train_fast(task):\n', '''def train_fast(task):
    """The reads are the kernel's: the task's files read from the disk with Pillow, never
    through its storage; the device runs every step, one at a time."""
'''),

    "own_image_folder_on_local_disk": _serial(
        "(data.batch(indices, step) for step, indices in enumerate(task.plan()))").replace(
        'def train_fast(task):\n', '''def train_fast(task):
    """The reads are the kernel's: the chapter's own ImageFolder on the task's folder, built
    on LOCAL_DISK (no latency) instead of the task's storage."""
    data = ImageFolder(task.folder, LOCAL_DISK, seed=task.seed)
'''),

    "task_copied_without_latency": _serial(
        "dataclasses.replace(task, latency=0.0).batches()", before="import dataclasses\n").replace(
        'def train_fast(task):\n', '''def train_fast(task):
    """The reads are the kernel's: a copy of the task whose storage has no latency
    (dataclasses.replace), the steps run on the task's own device."""
'''),

    "storage_swapped_in_the_data_set": _serial(
        "(data.batch(indices, step) for step, indices in enumerate(task.plan()))").replace(
        'def train_fast(task):\n', '''def train_fast(task):
    """The reads are the kernel's: the task's data set, its storage attribute swapped for a
    local disk before the first read."""
    data = task.dataset(batched_reads=True)
    data.storage = LOCAL_DISK
'''),

    "host_work_hidden_in_the_idle_allowance": '''

def train_fast(task):
    """Statistics: idle time the grader does not charge (the device's idle time while no read
    is in flight, up to a step's time before each step) spent on 15 ms of host work a step in
    the loop's critical path, after a batched read: the device waits a third of the run."""
    values = []
    with Device() as device:
        for batch in task.batches(batched_reads=True):
            time.sleep(0.015)   # per-step host work: logging, metrics, a checksum
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "long_pause_before_the_first_step": '''

def train_fast(task):
    """Statistics: the device's idle time before its first step is not charged unless a read is
    in flight (start-up): every batch read and decoded in one request, then 2 s of anything,
    then the steps back to back; the device is busy about a third of the run."""
    batches = list(task.batches(batched_reads=True))
    time.sleep(2.0)   # "warming up": anything at all
    values = []
    with Device() as device:
        for batch in batches:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "step_opened_before_its_batch_is_read": '''
import json


def _part(data):
    return len(data).to_bytes(4, "big") + data


def _step_opened_early(task, step, batches):
    """Step ``step`` on the grader's device, its request opened before its batch exists: the
    header (the shapes are known: batch_size × 64) goes first, then the batch is read as given
    (a request per file), then its bytes follow, then the answer."""
    wire = pipecheck.socket   # the module tinyprof's storage uses, not imported here
    sock = wire.socket(wire.AF_UNIX, wire.SOCK_STREAM)
    sock.connect(task.address)
    try:
        header = {"op": "step", "step": step, "x": [task.batch_size, 64],
                  "y": [task.batch_size], "blobs": 2}
        sock.sendall(_part(json.dumps(header).encode()))
        batch = next(batches)   # the storage's wait, while the device has the step's header
        x = np.ascontiguousarray(batch.x, dtype=np.float32)
        y = np.ascontiguousarray(batch.y, dtype=np.int64)
        sock.sendall(_part(x.tobytes()) + _part(y.tobytes()))
        answer, _ = pipecheck.receive_message(sock)
    finally:
        sock.close()
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return float(answer["value"])


def train_fast(task):
    """The device's clock is the grader's, but when does a step begin? The loop as given (a
    request per file, nothing ahead), each step's request to the grader's device opened
    (its header sent) before the batch is read, its bytes sent after: if the device counts
    itself busy from the header, the storage's waits become device time."""
    if task.address is None:   # not graded: the loop as given
        return [task.step(batch) for batch in task.batches()]
    values, batches = [], task.batches()
    with Device() as device:
        for step in range(task.steps):
            values.append(device.submit(
                lambda s=step: _step_opened_early(task, s, batches)).result())
    return values
''',

    "pause_before_the_first_request": '''

def train_fast(task):
    """Statistics, the start-up window: 2 s of anything before the loop's first request to the
    grader (no listing, no read), then the chapter's prefetching loop; if the device's idle
    time before its first step is counted from the first read, the pause is free and the
    device idles two thirds of the call."""
    time.sleep(2.0)   # "warming up": anything at all
    values = []
    with tp.loading.Prefetcher(task.batches(), 2) as batches, Device() as device:
        for batch in batches:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "pause_after_the_listing": '''

def train_fast(task):
    """Statistics, the start-up window: the data set made first (the grader's storage lists
    the files: a request, but no read), then 2 s of anything, then the chapter's prefetching
    loop on that data set; free if the device's start-up is counted from the first read."""
    data = task.dataset()
    time.sleep(2.0)   # "warming up": anything at all
    values = []
    batches = (data.batch(indices, step) for step, indices in enumerate(task.plan()))
    with tp.loading.Prefetcher(batches, 2) as batches, Device() as device:
        for batch in batches:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "idle_after_the_last_step": '''

def train_fast(task):
    """Statistics, the end of the run: the chapter's prefetching loop, then 2 s of anything
    (a "final evaluation", logging) before the call returns; idle time is charged before a
    step, and none comes after the last one, so the device idles two thirds of the call."""
    values = []
    with tp.loading.Prefetcher(task.batches(), 2) as batches, Device() as device:
        for batch in batches:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    time.sleep(2.0)   # after the last step: anything at all
    return values
''',
}


HONEST = {
    # "the chapter's solution" (tp.loading.Prefetcher) is read from the solution notebook.
    "batched_reads_serial": '''
def train_fast(task):
    values = []
    with Device() as device:
        for batch in task.batches(batched_reads=True):
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "thread_workers": '''
def train_fast(task):
    values = []
    with tp.loading.Workers(task.dataset(), 4, kind="thread") as pool, Device() as device:
        for batch in pool.batches(task.plan()):
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "process_workers": '''
def train_fast(task):
    values = []
    with tp.loading.Workers(task.dataset(batched_reads=True), 2, kind="process") as pool, \\
            Device() as device:
        for batch in pool.batches(task.plan()):
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "warm_process_pool": '''
from collections import deque
from concurrent.futures import ProcessPoolExecutor


def load_batch(task, indices, step):
    return task.dataset(batched_reads=True).batch(indices, step)


LOADERS = ProcessPoolExecutor(2)   # kept between calls, as persistent_workers=True keeps them
for _started in [LOADERS.submit(time.sleep, 0.2) for _ in range(2)]:
    _started.result()


def train_fast(task):
    values, pending = [], deque()
    with Device() as device:
        for step, indices in enumerate(task.plan()):
            pending.append(LOADERS.submit(load_batch, task, indices, step))
            if len(pending) > 3:
                batch = pending.popleft().result()
                values.append(device.submit(lambda b=batch: task.step(b)).result())
        while pending:
            batch = pending.popleft().result()
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "own_thread_and_queue": '''
import queue
import threading


def train_fast(task):
    ready = queue.Queue(maxsize=2)
    done = object()

    def load():
        for batch in task.batches():
            ready.put(batch)
        ready.put(done)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    values = []
    with Device() as device:
        while (batch := ready.get()) is not done:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    loader.join()
    return values
''',

    "asynchronous_device_overlap": '''
def train_fast(task):
    values, running = [], None
    with Device() as device:
        for batch in task.batches():
            if running is not None:
                values.append(running.result())
            running = device.submit(lambda b=batch: task.step(b))
        values.append(running.result())
    return values
''',

    "thread_pool_of_loaders": '''
from collections import deque
from concurrent.futures import ThreadPoolExecutor


def train_fast(task):
    """Four loader threads, each reading and decoding a whole batch (a request per file), four
    batches in flight ahead of the device, taken in step order."""
    data = task.dataset()
    values, pending = [], deque()
    with ThreadPoolExecutor(4, thread_name_prefix="loader") as loaders, Device() as device:
        plan = iter(enumerate(task.plan()))
        for step, indices in plan:
            pending.append(loaders.submit(data.batch, indices, step))
            if len(pending) == 4:
                break
        while pending:
            batch = pending.popleft().result()
            for step, indices in plan:
                pending.append(loaders.submit(data.batch, indices, step))
                break
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',
}

__all__ = ["CHEATS", "HONEST", "OWN_READS", "OWN_VALUES", "PAD"]
