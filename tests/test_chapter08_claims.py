"""Chapter 08 says what its run shows (issue 38): the instructor notebook executed once in a real
kernel, then its printed sentences checked against the values its cells computed.

- every roofline label the chapter prints (the roofline table, the fix table, the GELU's line,
  the plot's description) is the label of the same stage in the roofline table;
- the fast step has no cost that no stage owns: "other" ≤ 5 % of its profile;
- the ranking printed is the order the fixes are applied in, and the proof's table lists them
  in that order;
- each prediction is Amdahl's law on the profile *before* its fix with a forecast of only the
  stages the fix touches (how a forecast is made, without running the fixed step, is checked
  in tests/test_faster.py);
- each fix's A/B and the whole step's time by CPU time with enough rounds for a verdict; each
  fix measured also the speed test's way (its blocks, fresh inputs, outputs kept), both with how
  their blocks were made and the page faults a call counted, and the line under them is what
  tinyprof's Agreement says of those two results: whether they agree, and if not which side's
  time moved and why (issue 46);
- the clock passage prints what its four measurements of the same comparison show;
- the summary's headline is the median of the chapter's three CPU-time measurements of the
  step, each printed beside it (issue 46, 08-N3).
"""

from __future__ import annotations

import json
import re

import nbformat
import numpy as np
import pytest
from chapters import SOLUTIONS, execute_apart

from tinyprof.faster import analysis, pipeline
from tinyprof.timing import LatencyStats
from tinyprof.timing.abtest import MIN_ROUNDS, ABResult
from tinyprof.timing.agreement import Agreement
from tinyprof.units import format_seconds

pytestmark = pytest.mark.kernel

NOTEBOOK = SOLUTIONS / "08_faster" / "faster.ipynb"

#: A cell appended to the executed chapter: the values its sentences are about, as JSON.
PROBE = """
import json as _json

def _dump(r):
    return {"base": list(r.baseline.samples), "cand": list(r.candidate.samples),
            "loops": [r.baseline.loops, r.candidate.loops],
            "names": [r.baseline.name, r.candidate.name],
            "faults": list(r.faults), "blocks": r.blocks, "fresh": r.fresh_inputs, "clock": r.clock,
            "speedup": r.speedup, "ci": list(r.ci), "p": r.p_value, "rounds": r.rounds,
            "conclusion": r.conclusion}

print("PROBE" + _json.dumps({
    "labels": {stage: placed[stage]["bound"] for stage in STAGES},
    "ranking": list(ranking),
    "applied": [row["fix"] for row in proof],
    "fast_profile": profiles[states[-1]],
    "rows": [{"fix": row["fix"], "predicted": row["predicted"], "forecast": row["forecast"],
              "before": profiles[states[i]]} for i, row in enumerate(proof)],
    "fixes": {part: {"ab": _dump(r), "speed": _dump(fix_speed[part])}
              for part, (r, _) in fix_checks.items()},
    "whole": {"clock": whole.clock, "rounds": whole.rounds},
    "clocks": {"wall": step_ab["wall"].speedup, "cpu": step_ab["cpu"].speedup,
               "cpu_ci": step_ab["cpu"].ci, "speed": step_speed.speedup, "speed_ci": step_speed.ci,
               "sequential": step_sequential.speedup, "slow_stretch": slow_stretch,
               "alone_slow": alone_slow, "alone_fast": alone_fast,
               "fast_stretch": fast_stretch, "ab_cpu": _dump(step_ab["cpu"]),
               "speed_way": _dump(step_speed)},
    "step_runs": {name: list(run) for name, run in step_runs.items()},
    "whole_dump": _dump(whole),
}))
"""


def _text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output["text"])
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
    return "".join(parts)


@pytest.fixture(scope="module")
def run() -> tuple[list[str], dict]:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE))
    execute_apart(notebook, NOTEBOOK.parent)
    texts = [_text(cell) for cell in notebook.cells if cell.cell_type == "code"]
    probe = texts[-1]
    return texts[:-1], json.loads(probe[probe.index("PROBE") + 5:])


def _output(texts: list[str], marker: str) -> str:
    found = [text for text in texts if marker in text]
    assert found, f"no cell printed {marker!r}"
    return found[0]


def test_every_roofline_label_the_chapter_prints_is_the_tables(run):
    texts, values = run
    labels = values["labels"]
    assert set(labels.values()) <= {"compute", "memory", "overhead"}
    table = _output(texts, "The slow step's stages on this machine's float64 roofline")
    for stage, label in labels.items():
        row = next(line for line in table.splitlines() if line.split()[:1] == [stage])
        assert f" {label} " in row, (stage, label, row)
    fixes = _output(texts, "The eight fixes")
    quoted = re.findall(r"\b(read|statistics|load|hidden|loss|update): (\w+), ", fixes)
    assert len(quoted) >= len(pipeline.FIXES), fixes
    assert all(labels[stage] == label for stage, label in quoted), quoted
    gelu = _output(texts, "The hidden stage took")
    assert f"{labels['hidden']}-bound at" in gelu, gelu
    plot = _output(texts, "Roofline chart")
    placed = r"(\w+) at [\d.e+-]+ FLOPs/byte and [\d.e+-]+ GFLOP/s \((\w+)-bound"
    for stage, label in re.findall(placed, plot):
        assert labels[stage] == label, (stage, label)


