"""What grading a chapter's solution costs with this checkout's grader beside another's, side by
side in one run.

Issue 45 rebuilt the three checks decided outside the kernel (speed, chapter 08; the busy
device and the Prefetcher, chapter 09; leak-free, chapter 10) and allows them at most 10 % more
grading time than before. This script grades each chapter's solution (its answer cells put into
the released notebook, a cohort of one, through the real ``grade()``) with two checkouts of the
grader: this one, and ``--baseline`` (another checkout, e.g. ``git worktree add /tmp/base
98cae8f``). The two alternate within each round, the first side drawn at random, so that a
neighbour's load falls on both alike. Each side runs in a process of its own whose import path
starts at its checkout (the sandbox then exposes that checkout's tinyprof to the kernel).

Printed per chapter: the median wall seconds of each side, their ratio (target ≤ 1.10), and
each side's points (the solution must keep full marks on both).

Run: ``.venv/bin/python benchmarks/bench_check_cost.py --baseline PATH [--repeat 3]
[--chapters 08_faster 09_pipeline 10_leaks]``; ``--quick`` grades chapter 10 once a side, with
this checkout as its own baseline unless ``--baseline`` is given (CI's check that it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
CHAPTERS = {"08_faster": "faster.ipynb", "09_pipeline": "pipeline.ipynb",
            "10_leaks": "leaks.ipynb"}

#: Run in a checkout's own process: grade the chapter's solution once and print one JSON line.
GRADE_ONCE = """
import json, sys, tempfile, time
from pathlib import Path
from autograder import samples
from autograder.grade import grade
chapter, name = sys.argv[1], sys.argv[2]
nb = samples.notebook(samples.solutions(chapter, name), chapter=chapter, name=name)
with tempfile.TemporaryDirectory(prefix="tinyprof-check-cost-") as scratch:
    cohort = Path(scratch) / "cohort" / "ada" / chapter
    cohort.mkdir(parents=True)
    (cohort / name).write_bytes(nb)
    start = time.perf_counter()
    rows, problems = grade(Path(scratch) / "cohort", Path(scratch) / "out", progress=False)
    wall = time.perf_counter() - start
row = rows[0] if rows else None
print("RESULT " + json.dumps({"wall": wall, "problems": [str(p) for p in problems],
                              **{key: getattr(row, key, None) for key in (
                                  "score", "max_score", "auto_score", "max_auto_score",
                                  "questions")}}))
"""


def grade_with(checkout: Path, chapter: str) -> dict:
    """Grade ``chapter``'s solution with the grader of ``checkout``, in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", GRADE_ONCE, chapter, CHAPTERS[chapter]],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"grading {chapter} with {checkout} printed no result:\n"
                     f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout of the course (default with --quick: this one)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chapters", nargs="*", default=list(CHAPTERS), choices=list(CHAPTERS))
    parser.add_argument("--quick", action="store_true", help="chapter 10, once a side")
    args = parser.parse_args()
    if args.baseline is None and not args.quick:
        parser.error("--baseline PATH is needed (a checkout of the grader to compare with)")
    baseline = (args.baseline or HERE).resolve()
    chapters, repeat = (["10_leaks"], 1) if args.quick else (args.chapters, args.repeat)
    sides = {"this": HERE, "baseline": baseline}
    rng = random.Random()
    print(f"this checkout: {HERE}\nbaseline:      {baseline}\n")
    print(f"{'chapter':<12} {'this s':>8} {'base s':>8} {'this/base':>10} "
          f"{'points (this, base)':>22}")
    for chapter in chapters:
        walls: dict[str, list[float]] = {"this": [], "baseline": []}
        points: dict[str, set] = {"this": set(), "baseline": set()}
        for _ in range(repeat):
            order = rng.sample(list(sides), 2)
            for side in order:
                result = grade_with(sides[side], chapter)
                if result["problems"]:
                    raise SystemExit(f"{side} could not grade {chapter}: {result['problems']}")
                walls[side].append(result["wall"])
                points[side].add(f"{result['score']:g}/{result['max_score']:g}")
        this, base = (statistics.median(walls[s]) for s in ("this", "baseline"))
        shown = f"{','.join(sorted(points['this']))} {','.join(sorted(points['baseline']))}"
        print(f"{chapter:<12} {this:8.1f} {base:8.1f} {this / base:10.2f}× {shown:>22}",
              flush=True)
    print(f"\nmedian of {repeat} interleaved gradings a side; target: this/base ≤ 1.10")


if __name__ == "__main__":
    main()
