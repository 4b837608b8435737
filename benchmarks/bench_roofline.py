"""The measured roofline against what numpy reaches when searched for exhaustively, side by side.

In one run, alternating ROUNDS times (the machine is shared, so each ratio is taken within a
round and the median ratio is reported):

- ``machine_peaks``' measurement (in a child process, as the library does it), its wall time;
- the best float32 matmul numpy reaches over a wide sweep (n = 128 … 4096, many repeats): the
  compute roof should be at least 0.9 of it;
- a large numpy copy (512 MiB float32 source, two passes of bytes counted): the memory roof
  should be within 10 % of it (glibc's memcpy uses non-temporal stores at this size, so a copy
  can run below the in-place add and triad that set the roof: see bench_stream_sizes.py);
- the best STREAM kernel on 1 GiB arrays (in a child process): the memory roof, measured on far
  smaller arrays to fit a chapter's memory budget, should be within 10 % of it.

Run: ``python benchmarks/bench_roofline.py [ROUNDS] [--quick]``  (``--quick``: one round, matmuls
up to n = 1024, a 256 MiB copy and 256 MiB STREAM arrays: a few seconds)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from functools import partial

import numpy as np

from tinyprof.roofline import best_seconds, measure_in_child
from tinyprof.units import format_si

SWEEP = (128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
QUICK_SWEEP = (256, 512, 1024)
BIG_STREAM_MIB, QUICK_BIG_STREAM_MIB = 1024, 256


def best_numpy_matmul(sweep: tuple[int, ...] = SWEEP) -> tuple[float, int]:
    """FLOP/s and n of the fastest float32 matmul over ``sweep``, each size timed for ~0.5 s."""
    rng = np.random.default_rng(1)
    best = (0.0, 0)
    for n in sweep:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        multiply = partial(np.matmul, a, b)
        seconds = best_seconds(multiply, max(3, min(200, int(0.5 / best_seconds(multiply, 1)))))
        best = max(best, (2.0 * n**3 / seconds, n))
    return best


def large_copy(nbytes: int = 512 * 2**20) -> float:
    """Bytes/s of np.copyto on an ``nbytes`` float32 array: 2·nbytes moved over the best of 8."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    dst.fill(0.0)
    return 2.0 * src.nbytes / best_seconds(lambda: np.copyto(dst, src), 8)


def big_stream(mib: int) -> float:
    """The best STREAM kernel's bytes/s on two ``mib`` MiB arrays, in a child process."""
    code = ("import sys; from tinyprof.roofline import measure_stream; "
            "print(max(measure_stream(int(sys.argv[1]) * 2**20).values()))")
    done = subprocess.run([sys.executable, "-c", code, str(mib)], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def main(rounds: int = 3, quick: bool = False) -> None:
    sweep, copy_bytes = (QUICK_SWEEP, 256 * 2**20) if quick else (SWEEP, 512 * 2**20)
    stream_mib = QUICK_BIG_STREAM_MIB if quick else BIG_STREAM_MIB
    compute_ratios, memory_ratios, stream_ratios, costs = [], [], [], []
    for r in range(rounds):
        start = time.perf_counter()
        peaks = measure_in_child()
        costs.append(time.perf_counter() - start)
        matmul, n = best_numpy_matmul(sweep)
        copy = large_copy(copy_bytes)
        big = big_stream(stream_mib)
        compute_ratios.append(peaks.flops_per_second / matmul)
        memory_ratios.append(peaks.bytes_per_second / copy)
        stream_ratios.append(peaks.bytes_per_second / big)
        print(f"round {r + 1}: compute roof {format_si(peaks.flops_per_second, 'FLOP/s')} "
              f"(n={peaks.matmul_size}) vs best numpy matmul {format_si(matmul, 'FLOP/s')} "
              f"(n={n}): {compute_ratios[-1]:.3f}; memory roof "
              f"{format_si(peaks.bytes_per_second, 'B/s')} vs {copy_bytes >> 20} MiB copy "
              f"{format_si(copy, 'B/s')}: {memory_ratios[-1]:.3f}, vs STREAM on "
              f"{stream_mib} MiB arrays {format_si(big, 'B/s')}: {stream_ratios[-1]:.3f}; "
              f"measuring took {costs[-1]:.2f} s")
    print(f"\n{peaks}\n")
    print(f"median compute roof / best numpy matmul:      {statistics.median(compute_ratios):.3f}"
          "  (goal ≥ 0.9)")
    print(f"median memory roof / large numpy copy:        {statistics.median(memory_ratios):.3f}"
          "  (goal 0.9–1.1)")
    print(f"median memory roof / STREAM on {stream_mib} MiB arrays: "
          f"{statistics.median(stream_ratios):.3f}  (goal 0.9–1.1)")
    print(f"median time to measure the roofline:          {statistics.median(costs):.2f} s")


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    main(int(numbers[0]) if numbers else (1 if quick else 3), quick)