def test_the_fast_step_has_no_cost_that_no_stage_owns(run):
    _, values = run
    fast = values["fast_profile"]
    share = fast[analysis.OTHER] / sum(fast.values())
    assert share <= 0.05, fast
    largest = _output(run[0], "largest stage of the fast step")
    assert f"Outside every stage: {100 * share:.1f}%" in largest, largest


def test_the_fixes_are_applied_in_the_order_of_the_printed_ranking(run):
    texts, values = run
    ranking = values["ranking"]
    assert sorted(ranking) == sorted(pipeline.FIXES)
    assert values["applied"] == ranking
    assert f"ranking: {' > '.join(ranking)}" in _output(texts, "ranking: ")
    assert f"Applied in the order of the ranking: {' > '.join(ranking)}." in _output(
        texts, "Applied in the order")
    proof = _output(texts, "Each fix, in the order of the ranking")
    rows = [line.split()[0] for line in proof.splitlines() if line.split()[:1]
            and line.split()[0] in pipeline.FIXES]
    assert rows == ranking, proof


def test_each_prediction_is_amdahl_on_the_profile_before_its_fix(run):
    _, values = run
    for row in values["rows"]:
        assert sorted(row["forecast"]) == sorted(analysis.FIX_STAGES[row["fix"]]), row["fix"]
        assert row["predicted"] == pytest.approx(
            analysis.predicted_speedup(row["before"], row["forecast"]), rel=1e-12), row["fix"]


def _overlap(first, second) -> bool:
    return first[0] <= second[1] and second[0] <= first[1]


def _rebuilt(dump: dict) -> ABResult:
    """The chapter's ABResult again, from its samples and how it was measured."""
    sides = [LatencyStats.from_samples(samples, loops=loops, name=name)
             for samples, loops, name in zip((dump["base"], dump["cand"]), dump["loops"],
                                             dump["names"])]
    return ABResult.from_samples(*sides, clock=dump["clock"], blocks=dump["blocks"],
                                 fresh_inputs=dump["fresh"], faults=tuple(dump["faults"]))


#: The slow function each fix of 8.4 is measured against.
SLOW = {"load": "load_per_sample", "GELU": "gelu_slow", "loss": "loss_per_sample"}


def test_each_fix_is_checked_by_cpu_time_beside_its_speed_test(run):
    """Issue 46: each fix's A/B (short blocks, one input) and the speed test cell's own
    measurement (its blocks, fresh inputs, every output kept) are both printed, each with how
    its blocks were made and the page faults a call it counted, and the last line is what
    tinyprof's Agreement says of exactly those two results (whether they agree, and if not
    which side moved and why)."""
    texts, values = run
    assert values["whole"] == {"clock": "cpu", "rounds": 9}
    checks = _output(texts, "vs load_per_sample, outputs equal")
    lines = checks.splitlines()
    for part, fix in values["fixes"].items():
        ab, speed = fix["ab"], fix["speed"]
        assert ab["clock"] == speed["clock"] == "cpu", (part, fix)
        assert ab["rounds"] >= MIN_ROUNDS and speed["rounds"] >= MIN_ROUNDS, (part, fix)
        assert (ab["blocks"], ab["fresh"], speed["blocks"], speed["fresh"]) == (
            "calibrated", False, "speed test", True), part
        assert speed["loops"][0] == speed["loops"][1] >= 1, speed["loops"]   # one count, both
        assert None not in ab["faults"] + speed["faults"], (part, fix)       # counted on Linux
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{part}: "))
        first, second, said = lines[at + 1], lines[at + 2], lines[at + 3].strip()
        rebuilt = [_rebuilt(ab), _rebuilt(speed)]
        for line, label, digits, dump, result in zip((first, second), ("A/B", "the speed test"),
                                                     (1, 2), (ab, speed), rebuilt):
            low, high = dump["ci"]
            assert line.startswith(f"  {label}: {dump['speedup']:.{digits}f}× "
                                   f"[{low:.{digits}f}, {high:.{digits}f}] (p = {dump['p']:.2g}, "
                                   f"{dump['rounds']} rounds) → {dump['conclusion']}; "), line
            assert line.endswith(f"blocks: {result.describe_blocks()}"), line
            assert result.ci == pytest.approx(tuple(dump["ci"]), rel=1e-12), (part, label)
        agreement = Agreement(*rebuilt, ("the A/B", "the speed test"))
        assert said == str(agreement), (said, str(agreement))
        assert agreement.agree == _overlap(ab["ci"], speed["ci"]), (part, fix)
        # the speed test's number is the speed test cell's own measurement, not another one
        low, high = speed["ci"]
        graded = _output(texts, f"faster than tinyprof.faster.pipeline.{SLOW[part]} (95% CI")
        assert (f"speed: {speed['speedup']:.2f}× faster than tinyprof.faster.pipeline."
                f"{SLOW[part]} (95% CI {low:.2f}–{high:.2f}×") in graded, (part, graded)
        assert speed["rounds"] == 11 and f"rounds of {speed['loops'][0]} calls" in graded


