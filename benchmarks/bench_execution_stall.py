"""Do chapters execute without stalls? Every chapter run many times with plain nbclient, and the
book built many times; the slowest run is compared with the median.

Before the fix of issue 13, about one run in fifteen of a chapter with an explorer took exactly
the client's cell timeout longer than the others (a missed wake-up of the client's shell poll,
see tests/test_execution_stall.py). With a short timeout a stall shows as a slowest run many
times the median; the goal is slowest ≤ 2× median and no cell near the timeout.

    .venv/bin/python benchmarks/bench_execution_stall.py            # 20 runs of each chapter
    .venv/bin/python benchmarks/bench_execution_stall.py --book 20  # and 20 book builds
    .venv/bin/python benchmarks/bench_execution_stall.py --quick    # one run of chapter 01
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from traitlets.config import Config

REPO = Path(__file__).resolve().parent.parent

#: CurveZMQ keys for the kernel, as the book's build uses (book/_ext/kernel_encryption.py):
#: without them ipykernel 7 warns on every start that it runs over TCP without encryption.
ENCRYPTED = Config({"KernelManager": {"transport_encryption": "auto"}})


def run_chapter(path: Path, timeout: int) -> tuple[float, float]:
    """(seconds to execute the notebook, seconds of its slowest cell), plain nbclient."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            config=ENCRYPTED)
    slowest = 0.0
    with client.setup_kernel():
        start = time.perf_counter()
        for index, cell in enumerate(notebook.cells):
            began = time.perf_counter()
            client.execute_cell(cell, index)
            slowest = max(slowest, time.perf_counter() - began)
        return time.perf_counter() - start, slowest


def report(name: str, times: list[float], slowest_cells: list[float], timeout: float) -> bool:
    """Print one line; True when the runs show no stall."""
    median, worst = statistics.median(times), max(times)
    near_timeout = sum(cell >= 0.9 * timeout for cell in slowest_cells)
    ok = worst <= 2 * median and near_timeout == 0
    print(f"{name:<16} {len(times):>4} {median:8.1f} {worst:8.1f} {worst / median:7.2f}× "
          f"{near_timeout:>6}  {'ok' if ok else 'STALL'}", flush=True)
    return ok


def build_book(copy: Path) -> float:
    """Seconds for one `jupyter-book build` of the copy (every chapter executed)."""
    shutil.rmtree(copy / "_build", ignore_errors=True)
    start = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(copy),
                    "--builder", "html"], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each chapter")
    parser.add_argument("--timeout", type=int, default=30, help="nbclient cell timeout (s)")
    parser.add_argument("--book", type=int, default=0, help="book builds (default none)")
    parser.add_argument("--quick", action="store_true", help="one run of chapter 01 only")
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    print(f"{'chapter':<16} {'runs':>4} {'median':>8} {'slowest':>8} {'ratio':>8} "
          f"{'stalls':>6}  (seconds; stall = a cell ≥ 90% of the {args.timeout} s timeout)")
    ok = True
    for path in sorted((REPO / "solutions").glob("*/*.ipynb")):
        if args.quick and path.parent.name != "01_parameters":
            continue
        runs = [run_chapter(path, args.timeout) for _ in range(args.runs)]
        ok &= report(path.parent.name, [t for t, _ in runs], [c for _, c in runs], args.timeout)
    if args.book:
        with tempfile.TemporaryDirectory() as scratch:
            copy = Path(scratch) / "course"
            files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True,
                                   text=True, check=True).stdout.split()
            for name in files:
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, copy / name)
            builds = [build_book(copy) for _ in range(args.book)]
        ok &= report("book build", builds, [0.0], args.timeout)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
