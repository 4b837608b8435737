"""Parallel loading: batches loaded by a pool of worker processes or threads, in order.

:class:`Workers` keeps a pool for its lifetime (PyTorch's ``persistent_workers``) and
:meth:`Workers.batches` keeps ``ahead`` batches in flight beyond the one the consumer holds
(PyTorch's ``num_workers × prefetch_factor``), yielding them in step order. Each worker
receives the data set once (the pool's initializer) and then only (step, indices); a batch is
the same whoever loads it (the augmentation is seeded by step, :mod:`.dataset`).

* ``kind="process"``: a ``ProcessPoolExecutor`` with the **spawn** start method (fresh
  interpreters that import tinyprof: safe where fork is not, and what macOS and Windows use);
  the functions it runs are module-level, importable by name. Each worker decodes with its own
  GIL, so Python-bound decoding runs in parallel, at the cost of starting the interpreters
  (about a second each) and of pickling each batch back.
* ``kind="thread"``: a ``ThreadPoolExecutor`` in this process. Waiting on storage (a sleep, a
  socket) releases the GIL and overlaps; decoding in Python holds it, so threads do not make
  decoding faster (:func:`loading_seconds` measures both).
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Iterator, Sequence

import numpy as np

from .dataset import Batch, ImageFolder, batch_plan

KINDS = ("process", "thread")

_dataset: ImageFolder | None = None   # the data set of this worker process


def _install(dataset: ImageFolder) -> None:
    """The worker process's initializer: keep the data set it loads from."""
    global _dataset
    _dataset = dataset


def _load_batch(indices: np.ndarray, step: int) -> Batch:
    """Load one batch in a worker process (from the data set :func:`_install` kept)."""
    return _dataset.batch(indices, step)


class Workers:
    """``workers`` processes (or threads) that load batches of ``dataset`` ahead of use."""

    def __init__(self, dataset: ImageFolder, workers: int = 2, kind: str = "process"):
        if kind not in KINDS:
            raise ValueError(f"kind is one of {KINDS}, got {kind!r}")
        if workers < 1:
            raise ValueError(f"workers must be ≥ 1, got {workers}")
        self.dataset, self.workers, self.kind = dataset, workers, kind
        self._pool: Executor
        if kind == "process":
            self._pool = ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"),
                                             initializer=_install, initargs=(dataset,))
        else:
            self._pool = ThreadPoolExecutor(workers, thread_name_prefix="loader")

    def submit(self, indices: np.ndarray, step: int):
        if self.kind == "process":
            return self._pool.submit(_load_batch, indices, step)
        return self._pool.submit(self.dataset.batch, indices, step)

    def warm_up(self) -> "Workers":
        """Start every worker now (a spawned process imports numpy, Pillow and tinyprof)."""
        first = np.arange(1)
        for future in [self.submit(first, 0) for _ in range(2 * self.workers)]:
            future.result()
        return self

    def batches(self, plan: Sequence[np.ndarray], ahead: int | None = None) -> Iterator[Batch]:
        """The batches of ``plan`` (a list of index arrays, step k = plan[k]) in order. While the
        consumer holds batch k, batches k+1 … k+``ahead`` are submitted (default 2 × workers),
        as a :class:`~.prefetch.Prefetcher` of depth ``ahead`` holds them."""
        ahead = 2 * self.workers if ahead is None else max(int(ahead), 1)
        pending: deque = deque()
        steps = iter(enumerate(plan))
        try:
            for step, indices in steps:
                pending.append(self.submit(indices, step))
                if len(pending) > ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        """Stop the pool (queued batches are cancelled) and wait for its workers."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def loading_seconds(dataset: ImageFolder, batch_size: int, steps: int, workers: int = 0,
                    kind: str = "process") -> float:
    """Seconds to load ``steps`` batches of :func:`batch_plan` with nothing else running:
    in this thread (``workers`` 0) or by a warmed-up pool (start-up not counted)."""
    plan = batch_plan(len(dataset), batch_size, steps, dataset.seed)
    if workers == 0:
        started = time.perf_counter()
        for step, indices in enumerate(plan):
            dataset.batch(indices, step)
        return time.perf_counter() - started
    with Workers(dataset, workers, kind) as pool:
        pool.warm_up()
        started = time.perf_counter()
        for _ in pool.batches(plan):
            pass
        return time.perf_counter() - started
