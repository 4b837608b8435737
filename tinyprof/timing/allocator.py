"""The memory allocator held while a speed test runs: its page faults without the process's past.

A speed test keeps every output of a block until it is checked, then lets them all go. With
glibc's ``malloc`` (Linux, Colab), what happens next depends on what the process freed before:
large arrays come from ``mmap`` until one of that size has been freed, and freed memory above
the *trim threshold* goes back to the operating system. Both thresholds grow with the largest
mapped array freed so far (up to 32 MiB and 64 MiB), so the same function's next block lands on
fresh pages (a minor page fault per 4 KiB, about 2.4 µs here) or on memory the process kept,
depending on the cells that ran before it. Graded in one kernel after other functions, chapter
08's float32 ``fast_step`` of the red team measured 8.4×, 10.7× and 16.2× against the same slow
step (issue 46): its grade was its history.

While :func:`freed_memory_held` is open (and after :func:`hold_freed_memory`), the mmap
threshold is fixed where glibc's own policy ends up in a process that has freed a large array
(32 MiB: arrays up to that size come from the heap), and the trim threshold well above where
that policy would put it (1 GiB against 64 MiB), so that freed memory stays with the process and
every block after the first reuses what the last one freed, on both sides of a speed test.
:func:`settle` then fixes the trim threshold at glibc's own 64 MiB and has ``malloc_trim`` hand
back the free pages (all but 64 MiB at the top of the heap). Neither can restore glibc's
*dynamic* policy (no call can): the process keeps the settled thresholds. Arrays above 32 MiB
are mapped afresh whatever is set.

Elsewhere (macOS, Windows, musl) these do nothing and report False.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Iterator

MiB = 2**20
#: ``mallopt`` parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: The largest mmap threshold glibc accepts on 64-bit systems (its dynamic policy's ceiling).
MMAP_THRESHOLD = 32 * MiB
#: Freed memory the process keeps while held.
HELD_TRIM = 1024 * MiB
#: The trim threshold glibc's dynamic policy sets beside a 32 MiB mmap threshold (twice it).
SETTLED_TRIM = 2 * MMAP_THRESHOLD

@functools.cache
def _glibc():
    """glibc's C library, or None where this is not glibc."""
    import ctypes
    import ctypes.util
    import platform

    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _set(trim: int) -> bool:
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and libc.mallopt(M_TRIM_THRESHOLD, trim))


def hold_freed_memory() -> bool:
    """Fix the thresholds so that freed memory stays with the process (module docstring);
    whether it could (glibc only). Cheap enough to call before every block."""
    return _set(HELD_TRIM)


def settle() -> bool:
    """Fix the thresholds where glibc's dynamic policy would have them (32 MiB, 64 MiB) and hand
    back the free pages (all but 64 MiB at the top of the heap); whether it could (glibc
    only)."""
    done = _set(SETTLED_TRIM)
    if done:
        _glibc().malloc_trim(SETTLED_TRIM)
    return done


@contextlib.contextmanager
def freed_memory_held() -> Iterator[bool]:
    """:func:`hold_freed_memory` for the ``with`` block, :func:`settle` after it; yields
    whether the allocator could be held."""
    held = hold_freed_memory()
    try:
        yield held
    finally:
        if held:
            settle()


__all__ = ["HELD_TRIM", "MMAP_THRESHOLD", "SETTLED_TRIM", "freed_memory_held",
           "hold_freed_memory", "settle"]
