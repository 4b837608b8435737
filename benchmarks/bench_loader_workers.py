"""Does a pool of loader workers speed up decoding, and which kind? (chapter 09, §9.6)

A digit is an 8×8 PNG: ``decode_png`` spends its time in Python around Pillow (opening the
bytes, converting, making the array), not in long C calls that release the GIL, so two
threads should load no faster than one loop, and two processes should, on a machine with two
free cores. This prints, for 10 batches of 32 digits,
the serial loop, 2 threads and 2 processes (pools warmed up first, start-up not counted), each
the fastest of its ROUNDS, all interleaved, and the ratios serial / threads and serial /
processes measured side by side in one run (a neighbour's load slows single rounds; the machine
is shared). Goals: threads below 1.35×, processes above threads.

It was a timed assertion in tests/test_loading.py; on a busy machine it measured 1.48× once, so
the ratio is read here, and the tests keep what does not depend on the machine (every kind of
worker gives the serial loop's batches).

Run: ``python benchmarks/bench_loader_workers.py [--rounds N] [--quick]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tinyprof.loading import ImageFolder, loading_seconds, write_image_folder  # noqa: E402

KINDS = {"serial": dict(workers=0), "2 threads": dict(workers=2, kind="thread"),
         "2 processes": dict(workers=2, kind="process")}


def fastest_of(data: ImageFolder, rounds: int, batch_size: int, steps: int) -> dict[str, float]:
    """Each kind's fastest loading time over ``rounds`` interleaved rounds."""
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(rounds):
        for kind, how in KINDS.items():
            times[kind].append(loading_seconds(data, batch_size, steps, **how))
    return {kind: min(seconds) for kind, seconds in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 3 batches (CI's check)")
    args = parser.parse_args()
    rounds, steps = (2, 3) if args.quick else (args.rounds, 10)
    with tempfile.TemporaryDirectory() as where:
        write_image_folder(where)
        best = fastest_of(ImageFolder(where), rounds, 32, steps)
    print(f"{steps} batches of 32, fastest of {rounds} interleaved rounds:")
    for kind, seconds in best.items():
        print(f"  {kind:<12} {seconds * 1e3:8.1f} ms   {best['serial'] / seconds:5.2f}× serial")
    threads = best["serial"] / best["2 threads"]
    processes = best["serial"] / best["2 processes"]
    goal = "met" if threads < 1.35 else "not met"
    print(f"serial / 2 threads: {threads:.2f}× (goal < 1.35: {goal}); "
          f"serial / 2 processes: {processes:.2f}× "
          f"({'above' if processes > threads else 'not above'} threads)")


if __name__ == "__main__":
    main()
