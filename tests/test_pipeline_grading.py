"""Input pipelines graded on the grader's own storage and device (autograder/run/pipeline_check.py),
against the cheats of issues 40 and 45.

Chapter 09's last exercise, ``train_fast(task)``, is checked by ``expect_busy_device``. Under the
grader the task's storage and device are the grader's, served on a Unix socket in the folder the
sandbox shares with it: the data set is drawn from a seed the kernel never gets and exists only
behind that storage; each step's value needs weights only the device holds; the device runs one
step at a time, in order, on the batch its storage served for that step, and utilization is its
own busy time against the time it waited for the storage (and any other idle time beyond two
steps' time before a step), all on the grader's clock. The call runs with tinyprof switched
off, except the chapter's tools (tinyprof.loading).

Every cheat below was written against the check's contract as the cleverest student would (the
class of each in its name); each must score 0, and every honest alternative full marks, graded
for real: a real kernel in the real sandbox, through the grader's own executor.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from autograder.run.execute import GraderExecute
from autograder.run.pipeline_check import ServedPipeline, peer_process, running_processes
from tinyprof.loading import Batch
from tinyprof.pipecheck import OTHER_IDLE_STEPS, START_UP_SECONDS, PipelineTask, expected_values

pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")

HELPERS = "import time\nimport numpy as np\nfrom tinyprof.loading import Device, Prefetcher\n"
#: The loop a fix starts from: ``LOADER`` gives the batches, ``EACH`` what a step does.
LOOP = """
def train_fast(task):
    values = []
    with Device() as device:
        batches = LOADER
        for batch in batches:
            EACH
    return values
"""
STEP = "values.append(device.submit(lambda b=batch: task.step(b)).result())"


def loop_with(loader: str = "task.batches()", each: str = STEP, name: str = "train_fast") -> str:
    return LOOP.replace("LOADER", loader).replace("EACH", each).replace("train_fast", name)


#: The chapter's solution (solutions/09_pipeline, cell "train_fast").
SOLUTION = """
import tinyprof as tp
def SOLUTION(task):
    values = []
    with tp.loading.Prefetcher(task.batches(), 2) as batches, Device() as device:
        for batch in batches:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
"""
#: Honest loops a good student hands in: each must keep full marks.
HONEST = {
    "the chapter's solution": SOLUTION,
    "Prefetcher(task.batches(), 2)": loop_with("Prefetcher(task.batches(), 2)", name="PREFETCH"),
    "batched reads, serial": loop_with("task.batches(batched_reads=True)", name="BATCHED"),
    "Workers(kind='thread')": """
from tinyprof.loading import Workers
def WORKERS(task):
    values = []
    with Workers(task.dataset(), 2, kind="thread") as pool, Device() as device:
        for batch in pool.batches(task.plan()):
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
""",
    "a hand-written thread and queue.Queue prefetcher": """
import queue, threading
def OWN_THREAD(task):
    ready = queue.Queue(maxsize=2)
    def load():
        for batch in task.batches():
            ready.put(batch)
        ready.put(None)
    threading.Thread(target=load, daemon=True).start()
    values = []
    with Device() as device:
        while (batch := ready.get()) is not None:
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
""",
    "asynchronous launches, results read at the end": """
def ASYNC(task):
    with Prefetcher(task.batches(), 2) as batches, Device() as device:
        steps = [device.submit(lambda b=batch: task.step(b)) for batch in batches]
        return [step.result() for step in steps]
""",
}
#: A loop with process workers (spawn), as §9.6 and §9.7 offer them.
PROCESS_WORKERS = """
from tinyprof.loading import Workers
def PROCESSES(task):
    values = []
    with Workers(task.dataset(), 2, kind="process") as pool, Device() as device:
        for batch in pool.batches(task.plan()):
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
"""

#: Cheats, each a whole student cell defining ``train_fast``, and a sentence its failure must
#: contain (the grader's, never the kernel's).
# Steps sent side by side reach the device in an order the scheduler picks: the second may
# arrive while the first runs, or before it. Either way the device refuses it; which reason
# it gives is the race's, so either is the right one.
OUT_OF_TURN = ("one step at a time", "it runs the steps in order")

CHEATS = {
    # (a) issue 45: no Device, no file, the values computed in the kernel, a sleep to the floor
    "values computed in the kernel from the seed, a sleep past the floor": ("""
from tinyprof import pipecheck
def train_fast(task):
    local = pipecheck.PipelineTask(task.folder, task.seed, task.steps)
    values = pipecheck.expected_values(local)
    time.sleep(local.floor_seconds() / 0.96)
    return values
