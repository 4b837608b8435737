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
- each fix's A/B and the whole step's time by CPU time with enough rounds for a verdict, and
  each line says whether the A/B and the speed test's measurement of the same two functions
  agree within their intervals, and which side moved when they do not (issue 46);
- the clock passage prints what its four measurements of the same comparison show.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest
from chapters import SOLUTIONS
from nbclient import NotebookClient

from tinyprof.faster import analysis, pipeline
from tinyprof.timing.abtest import MIN_ROUNDS

pytestmark = pytest.mark.kernel

NOTEBOOK = SOLUTIONS / "08_faster" / "faster.ipynb"

#: A cell appended to the executed chapter: the values its sentences are about, as JSON.
PROBE = """
import json as _json
print("PROBE" + _json.dumps({
    "labels": {stage: placed[stage]["bound"] for stage in STAGES},
    "ranking": list(ranking),
    "applied": [row["fix"] for row in proof],
    "fast_profile": profiles[states[-1]],
    "rows": [{"fix": row["fix"], "predicted": row["predicted"], "forecast": row["forecast"],
              "before": profiles[states[i]]} for i, row in enumerate(proof)],
    "fixes": {part: {"clock": r.clock, "rounds": r.rounds, "conclusion": r.conclusion,
                     "ci": r.ci, "p": r.p_value, "speed_ci": fix_speed[part].ci}
              for part, (r, _) in fix_checks.items()},
    "whole": {"clock": whole.clock, "rounds": whole.rounds},
    "clocks": {"wall": step_ab["wall"].speedup, "cpu": step_ab["cpu"].speedup,
               "cpu_ci": step_ab["cpu"].ci, "speed": step_speed.speedup, "speed_ci": step_speed.ci,
               "sequential": step_sequential.speedup, "slow_stretch": slow_stretch,
               "fast_stretch": fast_stretch},
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
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
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


def test_each_fix_is_checked_by_cpu_time_beside_its_speed_test(run):
    texts, values = run
    assert values["whole"] == {"clock": "cpu", "rounds": 9}
    checks = _output(texts, " vs load_per_sample: A/B ")
    for part, fix in values["fixes"].items():
        assert fix["clock"] == "cpu" and fix["rounds"] >= MIN_ROUNDS, (part, fix)
        line = next(line for line in checks.splitlines() if line.startswith(f"{part}: "))
        assert f"(p = {fix['p']:.2g}, {fix['rounds']} rounds) → {fix['conclusion']};" in line, line
        apart = "the intervals do NOT overlap" in line
        assert apart == (not _overlap(fix["ci"], fix["speed_ci"])), (line, fix)
        if apart:   # which side's time moved, and the blocks each was timed in
            assert "a call in the A/B and" in line and "calls a block" in line, line


def test_the_clock_passage_prints_what_its_measurements_show(run):
    texts, values = run
    clocks = values["clocks"]
    table = _output(texts, "slow_step vs fast_step, 9 rounds each")
    for label, key in (("interleaved A/B, wall clock", "wall"),
                       ("interleaved A/B, CPU time", "cpu"),
                       ("all of A, then all of B, wall clock", "sequential"),
                       ("speed test (fresh inputs, CPU time)", "speed")):
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
    sequential = (f"All of A before all of B gave {clocks['sequential']:.1f}×, "
                  f"{clocks['sequential'] / clocks['wall']:.2f}× the interleaved wall-clock")
    assert sequential in line, line
