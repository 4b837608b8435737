"""Grading a cohort on a Dask cluster: ``grade ... --scheduler tcp://HOST:PORT`` (or ``local:N``).
This is the instructor's side (:class:`Cluster`); what runs on each Dask worker is in
dask_worker.py.

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
import queue
import shutil
import sys
import time
import uuid
import zlib
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Iterator

from .. import records
from .contract import Done, Started
from .dask_worker import (
    MAX_RETURN_BYTES,
    STEPS,
    TOPIC,
    Returned,
    Shipment,
    end_run,
    grade_shipment,
    grader_fingerprint,
    on_scheduler,
    probe,
)

#: How long ``grade`` waits for a first worker to join the scheduler (a SLURM job may queue).
WAIT_FOR_WORKERS_S = 600
CONNECT_S = 30
#: How often the parent looks for workers that joined (and probes them).
REFRESH_S = 2.0
#: A task refused by this many workers in a row is reported rather than sent again.
MAX_REFUSALS = 5

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
    """Grade ``records.Task`` payloads on the cluster at ``scheduler`` (a contract.Dispatcher),
    through ``client`` (a distributed.Client; None: connect in ``run``); ``done(task, result,
    worker, sandbox)`` is called here once for each task."""

    client: object
    scheduler: str
    jobs: int
    limit_s: float
    done: Done
    started: Started = lambda task: None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    problems: list[str] = field(default_factory=list)
    _probed: dict[str, dict] = field(default_factory=dict)
    _alive: set[str] = field(default_factory=set)
    _checked: float = 0.0
    _events: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    _by_key: dict[str, records.Task] = field(default_factory=dict)
    _merged: set[str] = field(default_factory=set)
    _begun: set[str] = field(default_factory=set)

    def run(self, payloads: list[records.Task]) -> list[str]:
        """Grade them all; return the problems (workers that refused, and why)."""
        if not payloads:
            return self.problems
        if self.client is None:
            with connect(self.scheduler, self.jobs) as client:
                self.client = client
                try:
                    return self._run(payloads)
                finally:
                    self.client = None
        return self._run(payloads)

    def _run(self, payloads: list[records.Task]) -> list[str]:
        self._by_key = {p.key: p for p in payloads}
        self.assignments = tuple(sorted({p.assignment for p in payloads}))
        self.wanted = grader_fingerprint(list(self.assignments))
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
        answers = self._call(self.client.run, probe, self.run_id, self.wanted, self.assignments,
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
        shipment = Shipment(self.run_id, payload.to_line(), handed_in, release, self.template,
                            self.wanted, self.assignments, self.jobs, self.limit_s,
                            payload.sandbox)
        # Once a worker has refused, tasks go only to those that may grade (strictly: Dask's
        # loose restrictions let an idle worker steal them); one whose workers all left is
        # sent again (see grade).
        refused = any(answer["refused"] for answer in self._probed.values())
        allowed = frozenset(good) if refused else None
        flight = replace(flight, sent=flight.sent + 1, allowed=allowed)
        key = f"tinyprof-{self.run_id}-{Path(payload.work).name}-{flight.sent}"
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
            if isinstance(event, dict) and event.get("run") == self.run_id \
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
            self.client.run(end_run, self.run_id, on_error="ignore")
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass

    def _end(self) -> None:
        try:
            self.client.run(end_run, self.run_id, on_error="ignore")
        except Exception:  # noqa: BLE001 - the graders end with their workers anyway
            pass


__all__ = ["Cluster", "ClusterError", "connect", "parse_scheduler"]
