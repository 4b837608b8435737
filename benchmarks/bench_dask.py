"""Grading through Dask against grading on one machine, measured side by side in one run.

The same cohort of N chapter-01 submissions (solved, partly solved and untouched notebooks) is
graded, interleaved ``--repeat`` times:

- ``--jobs 2`` on this machine (pool.py: two worker processes);
- through Dask: a ``dask scheduler`` and two ``dask worker --nthreads 1`` processes on
  127.0.0.1, started once beforehand as a standing cluster would be, graded with ``--jobs 1
  --scheduler tcp://...`` (two submissions at once, as above);
- ``--scheduler local:2 --jobs 1``: a LocalCluster started and stopped by the command itself.

It prints the wall time, throughput and Dask's overhead against ``--jobs 2`` (target: at most
10 %; every run is printed, since a shared machine's other load moves them), whether grades.csv
is the same (but for its ``worker`` column), the per-notebook cost
(seconds a worker spent on one submission, from DIR/journal.jsonl), and from that, what a cohort
of 10,000 takes on N such workers; and what the instructor's process spends on each finished
submission, which bounds how many workers it can keep busy.

Run: ``.venv/bin/python benchmarks/bench_dask.py [--cohort 24] [--repeat 2] [--quick]``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder import course, samples  # noqa: E402
from autograder import grade as grading  # noqa: E402
from autograder.grade import Settings, grade  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def start_cluster(folder: Path, workers: int) -> tuple[str, list[subprocess.Popen]]:
    """``python -m dask scheduler`` and ``workers`` × ``python -m dask worker`` from the
    repository, each in a session of its own."""
    info = folder / "scheduler.json"
    log = open(folder / "dask.log", "w")  # noqa: SIM115 - lives as long as the processes
    common = {"cwd": REPO, "stdout": log, "stderr": subprocess.STDOUT, "start_new_session": True}
    processes = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host",
                                   "127.0.0.1", "--port", "0", "--no-dashboard",
                                   "--scheduler-file", str(info)], **common)]
    deadline = time.monotonic() + 120
    while not info.exists() or not info.read_text().strip():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Dask scheduler did not start: see {folder / 'dask.log'}")
        time.sleep(0.2)
    address = json.loads(info.read_text())["address"]
    for number in range(workers):
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", address, "--name", f"bench-{number}",
             "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"], **common))
    from distributed import Client

    with Client(address, timeout=120) as client:
        client.wait_for_workers(workers, timeout=120)
    return address, processes


def stop(processes: list[subprocess.Popen]) -> None:
    for process in reversed(processes):
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


MERGES: list[float] = []


def timing_merges() -> None:
    """Time what the instructor's process does for each finished submission (merge into the
    gradebook, move the files, the journal line): a cluster's throughput cannot pass it."""
    finish, add = grading._finish, grading.Journal.add

    def timed_finish(*args, **kwargs):
        start = time.perf_counter()
        try:
            return finish(*args, **kwargs)
        finally:
            MERGES.append(time.perf_counter() - start)

    def timed_add(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return add(self, *args, **kwargs)
        finally:
            MERGES[-1] += time.perf_counter() - start

    grading._finish, grading.Journal.add = timed_finish, timed_add


def without_worker(table: str) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "worker"}
            for row in csv.DictReader(io.StringIO(table))]


def journal_seconds(out: Path) -> list[float]:
    lines = (out / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["seconds"] for line in lines if line.endswith("}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohort", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="4 submissions, once each way: checks the script runs (CI)")
    args = parser.parse_args()
    if args.quick:
        args.cohort, args.repeat = 4, 1
    course.ensure_tools_on_path()
    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy 2 noise
    timing_merges()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; Python "
          f"{sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as tmp:
        scratch = Path(tmp)
        root = samples.mixed_cohort(scratch / "cohort", args.cohort)
        address, processes = start_cluster(scratch, workers=2)
        ways = {"--jobs 2 (this machine)": {"jobs": 2},
                "Dask, 2 workers (tcp)": {"jobs": 1, "scheduler": address},
                "Dask, local:2 (started by the command)": {"jobs": 1, "scheduler": "local:2"}}
        walls: dict[str, list[float]] = {name: [] for name in ways}
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        tables: dict[str, str] = {}
        try:
            for run in range(args.repeat):   # interleaved: the machine's drift hits all alike
                for way, (name, how) in enumerate(ways.items()):
                    out = scratch / f"out-{run}-{way}"
                    start = time.perf_counter()
                    grade(root, out, progress=False, settings=Settings(), **how)
                    walls[name].append(time.perf_counter() - start)
                    seconds[name] += journal_seconds(out)
                    tables[name] = (out / "grades.csv").read_text(encoding="utf-8")
        finally:
            stop(processes)
        base = statistics.median(walls["--jobs 2 (this machine)"])
        print(f"\ncohort of {args.cohort} submissions, two at a time, median of {args.repeat}:")
        for name, values in walls.items():
            wall = statistics.median(values)
            print(f"  {name:40s} {wall:6.1f} s   {60 * args.cohort / wall:5.1f} submissions/min"
                  f"   overhead {100 * (wall / base - 1):+5.1f} %   per notebook "
                  f"{statistics.median(seconds[name]):.2f} s   (runs: "
                  + ", ".join(f"{v:.1f}" for v in values) + " s)")
        same = all(without_worker(t) == without_worker(tables["--jobs 2 (this machine)"])
                   for t in tables.values())
        print(f"  grades.csv the same every way (but for its worker column): {same}")
        cost = statistics.median(seconds["Dask, 2 workers (tcp)"])
        local_cost = statistics.median(seconds["--jobs 2 (this machine)"])
        per_slot = statistics.median(walls["Dask, 2 workers (tcp)"]) * 2 / args.cohort
        print(f"\nper-notebook cost: {cost:.2f} s in a Dask worker's grading process "
              f"({local_cost:.2f} s in a local one), median over every submission; "
              f"{per_slot:.2f} s of wall time per submission and slot, all costs included")
        print(f"a cohort of 10,000 at {per_slot:.2f} s per submission and slot, each worker "
              "like this machine with --jobs 2:")
        for workers in (1, 4, 16, 64):
            hours = 10_000 * per_slot / (2 * workers) / 3600
            print(f"  {workers:3d} worker(s): {hours:6.2f} h")
        merge = statistics.median(MERGES)
        print(f"the instructor's process spends {1000 * merge:.0f} ms on each finished "
              f"submission (median of {len(MERGES)}: merge, files, journal), so it keeps up with "
              f"{1 / merge:.0f} submissions/s: about {per_slot / merge / 2:.0f} workers of "
              "--jobs 2 at this per-notebook cost")


if __name__ == "__main__":
    main()
