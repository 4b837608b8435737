"""A roofline measured on this machine: how fast it multiplies, how fast it moves bytes.

Attainable FLOP/s at arithmetic intensity I (FLOPs per byte moved) is
``min(peak_flops, I × bandwidth)``. Below the ridge point ``peak_flops / bandwidth`` a kernel is
memory-bound (bytes limit it), above it compute-bound; a call so short that per-call dispatch
cost dominates is overhead-bound, far below both roofs. Nothing is assumed about the hardware:

- the **compute roof** is the best float32 matmul over a sweep of sizes (2·n³ FLOPs each), the
  most numpy's BLAS reaches here with its current thread setting;
- the **memory roof** is the best of STREAM's four kernels (copy, scale, add, triad) on two
  float64 arrays of 4× the last-level cache each (STREAM's rule, so they stream from DRAM rather
  than a cache), at least 64 MiB and at most 128 MiB. The ceiling is the memory budget: the
  roofline's child process peaks at about 2.3× one array (0.3 GB at 128 MiB) and Binder
  guarantees a chapter 1 GB. A cache size is trusted only up to 16 MiB per CPU that shares it
  (common server and desktop parts have 2–12 MiB per CPU); more is likely a virtual machine
  reporting its host's whole cache. A 2-CPU VM here reports a 480 MiB L3, yet in one interleaved
  run of ``benchmarks/bench_stream_sizes.py`` the best kernel on 128 MiB arrays ran at 0.999 of
  its bandwidth on 1 GiB ones (0.97–1.00 from 128 MiB up; 1.10 at 64 MiB, 1.57 at 32 MiB). Two
  runs while other jobs shared the memory bus put 128 MiB at 1.16 and 1.06, and 256 MiB at 1.14
  and 1.15: a best-of-5 on a long call (1 GiB) is disturbed more often than on a short one, and
  doubling the arrays bought nothing. ``benchmarks/bench_roofline.py`` compares the roof with
  STREAM on 1 GiB arrays each run;
- **cache roofs** (optional) rerun the add kernel on arrays that fit half of each cache level
  (its trusted size);
- the **call overhead** is the median cost of one tiny numpy call.

Bytes convention: each kernel is counted at the bytes that numpy's implementation of it reads and
writes, 8 per float64 element per array touched per pass (write-allocate traffic not counted).
STREAM's C kernels are single-pass; numpy's triad ``y = x + s·y`` is two passes
(``y = s·y`` then ``y += x``) and so moves 40 bytes per element where STREAM's nominal is 24.
Counting what really moves keeps the four kernels comparable with one another and with a copy.
The kernels run on two arrays rather than STREAM's three (add and triad update one in place,
moving the same bytes), and in a child process, so that the quarter gigabyte they need never
counts against the caller's memory (a notebook's peak, a sandbox's cap). A copy is not a good
roof alone: glibc's memcpy switches to non-temporal stores only above a threshold derived from
the reported cache, so numpy's copy ran at 14 GB/s on 64–128 MiB arrays and 25 GB/s from
192 MiB here, while add and triad did not change.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import Callable

import numpy as np

from ..units import format_bytes, format_si

#: Bytes each numpy STREAM kernel moves per float64 element (see the module docstring).
STREAM_BYTES_PER_ELEMENT = {"copy": 16, "scale": 16, "add": 24, "triad": 40}
#: Square float32 matmul sizes swept for the compute roof.
MATMUL_SIZES = (256, 512, 1024, 2048)
#: STREAM array size, bytes each (two arrays): 4× the trusted last-level cache, at least
#: MIN_STREAM_ARRAY_BYTES and at most MAX_STREAM_ARRAY_BYTES (the memory budget).
MIN_STREAM_ARRAY_BYTES = 64 * 2**20
MAX_STREAM_ARRAY_BYTES = 128 * 2**20
#: The most cache per CPU sharing it that is taken at its word (see the module docstring).
MAX_CACHE_BYTES_PER_CPU = 16 * 2**20


def _number(what: str, value: float, positive: bool = False, infinite: bool = False) -> float:
    """``value`` as a float after checking it is a real number, not NaN, ≥ 0 (> 0 when
    ``positive``) and finite (unless ``infinite``); otherwise a ValueError naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, got {value!r}")
    value = float(value)
    if math.isnan(value) or value < 0 or (positive and value == 0) or (
            math.isinf(value) and not infinite):
        need = "> 0" if positive else "≥ 0"
        raise ValueError(f"{what} must be {'a finite number ' if not infinite else ''}{need}, "
                         f"got {value!r}")
    return value


