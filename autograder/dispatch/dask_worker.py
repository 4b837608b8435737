"""The Dask worker's side of grading on a cluster (``grade ... --scheduler``; the parent's side
is cluster.py): what crosses the network, and the task each Dask worker runs.

The parent first runs :func:`probe` on every worker (``Client.run``): the worker may grade when
its sandbox starts and its :func:`grader_fingerprint` is the instructor's. Each submission then
arrives as a :class:`Shipment` and :func:`grade_shipment` hands its :class:`records.Task` line
to a ``python -m autograder.dispatch.worker`` process (pool.Worker, kept for the next task),
which grades it in its own mount namespace with the sandbox, limits and trusted verdicts of
local grading; the work folder's files go back in a :class:`Returned`, at most
``MAX_RETURN_BYTES``. :func:`end_run` stops a run's graders and removes its files.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import shutil
import threading
import time
import uuid
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from .. import course, records
from ..kernel import caches, isolation, resources
from .contract import after_loss, timed_out
from .pool import Worker

#: Event topic on which a worker says it has started a submission (the progress bar).
TOPIC = "tinyprof-grading"
#: What one graded submission may send back: shard, notebooks and feedback pages together.
MAX_RETURN_BYTES = 256 * 2**20
#: Top-level folders of a work folder that come back, below ``STEP/student/assignment``.
STEPS = ("submitted", "autograded", "feedback")



def grader_fingerprint(assignments: list[str]) -> str:
    """What must be the same on every machine that grades: the grader's code (autograder/,
    but not the demo's sample cohort in autograder/samples, which grades nothing) and the
    instructor notebooks of ``assignments`` (hidden tests, points)."""
    digest = hashlib.sha256(f"records {records.VERSION}".encode())
    package = Path(__file__).resolve().parent.parent
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] == "samples":
            continue
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    for aid in sorted(assignments):
        for notebook in sorted((course.SOLUTIONS / aid).glob("*.ipynb")):
            digest.update(f"{aid}/{notebook.name}".encode())
            digest.update(notebook.read_bytes())
    return digest.hexdigest()[:16]


# --- what crosses the network ------------------------------------------------------------------

@dataclass(frozen=True)
class Shipment:
    """One task and everything a worker needs to grade it without the instructor's disk.

    ``task`` is the records.Task line (its paths are the instructor's, rewritten on arrival);
    ``handed_in`` and ``release`` map each released notebook name to the handed-in bytes and
    to the released notebook; ``template`` is the template gradebook, zlib-compressed."""

    run: str
    task: str
    handed_in: dict[str, bytes]
    release: dict[str, bytes]
    template: bytes
    fingerprint: str
    assignments: tuple[str, ...]
    jobs: int
    limit_s: float
    sandbox: bool


@dataclass(frozen=True)
class Returned:
    """What a worker sends back: the records.Result line (empty when ``refused`` says why it
    would not grade), who graded it, under which isolation, and the work folder's files that
    the parent merges (path relative to the work folder → bytes)."""

    worker: str
    result: str = ""
    sandbox: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    refused: str = ""


# --- the worker's side ---------------------------------------------------------------------------

#: Spawns grading processes from one thread that lives as long as the Dask worker: Linux's
#: parent-death signal (launcher.die_with_parent) follows the thread that started a child.
_SPAWNER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tinyprof-spawner")
#: (run, worker address) → its state; ``local:N`` runs N workers in one process.
_RUNS: dict[tuple[str, str], _Run] = {}
#: Runs the parent has ended (end_run): a task of theirs still queued here is not graded.
_ENDED: set[str] = set()
_RUNS_LOCK = threading.Lock()
#: Idle graders of a run not heard from for this long are stopped when another run starts.
IDLE_RUN_S = 300


def _worker_name(worker) -> str:
    name, address = str(worker.name), str(worker.address)
    return address if name == address else f"{name} ({address})"


class _Run:
    """One grading run's state in one Dask worker process: its folder, ``jobs`` slots, the
    graders (autograder.dispatch.worker processes) that are idle, and whether this machine may
    grade."""

    def __init__(self, run: str, jobs: int, root: Path):
        self.run, self.root = run, root
        self.slots = threading.BoundedSemaphore(jobs)
        self.lock = threading.Lock()
        self.idle: list[Worker] = []
        self.busy: set[Worker] = set()
        self.spawned = 0
        self.stopped = False
        self.verdicts: dict[tuple[str, bool], tuple[str, str]] = {}
        self.used = time.monotonic()

    def verdict(self, wanted: str, assignments: tuple[str, ...],
                sandbox: bool) -> tuple[str, str]:
        """(isolation in use, "") when this machine may grade, or ("", why it refuses)."""
        with self.lock:
            key = (wanted, sandbox)
            if key not in self.verdicts:
                self.verdicts[key] = _verdict(wanted, assignments, sandbox)
            return self.verdicts[key]

    def grader(self) -> Worker:
        with self.lock:
            if self.idle:
                grader = self.idle.pop()
            else:
                self.spawned += 1
                log = self.root / f"grader-{self.spawned}.log"
                grader = _SPAWNER.submit(Worker, log).result()
            self.busy.add(grader)
            return grader

    def release(self, grader: Worker, keep: bool) -> None:
        with self.lock:
            self.busy.discard(grader)
            if keep and not self.stopped:
                self.idle.append(grader)
                return
        grader.stop(kill=not keep)

    def stop(self) -> None:
        """Stop every grader of this run, the busy ones outright (the parent gave up on it)."""
        with self.lock:
            self.stopped = True
            idle, busy = self.idle, list(self.busy)
            self.idle = []
        for grader in idle:
            grader.stop()
        for grader in busy:
            grader.kill()


def _verdict(wanted: str, assignments: tuple[str, ...], sandbox: bool) -> tuple[str, str]:
    try:
        used = isolation.in_use(sandbox)
    except isolation.IsolationUnavailable as why:
        return "", f"its sandbox cannot start: {why}"
    mine = grader_fingerprint(list(assignments))
    if mine != wanted:
        return "", (f"it would grade with other code or chapters than the instructor's (its "
                    f"autograder/ and solutions/ of {', '.join(assignments)} have fingerprint "
                    f"{mine}, the instructor's {wanted}): check out the same commit there")
    return used, ""


def _run_state(run: str, jobs: int, dask_worker) -> _Run:
    key = (run, str(dask_worker.address))
    with _RUNS_LOCK:
        state = _RUNS.get(key)
        if state is None:
            now = time.monotonic()
            for old_key, old in list(_RUNS.items()):
                if not old.busy and now - old.used > IDLE_RUN_S:
                    old.stop()
                    _RUNS.pop(old_key, None)
                    shutil.rmtree(old.root, ignore_errors=True)
            mine = Path(dask_worker.local_directory) / "tinyprof"
            root = mine / run
            root.mkdir(parents=True, exist_ok=True)
            # the font cache (worker.configure: beside the work folders) outlives the run
            (mine / "cache").mkdir(exist_ok=True)
            if not (root / "cache").exists():
                (root / "cache").symlink_to(mine / "cache")
            state = _RUNS[key] = _Run(run, jobs, root)
        state.used = time.monotonic()
        return state


def probe(run: str, wanted: str, assignments: tuple[str, ...], sandbox: bool,
          jobs: int, dask_worker=None) -> dict:
    """Run by the parent on each worker (``Client.run``) before it gets work: whether it may
    grade (its sandbox starts, its fingerprint matches), and what it holds. It also removes what
    a killed grader left on this machine (socket folders, control groups)."""
    isolation.sweep_orphan_sockets()
    resources.sweep_orphans()
    state = _run_state(run, jobs, dask_worker)
    used, refused = state.verdict(wanted, assignments, sandbox)
    return {"worker": _worker_name(dask_worker), "sandbox": used, "refused": refused,
            "nthreads": dask_worker.state.nthreads}


def on_scheduler(dask_scheduler=None) -> int:
    """Run on the scheduler before any task: it unpickles every task it is sent, so it too
    must be able to import the grader."""
    return records.VERSION


def end_run(run: str, dask_worker=None) -> bool:
    """Run by the parent on every worker when it stops: this run's graders and files go."""
    with _RUNS_LOCK:
        _ENDED.add(run)
        state = _RUNS.pop((run, str(dask_worker.address)), None)
    if state is None:
        return False
    state.stop()
    shutil.rmtree(state.root, ignore_errors=True)
    return True


def grade_shipment(shipment: Shipment) -> Returned:
    """The Dask task: grade one submission on this worker, as a local worker process would."""
    from distributed import get_worker

    dask_worker = get_worker()
    who = _worker_name(dask_worker)
    if shipment.run in _ENDED:
        return Returned(who, refused="the instructor's command has stopped this grading run")
    state = _run_state(shipment.run, shipment.jobs, dask_worker)
    used, refused = state.verdict(shipment.fingerprint, shipment.assignments, shipment.sandbox)
    if refused:
        return Returned(who, refused=refused)
    task = records.Task.from_line(shipment.task)
    with state.slots:
        dask_worker.log_event(TOPIC, {"run": shipment.run, "key": task.key, "worker": who})
        if shipment.sandbox:   # once per run and machine, not in every kernel (caches.py)
            with state.lock:
                caches.matplotlib_cache(state.root / "cache" / "matplotlib")
        local = _unpack(shipment, task, state.root)
        try:
            result = _grade(state, local, shipment.limit_s)
            files, result = _pack(local, result)
        finally:
            shutil.rmtree(local.work, ignore_errors=True)
            shutil.rmtree(Path(local.work).with_name(Path(local.work).name + "-in"),
                          ignore_errors=True)
    return Returned(who, result.to_line(), used, files)


def _unpack(shipment: Shipment, task: records.Task, root: Path) -> records.Task:
    """Write the shipment's files under ``root`` and return the task pointed at them."""
    digest = Path(task.work).name
    handed_in = root / f"{digest}-in"
    shutil.rmtree(handed_in, ignore_errors=True)
    handed_in.mkdir(parents=True)
    notebooks = {}
    for number, (name, data) in enumerate(sorted(shipment.handed_in.items())):
        path = handed_in / f"{number}.ipynb"
        path.write_bytes(data)
        notebooks[name] = str(path)
    release = root / "release" / task.assignment
    release.mkdir(parents=True, exist_ok=True)
    for name, data in shipment.release.items():
        _write_once(release / PurePosixPath(name).name, data)
    template = root / f"template-{hashlib.sha256(shipment.template).hexdigest()[:16]}.db"
    _write_once(template, zlib.decompress(shipment.template))
    return replace(task, work=str(root / digest), notebooks=notebooks, template=str(template),
                   release=str(root / "release"))


def _write_once(path: Path, data: bytes) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    temporary.write_bytes(data)
    os.replace(temporary, path)   # atomic: a grader reading it sees the old file or the new


def _grade(state: _Run, task: records.Task, limit_s: float) -> records.Result:
    """One task as pool.Pool grades it (contract.py): a grader that dies holding it is replaced
    and the task tried once more; one past ``limit_s`` is killed and the task timed out."""
    while not state.stopped:
        grader = state.grader()
        try:
            grader.send(task)
        except OSError:   # it died while idle (killed, out of memory)
            state.release(grader, keep=False)
            result = None
        else:
            if not grader.ready(limit_s):
                state.release(grader, keep=False)
                return timed_out(task, limit_s)
            result = grader.receive()
            state.release(grader, keep=result is not None)
        if result is not None:
            return result
        again = after_loss(task)
        if isinstance(again, records.Result):
            return again
        task = again
    return records.Result(task.work, "not graded", [records.DIED_TWICE])


def _pack(task: records.Task, result: records.Result
          ) -> tuple[dict[str, bytes], records.Result]:
    """The files of a graded work folder, by path relative to it, at most MAX_RETURN_BYTES."""
    work = Path(task.work)
    paths = [work / "gradebook.db"] if result.status == "graded" else []
    for step in STEPS:
        folder = work / step / task.student / task.assignment
        if folder.is_dir():
            paths += sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    total = sum(p.stat().st_size for p in paths if p.exists())
    if total > MAX_RETURN_BYTES:
        return {}, records.Result(task.work, "not graded", [
            f"its graded files came to {total / 2**20:.0f} MB, more than the "
            f"{MAX_RETURN_BYTES // 2**20} MB a worker may send back"])
    return {p.relative_to(work).as_posix(): p.read_bytes() for p in paths if p.exists()}, result
