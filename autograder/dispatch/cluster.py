"""Grading a cohort on a Dask cluster: ``grade ... --scheduler tcp://HOST:PORT`` (or ``local:N``).

Dask (``distributed``) only carries the work; each submission is graded exactly as on one
machine. On the worker, the Dask task hands the :class:`records.Task` line to a
``python -m autograder.dispatch.worker`` process (pool.Worker, kept for the next task),
which grades it in its own mount namespace with the sandbox, limits and trusted verdicts of
local grading. The worker shares no disk with the instructor's machine:

- down, with each task (:class:`Shipment`): the handed-in files' bytes, the template gradebook,
  the released notebooks, and a fingerprint of the grader's code and the chapters' instructor
  notebooks;
- up (:class:`Returned`): the Result line, who graded it under which isolation, and the
  shard, autograded notebook and feedback page as bytes (at most ``MAX_RETURN_BYTES``), which
  this process writes into ``DIR/work/<digest>`` and merges as it merges a local worker's.

Only the instructor's process writes the gradebook, ``grades.csv``, feedback and the summary.

Refusals and faults:

- a worker whose sandbox cannot start, or whose checkout grades differently (another grader
  or other chapters: its fingerprint differs), or that cannot import the grader, is probed
  before it gets work and refuses every task with the reason, which the summary lists; tasks go
  to the other workers, and when none is left the submission is ``not graded`` with the reasons;
- a worker killed mid-notebook: Dask runs the task again on another worker (``KilledWorker``
  after ``distributed.scheduler.allowed-failures`` deaths: ``not graded``, graded again by a
  re-run); a result that arrives twice for one submission is merged once;
- the instructor's process interrupted: the workers' graders of this run are stopped, and a
  re-run resumes from ``DIR/journal.jsonl`` like a local one;
- the scheduler gone: :class:`ClusterError` (what is merged stays merged; re-run to finish).

``--jobs`` means the same on each worker as on one machine: a worker grades at most that many
submissions at once (a semaphore per worker and run; start ``dask worker --nthreads`` with the
same number, so that no thread holds a task it cannot start). The parent keeps about twice the
cluster's slots in flight, so the scheduler always has the next task at hand and neither side
holds a cohort's files in memory.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import queue
import select
import shutil
import signal
import sys
import threading
import time
import uuid
import zlib
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Callable, Iterator

from .. import course, records
from ..kernel import caches, isolation, resources
from .pool import Worker

#: Event topic on which a worker says it has started a submission (the progress bar).
TOPIC = "tinyprof-grading"
#: What one graded submission may send back: shard, notebooks and feedback pages together.
MAX_RETURN_BYTES = 256 * 2**20
#: How long ``grade`` waits for a first worker to join the scheduler (a SLURM job may queue).
WAIT_FOR_WORKERS_S = 600
CONNECT_S = 30
#: How often the parent looks for workers that joined (and probes them).
REFRESH_S = 2.0
#: A task refused by this many workers in a row is reported rather than sent again.
MAX_REFUSALS = 5
#: Top-level folders of a work folder that come back, below ``STEP/student/assignment``.
STEPS = ("submitted", "autograded", "feedback")


class ClusterError(RuntimeError):
    """The Dask cluster cannot be reached, or went away, or no worker in it can grade."""


def parse_scheduler(scheduler: str) -> int | None:
    """N for ``local:N``, None for an address (``tcp://HOST:PORT``, ``tls://...``); ValueError
    naming the argument otherwise."""
    if scheduler.startswith("local:"):
        count = scheduler.removeprefix("local:")
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"--scheduler {scheduler}: local:N needs N of at least 1 (workers "
                             "on this machine)")
        return int(count)
    if "://" not in scheduler or not scheduler.split("://", 1)[1]:
        raise ValueError(f"--scheduler {scheduler!r}: give the Dask scheduler's address, "
                         "tcp://HOST:PORT (as `dask scheduler` prints it), or local:N")
    return None


def fingerprint(assignments: list[str]) -> str:
    """What must be the same on every machine that grades: the grader's code (autograder/)
    and the instructor notebooks of ``assignments`` (hidden tests, points)."""
    digest = hashlib.sha256(f"records {records.VERSION}".encode())
    package = Path(__file__).resolve().parent.parent
    for path in sorted(package.rglob("*.py")):
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
            try:
                os.killpg(grader.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _verdict(wanted: str, assignments: tuple[str, ...], sandbox: bool) -> tuple[str, str]:
    try:
        used = isolation.in_use(sandbox)
    except isolation.IsolationUnavailable as why:
        return "", f"its sandbox cannot start: {why}"
    mine = fingerprint(list(assignments))
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
    """pool.Pool's contract for one task: a grader crashed is replaced and the task tried once
    more; one past ``limit_s`` is killed and the task timed out."""
    for _ in range(2):
        if state.stopped:
            break
        grader = state.grader()
        try:
            grader.send(task)
        except OSError:   # it died while idle (killed, out of memory): try a new one
            state.release(grader, keep=False)
            continue
        ready, _, _ = select.select([grader.process.stdout], [], [], limit_s)
        if not ready:
            state.release(grader, keep=False)
            return records.Result(task.work, "timed out", [
                f"grading took longer than {limit_s:.0f} s in all and was stopped"])
        result = grader.receive()
        state.release(grader, keep=result is not None)
        if result is not None:
            return result
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


# --- the instructor's side -----------------------------------------------------------------------

@contextmanager
def connect(scheduler: str, jobs: int) -> Iterator:
    """A Client of the scheduler at ``scheduler``, or of a LocalCluster for ``local:N`` (N
    workers of ``jobs`` threads each, in this process)."""
    import logging

    from distributed import Client, LocalCluster

    count = parse_scheduler(scheduler)
    if count is not None:
        # in this process (each worker's graders are processes of their own): no
        # interpreters to start, no network, and they end with this command
        with LocalCluster(n_workers=count, threads_per_worker=jobs, processes=False,
                          dashboard_address=":0", silence_logs=logging.ERROR) as local, \
                Client(local) as client:
            yield client
        return
    try:
        client = Client(scheduler, timeout=CONNECT_S)
    except (OSError, TimeoutError) as error:
        raise ClusterError(f"cannot reach the Dask scheduler at {scheduler} within {CONNECT_S} "
                           f"s ({error}); start it with `dask scheduler`, or check the "
                           "address") from None
    try:
        yield client
    finally:
        client.close(timeout=10)


@dataclass
class _Flight:
    """A task on its way: how often it was sent, refused, and to which workers it may go
    (None: any)."""

    payload: records.Task
    sent: int = 0
    refusals: int = 0
    allowed: frozenset[str] | None = None


@dataclass
class Cluster:
    """Grade ``records.Task`` payloads on the cluster behind ``client`` (a distributed.Client);
    ``done(task, result, worker, sandbox)`` is called here once for each task."""

    client: object
    scheduler: str
    jobs: int
    limit_s: float
    done: Callable[..., None]
    started: Callable[[records.Task], None] = lambda task: None
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    problems: list[str] = field(default_factory=list)
    _probed: dict[str, dict] = field(default_factory=dict)
    _alive: set[str] = field(default_factory=set)
    _checked: float = 0.0
    _events: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    _by_key: dict[str, records.Task] = field(default_factory=dict)
    _merged: set[str] = field(default_factory=set)
    _begun: set[str] = field(default_factory=set)

    def grade(self, payloads: list[records.Task]) -> list[str]:
        """Grade them all; return the problems (workers that refused, and why)."""
        if not payloads:
            return self.problems
        self._by_key = {p.key: p for p in payloads}
        self.assignments = tuple(sorted({p.assignment for p in payloads}))
        self.wanted = fingerprint(list(self.assignments))
        self.template = zlib.compress(Path(payloads[0].template).read_bytes())
        self.sandbox = payloads[0].sandbox
        self._check_scheduler()
        self._call(self.client.subscribe_topic, TOPIC,
                   lambda event: self._events.put(event[1]))
        self._wait_for_workers()
        pending = deque(_Flight(p) for p in payloads)
        flying: dict = {}
        try:
            while pending or flying:
                good = self._workers()
                if not self._alive and not flying:
                    self._wait_for_workers()   # every worker left: wait for one, or stop
                    continue
                for future, flight in list(flying.items()):
                    if flight.allowed is not None and not flight.allowed & set(good):
                        future.cancel()   # every worker it may go to is gone: send it again
                        pending.appendleft(flying.pop(future))
                while pending and len(flying) < max(2, 2 * self._slots(good)):
                    flight = pending.popleft()
                    if not good and self._alive and self._alive <= set(self._probed):
                        self._nobody(flight.payload)   # every worker refused: ship nothing
                        continue
                    future, flight = self._submit(flight, good)
                    flying[future] = flight
                finished = self._wait(list(flying))
                self._drain()
                for future in finished:
                    again = self._settle(future, flying.pop(future))
                    if again is not None:
                        pending.appendleft(again)
        except BaseException:
            self._cancel(list(flying))
            raise
        self._end()
        return self.problems

    # -- workers --

    def _check_scheduler(self) -> None:
        try:
            self._call(self.client.run_on_scheduler, on_scheduler)
        except ClusterError:
            raise
        except Exception as error:  # noqa: BLE001 - whatever the scheduler could not load
            raise ClusterError(
                f"the Dask scheduler at {self.scheduler} cannot load the grader's tasks "
                f"({type(error).__name__}: {error}): it unpickles them, so it needs the course's "
                "environment with the repository on its path, like the workers: start it with "
                "`.venv/bin/python -m dask scheduler` from the repository "
                "(book/instructors.md)") from None

    def _wait_for_workers(self) -> None:
        from distributed import TimeoutError as DaskTimeout  # noqa: A001

        if self._call(self.client.nthreads):
            return
        print(f"waiting up to {WAIT_FOR_WORKERS_S} s for a Dask worker to join {self.scheduler}",
              file=sys.stderr, flush=True)
        try:
            self.client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS_S)
        except (DaskTimeout, TimeoutError):
            raise ClusterError(f"no Dask worker joined {self.scheduler} within "
                               f"{WAIT_FOR_WORKERS_S} s: start one with `dask worker "
                               f"{self.scheduler}` (book/instructors.md)") from None

    def _workers(self, force: bool = False) -> list[str]:
        """Addresses of the workers that may grade, probing any that joined since last time."""
        if force or time.monotonic() - self._checked > REFRESH_S:
            self._checked = time.monotonic()
            threads = self._call(self.client.nthreads)
            new = sorted(set(threads) - set(self._probed))
            if new:
                self._probe(new)
            self._alive = set(threads)
        return [a for a in sorted(self._alive) if a in self._probed
                and not self._probed[a]["refused"]]

    def _probe(self, addresses: list[str]) -> None:
        answers = self._call(self.client.run, probe, self.run, self.wanted, self.assignments,
                             self.sandbox, self.jobs, workers=addresses, on_error="return")
        for address in addresses:
            answer = answers.get(address)
            if not isinstance(answer, dict):
                why = (f"it cannot load the grader ({answer}): start it in the course's "
                       "environment from the repository, `.venv/bin/python -m dask worker "
                       "...` (book/instructors.md)" if answer is not None
                       else "it did not answer")
                answer = {"worker": address, "sandbox": "", "refused": why, "nthreads": 0}
            self._probed[address] = answer
            if answer["refused"]:
                self._refusal(answer["worker"], answer["refused"])
            elif answer["nthreads"] != self.jobs:
                print(f"note: Dask worker {answer['worker']} has {answer['nthreads']} thread(s) "
                      f"and grades {min(answer['nthreads'], self.jobs)} submission(s) at once "
                      f"(--jobs {self.jobs}); start it with --nthreads {self.jobs}",
                      file=sys.stderr, flush=True)

    def _refusal(self, worker: str, why: str) -> None:
        line = f"Dask worker {worker} refused to grade: {why}"
        if line not in self.problems:
            self.problems.append(line)
            print(line, file=sys.stderr, flush=True)

    def _slots(self, good: list[str]) -> int:
        return sum(min(self._probed[a]["nthreads"], self.jobs) for a in good)

    # -- tasks --

    def _submit(self, flight: _Flight, good: list[str]) -> tuple[object, _Flight]:
        payload = flight.payload
        handed_in = {name: Path(path).read_bytes() for name, path in payload.notebooks.items()}
        release = {name: (Path(payload.release) / payload.assignment / name).read_bytes()
                   for name in payload.notebooks}
        shipment = Shipment(self.run, payload.to_line(), handed_in, release, self.template,
                            self.wanted, self.assignments, self.jobs, self.limit_s,
                            payload.sandbox)
        # Once a worker has refused, tasks go only to those that may grade (strictly: Dask's
        # loose restrictions let an idle worker steal them); one whose workers all left is
        # sent again (see grade).
        refused = any(answer["refused"] for answer in self._probed.values())
        allowed = frozenset(good) if refused else None
        flight = replace(flight, sent=flight.sent + 1, allowed=allowed)
        key = f"tinyprof-{self.run}-{Path(payload.work).name}-{flight.sent}"
        future = self._call(self.client.submit, grade_shipment, shipment, key=key, pure=False,
                            retries=0, workers=sorted(allowed) if allowed else None)
        return future, flight

    def _wait(self, futures: list) -> list:
        from distributed import wait

        try:
            done, _ = self._call(wait, futures, timeout=0.5, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return []
        return list(done)

    def _drain(self) -> None:
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, dict) and event.get("run") == self.run \
                    and event.get("key") in self._by_key and event["key"] not in self._begun:
                self._begun.add(event["key"])
                self.started(self._by_key[event["key"]])

    def _settle(self, future, flight: _Flight) -> _Flight | None:
        """Merge a finished future's result; return the flight if it must go out again."""
        from distributed.scheduler import KilledWorker

        payload = flight.payload
        if future.status == "cancelled":
            raise self._lost()
        if future.status == "error":
            error = future.exception()
            if isinstance(error, KilledWorker):
                why = (f"the Dask workers grading it died each time ({error}); not the "
                       "student's score: run the same command again to grade it")
            else:
                why = f"the Dask task failed: {type(error).__name__}: {error}"
            self._finish(payload, records.Result(payload.work, "not graded", [why]), "", "")
            return None
        returned: Returned = future.result()
        if returned.refused:
            self._refusal(returned.worker, returned.refused)
            self._workers(force=True)
            if flight.refusals + 1 < MAX_REFUSALS and self._workers():
                return replace(flight, refusals=flight.refusals + 1)
            self._nobody(payload)
            return None
        try:
            result = records.Result.from_line(returned.result)
            local = self._write(payload, returned.files)
        except (records.RecordError, ValueError) as bad:
            result, local = records.Result(payload.work, "not graded", [
                f"Dask worker {returned.worker} sent back something unusable: {bad}"]), None
        self._finish(payload, replace(result, work=str(local or payload.work)),
                     returned.worker, returned.sandbox)
        return None

    def _nobody(self, payload: records.Task) -> None:
        self._finish(payload, records.Result(payload.work, "not graded", [
            "no Dask worker would grade it (see the problems: each worker's reason); not the "
            "student's score: run the same command again once a worker can grade"]), "", "")

    def _finish(self, payload: records.Task, result: records.Result, worker: str,
                sandbox: str) -> None:
        if payload.key in self._merged:
            return   # a second result for one submission: the first one counts
        self._merged.add(payload.key)
        self._begun.add(payload.key)
        self.done(payload, result, worker, sandbox)

    def _write(self, payload: records.Task, files: dict[str, bytes]) -> Path:
        """The returned files, under DIR/work/<digest> where a local worker leaves them."""
        folder = Path(payload.work)
        allowed = {f"{step}/{payload.student}/{payload.assignment}" for step in STEPS}
        total = 0
        for name, data in files.items():
            path = PurePosixPath(name)
            inside = name == "gradebook.db" or any(
                str(path).startswith(prefix + "/") for prefix in allowed)
            if path.is_absolute() or ".." in path.parts or not inside \
                    or not isinstance(data, bytes):
                raise ValueError(f"a file outside the submission's folders: {name!r}")
            total += len(data)
        if total > MAX_RETURN_BYTES:
            raise ValueError(f"{total / 2**20:.0f} MB of files")
        shutil.rmtree(folder, ignore_errors=True)
        for name, data in files.items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return folder

    # -- the end --

    def _lost(self) -> ClusterError:
        return ClusterError(
            f"lost the Dask scheduler at {self.scheduler}: {len(self._merged)} submission(s) "
            "graded in this run are kept in the journal; start the scheduler and its workers "
            "again and run the same command to grade the rest")

    def _call(self, function, *args, **kwargs):
        """A Dask call; a scheduler that is gone becomes a ClusterError."""
        from distributed.comm.core import CommClosedError

        if self.client.status in ("closed", "closing"):
            raise self._lost()
        try:
            return function(*args, **kwargs)
        except TimeoutError:
            raise   # an OSError, but only the call's own time limit
        except (CommClosedError, OSError, concurrent.futures.CancelledError) as error:
            raise self._lost() from error

    def _cancel(self, futures: list) -> None:
        """Interrupted (or the scheduler gone): drop what is queued, stop this run's graders."""
        if self.client.status != "running":
            return
        try:
            self.client.cancel(futures)
            self.client.run(end_run, self.run, on_error="ignore")
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass

    def _end(self) -> None:
        try:
            self.client.run(end_run, self.run, on_error="ignore")
        except Exception:  # noqa: BLE001 - the graders end with their workers anyway
            pass


def grade_on_cluster(payloads: list[records.Task], *, scheduler: str, jobs: int, limit_s: float,
                     done: Callable[..., None],
                     started: Callable[[records.Task], None] = lambda task: None) -> list[str]:
    """Grade ``payloads`` on the Dask cluster at ``scheduler``; ``done(task, result, worker,
    sandbox)`` is called in this process once per task. Returns the cluster's problems."""
    with connect(scheduler, jobs) as client:
        return Cluster(client, scheduler, jobs, limit_s, done, started).grade(payloads)


__all__ = ["ClusterError", "MAX_RETURN_BYTES", "Returned", "Shipment", "end_run", "fingerprint",
           "grade_on_cluster", "grade_shipment", "parse_scheduler", "probe"]