def test_the_clock_passage_prints_what_its_measurements_show(run):
    texts, values = run
    clocks = values["clocks"]
    table = _output(texts, "slow_step vs fast_step, 9 rounds each")
    for label, key in (("interleaved A/B, wall clock", "wall"),
                       ("interleaved A/B, CPU time", "cpu"),
                       ("all of A, then all of B, CPU time", "sequential"),
                       ("the speed test's way (fresh inputs, CPU time)", "speed")):
        row = next(line for line in table.splitlines() if line.startswith(label))
        assert f" {clocks[key]:.1f}× " in row, (label, clocks[key], row)
    line = _output(texts, "By the wall clock the slow step took")
    assert (f"the slow step took {clocks['slow_stretch']:.2f}× its CPU time, the fast step "
            f"{clocks['fast_stretch']:.2f}×") in line, line
    longer_lost_more = clocks["slow_stretch"] > 1.1 * clocks["fast_stretch"]
    assert ("the longer step lost more of its time" in line) == longer_lost_more, line
    if longer_lost_more:
        assert f"{clocks['wall'] / clocks['cpu']:.2f}× the CPU-time one" in line, line
    agree = _overlap(clocks["cpu_ci"], clocks["speed_ci"])
    said_agree = "do NOT agree" not in line and "agree within their intervals" in line
    assert said_agree == agree, line
    agreement = str(Agreement(_rebuilt(clocks["ab_cpu"]), _rebuilt(clocks["speed_way"]),
                              ("the A/B by CPU time", "the speed test's way")))
    assert agreement[0].upper() + agreement[1:] in line, (agreement, line)
    assert clocks["speed_way"]["blocks"] == "speed test" and clocks["speed_way"]["fresh"]
    sequential = (f"All of A before all of B gave {clocks['sequential']:.1f}×, "
                  f"{clocks['sequential'] / clocks['cpu']:.2f}× the interleaved CPU-time")
    assert sequential in line, line
    # Which side moved back to back is read from the two sides' times, not asserted (issue 46).
    assert (f"the slow step took {clocks['alone_slow']:.2f}× its interleaved CPU time and the "
            f"fast step {clocks['alone_fast']:.2f}×") in line, line
    moved = [name for name in ("slow", "fast") if abs(clocks[f"alone_{name}"] - 1) > 0.03]
    assert ("neither moved by more than 3 %" in line) == (not moved), line
    if moved:
        assert f"the {' and the '.join(moved)} step" in line, (moved, line)
    assert "is charged to that side alone" not in line and "alternates its stages" not in line


def test_the_summary_headline_is_the_median_of_the_chapters_three_step_measurements(run):
    """Issue 46 (08-N3): the headline does not rest on one A/B that can be the outlier: the step
    times and the speedup are the medians of 8.4's A/B by CPU time, 8.4's speed test's way and
    8.5's A/B, each printed beside it, and the spread of the slow step's time is said."""
    texts, values = run
    runs = values["step_runs"]
    clocks, whole = values["clocks"], values["whole_dump"]
    assert runs["8.4's A/B"][0] == clocks["cpu"] and runs["8.4's speed test's way"][0] == \
        clocks["speed"] and runs["8.5's A/B"][0] == whole["speedup"], runs
    table = _output(texts, "all eight: measured speedup (median of the three)")
    median = [float(np.median([run[i] for run in runs.values()])) for i in range(3)]
    row = next(line for line in table.splitlines() if "measured speedup (median" in line)
    assert f" {median[0]:.1f}× (" in row, (median, row)
    for name, run in runs.items():
        assert f"{name} {run[0]:.1f}×" in row, (name, row)
    slow_row = next(line for line in table.splitlines() if "slow step (median of" in line)
    assert format_seconds(median[1]) in slow_row, (median, slow_row)
    slow = [run[1] for run in runs.values()]
    said = _output(texts, "The slow step's CPU time ranged from")
    assert f"({max(slow) / min(slow) - 1:.0%} apart)" in said, said
    assert ("which is why the headline is their median" in said) == (max(slow) > 1.1 * min(slow))