@dataclass(frozen=True)
class CacheLevel:
    """One data cache level as the OS reports it (Linux sysfs): ``size_bytes`` is the size
    trusted, at most MAX_CACHE_BYTES_PER_CPU × ``shared_by``; ``reported_bytes`` is what the OS
    said when that was more (None when it was trusted as reported)."""

    level: int
    size_bytes: int
    shared_by: int = 1
    reported_bytes: int | None = None

    def __str__(self) -> str:
        return f"L{self.level} {format_bytes(self.size_bytes)}"

    def describe(self) -> str:
        """``str(self)``, with the reported size when it was not trusted."""
        if self.reported_bytes is None:
            return str(self)
        return (f"{self} (the OS reports {format_bytes(self.reported_bytes)} shared by "
                f"{self.shared_by} CPUs; trusted up to {format_bytes(MAX_CACHE_BYTES_PER_CPU)} "
                "per CPU)")


@dataclass(frozen=True)
class MachinePeaks:
    """Measured peak compute (FLOP/s) and memory bandwidth (bytes/s) of this machine, with how
    they were found: ``stream`` (kernel → bytes/s), ``matmul_size`` (n of the best matmul),
    ``cache_roofs`` ((label, bytes/s) for each cache level measured), ``call_overhead_s`` (one
    tiny numpy call) and ``context`` (CPU, BLAS and its threads)."""

    flops_per_second: float
    bytes_per_second: float
    stream: dict[str, float] = field(default_factory=dict)
    matmul_size: int | None = None
    cache_roofs: tuple[tuple[str, float], ...] = ()
    call_overhead_s: float = 1e-6
    array_bytes: int | None = None
    seconds_spent: float = 0.0
    context: str = ""
    #: The number type of the matmul that measured the compute roof: a float64 computation is
    #: placed under a float64 roof (about half the float32 one on most CPUs).
    matmul_dtype: str = "float32"

    def __post_init__(self) -> None:
        for name in ("flops_per_second", "bytes_per_second", "call_overhead_s"):
            _number(f"MachinePeaks: {name}", getattr(self, name), positive=True)

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per byte where the two roofs meet: peak FLOP/s ÷ bandwidth."""
        return self.flops_per_second / self.bytes_per_second

    def attainable(self, intensity: float) -> float:
        """min(peak FLOP/s, intensity × bandwidth); ``intensity`` is FLOPs per byte, ≥ 0 (an
        infinite intensity, no bytes at all, reaches the peak)."""
        intensity = _number("attainable: intensity (FLOPs per byte)", intensity, infinite=True)
        return min(self.flops_per_second, intensity * self.bytes_per_second)

    def bound(self, intensity: float) -> str:
        """"memory" below the ridge point, "compute" at or above it."""
        intensity = _number("bound: intensity (FLOPs per byte)", intensity, infinite=True)
        return "compute" if intensity >= self.ridge_intensity else "memory"

    def roof_seconds(self, flops: float, nbytes: float) -> float:
        """The least time the roofline allows: max(flops / peak FLOP/s, bytes / bandwidth)."""
        flops = _number("roof_seconds: flops", flops)
        nbytes = _number("roof_seconds: bytes", nbytes)
        return max(flops / self.flops_per_second, nbytes / self.bytes_per_second)

    def classify(self, flops: float, nbytes: float, seconds: float, calls: int = 1,
                 overhead_factor: float = 50.0) -> str:
        """Which limit a measured operation sits under: "overhead" when its time per call is
        within ``overhead_factor`` tiny numpy calls *and* the roofline explains under a tenth of
        it (it is far below both roofs because of per-call cost); otherwise "compute" or
        "memory" by its arithmetic intensity flops / bytes against the ridge point."""
        flops = _number("classify: flops", flops)
        nbytes = _number("classify: bytes", nbytes)
        seconds = _number("classify: seconds", seconds, positive=True)
        if isinstance(calls, bool) or not isinstance(calls, numbers.Integral) or calls < 1:
            raise ValueError(f"classify: calls must be an integer ≥ 1, got {calls!r}")
        per_call = seconds / calls
        explained = self.roof_seconds(flops, nbytes) / seconds
        if per_call < overhead_factor * self.call_overhead_s and explained < 0.1:
            return "overhead"
        if nbytes <= 0:
            return "compute"
        return self.bound(flops / nbytes)

    def __str__(self) -> str:
        lines = [f"compute roof {format_si(self.flops_per_second, 'FLOP/s')}"
                 + (f" ({self.matmul_dtype} matmul n={self.matmul_size})" if self.matmul_size
                    else ""),
                 f"memory roof {format_si(self.bytes_per_second, 'B/s')}"
                 + (f" (best STREAM kernel on {format_bytes(self.array_bytes)} arrays)"
                    if self.array_bytes else ""),
                 f"ridge at {self.ridge_intensity:.1f} FLOPs/byte"]
        if self.stream:
            lines.append("STREAM: " + ", ".join(f"{k} {format_si(v, 'B/s')}"
                                                for k, v in self.stream.items()))
        for label, rate in self.cache_roofs:
            lines.append(f"{label} roof {format_si(rate, 'B/s')}")
        lines.append(f"one numpy call {self.call_overhead_s * 1e6:.2f} µs")
        if self.context:
            lines.append(self.context)
        return "\n".join(lines)


def best_seconds(fn: Callable[[], object], repeats: int = 5) -> float:
    """The fastest of ``repeats`` timed calls after one untimed call: the run least disturbed by
    a busy machine, and for peaks what the machine *can* do."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _repeats_for(seconds_per_call: float, budget_s: float, least: int = 3,
                 most: int = 50) -> int:
    return int(min(most, max(least, budget_s / max(seconds_per_call, 1e-9))))


