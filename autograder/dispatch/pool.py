"""Worker processes for grading, and a plain-text progress bar.

Each worker is ``python -m autograder.dispatch.worker`` in its own session, fed one task at a
time over a pipe. A worker that exceeds the wall-clock limit of a submission is killed (its
kernel dies with it, see launcher.py) and replaced; one that crashes, or dies before it takes
its task, is replaced and the task retried once. If the grading process itself is killed, the
workers receive SIGKILL from Linux (``PR_SET_PDEATHSIG``) and their kernels follow.
"""

from __future__ import annotations

import os
import select
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .. import course
from ..kernel import caches
from ..records import RecordError, Result, Task
from ..results.report import LOCAL
from .contract import Done, Started, after_loss, timed_out


class Worker:
    """One ``autograder.dispatch.worker`` process and the task it is grading."""

    def __init__(self, log: Path):
        course.ensure_tools_on_path()
        self.log = open(log, "a", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "autograder.dispatch.worker", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            encoding="utf-8", cwd=course.REPO_ROOT, start_new_session=True)
        self.task: Task | None = None
        self.started = 0.0

    def send(self, task: Task) -> None:
        self.task, self.started = task, time.monotonic()
        self.process.stdin.write(task.to_line() + "\n")
        self.process.stdin.flush()

    def receive(self) -> Result | None:
        """The finished task's result, or None if the worker died."""
        line = self.process.stdout.readline()
        try:
            return Result.from_line(line) if line else None
        except RecordError:  # cut short: the worker died while answering
            return None

    def ready(self, timeout: float) -> bool:
        """Whether its answer (or the end of a worker that died) arrives within ``timeout`` s."""
        readable, _, _ = select.select([self.process.stdout], [], [], timeout)
        return bool(readable)

    def kill(self) -> None:
        """SIGKILL its whole session now, from any thread (``receive`` then returns None)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stop(self, kill: bool = False) -> None:
        if not kill:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                kill = True
        if kill and self.process.poll() is None:
            self.kill()
            self.process.wait()
        self.log.close()


@dataclass
class Pool:
    """Grade tasks on ``jobs`` worker processes of this machine (a contract.Dispatcher);
    ``done(task, result, LOCAL, sandbox)`` is called in this process, ``sandbox`` saying what
    isolates the kernels here. With ``font_cache``, the kernels' font cache is made once here,
    rather than in every kernel (caches.py)."""

    jobs: int
    logs: Path
    limit_s: float
    done: Done
    started: Started = lambda task: None
    sandbox: str = ""
    font_cache: bool = False
    _workers: list[Worker] = field(default_factory=list)
    _spawned: int = 0

    def run(self, tasks: list[Task]) -> list[str]:
        """Grade them all; no worker here refuses, so there is no problem to return."""
        if self.font_cache and tasks:
            caches.matplotlib_cache(self.logs / "cache" / "matplotlib")
        pending = deque(tasks)
        selector = selectors.DefaultSelector()
        try:
            while pending or any(w.task for w in self._workers):
                self._dispatch(pending, selector)
                self._collect(selector, pending)
        finally:
            for worker in self._workers:
                worker.stop(kill=worker.task is not None)
            selector.close()
        return []

    def _done(self, task: Task, result: Result) -> None:
        self.done(task, result, LOCAL, self.sandbox)

    def _spawn(self, selector: selectors.BaseSelector) -> Worker:
        self._spawned += 1
        worker = Worker(self.logs / f"worker-{self._spawned}.log")
        selector.register(worker.process.stdout, selectors.EVENT_READ, worker)
        self._workers.append(worker)
        return worker

    def _replace(self, worker: Worker, selector: selectors.BaseSelector) -> None:
        selector.unregister(worker.process.stdout)
        self._workers.remove(worker)
        worker.stop(kill=True)

    def _lost(self, worker: Worker, task: Task, pending: deque,
              selector: selectors.BaseSelector) -> None:
        """``worker`` died holding ``task``: a new worker takes it, once (contract.after_loss)."""
        self._replace(worker, selector)
        again = after_loss(task)
        if isinstance(again, Result):
            self._done(task, again)
        else:
            pending.appendleft(again)

    def _dispatch(self, pending: deque, selector: selectors.BaseSelector) -> None:
        while pending:
            idle = next((w for w in self._workers if w.task is None), None)
            if idle is None and len(self._workers) < self.jobs:
                idle = self._spawn(selector)
            if idle is None:
                return
            task = pending.popleft()
            if not task.retried:
                self.started(task)
            try:
                idle.send(task)
            except OSError:   # it died before taking the task (killed, out of memory)
                idle.task = None
                self._lost(idle, task, pending, selector)

    def _collect(self, selector: selectors.BaseSelector, pending: deque) -> None:
        busy = [w for w in self._workers if w.task]
        if not busy:   # every task given out was lost before it reached a worker
            return
        wait = min(w.started + self.limit_s - time.monotonic() for w in busy)
        for key, _ in selector.select(timeout=max(0.05, wait)):
            worker: Worker = key.data
            task, result = worker.task, worker.receive()
            worker.task = None
            if result is None:
                self._lost(worker, task, pending, selector)
            else:
                self._done(task, result)
        now = time.monotonic()
        for worker in [w for w in self._workers if w.task and now - w.started > self.limit_s]:
            task = worker.task
            self._replace(worker, selector)
            self._done(task, timed_out(task, self.limit_s))


class Progress:
    """``[#####-----] 12/30 graded, 2 running, 0:45 elapsed, ~1:10 left`` on one line of a
    terminal (redrawn), or one line per finished submission when writing to a file or pipe."""

    def __init__(self, total: int, done: int = 0, stream: TextIO | None = None, width: int = 30):
        self.total, self.done, self.running = total, done, 0
        self.stream, self.width = stream or sys.stderr, width
        self.first_done, self.start = done, time.monotonic()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def begin(self, label: str) -> None:
        self.running += 1
        if self.tty:
            self._draw(f"grading {label}")

    def end(self, label: str, outcome: str) -> None:
        self.running, self.done = max(0, self.running - 1), self.done + 1
        self._draw(f"{label}: {outcome}", final=not self.tty)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, message: str, final: bool = False) -> None:
        share = self.done / self.total if self.total else 1.0
        filled = round(self.width * share)
        elapsed = time.monotonic() - self.start
        finished_here = self.done - self.first_done
        left = elapsed / finished_here * (self.total - self.done) if finished_here else None
        eta = f", ~{_clock(left)} left" if left is not None and self.done < self.total else ""
        line = (f"[{'#' * filled}{'-' * (self.width - filled)}] {self.done}/{self.total} graded, "
                f"{self.running} running, {_clock(elapsed)} elapsed{eta}  {message}")
        if self.tty:
            columns = os.get_terminal_size(self.stream.fileno()).columns
            self.stream.write("\r" + line[:columns - 1].ljust(columns - 1))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}"
