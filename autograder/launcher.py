"""Start a student's kernel inside limits: ``python -S launcher.py --memory-mb N
--address-space-mb A --processes P --file-mb F [--uid U] --parent-pid PID -- KERNEL COMMAND...``
(standard library only; run as a script, then exec'd away, so the kernel keeps this process id).
In the sandbox (isolation.py) this is the first thing that runs; without it, the same limits
apply to an unsandboxed kernel.

- Memory: ``RLIMIT_DATA`` of N MB counts the heap and every private writable mapping, where
  Python objects and numpy arrays live, so an allocation past it raises MemoryError in the
  student's cell and the kernel survives. ``RLIMIT_AS`` of A MB (N plus a reserve) also counts
  shared mappings, which the data limit misses (a 3 GB shared anonymous ``mmap``); it cannot be
  N itself, because an idle kernel reserves about 0.6 GB of address space it never touches.
- Processes: ``RLIMIT_NPROC`` of P (threads count too), so a fork bomb stops at P. Linux does
  not apply it to root, so under root the launcher first becomes uid U (``--uid``).
- Files: ``RLIMIT_FSIZE`` of F MB per file (Python ignores SIGXFSZ, so the write raises
  OSError), and no core dumps.
- BLAS/OpenMP pools get one thread (unless the grader's environment already says otherwise):
  OpenBLAS maps a buffer of about 40 MB per thread it starts, one per core.
- The kernel is killed when the grading process that started it dies (``PR_SET_PDEATHSIG``);
  in the sandbox bwrap's ``--die-with-parent`` does this instead (``--parent-pid 0``).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
PR_SET_PDEATHSIG = 1
MB = 2**20


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent exits; exit now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid and os.getppid() != parent_pid:
        os._exit(1)


def _cap(limit: int, value: int) -> None:
    if value > 0:
        resource.setrlimit(limit, (value, value))


def limit_memory(megabytes: int, address_space_mb: int = 0) -> None:
    """Cap the data segment at ``megabytes`` and the address space at ``address_space_mb``
    (0: no cap), and switch core dumps off."""
    _cap(resource.RLIMIT_DATA, megabytes * MB)
    _cap(resource.RLIMIT_AS, address_space_mb * MB)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def limit_processes_and_files(processes: int, file_mb: int) -> None:
    """At most ``processes`` processes and threads, and files of at most ``file_mb`` MB."""
    _cap(resource.RLIMIT_NPROC, processes)
    _cap(resource.RLIMIT_FSIZE, file_mb * MB)


def become(uid: int) -> None:
    """Give up root for ``uid`` (and the group of the same number), with no extra groups."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit(f"launcher: could not become uid {uid}")


def main(argv: list[str]) -> None:
    """Parse the options before ``--``, apply the limits, exec the command after it."""
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    values = {key: int(value) for key, value in zip(options[::2], options[1::2])}
    die_with_parent(values.get("--parent-pid", 0))
    limit_memory(values.get("--memory-mb", 0), values.get("--address-space-mb", 0))
    limit_processes_and_files(values.get("--processes", 0), values.get("--file-mb", 0))
    if "--uid" in values:
        become(values["--uid"])
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