""", "switched off"),
    "the step's formula rewritten by hand on the digits, no tinyprof call": ("""
import tinyprof
def train_fast(task):
    data = np.load(os.path.join(os.path.dirname(tinyprof.__file__), "data", "digits.npz"))
    images = data[data.files[0]].reshape(-1, 8, 8)
    rng = np.random.default_rng([task.seed, 7])
    weights = rng.normal(size=64)
    values = [float(images[k * 16:(k + 1) * 16].reshape(16, 64).sum(axis=0) / 16 @ weights)
              for k in range(task.steps)]
    time.sleep(task.floor_seconds() / 0.96)
    return values
import os
""", "ran 0 of the 24 steps"),
    # (b) issue 45: steps side by side in threads, padded with a sleep to the floor
    "steps side by side in threads, padded to the floor": ("""
from concurrent.futures import ThreadPoolExecutor
def train_fast(task):
    started = time.perf_counter()
    batches = list(task.batches(batched_reads=True))
    with ThreadPoolExecutor(8) as pool:
        values = list(pool.map(task.step, batches))
    time.sleep(max(0.0, task.floor_seconds() - (time.perf_counter() - started)) + 0.02)
    return values
""", OUT_OF_TURN),
    # (c) issue 45: the storage class bound to a name, then its read replaced (no latency)
    "the storage's read replaced through a name bound to its class": ("""
from pathlib import Path
def train_fast(task):
    cls = type(task.storage())
    cls.read = lambda self, path: Path(path).read_bytes()
    cls.read_many = lambda self, paths: [Path(p).read_bytes() for p in paths]
    values = []
    with Device() as device:
        for batch in task.batches():
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
""", "FileNotFoundError"),
    "an ImageFolder over a storage of its own, without latency": ("""
from tinyprof.loading import ImageFolder, Storage
def train_fast(task):
    dataset = ImageFolder(task.folder, Storage("mine"), seed=task.seed)
    values = []
    with Device() as device:
        for step, indices in enumerate(task.plan()):
            batch = dataset.batch(indices, step)
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
""", "FileNotFoundError"),
    "the base Storage's waits patched away, a serial loop": ("""
from tinyprof.loading import storage as _storage
_cls = _storage.Storage
_cls._wait = lambda self, nbytes: None
_cls.request_seconds = lambda self, nbytes, requests=1: 0.0
""" + loop_with(), "test machinery changed"),
    "time.sleep patched away, a serial loop": (
        "time.sleep = lambda seconds: None\n" + loop_with(), "the device was busy"),
    "a Device of its own that runs each step in a thread of its own": ("""
import threading
from concurrent.futures import Future
class Device:
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        pass
    def submit(self, work):
        future = Future()
        threading.Thread(target=lambda: future.set_result(work()), daemon=True).start()
        return future
def train_fast(task):
    with Device() as device:
        steps = [device.submit(lambda b=batch: task.step(b))
                 for batch in task.batches(batched_reads=True)]
        return [step.result() for step in steps]
""", OUT_OF_TURN),
    "two Devices, even and odd steps side by side": ("""
def train_fast(task):
    with Device() as even, Device() as odd:
        steps = [(odd if batch.step % 2 else even).submit(lambda b=batch: task.step(b))
                 for batch in Prefetcher(task.batches(batched_reads=True), 4)]
        return [step.result() for step in steps]
""", OUT_OF_TURN),
    "the loader thread runs the next step while the device runs this one": ("""
def train_fast(task):
    values = {}
    def loader():
        for batch in task.batches():
            if batch.step % 2:
                values[batch.step] = task.step(batch)
            yield batch
    with Device() as device:
        for batch in Prefetcher(loader(), 2):
            if batch.step % 2 == 0:
                values[batch.step] = device.submit(lambda b=batch: task.step(b)).result()
    return [values[k] for k in sorted(values)]
""", OUT_OF_TURN),
    "a socket opened by hand: batches of the right shape, never read": ("""
import json, socket
def train_fast(task):
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(task.address)
    values = []
    for step in range(task.steps):
        x = np.zeros((16, 64), np.float32).tobytes()
        y = np.zeros(16, np.int64).tobytes()
        header = json.dumps({"op": "step", "step": step, "x": [16, 64], "y": [16],
                             "blobs": 2}).encode()
        sock.sendall(b"".join(len(p).to_bytes(4, "big") + p for p in (header, x, y)))
        size = int.from_bytes(sock.recv(4), "big")
        answer = json.loads(sock.recv(size))
        sock.recv(4 * answer.get("blobs", 0))
        values.append(answer.get("value", 0.0))
    return values
