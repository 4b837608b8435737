"""The circumstances that change latency numbers, recorded next to them.

The same code can run several times slower with another BLAS thread count, another numpy
build or a busy machine, so a timing without its context cannot be compared with another.
Only the standard library and numpy are used (no threadpoolctl, no psutil).
"""

from __future__ import annotations

import functools
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Environment variables that set how many threads the BLAS behind numpy's matmul uses.
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: What two measurements must share for their timings to be comparable (see
#: :meth:`TimingContext.comparable`); the load average is not among them: it is a warning.
COMPARABLE_KEYS = ("processor", "machine", "python", "numpy", "blas", "blas_threads",
                   "usable_cpus")


@dataclass(frozen=True)
class TimingContext:
    """Versions, processor, thread settings and load at the moment of a measurement.

    ``blas_threads`` holds (variable, value) for each of ``BLAS_THREAD_VARIABLES``; a value of
    None means unset, in which case the BLAS usually starts one thread per core.
    ``load_average`` is the 1/5/15-minute run-queue length (None where the OS has none).
    """

    python: str
    numpy: str
    system: str
    machine: str
    processor: str
    cpu_count: int | None
    usable_cpus: int | None
    blas: str
    blas_threads: tuple[tuple[str, str | None], ...]
    load_average: tuple[float, float, float] | None
    timer: str

    @property
    def cpu(self) -> str:
        """The processor's model name (/proc/cpuinfo on Linux), else what ``platform`` says."""
        return cpu_name() or self.processor or self.machine

    def comparable(self) -> dict:
        """The facts two timings must share to be compared (:data:`COMPARABLE_KEYS`): the
        processor's name, architecture, Python, numpy, BLAS and its thread variables, usable
        CPUs. JSON-ready (thread variables as a dictionary)."""
        return {"processor": self.cpu, "machine": self.machine, "python": self.python,
                "numpy": self.numpy, "blas": self.blas,
                "blas_threads": dict(self.blas_threads), "usable_cpus": self.usable_cpus}

    def differences(self, other: "TimingContext | dict") -> list[str]:
        """What differs between ``other`` (e.g. a stored baseline's context, or its
        :meth:`comparable` dictionary) and this context, as "key: other's → this one's", for
        each of :data:`COMPARABLE_KEYS`; empty when the timings are comparable."""
        return context_differences(self.comparable(), other.comparable()
                                   if isinstance(other, TimingContext) else other)

    def hardware(self) -> str:
        """One line: processor, usable CPUs, BLAS and its thread variables (the machine as a
        roofline describes it)."""
        threads = ", ".join(f"{k}={v}" for k, v in self.blas_threads if v is not None) or "unset"
        return (f"{self.cpu}; {self.usable_cpus} usable CPUs; BLAS {self.blas} "
                f"(thread variables: {threads})")

    def __str__(self) -> str:
        threads = ", ".join(f"{k}={v if v is not None else 'unset'}" for k, v in self.blas_threads)
        load = (" / ".join(f"{x:.2f}" for x in self.load_average)
                if self.load_average is not None else "n/a")
        return (f"Python {self.python}, numpy {self.numpy} ({self.blas}); {self.system} "
                f"{self.machine} {self.processor or ''}".rstrip()
                + f", {self.usable_cpus} of {self.cpu_count} CPUs usable; {threads}; "
                f"load average {load}; timer {self.timer}")


@functools.lru_cache(maxsize=1)
def _static_facts() -> dict:
    """What cannot change while the process runs (read once: platform calls can be slow)."""
    clock = time.get_clock_info("perf_counter")
    return dict(
        python=platform.python_version(), numpy=np.__version__, system=platform.system(),
        machine=platform.machine(), processor=platform.processor(), cpu_count=os.cpu_count(),
        blas=_blas_name(),
        timer=f"perf_counter: {clock.implementation}, resolution {clock.resolution:g} s",
    )


def _blas_name() -> str:
    """numpy's BLAS as its build configuration names it (numpy ≥ 1.26), else 'unknown'."""
    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip()
    except Exception:  # older numpy: show_config only prints; the name is then unknown
        return "unknown"


def _usable_cpus() -> int | None:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def _load_average() -> tuple[float, float, float] | None:
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return None
    return (round(one, 2), round(five, 2), round(fifteen, 2))


def cpu_name() -> str:
    """The processor's model name from /proc/cpuinfo (Linux), or "" where it cannot be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def context_differences(current: dict, baseline: dict) -> list[str]:
    """The :data:`COMPARABLE_KEYS` whose values differ between two :meth:`TimingContext.comparable`
    dictionaries (or a suite's machine profile), as "key: baseline → current"."""
    return [f"{key}: {baseline.get(key)!r} → {current.get(key)!r}" for key in COMPARABLE_KEYS
            if current.get(key) != baseline.get(key)]


def collect_context() -> TimingContext:
    """The current :class:`TimingContext` (thread variables and load are read afresh)."""
    threads = tuple((name, os.environ.get(name)) for name in BLAS_THREAD_VARIABLES)
    return TimingContext(**_static_facts(), usable_cpus=_usable_cpus(), blas_threads=threads,
                         load_average=_load_average())


__all__ = ["BLAS_THREAD_VARIABLES", "COMPARABLE_KEYS", "TimingContext", "collect_context",
           "context_differences", "cpu_name"]
