"""Grading cost, measured side by side in one run.

0. A kernel's whole life (start, ready, one cell, shutdown), with jupyter_client's own async
   kernel manager and in the sandbox (SandboxedKernelManager), interleaved: the sandbox's
   fixed cost per kernel, phase by phase (a slow shutdown shows here first).
1. One chapter-01 notebook (every exercise solved): bare nbclient execution; the same in the
   bubblewrap sandbox (SandboxedKernelManager): the sandbox's cost per notebook; nbgrader's
   autograde plus feedback as a worker runs them (hardened Execute, limits), with and without
   the sandbox; and a whole ``grade()`` of a one-submission cohort (intake, gradebook, worker
   start, merge): the fixed cost of a ``grade`` command.
2. A cohort of N submissions (default 30: solved, partly solved and untouched notebooks), graded
   with ``--jobs 1`` and with ``--jobs J``: wall time, speedup, and whether grades.csv is
   byte-identical.

Run: ``.venv/bin/python benchmarks/bench_grading.py [--cohort 30] [--jobs 2] [--repeat 3]``;
``--quick`` times three kernel lives of each kind and bare and sandboxed nbclient once each
(CI's check that it runs).
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder import course, samples  # noqa: E402
from autograder.dispatch.worker import grade_task  # noqa: E402
from autograder.grade import Settings, grade  # noqa: E402
from autograder.records import Task  # noqa: E402
from autograder.results.gradebook import prepare  # noqa: E402


def timed(action, *args, **kwargs) -> float:
    start = time.perf_counter()
    action(*args, **kwargs)
    return time.perf_counter() - start


def bare_nbclient(notebook: bytes, folder: Path, sandboxed: bool = False) -> None:
    import nbformat
    from nbclient import NotebookClient

    from autograder.kernel.sandbox import SandboxedKernelManager

    nb = nbformat.reads(notebook.decode(), as_version=4)
    extra = {"kernel_manager_class": SandboxedKernelManager} if sandboxed else {}
    NotebookClient(nb, timeout=60, allow_errors=True, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}, **extra).execute()


PHASES = ("start", "ready", "one cell", "shutdown")


async def _kernel_life(folder: Path, sandboxed: bool) -> dict[str, float]:
    """Seconds each phase of one kernel's life took."""
    from jupyter_client.manager import AsyncKernelManager

    from autograder.kernel.sandbox import SandboxedKernelManager

    manager = (SandboxedKernelManager if sandboxed else AsyncKernelManager)(
        kernel_name="python3")
    marks = [time.perf_counter()]
    await manager.start_kernel(cwd=str(folder))
    marks.append(time.perf_counter())
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)
        marks.append(time.perf_counter())
        reply = await client.execute_interactive("x = sum(range(1000))", timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        marks.append(time.perf_counter())
    finally:
        client.stop_channels()
        await manager.shutdown_kernel()
    marks.append(time.perf_counter())
    return {phase: b - a for phase, a, b in zip(PHASES, marks, marks[1:])}


def kernel_lives(folder: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Median seconds per phase (and "life", their sum) of ``repeat`` kernel lives of each
    kind, bare and sandboxed taking turns."""
    import asyncio

    lives: dict[str, list[dict[str, float]]] = {"bare": [], "sandboxed": []}
    for _ in range(repeat):
        for kind in lives:
            phases = asyncio.run(_kernel_life(folder, kind == "sandboxed"))
            lives[kind].append({**phases, "life": sum(phases.values())})
    return {kind: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
            for kind, runs in lives.items()}


def print_kernel_lives(folder: Path, repeat: int) -> None:
    lives = kernel_lives(folder, repeat)
    bare, sandboxed = lives["bare"], lives["sandboxed"]
    print(f"a kernel's life (start, ready, one cell, shutdown), median of {repeat}:")
    for key in (*PHASES, "life"):
        print(f"  {key:9s} bare {bare[key]:5.2f} s   sandboxed {sandboxed[key]:5.2f} s")
    print(f"  kernel-life ratio, sandboxed / bare: {sandboxed['life'] / bare['life']:.2f}×")


def one_notebook(scratch: Path, repeat: int) -> dict[str, float]:
    notebook = samples.notebook(samples.solutions())
    single = scratch / "single" / "ada" / samples.CHAPTER
    single.mkdir(parents=True)
    (single / samples.NOTEBOOK).write_bytes(notebook)
    out = scratch / "prepared"
    out.mkdir()
    template = prepare(out, [samples.CHAPTER])
    task = Task(key=f"ada/{samples.CHAPTER}", student="ada", assignment=samples.CHAPTER,
                work=str(scratch / "task"),
                notebooks={samples.NOTEBOOK: str(single / samples.NOTEBOOK)},
                template=str(template), release=str(out / "release"), timeout=60,
                wall_timeout=Settings().wall_s, memory_mb=2048)
    times: dict[str, list[float]] = {"bare nbclient execution": [],
                                     "nbclient, kernel in the sandbox": [],
                                     "autograde + feedback, no sandbox": [],
                                     "autograde + feedback, sandboxed": [],
                                     "grade() of a 1-submission cohort": []}
    for i in range(repeat):  # interleaved, so that the machine's drift hits every row alike
        times["bare nbclient execution"].append(timed(bare_nbclient, notebook, single))
        times["nbclient, kernel in the sandbox"].append(
            timed(bare_nbclient, notebook, single, sandboxed=True))
        times["autograde + feedback, no sandbox"].append(
            timed(grade_task, replace(task, sandbox=False)))
        times["autograde + feedback, sandboxed"].append(timed(grade_task, task))
        times["grade() of a 1-submission cohort"].append(timed(
            grade, scratch / "single", scratch / f"one-{i}", progress=False))
    return {name: statistics.median(values) for name, values in times.items()}


def quick(scratch: Path) -> None:
    notebook = samples.notebook(samples.solutions())
    folder = scratch / "quick"
    folder.mkdir()
    (folder / samples.NOTEBOOK).write_bytes(notebook)
    print_kernel_lives(folder, 3)
    bare = timed(bare_nbclient, notebook, folder)
    sandboxed = timed(bare_nbclient, notebook, folder, sandboxed=True)
    print(f"one chapter-01 notebook, once each: bare nbclient {bare:.2f} s, kernel in the "
          f"sandbox {sandboxed:.2f} s: {sandboxed / bare:.2f}× bare (one run each, the first "
          "paying for cold caches: a check that grading runs, not a measurement of its cost)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cohort", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="bare vs sandboxed nbclient on one notebook, once")
    args = parser.parse_args()
    course.ensure_tools_on_path()
    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy 2 noise
    print(f"machine: {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        scratch = Path(tmp)
        if args.quick:
            quick(scratch)
            return
        (scratch / "lives").mkdir()
        print_kernel_lives(scratch / "lives", args.repeat)
        single = one_notebook(scratch, args.repeat)
        bare = single["bare nbclient execution"]
        print(f"\none chapter-01 notebook, median of {args.repeat}:")
        for name, seconds in single.items():
            print(f"  {name:34s} {seconds:6.2f} s   {seconds / bare:5.2f}× bare")
        sandboxed = single["nbclient, kernel in the sandbox"]
        fixed = single["grade() of a 1-submission cohort"] - single[
            "autograde + feedback, sandboxed"]
        print(f"  the sandbox costs {sandboxed - bare:+.2f} s per notebook "
              f"({sandboxed / bare:.2f}× bare nbclient); fixed cost of a grade command: "
              f"{fixed:.2f} s")
        root = samples.mixed_cohort(scratch / "cohort", args.cohort)
        walls, tables = {}, {}
        for jobs in (1, args.jobs):
            out = scratch / f"jobs{jobs}"
            walls[jobs] = timed(grade, root, out, jobs=jobs, progress=False,
                                settings=Settings())
            tables[jobs] = (out / "grades.csv").read_text(encoding="utf-8")
            shutil.rmtree(out / "autograded")
        rows = len(tables[1].splitlines()) - 1
        print(f"\ncohort of {args.cohort} submissions ({rows} rows in grades.csv):")
        for jobs, wall in walls.items():
            print(f"  --jobs {jobs}: {wall:6.1f} s   {wall / args.cohort:5.2f} s per submission   "
                  f"speedup {walls[1] / wall:4.2f}×")
        same = tables[1] == tables[args.jobs]
        print(f"  grades.csv identical for --jobs 1 and --jobs {args.jobs}: {same}")
        scores = Counter(row["score"] for row in csv.DictReader(io.StringIO(tables[1])))
        print("  scores: " + ", ".join(f"{n} × {s}" for s, n in sorted(scores.items())))


if __name__ == "__main__":
    main()
