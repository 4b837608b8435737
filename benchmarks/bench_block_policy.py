"""Why a speedup depends on the calls in a block: per-call times and page faults, side by side.

Issue 46 (chapter 08): the graded speed test measured ``load_batch`` against
``load_per_sample`` at about 5.1×, ``tp.ab_test`` at about 6.8×; ``measure_speedup`` with fresh
inputs gave 4.9× at 28 calls a block and 6.6× at 2. Four ways a block can differ, each a
hypothesis this script measures, all in one interleaved run:

- **outputs kept or dropped**: the speed test keeps every output of a block to check it, so a
  block's outputs pile up; once they outgrow what the allocator holds, each call's output
  lands on fresh pages, a minor page fault per 4 KiB page (``resource.getrusage``'s
  ``ru_minflt``, counted around each block);
- **the allocator's reuse**: a dropped output is freed before the next call, which gets the
  same memory back;
- **fresh or reused inputs**: one input reused stays in the caches; fresh ones were made
  before the block and may have left them;
- **the slow side getting faster** on repeated calls: its per-call time against the calls.

For each pair and each number of calls a block (CALLS), four policies (fresh/reused inputs ×
outputs kept/dropped) are timed in the same interleaved rounds (every (calls, policy) cell once
a round, in a random order, both sides in a random order inside it), by CPU time
(``time.process_time``, as the speed tests). Printed per row: each side's median per-call
time, its mean minor faults per call, and the speedup with its 95 % bootstrap interval.

Then the allocator is changed, nothing else: the speed test's way (fresh inputs, outputs kept)
and the A/B's way (one input, outputs dropped) at 2 and 28 calls, each in a child process with
glibc's malloc told to keep what is freed (``MALLOC_TRIM_THRESHOLD_``/``MALLOC_MMAP_THRESHOLD_``:
no fresh pages once the first round grew the heap), or to map every large block afresh
(``MALLOC_MMAP_THRESHOLD_`` at 128 KiB: fresh pages at every call, dropped or not), or left as
it is. If the faults are the cause, the first removes the dependence on the calls and the
second puts it into the A/B's way too.

Run: ``python benchmarks/bench_block_policy.py [--quick]`` (``--quick``: the loader only, 2 and
28 calls, 3 rounds, one child each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # as the speed tests' kernels
os.environ.setdefault("OMP_NUM_THREADS", "1")

import resource  # noqa: E402

import numpy as np  # noqa: E402

from tinyprof.faster import pipeline  # noqa: E402
from tinyprof.timing.abtest import bootstrap_ratio_ci  # noqa: E402

PAIRS = {"load": (pipeline.load_per_sample, pipeline.load_fast, pipeline.make_load_inputs),
         "GELU": (pipeline.gelu_slow, pipeline.gelu_fast, pipeline.make_activations)}
CALLS = (1, 2, 4, 8, 16, 28, 64)
#: (fresh inputs, outputs kept): the speed test's way first, the A/B's way last.
POLICIES = {"fresh, kept (speed test)": (True, True), "fresh, dropped": (True, False),
            "reused, kept": (False, True), "reused, dropped (A/B)": (False, False)}
ALLOCATORS = {
    "glibc as it is": {},
    "keeps what is freed": {"MALLOC_TRIM_THRESHOLD_": str(2**30),
                            "MALLOC_MMAP_THRESHOLD_": str(2**25)},
    "maps every large block afresh": {"MALLOC_MMAP_THRESHOLD_": str(2**17)},
}
CHILD_POLICIES = ("fresh, kept (speed test)", "reused, dropped (A/B)")


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def block(fn, inputs: list[tuple], keep: bool) -> tuple[float, int, list]:
    """(CPU seconds, minor faults, the outputs kept) of one block of calls."""
    outputs = []
    before_faults = faults()
    start = time.process_time()
    if keep:
        for args in inputs:
            outputs.append(fn(*args))
    else:
        for args in inputs:
            fn(*args)
    seconds = time.process_time() - start
    return seconds, faults() - before_faults, outputs


def measure(pair: str, calls_list, policies, rounds: int, seed: int = 0) -> dict:
    """Per (calls, policy): each side's per-call seconds and faults per call, one per round.
    A round of a cell is ordered as the speed test's (tinyprof.timing.blocks): inputs made, both
    blocks run, the inputs let go, then the outputs."""
    slow, fast, make = PAIRS[pair]
    rng = np.random.default_rng(seed)
    warm = make(10**9)
    for fn in (slow, fast):
        fn(*warm)
    cells = [(calls, policy) for calls in calls_list for policy in policies]
    samples = {cell: {"baseline": [], "candidate": [], "baseline faults": [],
                      "candidate faults": []} for cell in cells}
    made = 0
    for _ in range(rounds):
        for i in rng.permutation(len(cells)):
            calls, policy = cells[i]
            fresh, keep = POLICIES[policy]
            if fresh:
                inputs = [make(made + k) for k in range(calls)]
                made += calls
            else:
                inputs = [warm] * calls
            kept = []
            for side in rng.permutation(["baseline", "candidate"]):
                seconds, counted, outputs = block(slow if side == "baseline" else fast, inputs,
                                                  keep)
                kept.append(outputs)
                samples[cells[i]][side].append(seconds / calls)
                samples[cells[i]][f"{side} faults"].append(counted / calls)
            del inputs, outputs
            kept.clear()
    return {f"{calls}|{policy}": value for (calls, policy), value in samples.items()}


def summary(value: dict) -> dict:
    base, cand = np.median(value["baseline"]), np.median(value["candidate"])
    low, high = bootstrap_ratio_ci(value["baseline"], value["candidate"])
    return {"baseline": float(base), "candidate": float(cand), "ratio": float(base / cand),
            "ci": (low, high), "baseline faults": float(np.mean(value["baseline faults"])),
            "candidate faults": float(np.mean(value["candidate faults"]))}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.3f} ms"


def print_table(pair: str, results: dict, rounds: int) -> dict:
    slow, fast, _ = PAIRS[pair]
    print(f"\n{pair}: {fast.__name__} vs {slow.__name__}, {rounds} interleaved rounds, CPU time "
          "per call (median), minor page faults per call (mean)")
    print(f"{'calls':>5}  {'inputs, outputs':<26}{'baseline':>11} {'faults':>7}"
          f"{'candidate':>12} {'faults':>7}   speedup [95% CI]")
    table = {}
    for key, value in results.items():
        calls, policy = key.split("|")
        row = table[(int(calls), policy)] = summary(value)
        print(f"{calls:>5}  {policy:<26}{ms(row['baseline'])} {row['baseline faults']:7.1f}"
              f"{ms(row['candidate'])}  {row['candidate faults']:7.1f}   {row['ratio']:5.2f}× "
              f"[{row['ci'][0]:.2f}, {row['ci'][1]:.2f}]")
    return table


def print_findings(table: dict, calls_list) -> None:
    few, many = min(calls_list), max(c for c in calls_list if c <= 28)
    speed, ab = "fresh, kept (speed test)", "reused, dropped (A/B)"
    a, b = table[(few, speed)], table[(many, speed)]
    print(f"  the speed test's way, {many} calls / {few}: speedup {b['ratio'] / a['ratio']:.2f}×; "
          f"candidate faults a call {b['candidate faults']:.1f} vs {a['candidate faults']:.1f}")
    kept, dropped = table[(many, speed)], table[(many, "fresh, dropped")]
    extra_faults = kept["candidate faults"] - dropped["candidate faults"]
    extra = kept["candidate"] - dropped["candidate"]
    print(f"  at {many} calls, fresh inputs, outputs kept / dropped: candidate "
          f"{kept['candidate'] / dropped['candidate']:.2f}×, baseline "
          f"{kept['baseline'] / dropped['baseline']:.2f}× its time; "
          f"{extra_faults:.1f} more faults a call cost the candidate {extra * 1e6:+.1f} µs"
          + (f" ({extra / extra_faults * 1e6:.2f} µs a fault)" if extra_faults >= 1 else ""))
    fresh, reused = table[(many, "fresh, dropped")], table[(many, ab)]
    print(f"  at {many} calls, outputs dropped, fresh / reused inputs: candidate "
          f"{fresh['candidate'] / reused['candidate']:.2f}×, baseline "
          f"{fresh['baseline'] / reused['baseline']:.2f}× its time")
    first, last = table[(min(calls_list), ab)], table[(max(calls_list), ab)]
    print(f"  the A/B's way, baseline's time at {max(calls_list)} calls / {min(calls_list)}: "
          f"{last['baseline'] / first['baseline']:.2f}×; speedup {last['ratio']:.2f}× vs "
          f"{first['ratio']:.2f}×")


def child(pair: str, rounds: int) -> None:
    print("RESULT" + json.dumps(measure(pair, (2, 28), CHILD_POLICIES, rounds, seed=1)))


def allocators(pair: str, rounds: int, repeats: int) -> None:
    print(f"\n{pair}, the allocator changed (child processes, {rounds} rounds each, "
          f"{repeats} alternation(s)): speedup [95% CI], candidate's faults a call")
    got: dict[str, list[dict]] = {name: [] for name in ALLOCATORS}
    for _ in range(repeats):
        for name, env in ALLOCATORS.items():
            done = subprocess.run([sys.executable, __file__, "--child", pair, str(rounds)],
                                  env={**os.environ, **env}, capture_output=True, text=True,
                                  check=True)
            out = done.stdout
            got[name].append(json.loads(out[out.index("RESULT") + 6:]))
    for name, runs in got.items():
        cells = []
        for key in runs[0]:
            merged = {part: sum((run[key][part] for run in runs), []) for part in runs[0][key]}
            row = summary(merged)
            calls, policy = key.split("|")
            cells.append(f"{policy} at {calls}: {row['ratio']:.2f}× [{row['ci'][0]:.2f}, "
                         f"{row['ci'][1]:.2f}], {row['candidate faults']:.0f}")
        print(f"  {name:<30} " + "; ".join(cells))


def main(quick: bool) -> None:
    rounds = 3 if quick else 9
    calls_list = (2, 28) if quick else CALLS
    pairs = ("load",) if quick else tuple(PAIRS)
    for pair in pairs:
        table = print_table(pair, measure(pair, calls_list, tuple(POLICIES), rounds), rounds)
        print_findings(table, calls_list)
    for pair in pairs:
        allocators(pair, 3 if quick else 9, 1 if quick else 2)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
    else:
        main("--quick" in sys.argv)
