"""Does a chapter's solution get the same points however busy the grading machine is?

Issue 45 asks that the solutions of the chapters whose checks are decided outside the kernel
(08: speed; 09: the busy device and the Prefetcher; 10: leak-free) get the same points over 5
gradings on a quiet machine and 5 beside 2 CPU hogs. This grades each chapter's solution (its
answer cells put into the released notebook, a cohort of one, through the real ``grade()``, in
a process of its own: ``bench_check_cost.grade_with``) ``--repeat`` times each way, quiet and
busy alternating, the first drawn at random. The hogs are ``stress-ng --cpu 2`` when it is
installed, else 2 Python processes that spin; they run only during the busy gradings.

Printed per chapter: every grading's autograded points (the written answers wait for a person),
quiet and busy, the median wall seconds of each, whether every grading gave the solution its
full marks, and each test whose points varied, grading by grading.

Run: ``.venv/bin/python benchmarks/bench_solution_stability.py [--repeat 5]
[--chapters 08_faster 09_pipeline 10_leaks]``; ``--quick`` grades chapter 10 once each way
(CI's check that it runs).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_check_cost import CHAPTERS, HERE, grade_with  # noqa: E402

SPIN = "while True: pass"


def hog_commands(count: int = 2) -> tuple[list[list[str]], str]:
    """The commands that keep ``count`` cores busy, and what they are."""
    stress = shutil.which("stress-ng")
    if stress:
        return [[stress, "--cpu", str(count), "--quiet"]], f"stress-ng --cpu {count}"
    return ([[sys.executable, "-c", SPIN]] * count), f"{count} spinning Python processes"


@contextmanager
def hogs(count: int = 2) -> Iterator[None]:
    """:func:`hog_commands` running while the block runs."""
    started = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for command in hog_commands(count)[0]]
    try:
        yield
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def graded(chapter: str, busy: bool) -> dict:
    if not busy:
        return grade_with(HERE, chapter)
    with hogs():
        return grade_with(HERE, chapter)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="gradings each way (default 5)")
    parser.add_argument("--chapters", nargs="*", default=list(CHAPTERS), choices=list(CHAPTERS))
    parser.add_argument("--quick", action="store_true", help="chapter 10, once each way")
    args = parser.parse_args()
    chapters, repeat = (["10_leaks"], 1) if args.quick else (args.chapters, args.repeat)
    what = hog_commands()[1]
    print(f"the solution graded {repeat} times quiet and {repeat} times beside {what}, "
          "alternating\n")
    rng = random.Random()
    steady = True
    for chapter in chapters:
        results: dict[bool, list[dict]] = {False: [], True: []}
        for _ in range(repeat):
            for busy in rng.sample([False, True], 2):
                result = graded(chapter, busy)
                if result["problems"]:
                    raise SystemExit(f"could not grade {chapter}: {result['problems']}")
                results[busy].append(result)
        everything = results[False] + results[True]
        full = all(r["auto_score"] == r["max_auto_score"] for r in everything)
        steady &= full
        print(f"{chapter:<12} autograded points, quiet: {points(results[False])} "
              f"({statistics.median(r['wall'] for r in results[False]):.1f} s); busy: "
              f"{points(results[True])} "
              f"({statistics.median(r['wall'] for r in results[True]):.1f} s); "
              f"{'full marks every time' if full else 'NOT full marks every time'}", flush=True)
        for question, got in varied(everything).items():
            print(f"{'':12} {question}: quiet {got[:repeat]}, busy {got[repeat:]}")
    print(f"\nevery grading of every solution at full autograded marks: "
          f"{'yes' if steady else 'NO'}")


def points(results: list[dict]) -> str:
    """Each grading's autograded points (what the tests decide; written answers wait for a
    person and are not counted)."""
    return " ".join(f"{r['auto_score']:g}/{r['max_auto_score']:g}" for r in results)


def varied(results: list[dict]) -> dict[str, list[float]]:
    """The tests whose points were not the same in every grading, with each grading's."""
    found = {}
    for question in results[0]["questions"] or {}:
        got = [(r["questions"] or {}).get(question) for r in results]
        if len(set(got)) > 1:
            found[question] = got
    return found


if __name__ == "__main__":
    main()
