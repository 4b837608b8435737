"""Speed grading (autograder/run/speed.py), measured side by side with what a student measures.

Chapter 08's solution (its answer cells in the released notebook) is graded by the real
``grade()`` as a one-submission cohort, and run by a plain kernel (nbclient) that then times
``tp.ab_test(tp.faster.slow_step, fast_step, *tp.faster.make_inputs(0))`` inside itself. The
two alternate, ``--repeat`` times. Printed:

1. the speed-up of ``fast_step`` over ``tp.faster.slow_step`` as the grader measured it (CPU
   time of each kernel, read from outside, baseline in a clean kernel: the figure on the
   feedback page) beside ``tp.ab_test``'s in the kernel (one input, reused) as a student calls
   it, and their ratio (target: within 10 %); beside the grader's own method run in the
   kernel (``measure_speedup``: fresh inputs, CPU time); and beside ``tp.ab_test`` with the
   grader's calls a block, which repeats its one input within a block, so that the input stays
   in cache (on this pair that gains the fast side about a quarter);
2. the wall time of grading the notebook (target: ≤ 60 s) beside a plain run of it;
3. every speed test's line of each grading (``graded:``: the figures on the instructors' page).

Both kernels of the grader and the plain kernel run one BLAS thread. Run:
``.venv/bin/python benchmarks/bench_speed_grading.py [--repeat 3]``; ``--quick`` does one
repetition (CI's check that it runs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = "1"  # as the grader's

from autograder import samples  # noqa: E402
from autograder.grade import grade  # noqa: E402

CHAPTER, NOTEBOOK = "08_faster", "faster.ipynb"
GRADER_LINE = re.compile(r"speed: ([0-9.]+)× faster than tinyprof\.faster\.pipeline\.slow_step"
                         r".*? rounds of ([0-9]+) calls")
SPEED_LINE = re.compile(r"speed: ([0-9.]+)× faster than tinyprof\.faster\.pipeline\.(\w+) "
                        r"\(95% CI ([0-9.]+)–([0-9.]+)×.*?Tier ([0-9.]+)×: (\w+)", re.S)
AB_CELL = """from tinyprof.timing.speed import measure_speedup
_inputs = tp.faster.make_inputs(0)
_same = tp.ab_test(tp.faster.slow_step, fast_step, *_inputs, rounds=15, loops={calls})
_default = tp.ab_test(tp.faster.slow_step, fast_step, *_inputs, rounds=15)
_fresh = measure_speedup(fast_step, tp.faster.slow_step, tp.faster.make_inputs)
print('in-kernel speedups', _same.speedup, _default.speedup, _fresh.speedup)
"""


def solved() -> bytes:
    return samples.notebook(samples.solutions(CHAPTER, NOTEBOOK), chapter=CHAPTER, name=NOTEBOOK)


def graded(scratch: Path, notebook: bytes) -> tuple[float, float, int]:
    """Grade the notebook as a cohort of one: (wall seconds, the grader's speed-up, its calls
    per block)."""
    cohort = scratch / "cohort" / "ada" / CHAPTER
    cohort.mkdir(parents=True)
    (cohort / NOTEBOOK).write_bytes(notebook)
    out = scratch / "out"
    start = time.perf_counter()
    rows, problems = grade(scratch / "cohort", out, progress=False)
    wall = time.perf_counter() - start
    if problems or not rows:
        raise SystemExit(f"grading failed: {problems}")
    found = None
    for path in out.rglob(NOTEBOOK):
        if "autograded" in path.parts:
            nb = json.loads(path.read_text(encoding="utf-8"))
            for cell in nb["cells"]:
                for output in cell.get("outputs", []):
                    text = output.get("text", "")
                    text = "".join(text) if isinstance(text, list) else text
                    speed = SPEED_LINE.search(text)
                    if speed:   # every speed test's line, for the instructors' page
                        print(f"  graded: {cell['metadata']['nbgrader']['grade_id']:22s} "
                              f"{speed.group(1)}× [{speed.group(3)}, {speed.group(4)}] over "
                              f"{speed.group(2)}, tier {speed.group(5)}×: {speed.group(6)}")
                    found = found or GRADER_LINE.search(text)
    if not found:
        raise SystemExit("no speed test output in the autograded notebook")
    return wall, float(found.group(1)), int(found.group(2))


def in_kernel(scratch: Path, notebook: bytes, calls: int) -> tuple[float, float, float, float]:
    """Run the notebook in a plain kernel, then in it tp.ab_test (one input, reused) with
    ``calls`` calls a block as the grader's, tp.ab_test as a student calls it (a block as
    short as 200 µs allows: one call here), and measure_speedup (fresh inputs, CPU time, as
    the grader): (wall seconds of the notebook, the three in-kernel speed-ups)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.reads(notebook.decode(), as_version=4)
    folder = scratch / "plain"
    folder.mkdir(parents=True)
    client = NotebookClient(nb, timeout=300, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}})
    start = time.perf_counter()
    client.execute()
    wall = time.perf_counter() - start
    nb.cells.append(nbformat.v4.new_code_cell(AB_CELL.format(calls=calls)))
    client = NotebookClient(nb, timeout=300, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}})
    client.execute()
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    found = re.search(r"in-kernel speedups ([0-9.]+) ([0-9.]+) ([0-9.]+)", text)
    if not found:
        raise SystemExit(f"the in-kernel A/B printed no speed-up: {text[-300:]}")
    return (wall, *(float(found.group(i)) for i in (1, 2, 3)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one repetition")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    notebook = solved()
    rows = []
    for i in range(repeat):
        with tempfile.TemporaryDirectory(prefix="tinyprof-speed-bench-") as scratch:
            grade_wall, grader, calls = graded(Path(scratch) / "g", notebook)
            plain_wall, same, default, fresh = in_kernel(Path(scratch) / "k", notebook, calls)
        rows.append((grader, same, default, fresh, grade_wall, plain_wall))
        print(f"run {i + 1}: grader {grader:.2f}× ({calls} calls a block); in the kernel "
              f"tp.ab_test {same:.2f}× ({calls} calls a block) and {default:.2f}× (its default "
              f"block), measure_speedup {fresh:.2f}×; grading {grade_wall:.1f} s, plain run "
              f"{plain_wall:.1f} s", flush=True)
    grader, same, default, fresh, grade_wall, plain_wall = (statistics.median(col)
                                                            for col in zip(*rows))
    print(f"\nmedian of {repeat}: fast_step over slow_step {grader:.2f}× by the grader (CPU time, "
          f"outside the kernel) vs {default:.2f}× by tp.ab_test in the kernel, called as a "
          f"student calls it: {grader / default - 1:+.1%} (target within ±10%)")
    print(f"the grader's own method in the kernel (fresh inputs, CPU time, measure_speedup): "
          f"{fresh:.2f}×, the grader {grader / fresh - 1:+.1%}")
    print(f"tp.ab_test with the grader's calls a block, all on its one input (which then stays "
          f"in cache): {same:.2f}×, the grader {grader / same - 1:+.1%}")
    print(f"grading chapter 08's solution: {grade_wall:.1f} s a notebook (target ≤ 60 s); "
          f"the plain run of the notebook takes {plain_wall:.1f} s "
          f"({grade_wall / plain_wall:.2f}×)")


if __name__ == "__main__":
    main()
