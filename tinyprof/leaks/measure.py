"""Memory per step, two ways: the live allocations tracemalloc counts, and the resident set.

- **Live bytes** (``tracemalloc.get_traced_memory()[0]``): every block Python and numpy hold
  right now, byte for byte (numpy reports its data buffers to tracemalloc). A freed array is
  gone from it at once.
- **Resident set (RSS)**: the pages of the process that are in RAM, read from
  ``/proc/self/statm`` (its second field, in pages). It is what the operating system, Binder's
  1 GB limit and the grader see. It is larger than the live bytes (the interpreter, the
  libraries' code and data, and memory tracemalloc does not see: BLAS buffers, torch's
  allocator) and it lags them: the C allocator keeps freed blocks to reuse them, returns a
  heap's top only when enough of it is free, and a heap riddled with small live blocks
  (fragmentation) cannot give back the free pages between them; only large blocks (glibc:
  above its mmap threshold, 128 kB growing to 32 MB) are mapped and unmapped on their own. A
  GPU's caching allocator does the same on purpose: PyTorch keeps freed device blocks in its
  cache (``torch.cuda.memory_reserved`` ≥ ``memory_allocated``), so ``nvidia-smi`` shows the
  reserved figure, not what tensors use.

So a leak shows in both (what is kept is live and resident); a plateau or a burst of
temporaries may show in RSS alone. Where ``/proc`` is missing (macOS), RSS is None.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import tracemalloc
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int | None:
    """This process's resident set in bytes (``/proc/self/statm``), or None without /proc."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True)
class StepMemory:
    """Memory after each step: ``live`` (tracemalloc's current bytes, relative to the start of
    the run) and ``rss`` (resident bytes, relative to the start; None without /proc), and the
    seconds each step took (``seconds``, under tracemalloc: it slows allocation)."""

    live: tuple[int, ...]
    rss: tuple[int, ...] | None
    seconds: tuple[float, ...]

    @property
    def steps(self) -> int:
        return len(self.live)


def memory_per_step(step: Callable[[], object], steps: int, collect: bool = False) -> StepMemory:
    """Run ``step()`` ``steps`` times and read the live bytes and RSS after each. Starts
    tracemalloc if it is off (and stops it after); a trace already on is left on. ``collect``:
    run the cyclic garbage collector before each read (what a leak that the collector frees
    looks like once it does)."""
    import time

    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        live0, rss0 = tracemalloc.get_traced_memory()[0], rss_bytes()
        live, rss, seconds = [], [], []
        for _ in range(steps):
            began = time.perf_counter()
            step()
            seconds.append(time.perf_counter() - began)
            if collect:
                gc.collect()
            live.append(tracemalloc.get_traced_memory()[0] - live0)
            now = rss_bytes()
            rss.append(None if now is None or rss0 is None else now - rss0)
    finally:
        if started:
            tracemalloc.stop()
    return StepMemory(tuple(live), None if None in rss else tuple(rss), tuple(seconds))


def steps_until(budget_bytes: float, start_bytes: float, bytes_per_step: float) -> float:
    """Steps until memory starting at ``start_bytes`` and growing ``bytes_per_step`` reaches
    ``budget_bytes`` (infinite when it does not grow)."""
    if bytes_per_step <= 0:
        return float("inf")
    return max(0.0, (budget_bytes - start_bytes) / bytes_per_step)


def shares(per_step: dict[str, float]) -> dict[str, float]:
    """Each part's share of the total growth per step (parts that shrink count as 0)."""
    total = sum(max(v, 0.0) for v in per_step.values())
    return {k: (max(v, 0.0) / total if total else 0.0) for k, v in per_step.items()}


def mean_step_seconds(memory: StepMemory, skip: int = 1) -> float:
    """The mean seconds per step after the first ``skip`` steps."""
    kept: Sequence[float] = memory.seconds[skip:] or memory.seconds
    return sum(kept) / len(kept)




def give_back() -> int | None:
    """Collect cycles and ask the C allocator to return the free memory it keeps to the
    operating system (glibc's ``malloc_trim(0)``), so that the next run's resident set starts
    from what is live; the RSS in bytes after it (None without /proc). Elsewhere (macOS,
    musl) only the collection runs."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    return rss_bytes()


@contextlib.contextmanager
def small_pages() -> Iterator[None]:
    """No transparent huge pages for this process inside the block (Linux's
    ``prctl(PR_SET_THP_DISABLE)``, the previous setting put back after): a 2 MB page taken or
    given back whole moves the resident set by 2 MB at random, several kB a step over a few
    hundred steps. Elsewhere, nothing."""
    prctl = _prctl()
    before = prctl(42, 0, 0, 0, 0) if prctl is not None else -1   # PR_GET_THP_DISABLE
    if before == 0:
        prctl(41, 1, 0, 0, 0)
    try:
        yield
    finally:
        if before == 0:
            prctl(41, 0, 0, 0, 0)


@functools.lru_cache(maxsize=1)
def _prctl():
    import ctypes

    try:
        return ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim`` from the symbols already loaded in this process (no library
    search: ``ctypes.util.find_library`` would start a process), or None."""
    import ctypes

    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


__all__ = ["PAGE", "StepMemory", "give_back", "mean_step_seconds", "memory_per_step", "rss_bytes",
           "shares", "small_pages", "steps_until"]
