"""An asynchronous device: the host enqueues a step and goes on; a worker thread runs it.

A GPU runs what the host launches asynchronously: the launch returns at once, the kernels run in
order on the device, and the host waits only when it needs a result (``synchronize``, reading a
loss). :class:`Device` models that on a CPU: one worker thread (named ``"device"``) takes steps
from a FIFO queue and either runs the step's numpy compute (numpy releases the GIL in its
kernels, so the host thread keeps going meanwhile) or holds for a set kernel time
(``time.sleep``: a kernel that takes no host CPU, as a GPU's does not). What it does not model:
host-to-device copies, pinned memory, several streams, or a launch cost.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable

from .timeline import Timeline, null_span

_STOP = object()


class Device:
    """A worker thread with a queue of steps (``queue_size`` 0: unbounded, as a launch queue
    that never fills; n: :meth:`submit` blocks while n steps wait)."""

    def __init__(self, timeline: Timeline | None = None, queue_size: int = 0,
                 name: str = "device"):
        self.timeline = timeline
        self._queue: queue.Queue = queue.Queue(queue_size)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self.closed = False

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                future, name, work = item
                if future.set_running_or_notify_cancel():
                    try:
                        with null_span(self.timeline, name):
                            result = work()
                        future.set_result(result)
                    except BaseException as error:   # handed to whoever waits on the future
                        future.set_exception(error)
            finally:
                self._queue.task_done()

    def submit(self, work: Callable[[], Any] | float, name: str = "compute") -> Future:
        """Enqueue a step and return at once: ``work`` is a function of no arguments (the
        step's compute) or a kernel time in seconds to hold for. The future holds its result."""
        if self.closed:
            raise RuntimeError("this device is closed")
        if not callable(work):
            seconds = float(work)
            work = lambda: time.sleep(seconds)   # noqa: E731 - a kernel of a set time
        future: Future = Future()
        self._queue.put((future, name, work))
        return future

    def synchronize(self) -> None:
        """Wait until every enqueued step has run (as ``torch.cuda.synchronize``)."""
        self._queue.join()

    def close(self) -> None:
        """Run what is queued, then stop the worker thread and wait for it."""
        if not self.closed:
            self.closed = True
            self._queue.put(_STOP)
            self._thread.join()

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
