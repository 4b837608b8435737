"""Does ``check_regression`` stay quiet on unchanged code and catch a real 20 % slowdown?

TRIALS trials, each as a CI job would run them, in one process on this (shared) machine:

1. ``benchmark_suite({"model": mlp}, digits)`` (``rounds=ROUNDS``) → ``save("baseline.json")``;
2. 0.2 s later, the **same** model measured again → ``check_regression(now, "baseline.json")``:
   "regressed" or "improved" here is a false alarm;
3. then a **slower** model: the same MLP that also runs on an extra slice of the inputs, the
   slice sized at start-up so that it is SLOWDOWN (+20 %) slower in interleaved rounds → the
   check: "regressed" is a detection, "improved" a slowdown called an improvement.

Beside the check's own statuses, each trial also scores the comparison it replaced (the raw
stored and current samples judged as one A/B test, noise band = tolerance) on the same samples.
With ``--drift``, every other trial measures the current suites while CPU hogs (HOGS busy
loops in child processes, one per core) compete for the machine, and the baseline without
them: the machine drifted between the runs, which the check must not take for a change of code.

Last, a baseline saved with rounds=5 and one edited by hand are run through the command line:
both must be refused (exit status 2), never "OK".

Run: ``python benchmarks/bench_regression.py [TRIALS] [--drift] [--quick]``   (about 15 s for 30
trials; ``--quick``: 1 trial, the slowdown calibrated in 40 rounds)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")   # as the chapters do: stable BLAS timings

import numpy as np  # noqa: E402

import tinyprof as tp  # noqa: E402
from tinyprof import datasets, models  # noqa: E402
from tinyprof.abtest import ABResult  # noqa: E402
from tinyprof.regression import main as regression_cli  # noqa: E402
from tinyprof.training import train_classifier  # noqa: E402

ROUNDS = 20
TOLERANCE = 0.05
SLOWDOWN = 0.20


def slowed_by(model, x: np.ndarray, target: float, rounds: int = 100):
    """``model`` plus the same model on the first k rows, k chosen so that the interleaved
    median ratio is 1 + target; returns (the slower callable, its measured slowdown)."""
    def with_extra(rows: int):
        def slower(inputs: np.ndarray) -> np.ndarray:
            out = model(inputs)
            model(inputs[:rows])
            return out
        return slower

    rows = max(1, int(target * len(x)))
    for _ in range(8):
        measured = 1 / tp.ab_test(model, with_extra(rows), x, rounds=rounds).speedup - 1
        if abs(measured - target) < 0.02:
            break
        rows = int(np.clip(round(rows * target / max(measured, 0.01)), 1, len(x)))
    return with_extra(rows), rows


@contextlib.contextmanager
def hogs(active: bool):
    """Busy-loop child processes, one per usable core, while the block runs (when active)."""
    children = []
    if active:
        children = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(len(os.sched_getaffinity(0)))]
        time.sleep(0.3)   # let them start spinning
    try:
        yield
    finally:
        for child in children:
            child.kill()
            child.wait()


def judged_raw(now, baseline_path: Path) -> str:
    """The former check on the same samples: raw stored vs current samples as one A/B test."""
    then = tp.SuiteResult.load(baseline_path)["model"].latency
    verdict = ABResult.from_samples(then, now["model"].latency, noise_band=TOLERANCE).verdict
    return {"slower": "regressed", "faster": "improved"}.get(verdict, "unchanged")


def main(trials: int = 30, drift: bool = False, quick: bool = False) -> None:
    digits = datasets.digits(seed=0)
    model = models.mlp((64, 128, 64, 10))
    train_classifier(model, digits.x_train, digits.y_train, epochs=5, seed=0)
    data = (digits.x_test, digits.y_test)
    slower, rows = slowed_by(model, digits.x_test, SLOWDOWN, 40 if quick else 100)
    check_rounds = 40 if quick else 300
    measured = 1 / tp.ab_test(model, slower, digits.x_test, rounds=check_rounds).speedup - 1
    print(f"model: MLP 64-128-64-10 on {len(digits.x_test)} digits; the slower model also runs "
          f"it on {rows} extra rows: {measured:+.1%} in {check_rounds} interleaved rounds (target "
          f"{SLOWDOWN:+.0%})")
    print(f"{trials} trials, rounds={ROUNDS}, tolerance ±{TOLERANCE:.0%}, load average "
          f"{os.getloadavg()[0]:.2f} at the start"
          + (", CPU hogs during every other trial's current suites" if drift else "") + "\n")
    same, slow, same_raw, slow_raw = Counter(), Counter(), Counter(), Counter()
    changes = {"same": [], "slow": []}
    remeasured = 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "baseline.json"
        for trial in range(trials):
            tp.benchmark_suite({"model": model}, data, rounds=ROUNDS).save(path)
            time.sleep(0.2)
            for label, candidate, counts, raw in (("same", model, same, same_raw),
                                                  ("slow", slower, slow, slow_raw)):
                with hogs(drift and trial % 2 == 1):
                    now = tp.benchmark_suite({"model": candidate}, data, rounds=ROUNDS)
                    check = tp.check_regression(now, path, tolerance=TOLERANCE).checks[0]
                counts[check.status] += 1
                raw[judged_raw(now, path)] += 1
                changes[label].append(check.change)
                remeasured += check.remeasured is not None
        elapsed = time.perf_counter() - start

        print(f"{'':34}{'check_regression':>18}{'raw samples as one A/B':>26}")
        goal = f"≥ {max(trials - 2, 1)}"
        rows_out = [
            ("same model: false alarms", same["regressed"] + same["improved"],
             same_raw["regressed"] + same_raw["improved"], "≤ 1"),
            ("same model: unstable (no verdict)", same["unstable"], None, ""),
            ("+20 %: detected (regressed)", slow["regressed"], slow_raw["regressed"], goal),
            ("+20 %: unstable (no verdict)", slow["unstable"], None, ""),
            ("+20 %: called an improvement", slow["improved"], slow_raw["improved"], "0"),
        ]
        for label, ours, theirs, target in rows_out:
            theirs = "–" if theirs is None else f"{theirs}/{trials}"
            print(f"{label:34}{ours:>12}/{trials:<5}{theirs:>20}{'':5} "
                  + (f"goal {target}" if target else ""))
        for label in ("same", "slow"):
            values = np.asarray(changes[label])
            print(f"change reported, {label:>4}: median {np.median(values):+.1%}, range "
                  f"{values.min():+.1%} to {values.max():+.1%}")
        print(f"flagged and re-measured: {remeasured} of {2 * trials} checks; "
              f"{elapsed:.0f} s in all")

        print("\nbaselines that must be refused (command line, exit status 2):")
        current = tp.benchmark_suite({"model": model}, data, rounds=ROUNDS).save(
            Path(folder) / "current.json")
        small = tp.benchmark_suite({"model": model}, data, rounds=5).save(
            Path(folder) / "small.json")
        tampered = json.loads(path.read_text())
        tampered["variants"][0]["latency"]["samples"] = [
            t / 3 for t in tampered["variants"][0]["latency"]["samples"]]
        (Path(folder) / "tampered.json").write_text(json.dumps(tampered))
        for label, baseline in (("saved with rounds=5", small),
                                ("samples edited to 3x faster", Path(folder) / "tampered.json")):
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                status = regression_cli([str(current), str(baseline)])
            print(f"  {label:30} exit {status}: {err.getvalue().strip()[:150]}")


if __name__ == "__main__":
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    quick = "--quick" in sys.argv
    main(int(numbers[0]) if numbers else (1 if quick else 30), drift="--drift" in sys.argv,
         quick=quick)
