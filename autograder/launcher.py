"""Start a student's kernel inside limits: ``python -S launcher.py --memory-mb N
--parent-pid P -- KERNEL COMMAND...`` (standard library only; run as a script, then exec'd
away, so the kernel keeps this process id).

- Memory: ``RLIMIT_DATA`` (soft and hard) of N MB. Since Linux 4.7 it counts the heap and every
  private writable mapping, which is where Python objects and numpy arrays live, so an
  allocation past the limit raises MemoryError in the student's cell and the kernel survives.
  ``RLIMIT_AS`` would count reserved address space as well: an idle ipykernel reserves about
  0.9 GB of it (thread stacks, allocator arenas), so a 512 MB address-space limit would stop the
  kernel before any student code ran.
- BLAS/OpenMP pools get one thread (unless the grader's environment already says otherwise):
  OpenBLAS maps a buffer of about 40 MB per thread it starts, one per core, which on a big
  machine is gigabytes of data segment; and several kernels grade in parallel anyway.
- No core dumps; and the kernel is killed when the grading process that started it dies
  (``PR_SET_PDEATHSIG``), so a killed grader leaves no kernels behind.
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


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent exits; exit now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid and os.getppid() != parent_pid:
        os._exit(1)


def limit_memory(megabytes: int) -> None:
    """Cap the data segment (heap and private writable mappings) at ``megabytes``."""
    if megabytes > 0:
        limit = megabytes * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str]) -> None:
    """Parse ``--memory-mb N --parent-pid P -- CMD...``, apply the limits, exec CMD."""
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    values = dict(zip(options[::2], options[1::2]))
    die_with_parent(int(values.get("--parent-pid", 0)))
    limit_memory(int(values.get("--memory-mb", 0)))
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