def measure_peak_flops(sizes: tuple[int, ...] = MATMUL_SIZES, budget_s: float = 0.2,
                       dtype: type = np.float32) -> tuple[float, int]:
    """(FLOP/s, n) of the fastest n×n matmul of ``dtype`` (float32 unless told) over ``sizes``:
    2·n³ FLOPs over the best time, each size repeated for about ``budget_s`` seconds (at least
    3 times)."""
    if np.dtype(dtype).kind != "f":
        raise ValueError(f"measure_peak_flops: dtype must be a floating type, got {dtype!r}")
    rng = np.random.default_rng(0)
    best = (0.0, sizes[0])
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=dtype)
        b = rng.standard_normal((n, n), dtype=dtype)
        out = np.empty((n, n), dtype=dtype)
        multiply = partial(np.matmul, a, b, out=out)
        seconds = best_seconds(multiply, _repeats_for(best_seconds(multiply, 1), budget_s))
        best = max(best, (2.0 * n**3 / seconds, n))
    return best


def _stream_kernels(x: np.ndarray, y: np.ndarray) -> dict[str, Callable[[], object]]:
    """STREAM's four kernels on two arrays (bytes per element in STREAM_BYTES_PER_ELEMENT)."""
    scalar = 0.5  # keeps the in-place triad y = x + s·y bounded (it converges to 2x)

    def triad() -> None:
        np.multiply(y, scalar, out=y)
        np.add(y, x, out=y)

    return {"copy": lambda: np.copyto(y, x), "scale": lambda: np.multiply(x, scalar, out=y),
            "add": lambda: np.add(x, y, out=y), "triad": triad}


