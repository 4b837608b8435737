"""Prefetching: load the next batches in a background thread while the consumer uses this one.

``Prefetcher(source, depth)`` is an iterator over ``source`` that pulls items from it in a
thread of its own (named ``"prefetcher"``) into a queue, so item k+1 is being loaded while the
consumer works on item k. Its contract:

* the same items in the same order as iterating ``source`` directly;
* at most ``depth`` items held: the loader takes a slot (a semaphore of ``depth``) before it
  pulls the next item from the source, and the consumer frees one when it takes an item, so
  pulled − handed out ≤ depth at every moment (no item is pulled early into a loader's hand);
* an exception raised by the source is raised in the consumer, at the position it happened
  (the items before it are delivered first);
* :meth:`Prefetcher.close` (also on leaving a ``with`` block, at the end of the source, after an
  error, and when the prefetcher is garbage-collected, e.g. after a ``break``) stops the loader
  and waits for its thread: no thread is left running. The loader never references the
  prefetcher, so dropping the last reference is enough to stop it.

With ``depth`` d ≥ 1 a step costs max(load, compute) instead of load + compute once the queue is
filled (:mod:`.model`).
"""

from __future__ import annotations

import queue
import threading
import time
import weakref
from typing import Any, Iterable, Iterator

from .timeline import Timeline, null_span

_ITEM, _DONE, _ERROR = "item", "done", "error"
#: How often (seconds) a waiting loader checks whether it was told to stop.
POLL = 0.02


def _load(source: Iterator, items: queue.Queue, slots: threading.Semaphore,
          stop: threading.Event, timeline: Timeline | None) -> None:
    """The loader thread: take a slot, pull an item, queue it; until the end, an error or stop."""
    try:
        while not stop.is_set():
            if not slots.acquire(timeout=POLL) or stop.is_set():
                continue
            try:
                with null_span(timeline, "load"):
                    item = next(source)
            except StopIteration:
                items.put((_DONE, None))
                return
            items.put((_ITEM, item))
    except BaseException as error:  # raised in the consumer by __next__
        items.put((_ERROR, error))


def _shutdown(thread: threading.Thread, stop: threading.Event, items: queue.Queue,
              slots: threading.Semaphore, source: Iterator) -> None:
    """Stop the loader, drop what it queued, wait for its thread, then close the source."""
    stop.set()
    slots.release()          # wake a loader waiting for a slot at once
    while True:
        try:
            items.get_nowait()
        except queue.Empty:
            break
    if thread is not threading.current_thread():
        thread.join()
    close = getattr(source, "close", None)
    if close is not None and not thread.is_alive():
        close()              # a generator source runs its finally blocks here


class Prefetcher:
    """Iterate over ``source`` with up to ``depth`` items loaded ahead by a background thread.

    Use it in a ``for`` loop, preferably as ``with Prefetcher(source, 2) as batches: ...``.
    ``wait_seconds`` adds up the time the consumer spent blocked in ``next`` (the input wait).
    """

    def __init__(self, source: Iterable[Any], depth: int = 2,
                 timeline: Timeline | None = None):
        if int(depth) != depth or depth < 1:
            raise ValueError(f"depth is how many items to load ahead, an int ≥ 1, got {depth!r}")
        self.depth = int(depth)
        self.timeline = timeline
        self.wait_seconds = 0.0
        self._items: queue.Queue = queue.Queue()
        self._slots = threading.Semaphore(self.depth)
        self._stop = threading.Event()
        source = iter(source)
        self._thread = threading.Thread(
            target=_load, args=(source, self._items, self._slots, self._stop, timeline),
            name="prefetcher", daemon=True)
        self._finalizer = weakref.finalize(self, _shutdown, self._thread, self._stop,
                                           self._items, self._slots, source)
        self._thread.start()

    def __iter__(self) -> "Prefetcher":
        return self

    def __next__(self) -> Any:
        if not self._finalizer.alive:
            raise StopIteration
        started = time.perf_counter()
        with null_span(self.timeline, "wait for batch"):
            kind, value = self._items.get()
        self.wait_seconds += time.perf_counter() - started
        if kind == _ITEM:
            self._slots.release()
            return value
        self.close()
        if kind == _ERROR:
            raise value
        raise StopIteration

    def close(self) -> None:
        """Stop loading and wait for the loader thread (safe to call more than once)."""
        self._finalizer()

    @property
    def running(self) -> bool:
        """Whether the loader thread is still alive."""
        return self._thread.is_alive()

    def __enter__(self) -> "Prefetcher":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
