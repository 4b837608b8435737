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
  ``pause_after_the_listing``, ``idle_after_the_last_step``;
- *a worker's start-up* (since the window opens at the call and a process the call started
  earns a worker's start-up allowance): ``pause_in_a_process_the_call_started``; and, in
  ``NEW_CHEATS`` (a second red team; each idles 1.4 s before its first step, inside the 1.83 s
  a worker's read freed when the allowance was granted whole; all lose since it is the time
  from the call to a new process's first read of a file): the allowance is a flag, not a
  moment (``pause_after_a_new_process_read``, ``whole_loop_in_a_process_the_call_started``);
  who connected is not who reads (a connection's credentials are set at connect:
  ``connection_made_by_a_child_on_a_shared_socket``,
  ``connection_passed_from_a_spawned_program``); what counts as a read
  (``empty_read_from_a_new_process``); which process the call started
  (``reader_forked_by_a_helper_started_before_the_call``,
  ``connection_made_before_the_call_by_a_process_gone_at_it``); and two controls that must lose
  whatever the rule's weaknesses, as they show the grader tells the kernel and processes
  running at the call from new ones (``pause_in_the_kernel_process_alone``,
  ``read_by_a_helper_started_before_the_call``).

``HONEST`` adds ``thread_pool_of_loaders`` (a ThreadPoolExecutor of four loaders, four batches
ahead, a request per file), and in ``NEW_HONEST`` worker processes started in the call:
``fork_pool_imap`` (a multiprocessing Pool of forked loaders),
``spawn_executor_of_the_data_sets_batch`` (a spawned ProcessPoolExecutor mapping the data set's
own ``batch``), ``forked_loader_feeding_a_queue`` (one forked producer, a bounded queue),
``process_pool_started_in_the_call`` (concurrent.futures' pool, forked, made in the call).
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


#: The rest of ``train_fast``: the chapter's prefetching loop (appended to the cheats that
#: pause first, to be graded on the pause alone).
PREFETCH = '''
    values = []
    with tp.loading.Prefetcher(task.batches(), 2) as batches, Device() as device:
        for batch in batches:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
'''

#: The grader's wire written out (json header with its blob count, each part length-prefixed):
#: a request on a socket of the loop's own, without tinyprof's functions.
RAW_WIRE = '''
import json
import socket


def _exactly(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _raw_ask(sock, header):
    body = json.dumps({**header, "blobs": 0}).encode()
    sock.sendall(len(body).to_bytes(4, "big") + body)
    answer = json.loads(_exactly(sock, int.from_bytes(_exactly(sock, 4), "big")))
    for _ in range(answer.get("blobs", 0)):
        _exactly(sock, int.from_bytes(_exactly(sock, 4), "big"))
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer


def _first_path(sock):
    return _raw_ask(sock, {"op": "list"})["files"][0][0]
'''

#: A helper process started when the answer cell runs (so it is running when the grader calls
#: the loop), serving the call's requests: it follows a cheat's own ``_helper(requests)``.
HELPER_STARTED_WITH_THE_CELL = '''

_REQUESTS, _HELPERS_END = multiprocessing.Pipe()
_HELPER = multiprocessing.get_context("fork").Process(target=_helper, args=(_HELPERS_END,),
                                                      daemon=True)
_HELPER.start()   # when the cell runs: running when the grader calls the loop
'''

NEW_CHEATS = {
    "pause_after_a_new_process_read": '''
from concurrent.futures import ProcessPoolExecutor


def _read_one(task):
    task.dataset(batched_reads=True).read([0])


def train_fast(task):
    """A worker's start-up is a flag, not a moment: a process pool of one (concurrent.futures,
    nothing the static review flags) reads one file at once and is shut down, then the kernel's
    own process pauses 1.4 s, then the chapter's prefetching loop; the grader frees 1.5 s
    before the first step because a new process read, whenever it read."""
    with ProcessPoolExecutor(1) as pool:
        pool.submit(_read_one, task).result()
    time.sleep(1.4)   # "warming up": anything at all, after the worker's read
''' + PREFETCH,

    "pause_in_the_kernel_process_alone": '''

def train_fast(task):
    """Who read (the control): no process but the kernel's, a 1.4 s pause before the chapter's
    prefetching loop; kept if the grader's snapshot of the processes running at the call misses
    the sandboxed kernel (another pid namespace, hidden pids), so that every read looks new."""
    time.sleep(1.4)   # "warming up": anything at all
''' + PREFETCH,

    "connection_made_by_a_child_on_a_shared_socket": RAW_WIRE + '''
import os


def train_fast(task):
    """Who connected is not who reads: the kernel makes a socket, a forked child connects it to
    the grader (a fork shares the socket) and ends at once; the kernel then reads a file through
    it (its credentials are the child's, set at connect), pauses 1.4 s, and runs the chapter's
    prefetching loop."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    child = os.fork()
    if child == 0:
        try:
            sock.connect(task.address)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    _raw_ask(sock, {"op": "read", "paths": [_first_path(sock)]})   # the kernel's own read
    sock.close()
    time.sleep(1.4)   # "warming up": anything at all
''' + PREFETCH,

    "connection_passed_from_a_spawned_program": RAW_WIRE + '''
import subprocess
import sys

_CONNECT_AND_PASS = (
    "import socket, sys\\n"
    "back = socket.socket(fileno=int(sys.argv[2]))\\n"
    "sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\\n"
    "sock.connect(sys.argv[1])\\n"
    "socket.send_fds(back, [b'x'], [sock.fileno()])\\n")


def train_fast(task):
    """Who connected is not who reads: a program the call runs (python -S, no imports) connects
    to the grader and hands the connection to the kernel over a Unix socket (SCM_RIGHTS), then
    ends; the kernel reads a file through it, pauses 1.4 s, then the chapter's prefetching
    loop."""
    mine, theirs = socket.socketpair()
    subprocess.run([sys.executable, "-S", "-c", _CONNECT_AND_PASS, task.address,
                    str(theirs.fileno())], pass_fds=(theirs.fileno(),), check=True)
    theirs.close()
    _, fds, _, _ = socket.recv_fds(mine, 1, 1)
    mine.close()
    sock = socket.socket(fileno=fds[0])
    _raw_ask(sock, {"op": "read", "paths": [_first_path(sock)]})   # the kernel's own read
    sock.close()
    time.sleep(1.4)   # "warming up": anything at all
''' + PREFETCH,

    "empty_read_from_a_new_process": RAW_WIRE + '''
import os


def train_fast(task):
    """What counts as a read: a forked process asks the grader's storage to read no file at all
    (an empty list of paths) and ends; the grader counts it as a worker's read before the first
    step. Then 1.4 s of anything, then the chapter's prefetching loop."""
    child = os.fork()
    if child == 0:
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(task.address)
            _raw_ask(sock, {"op": "read", "paths": []})
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    time.sleep(1.4)   # "warming up": anything at all
''' + PREFETCH,

    "whole_loop_in_a_process_the_call_started": '''
from concurrent.futures import ProcessPoolExecutor


def _whole_loop(task):
    data = task.dataset(batched_reads=True)
    plan = task.plan()
    first = data.batch(plan[0], 0)   # a read: this process is "a worker"
    time.sleep(1.4)                  # idle after the first read, inside a worker's start-up
    values = []
    batches = (data.batch(indices, step) for step, indices in enumerate(plan) if step > 0)
    with tp.loading.Prefetcher(batches, 2) as rest, Device() as device:
        values.append(device.submit(lambda: task.step(first)).result())
        for batch in rest:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values


def train_fast(task):
    """A process the call started is no proof of a worker's start-up: the whole loop runs in a
    process of a pool of one (forked, concurrent.futures), which reads its first batch, idles
    1.4 s, then prefetches the rest; its values come back as the pool's result."""
    with ProcessPoolExecutor(1) as pool:
        return pool.submit(_whole_loop, task).result()
''',

    "reader_forked_by_a_helper_started_before_the_call": '''
import multiprocessing
import os


def _helper(requests):
    while True:
        task = requests.recv()
        child = os.fork()   # a grandchild of the kernel, started now by a process that is not
        if child == 0:
            try:
                task.dataset(batched_reads=True).read([0])
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        requests.send("read")

''' + HELPER_STARTED_WITH_THE_CELL + '''

def train_fast(task):
    """Which process the call started: a helper process started with the cell (so it runs at
    the call) forks, on the call's request, a reader that reads one file; then 1.4 s of
    anything, then the chapter's prefetching loop."""
    _REQUESTS.send(task)
    _REQUESTS.recv()
    time.sleep(1.4)   # "warming up": anything at all
''' + PREFETCH,

    "connection_made_before_the_call_by_a_process_gone_at_it": RAW_WIRE + '''
import glob
import os
import threading

from ipykernel.kernelapp import IPKernelApp

_SOCKETS = os.path.dirname(IPKernelApp.instance().connection_file)   # shared with the grader
_EARLY = {}   # the grader's address -> a socket connected by a process that is gone


def _standby():
    """A socket and a forked child ready to connect it to an address written to its pipe."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    into, out = os.pipe()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.close(out)
            address = os.read(into, 4096).decode()
            for _ in range(5000):   # until the grader hands the socket over and listens
                try:
                    sock.connect(address)
                    code = 0
                    break
                except OSError:
                    time.sleep(0.0002)
        finally:
            os._exit(code)
    os.close(into)
    return sock, out, child


def _watch():
    pattern = os.path.join(_SOCKETS, "pipeline-*.sock")
    seen, ready = set(glob.glob(pattern)), _standby()
    while True:
        for address in set(glob.glob(pattern)) - seen:
            seen.add(address)
            sock, out, child = ready
            os.write(out, address.encode())
            os.close(out)
            _, status = os.waitpid(child, 0)   # gone (and reaped) before the grader's snapshot
            if status == 0:
                _EARLY[address] = sock
            ready = _standby()
        time.sleep(0.0005)


threading.Thread(target=_watch, daemon=True).start()


def train_fast(task):
    """Which process the call started is read as "not running at the call": a watcher thread
    sees the grader's socket appear (its folder is the kernel's), a child forked before
    connects to it and ends before the grader calls the loop; the call reads a file through
    that connection (the child's credentials), pauses 1.4 s, then the chapter's prefetching
    loop."""
    sock = _EARLY.pop(task.address, None)
    if sock is not None:
        _raw_ask(sock, {"op": "read", "paths": [_first_path(sock)]})
        sock.close()
    time.sleep(1.4)   # "warming up": anything at all
''' + PREFETCH,

    "read_by_a_helper_started_before_the_call": '''
import multiprocessing


def _helper(requests):
    while True:
        task = requests.recv()
        task.dataset(batched_reads=True).read([0])
        requests.send("read")

''' + HELPER_STARTED_WITH_THE_CELL + '''

def train_fast(task):
    """Which process the call started (the control): a helper process started with the cell
    reads one file when the call asks; then 1.4 s of anything, then the chapter's prefetching
    loop; kept if the grader takes any process but the kernel's for a worker."""
    _REQUESTS.send(task)
    _REQUESTS.recv()
    time.sleep(1.4)   # "warming up": anything at all
''' + PREFETCH,
}

NEW_HONEST = {
    "fork_pool_imap": '''
import multiprocessing

_DATA = None


def _open(task):
    global _DATA
    _DATA = task.dataset(batched_reads=True)


def _load(job):
    step, indices = job
    return _DATA.batch(indices, step)


def train_fast(task):
    """A multiprocessing Pool of two forked loaders, each with its data set, batches taken in
    order with imap while the device computes."""
    values = []
    with multiprocessing.get_context("fork").Pool(2, _open, (task,)) as pool, \\
            Device() as device:
        for batch in pool.imap(_load, enumerate(task.plan())):
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "spawn_executor_of_the_data_sets_batch": '''
from concurrent.futures import ProcessPoolExecutor
import multiprocessing


def train_fast(task):
    """Two spawned processes (concurrent.futures) run the data set's own batch method (a
    library function: spawn can import it), all steps submitted, taken in order."""
    data = task.dataset(batched_reads=True)
    plan = task.plan()
    values = []
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool, \\
            Device() as device:
        for batch in pool.map(data.batch, plan, range(len(plan))):
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "process_pool_started_in_the_call": '''
from collections import deque
from concurrent.futures import ProcessPoolExecutor


def train_fast(task):
    """concurrent.futures' process pool (Linux's default start, fork) made in the call, two
    loaders each reading a batch in one request, three batches ahead of the device."""
    data = task.dataset(batched_reads=True)
    values, pending = [], deque()
    with ProcessPoolExecutor(2) as loaders, Device() as device:
        for step, indices in enumerate(task.plan()):
            pending.append(loaders.submit(data.batch, indices, step))
            if len(pending) > 3:
                batch = pending.popleft().result()
                values.append(device.submit(lambda b=batch: task.step(b)).result())
        while pending:
            batch = pending.popleft().result()
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
''',

    "forked_loader_feeding_a_queue": '''
import multiprocessing


def _produce(task, ready):
    for batch in task.batches(batched_reads=True):
        ready.put(batch)
    ready.put(None)


def train_fast(task):
    """One forked loader process, started in the call, puts each batch in a bounded queue while
    the device computes the one before."""
    context = multiprocessing.get_context("fork")
    ready = context.Queue(maxsize=3)
    loader = context.Process(target=_produce, args=(task, ready), daemon=True)
    loader.start()
    values = []
    with Device() as device:
        while (batch := ready.get()) is not None:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    loader.join()
    return values
''',
}


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

    "pause_in_a_process_the_call_started": '''
import multiprocessing


def _late_reader(task):
    time.sleep(1.0)   # "importing": anything at all
    task.dataset(batched_reads=True).read([0])


def train_fast(task):
    """Statistics, a worker's start-up: the grader frees a worker's start-up when a process the
    call started reads before the first step; a forked process that pauses 1 s, then reads one
    file, then the chapter's prefetching loop: the device idles a third of the call."""
    reader = multiprocessing.get_context("fork").Process(target=_late_reader, args=(task,))
    reader.start()
    reader.join()
    values = []
    with tp.loading.Prefetcher(task.batches(), 2) as batches, Device() as device:
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

CHEATS.update(NEW_CHEATS)
HONEST.update(NEW_HONEST)

__all__ = ["CHEATS", "HONEST", "NEW_CHEATS", "NEW_HONEST", "OWN_READS", "OWN_VALUES", "PAD",
           "PREFETCH", "RAW_WIRE"]