def measure_stream(array_bytes: int, repeats: int = 5) -> dict[str, float]:
    """Bytes/s of STREAM's copy, scale, add and triad on two float64 arrays of ``array_bytes``
    each, in this process: elements × STREAM_BYTES_PER_ELEMENT[kernel] over the best time."""
    n = max(1, array_bytes // 8)
    x, y = np.empty(n), np.empty(n)
    x.fill(1.0)  # touch every page before timing
    y.fill(2.0)
    return {name: n * STREAM_BYTES_PER_ELEMENT[name] / best_seconds(kernel, repeats)
            for name, kernel in _stream_kernels(x, y).items()}


def measure_bandwidth(array_bytes: int | None = None, repeats: int = 5) -> float:
    """The memory roof, in this process: the best STREAM kernel's bytes/s on arrays of
    ``array_bytes`` (default :func:`stream_array_bytes`)."""
    return max(measure_stream(array_bytes or stream_array_bytes(), repeats).values())


def cache_levels(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> tuple[CacheLevel, ...]:
    """The data and unified caches of CPU 0, smallest level first; empty where the OS does not
    say (non-Linux, containers hiding sysfs). A size over MAX_CACHE_BYTES_PER_CPU per CPU sharing
    the cache is trusted only up to that (the reported size stays in ``reported_bytes``)."""
    levels = []
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            if kind == "Instruction":
                continue
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text())
            shared = _count_cpus((index / "shared_cpu_list").read_text())
        except (OSError, ValueError):
            continue
        trusted = min(size, MAX_CACHE_BYTES_PER_CPU * shared)
        levels.append(CacheLevel(level, trusted, shared, None if trusted == size else size))
    return tuple(sorted(levels, key=lambda c: c.level))


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def _count_cpus(text: str) -> int:
    count = 0
    for part in text.strip().split(","):
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return count


def stream_array_bytes(levels: tuple[CacheLevel, ...] | None = None) -> int:
    """Bytes per STREAM array: 4× the (trusted) last-level cache, at least
    MIN_STREAM_ARRAY_BYTES (64 MiB) and at most MAX_STREAM_ARRAY_BYTES (128 MiB)."""
    levels = cache_levels() if levels is None else levels
    last = levels[-1].size_bytes if levels else 0
    return int(min(MAX_STREAM_ARRAY_BYTES, max(MIN_STREAM_ARRAY_BYTES, 4 * last)))


def measure_cache_roofs(levels: tuple[CacheLevel, ...], repeats: int = 20
                        ) -> tuple[tuple[str, float], ...]:
    """Bandwidth of the add kernel (24 bytes per element) on two arrays that together fill
    half of each cache level of 256 KiB or more (smaller ones are lost in call overhead), at
    its trusted size."""
    roofs = []
    for cache in levels:
        if cache.size_bytes < 256 * 2**10:
            continue
        n = cache.size_bytes // 2 // 2 // 8
        inner = max(1, (2**22) // (n * 24))  # ≈ 4 MiB of traffic per timed call
        seconds = best_seconds(_repeated_add(np.full(n, 1.0), np.full(n, 2.0), inner), repeats)
        roofs.append((str(cache), inner * n * 24 / seconds))
    return tuple(roofs)


def _repeated_add(x: np.ndarray, y: np.ndarray, times: int) -> Callable[[], None]:
    def add_many() -> None:
        for _ in range(times):
            np.add(x, y, out=y)
    return add_many


def measure_call_overhead(calls: int = 2000) -> float:
    """Median seconds of one ``np.add`` on one-element arrays: numpy's per-call dispatch cost."""
    a, b, out = np.ones(1), np.ones(1), np.empty(1)
    samples = []
    for _ in range(15):
        start = time.perf_counter()
        for _ in range(calls):
            np.add(a, b, out=out)
        samples.append((time.perf_counter() - start) / calls)
    return float(np.median(samples))


def _context(levels: tuple[CacheLevel, ...]) -> str:
    from ..timing.context import collect_context  # the machine as timings describe it

    caches = ", ".join(c.describe() for c in levels) or "cache sizes not reported"
    return f"{collect_context().hardware()}; {caches}"


def measure_machine_peaks(cache_roofs: bool = True) -> MachinePeaks:
    """Measure every roof afresh, in this process (one to three seconds, and two STREAM arrays
    of :func:`stream_array_bytes` each); :func:`machine_peaks` runs this in a child process."""
    start = time.perf_counter()
    levels = cache_levels()
    flops, size = measure_peak_flops()
    array_bytes = stream_array_bytes(levels)
    stream = measure_stream(array_bytes)
    caches = measure_cache_roofs(levels) if cache_roofs else ()
    overhead = measure_call_overhead()
    return MachinePeaks(flops, max(stream.values()), stream, size, caches, overhead, array_bytes,
                        time.perf_counter() - start, _context(levels))


def measure_in_child(timeout_s: float = 300.0) -> MachinePeaks:
    """:func:`measure_machine_peaks` in a fresh Python process with this one's environment and
    tinyprof, so its arrays never count against this process's memory."""
    import json
    import subprocess

    package_parent = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    code = "from tinyprof.bottlenecks.roofline import _main; _main()"
    done = subprocess.run([sys.executable, "-c", code], env=env, timeout=timeout_s,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError("measuring the roofline in a child process failed "
                           f"(exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    fields = json.loads(done.stdout.strip().splitlines()[-1])
    fields["cache_roofs"] = tuple(tuple(roof) for roof in fields["cache_roofs"])
    return MachinePeaks(**fields)


@lru_cache(maxsize=1)
def machine_peaks() -> MachinePeaks:
    """This machine's roofline, measured once per process (in a child process) and cached."""
    return measure_in_child()


def _main() -> None:
    """Measure and print the peaks as one line of JSON (what :func:`measure_in_child` runs;
    also ``python -m tinyprof.roofline``)."""
    import json

    print(json.dumps(asdict(measure_machine_peaks())))


__all__ = ["CacheLevel", "MAX_CACHE_BYTES_PER_CPU", "MachinePeaks", "STREAM_BYTES_PER_ELEMENT",
           "best_seconds",
           "cache_levels", "machine_peaks", "measure_bandwidth", "measure_cache_roofs",
           "measure_call_overhead", "measure_machine_peaks", "measure_peak_flops",
           "measure_in_child", "measure_stream", "stream_array_bytes"]

if __name__ == "__main__":
    _main()