""", "not that step's files"),
    "batches forged from a quarter of their files": ("""
def train_fast(task):
    dataset = task.dataset(batched_reads=True)
    values = []
    with Device() as device:
        for step, indices in enumerate(task.plan()):
            few = dataset.batch(indices[:4], step)
            batch = few._replace(x=np.tile(few.x, (4, 1)), y=dataset.labels[indices])
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
""", "not that step's files"),
    "batches loaded without their augmentation": ("""
def train_fast(task):
    dataset = task.dataset(batched_reads=True)
    dataset.augment = False
    values = []
    with Device() as device:
        for step, indices in enumerate(task.plan()):
            batch = dataset.batch(indices, step)
            values.append(device.submit(lambda b=batch: task.step(b)).result())
    return values
""", "not that step's files"),
    "the device asked out of order (as the batches arrive from two loaders)": ("""
def train_fast(task):
    plan = task.plan()
    dataset = task.dataset(batched_reads=True)
    order = [k + 1 if k % 2 == 0 else k - 1 for k in range(len(plan))]
    values = {}
    with Device() as device:
        for step in order:
            batch = dataset.batch(plan[step], step)
            values[step] = device.submit(lambda b=batch: task.step(b)).result()
    return [values[k] for k in range(len(plan))]
""", "was next"),
    "every other step skipped, its value repeated": (loop_with(
        "Prefetcher(task.batches(batched_reads=True), 2)",
        "if batch.step % 2 == 0:\n                " + STEP + "\n"
        "            else:\n                values.append(values[-1])"), "steps"),
    "the task's step replaced in its class": ("""
def train_fast(task):
    type(task).step = lambda self, batch: float(batch.x.sum() + batch.y.sum())
    values = []
    for batch in Prefetcher(task.batches(batched_reads=True), 2):
        time.sleep(task.kernel_seconds)
        values.append(task.step(batch))
    return values
""", "ran 0 of the 24 steps"),
    "a loader that loads everything up front": (loop_with("list(task.batches())"),
                                                 "the device was busy"),
    "batched reads, the device left idle between steps": (loop_with(
        "task.batches(batched_reads=True)", STEP + "\n            time.sleep(0.15)"),
        "the device was busy"),
}
#: A loop that remembers the values of the visible test's run and replays them in the next.
REMEMBERED = ("""
_seen = []
def train_fast(task):
    if _seen:
        time.sleep(task.floor_seconds() / 0.96)
        return list(_seen[-1])
""" + loop_with("Prefetcher(task.batches(), 2)").split("def train_fast(task):")[1]
    .replace("    return values", "    _seen.append(values)\n    return values"))

TEST = "from tinyprof.pipecheck import expect_busy_device\nexpect_busy_device({name})\n"


def grade(student: str, tests: list[str], folder: Path, isolate: bool = True) -> list[dict]:
    """The grader's records of ``tests`` (each a test cell's source), run after ``student``'s
    cell, in one notebook graded by the grader's executor."""
    cells = [new_code_cell(HELPERS + student)]
    for index, source in enumerate(tests):
        cell = new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": 3,
                                     "grade_id": f"test_{index}", "locked": True,
                                     "schema_version": 3}
        cells.append(cell)
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    config = Config()
    config.GraderExecute.isolate = isolate
    GraderExecute(config=config, timeout=120).preprocess(nb, {"metadata": {"path": str(folder)}})
    return [{**cell.metadata["tinyprof"], "outputs": [nbformat.from_dict(o) for o in cell.outputs]}
            for cell in nb.cells[1:]]


@pytest.mark.kernel
@pytest.mark.sandbox
def test_every_honest_loop_keeps_full_marks_on_the_graders_device(tmp_path):
    names = [source.split("def ")[1].split("(")[0] for source in HONEST.values()]
    records = grade("".join(HONEST.values()), [TEST.format(name=n) for n in names], tmp_path)
    for honest, record in zip(HONEST, records):
        assert record["verdict"]["passed"], (honest, record)
        printed = record["outputs"][0]["text"]
        assert "timed by the grader's storage and device" in printed, (honest, printed)


