"""STREAM bandwidth against array size, side by side in one run: where does the curve flatten?

The roofline's memory roof is the best of STREAM's four kernels on two arrays large enough to
stream from main memory. Larger arrays cost the roofline's child process memory (two arrays
plus the interpreter) that Binder counts against the chapter; smaller ones may still sit in a
cache. This script measures each array size in its own child process (so each child's peak RSS
is that size's alone), ROUNDS times in rotated order (the machine is shared, so sizes are
interleaved rather than run one after the other), and prints per size the median over rounds of
each kernel's best bytes/s, the best kernel, both as a fraction of the largest size's, and the
child's peak memory. The last lines print the cache the OS reports and the array size
``tinyprof.roofline.stream_array_bytes`` chooses from it.

Run: ``python benchmarks/bench_stream_sizes.py [ROUNDS] [--quick]``  (about 1 s per size and round;
``--quick``: 2 sizes, 1 round)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

from tinyprof.roofline import (
    MAX_STREAM_ARRAY_BYTES,
    STREAM_BYTES_PER_ELEMENT,
    cache_levels,
    stream_array_bytes,
)
from tinyprof.units import format_bytes

SIZES_MIB = (32, 64, 128, 256, 512)
QUICK_SIZES_MIB = (32, 64)

CHILD = """
import json, resource, sys
from tinyprof.roofline import measure_stream
rates = measure_stream(int(sys.argv[1]) * 2**20)
rates["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
print(json.dumps(rates))
"""


def measure(size_mib: int) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(size_mib)], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def main(rounds: int = 3, sizes: tuple[int, ...] = SIZES_MIB) -> None:
    runs: dict[int, list[dict[str, float]]] = {size: [] for size in sizes}
    for r in range(rounds):
        order = sizes[r % len(sizes):] + sizes[:r % len(sizes)]
        for size in order:
            runs[size].append(measure(size))
    kernels = list(STREAM_BYTES_PER_ELEMENT)
    median = {size: {k: statistics.median(run[k] for run in runs[size]) for k in kernels}
              for size in sizes}
    best = {size: statistics.median(max(run[k] for k in kernels) for run in runs[size])
            for size in sizes}
    peak = {size: max(run["peak_mb"] for run in runs[size]) for size in sizes}
    ref = sizes[-1]
    print(f"{rounds} round(s), sizes interleaved; GB/s = median over rounds of the best of 5 "
          f"calls; ratios against the {ref} MiB arrays")
    print(f"{'array':>8} " + " ".join(f"{k:>6}" for k in kernels)
          + f" {'best':>6} {'best/ref':>9} {'copy/ref':>9} {'child MB':>9}")
    for size in sizes:
        print(f"{size:>4} MiB " + " ".join(f"{median[size][k] / 1e9:6.1f}" for k in kernels)
              + f" {best[size] / 1e9:6.1f} {best[size] / best[ref]:9.3f} "
              f"{median[size]['copy'] / median[ref]['copy']:9.3f} {peak[size]:9.0f}")
    levels = cache_levels()
    reported = ", ".join(c.describe() for c in levels) or "none"
    print(f"\ncaches (as trusted): {reported}")
    print(f"stream_array_bytes() chooses {format_bytes(stream_array_bytes())} per array "
          f"(at most {format_bytes(MAX_STREAM_ARRAY_BYTES)})")


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    main(int(numbers[0]) if numbers else (1 if quick else 3),
         QUICK_SIZES_MIB if quick else SIZES_MIB)
