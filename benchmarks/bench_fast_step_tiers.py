"""Where chapter 08's ``fast_step`` tiers sit: students' steps graded by the real grader.

The tiers (2×, 4×, 6× over ``pipeline.slow_step``, 25 rounds) must be cleared with room by every
step that has every fix, quiet or beside CPU hogs, and the same function must get the same
grade wherever it stands in the notebook (issue 46: the red team's honest float32 step measured
8.4× to 16.2× in one kernel before the speed test held the memory allocator). This grades, in
one sandboxed kernel by the grader's Execute preprocessor (``tests/test_redteam_speed.grade``),
each of these steps ``--repeat`` times, the repeats one after the other, so that each step is
graded again after everything else has run:

- the red team's honest float32 step with every fix (``tests/redteam_speed.py``), its loader a
  sliding-window view indexed by sample and shift;
- the same step with a per-sample loop over the pre-padded images instead;
- the same step with the loss computed one row at a time;
- the same step in float64;
- the chapter's solution.

Printed per step and repeat: the grader's speedup, its 95 % interval and the per-call times;
then per step the range of the speedups and the lowest lower end, against the top tier. Run
``.venv/bin/python benchmarks/bench_fast_step_tiers.py [--repeat 2] [--rounds 25]`` (beside
``stress-ng --cpu 2`` for the loaded figures); ``--quick`` grades each once with 11 rounds.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from redteam_speed import HONEST, SETUP, answer  # noqa: E402
from test_redteam_speed import chapter_test, grade, printed  # noqa: E402

TOP_TIER = 6
HONEST_STEP = HONEST["fast_step: float32 written another way"]
LOADER = ("    x = WINDOWS[idx, MAX_SHIFT - shifts[:, 0], MAX_SHIFT - shifts[:, 1]]"
          ".reshape(n, FEATURES)\n    x = (x - CENTRE) / SCALE\n")
PER_SAMPLE_LOADER = """    x = np.empty((n, FEATURES), dtype=np.float32)
    for i, (k, (dy, dx)) in enumerate(zip(idx, shifts)):
        window = PADDED[k, MAX_SHIFT - dy:MAX_SHIFT + 16 - dy, MAX_SHIFT - dx:MAX_SHIFT + 16 - dx]
        x[i] = (window.reshape(-1) - CENTRE) / SCALE
"""
PER_ROW_LOSS = """    total, dz = 0.0, np.empty_like(z)
    for i in range(n):
        row = z[i] - z[i].max()
        logp = row - np.log(np.exp(row).sum())
        target = np.full(CLASSES, TARGET_OFF, dtype=z.dtype)
        target[labels[idx[i]]] += np.float32(1 - SMOOTHING)
        total += -(target * logp).sum()
        dz[i] = (np.exp(logp) - target) / n
    loss = float(total / n)
"""
LINE = re.compile(r"speed: ([0-9.]+)× .*?CI ([0-9.]+)–([0-9.]+)×; ([0-9.]+ [µm]?s) → "
                  r"([0-9.]+ [µm]?s) a call")


def steps() -> dict[str, str]:
    """Each step's answer cell (the chapter's set-up left out), by name."""
    loss = HONEST_STEP[HONEST_STEP.index("    z -= z.max("):HONEST_STEP.index("    dh = dz @")]
    assert LOADER in HONEST_STEP and loss, "the red team's honest step changed: update this script"
    return {
        "every fix (red team's float32)": HONEST_STEP,
        "  with a per-sample loader": HONEST_STEP.replace(LOADER, PER_SAMPLE_LOADER),
        "  with a per-row loss": HONEST_STEP.replace(loss, PER_ROW_LOSS),
        "  in float64": HONEST_STEP.replace("dtype=np.float32)", "dtype=np.float64)")
                                   .replace(".astype(np.float32)", ".astype(np.float64)"),
        "the chapter's solution": answer("fast_step: the chapter's solution")[len(SETUP):],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--quick", action="store_true", help="each step once, 11 rounds")
    args = parser.parse_args()
    repeat, rounds = (1, 11) if args.quick else (args.repeat, args.rounds)
    named = steps()
    code, tests, order = [SETUP], [], []
    for r in range(repeat):
        for i, (name, body) in enumerate(named.items()):
            function = f"step_{r}_{i}"
            code.append(re.sub(r"\bfast_step\b", function, body))
            test = chapter_test("fast_step", function)
            tests.append(re.sub(r"at_least=\d+, rounds=\d+", f"at_least={TOP_TIER}, "
                                f"rounds={rounds}", test))
            order.append(name)
    with tempfile.TemporaryDirectory() as folder:
        records = grade("\n\n".join(code), tests, Path(folder))
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in named}
    print(f"{'step':34s} {'speedup':>8s} {'95 % CI':>14s}   slow → fast a call "
          f"({rounds} rounds, graded in one kernel)")
    for name, record in zip(order, records):
        match = LINE.search(printed(record))
        if not match:
            print(f"{name:34s} no measurement: {printed(record)[:200]}")
            continue
        speedup, low, high = (float(match.group(k)) for k in (1, 2, 3))
        found[name].append((speedup, low, high))
        print(f"{name:34s} {speedup:7.2f}× {low:6.2f}–{high:5.2f}×   {match.group(4)} → "
              f"{match.group(5)}")
    print(f"\nper step, over {repeat} grading(s), against the top tier ({TOP_TIER}×):")
    for name, seen in found.items():
        if seen:
            lowest = min(low for _, low, _ in seen)
            print(f"{name:34s} speedups {min(s for s, _, _ in seen):.2f}–"
                  f"{max(s for s, _, _ in seen):.2f}×, lowest lower end {lowest:.2f}× "
                  f"({lowest / TOP_TIER:.2f}× the tier)")


if __name__ == "__main__":
    main()