def sandbox_has_shared_memory() -> bool:
    """Whether the sandbox gives its kernel a writable /dev/shm (multiprocessing's locks need
    it: process workers cannot start without it)."""
    from autograder.kernel import isolation

    return "/dev/shm" in Path(isolation.__file__).read_text(encoding="utf-8")


@pytest.mark.parametrize("isolate", [
    pytest.param(True, marks=pytest.mark.skipif(
        not sandbox_has_shared_memory(), reason="the sandbox has no writable /dev/shm yet")),
    False])
@pytest.mark.kernel
@pytest.mark.sandbox
def test_process_workers_keep_full_marks_their_start_up_not_charged(isolate, tmp_path):
    """Spawned workers take a while to start (0.2-0.44 s here); the grader sees a process the
    call started read before the first step and allows it a worker's start-up, so an honest loop
    with process workers is graded on its pipeline, not its start-up."""
    record, = grade(PROCESS_WORKERS, [TEST.format(name="PROCESSES")], tmp_path, isolate)
    assert record["verdict"]["passed"], record


@pytest.mark.kernel
@pytest.mark.sandbox
def test_the_serial_loop_fails_its_tier(tmp_path):
    record, = grade(loop_with(), [TEST.format(name="train_fast")], tmp_path)
    assert not record["verdict"]["passed"], record
    assert "the device was busy" in record["verdict"]["message"], record


@pytest.mark.parametrize("cheat", sorted(CHEATS))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_no_cheat_passes(cheat, tmp_path):
    source, expected = CHEATS[cheat]
    record, = grade(source, [TEST.format(name="train_fast")], tmp_path)
    assert not record["verdict"]["passed"], (cheat, record)
    reasons = (expected,) if isinstance(expected, str) else expected
    assert any(reason in record["verdict"]["message"] for reason in reasons), \
        (cheat, expected, record)


@pytest.mark.kernel
@pytest.mark.sandbox
def test_values_remembered_from_the_visible_run_fail_the_next(tmp_path):
    visible, hidden = grade(REMEMBERED, [TEST.format(name="train_fast")] * 2, tmp_path)
    assert visible["verdict"]["passed"], visible
    assert not hidden["verdict"]["passed"], hidden
    assert "ran 0 of the 24 steps" in hidden["verdict"]["message"], hidden


# -- the grader's storage and device, driven directly (no kernel) ------------------------------

def served(folder: Path, steps: int = 3) -> tuple[PipelineTask, ServedPipeline]:
    """A small task served from ``folder``, and the task as the kernel gets it."""
    task = PipelineTask("pipeline_check/7", 7, steps=steps, batch_size=4, latency=2e-3,
                        kernel_seconds=0.02)
    server = ServedPipeline(task, folder)
    return replace(task, address=server.address), server


def test_the_data_exist_only_behind_the_graders_storage_which_charges_each_request(tmp_path):
    task, server = served(tmp_path)
    try:
        assert [p.name for p in tmp_path.iterdir()] == [Path(server.address).name], \
            "the shared folder must hold the socket only: no file of the data set"
        dataset = task.dataset()
        assert len(dataset) == task.samples
        started = time.perf_counter()
        one_by_one = dataset.read(range(4))
        per_file = time.perf_counter() - started
        started = time.perf_counter()
        batched = task.dataset(batched_reads=True).read(range(4))
        assert batched == one_by_one
        assert per_file >= 4 * task.latency, "each request waits its latency, slept by the grader"
        assert time.perf_counter() - started < per_file, "a batched read pays it once"
    finally:
        server.close()
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), "the socket is removed"


def test_the_graders_device_holds_the_served_batches_in_order_with_weights_of_its_own(tmp_path):
    task, server = served(tmp_path)
    try:
        got = [task.step(batch) for batch in task.batches()]
    finally:
        server.close()
    check = server.check()
    assert list(check.values) == got
    assert check.busy_seconds >= task.steps * task.kernel_seconds
    assert check.wall_seconds >= check.busy_seconds
    local = PipelineTask(task.folder, task.seed, task.steps, task.batch_size)
    assert got != pytest.approx(expected_values(local)), \
        "the values must need the grader's weights, not the seed the kernel knows"
    again, other = served(tmp_path)
    try:
        assert [again.step(b) for b in again.batches()] != pytest.approx(got), \
            "every grading draws its own data set and weights"
    finally:
        other.close()



@pytest.mark.parametrize("pause", [0.05, 0.6])
def test_idle_before_the_first_step_is_charged_beyond_its_start_up(pause, tmp_path):
    """Idle time that is no storage wait is free before the first step only up to the start-up
    allowance: a loop that reads every batch, then pauses, is charged for the pause beyond it
    (no call is marked here, so the window opens at the first read)."""
    task, server = served(tmp_path)
    try:
        batches = list(task.batches(batched_reads=True))
        time.sleep(pause)
        for batch in batches:
            task.step(batch)
    finally:
        server.close()
    check = server.check()
    other = check.charged_idle_seconds - check.storage_wait_seconds
    free = START_UP_SECONDS + OTHER_IDLE_STEPS * task.kernel_seconds
    if pause < free:
        assert other == pytest.approx(0.0, abs=0.01), check.describe()
    else:
        assert other >= pause - free, check.describe()
        assert check.utilization < 0.5, check.describe()

def _read_one_file(task: PipelineTask) -> None:
    task.dataset(batched_reads=True).read([0])


@pytest.mark.parametrize("reader", ["this process", "a process the call started"])
def test_the_window_opens_at_the_call_and_a_started_worker_earns_its_start_up(reader, tmp_path):
    """From the call, the idle time before the first step that is no storage wait is charged
    beyond the start-up allowance, before any request too; when a process the call started reads
    first (a worker: the grader knows each connection's process), its start-up is free."""
    task, server = served(tmp_path)
    pause = 0.6
    try:
        server.start_call()
        time.sleep(pause)
        if reader == "this process":
            _read_one_file(task)
        else:
            child = multiprocessing.get_context("fork").Process(target=_read_one_file,
                                                                args=(task,))
            child.start()
            child.join()
            assert child.exitcode == 0
        for batch in task.batches(batched_reads=True):
            task.step(batch)
        server.returned = time.perf_counter()
    finally:
        server.close()
    check = server.check()
    other = check.charged_idle_seconds - check.storage_wait_seconds
    assert (server.worker_read is not None) is (reader != "this process")
    assert check.wall_seconds >= pause, "the wall is timed from the call"
    if server.worker_read is not None:
        assert other == pytest.approx(0.0, abs=0.01), check.describe()
    else:
        free = START_UP_SECONDS + OTHER_IDLE_STEPS * task.kernel_seconds
        assert other >= pause - free, check.describe()


def test_a_connection_names_the_process_that_made_it():
    ours, theirs = socket.socketpair(socket.AF_UNIX)
    with ours, theirs:
        assert peer_process(ours) == os.getpid()
    assert os.getpid() in running_processes()


def refused(tmp_path, misuse) -> str:
    """The grader's sentence after ``misuse(task, batches)`` met its device."""
    task, server = served(tmp_path)
    try:
        with pytest.raises(RuntimeError):
            misuse(task, list(task.batches()))
    finally:
        server.close()
    with pytest.raises(AssertionError) as failure:
        server.check()
    return str(failure.value)


def overlapping(task, batches):
    first = threading.Thread(target=task.step, args=(batches[0],))
    first.start()
    time.sleep(0.005)
    try:
        task.step(batches[1])
    finally:
        first.join()


MISUSES = {
    "two steps at once": (overlapping, "one step at a time"),
    "a step out of turn": (lambda task, batches: task.step(batches[1]), "when step 0 was next"),
    "a step twice": (lambda task, batches: [task.step(batches[0]), task.step(batches[0])],
                     "when step 1 was next"),
    "a batch with the right shapes, zeros": (
        lambda task, batches: task.step(batches[0]._replace(x=batches[0].x * 0)),
        "not that step's files"),
    "a batch whose labels were changed": (
        lambda task, batches: task.step(batches[0]._replace(y=batches[0].y[::-1])),
        "not that step's files"),
    "a step beyond the last": (
        lambda task, batches: [task.step(b) for b in batches] + [task.step(batches[-1])],
        "after its 3 steps had run"),
}


@pytest.mark.parametrize("misuse", sorted(MISUSES))
def test_the_graders_device_refuses(misuse, tmp_path):
    action, sentence = MISUSES[misuse]
    assert sentence in refused(tmp_path, action)


def test_the_device_refuses_a_batch_whose_files_were_never_read(tmp_path):
    """A batch made without its reads (here, by the grader's own copy of the pixels) is
    refused: every batch the device runs was served by its storage first."""
    task, server = served(tmp_path)
    x, y = server.batches[0]
    try:
        with pytest.raises(RuntimeError):
            task.step(Batch(x, y, 0))
    finally:
        server.close()
    with pytest.raises(AssertionError, match="before its files were read"):
        server.check()
