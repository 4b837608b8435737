"""The cohort report (issue 49): ``python -m autograder report DIR`` after ``grade``.

- Unit tests, no kernel: the statistics with exact values, the hints read back from failure
  messages, the grouping, the measured values and their tiers, copydetect's similarity, bad
  input (no DIR, DIR not graded, an unreadable notebook naming the student while the rest of
  the report is written), the mark that ``publish`` refuses, on a DIR laid out by hand.
- A real graded cohort of chapter 01 (``python -m autograder grade``: real nbgrader, the
  sandbox), ten submissions written for it: three students forget the Linear layer's bias,
  two the attention's output projection (each a named hint), one returns a wrong number of
  bytes no hint names; two pairs are copies with renamed variables, everyone else wrote their
  own. The report must count every planted mistake exactly and put both copied pairs above
  every pair of independent solutions.
- The page in headless Chromium (tests/test_browser.py's machinery, file://): axe-core's WCAG
  2.1 AA rules find no violation.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from chapters import REPO

from autograder import samples
from autograder.results.cohort_report import graded as graded_module
from autograder.results.cohort_report.build import write_report
from autograder.results.cohort_report.graded import ReportError, read_graded
from autograder.results.cohort_report.measured import (
    measured_tests,
    measurements_in,
    thresholds,
    tier_counts,
)
from autograder.results.cohort_report.mistakes import (
    Failure,
    failures_in,
    group_failures,
    hint_of,
    normalised,
)
from autograder.results.cohort_report.similarity import release_code, similar_pairs
from autograder.results.cohort_report.statistics import (
    exercise_stats,
    pearson,
    quintile_groups,
    totals_of,
)

CHAPTER = samples.CHAPTER
HEAVY = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.cohort]
BIAS_HINT = "That is the weights alone (128·64): did you forget the bias, one per output?"
PROJECTION_HINT = "That is Q, K and V only: did you forget the output projection?"
UNNAMED = "GPT-2 small in float32: expected #, got #"

# -- the cohort: each author writes all five functions in a style of their own ---------------

AUTHORS = {
"ada": {
"linear_params": '''def linear_params(in_features: int, out_features: int, bias=True) -> int:
    weight_count = in_features * out_features
    bias_count = out_features if bias else 0
    return weight_count + bias_count
''',
"conv2d_params": '''def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    if isinstance(kernel_size, int):
        height = width = kernel_size
    else:
        height, width = kernel_size
    per_filter = (in_channels // groups) * height * width
    total = out_channels * per_filter
    if bias:
        total += out_channels
    return total
''',
"attention_params": '''def attention_params(d_model, bias=True):
    one_projection = d_model * d_model + (d_model if bias else 0)
    return 4 * one_projection
''',
"count_model_parameters": '''def count_model_parameters(model):
    counted = {}
    for _name, module in model.named_modules():
        for _pname, param in module.own_parameters():
            counted[id(param)] = param.size
    return sum(counted.values())
''',
"parameter_memory_bytes": '''def parameter_memory_bytes(n_params, dtype):
    bytes_each = np.dtype(dtype).itemsize
    return int(n_params) * bytes_each
'''},
"babbage": {
"linear_params": '''def linear_params(in_features, out_features, bias=True):
    return in_features * out_features
''',
"conv2d_params": '''def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    ks = kernel_size if isinstance(kernel_size, tuple) else (kernel_size, kernel_size)
    n = out_channels * in_channels // groups
    for side in ks:
        n *= side
    return n + bias * out_channels
''',
"attention_params": '''def attention_params(d_model, bias=True):
    return sum(d_model * d_model + d_model * bias for _ in "qkvo")
''',
"count_model_parameters": '''def count_model_parameters(model):
    sizes = {}
    pending = [model]
    while pending:
        current = pending.pop()
        for _, weight in current.own_parameters():
            sizes[id(weight)] = weight.size
        pending.extend(child for _, child in current.children())
    return sum(sizes.values())
''',
"parameter_memory_bytes": '''def parameter_memory_bytes(n_params, dtype):
    return int(np.zeros(1, dtype=dtype).nbytes) * n_params
'''},
"curie": {
"linear_params": '''def linear_params(in_features, out_features, bias=True):
    params = 0
    for _ in range(out_features):
        params += in_features
    return params
''',
"conv2d_params": '''import math

def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    dims = [kernel_size] * 2 if isinstance(kernel_size, int) else list(kernel_size)
    return out_channels * (in_channels // groups) * math.prod(dims) + (out_channels if bias else 0)
''',
"attention_params": '''def attention_params(d_model, bias=True):
    weights = 4 * d_model ** 2
    biases = 4 * d_model
    return weights + biases if bias else weights
''',
"count_model_parameters": '''def count_model_parameters(model):
    unique = {id(p): p for _, m in model.named_modules() for _, p in m.own_parameters()}
    return sum(p.size for p in unique.values())
''',
"parameter_memory_bytes": '''def parameter_memory_bytes(n_params, dtype):
    bits = np.dtype(dtype).itemsize * 8
    return n_params * bits // 8
'''},
"dirac": {
"linear_params": '''def linear_params(in_features, out_features, bias=True):
    shape = (out_features, in_features)
    return int(np.prod(shape))
''',
"conv2d_params": '''def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    if type(kernel_size) is int:
        kernel_size = (kernel_size, kernel_size)
    weight_shape = (out_channels, in_channels // groups, *kernel_size)
    count = int(np.prod(weight_shape))
    if bias:
        count = count + out_channels
    return count
''',
"attention_params": '''def attention_params(d_model, bias=True):
    shapes = [(d_model, d_model)] * 4
    total = sum(int(np.prod(s)) for s in shapes)
    if bias:
        total += 4 * d_model
    return total
''',
"count_model_parameters": '''def count_model_parameters(model):
    by_identity = dict()
    queue = [model]
    index = 0
    while index < len(queue):
        node = queue[index]
        index += 1
        by_identity.update((id(w), w.size) for _, w in node.own_parameters())
        queue += [c for _, c in node.children()]
    return sum(by_identity.values())
''',
"parameter_memory_bytes": '''def parameter_memory_bytes(n_params, dtype):
    return n_params * np.empty(0, dtype=dtype).itemsize
'''},
"euler": {
"linear_params": '''def _matrix(rows, cols):
    return rows * cols


def linear_params(in_features, out_features, bias=True):
    extra = out_features if bias else 0
    return _matrix(in_features, out_features) + extra
''',
"conv2d_params": '''def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    try:
        kh, kw = kernel_size
    except TypeError:
        kh = kw = kernel_size
    fan_in = in_channels // groups * kh * kw
    return _matrix(out_channels, fan_in) + (out_channels if bias else 0)
''',
"attention_params": '''def attention_params(d_model, bias=True):
    return sum(linear_params(d_model, d_model, bias) for _ in range(4))
''',
"count_model_parameters": '''def count_model_parameters(model):
    found = {}

    def walk(module):
        for _, p in module.own_parameters():
            found.setdefault(id(p), p.size)
        for _, child in module.children():
            walk(child)

    walk(model)
    return sum(found.values())
''',
"parameter_memory_bytes": '''def parameter_memory_bytes(n_params, dtype):
    size_of_one = np.array(0, dtype=dtype).itemsize
    return size_of_one * int(n_params)
'''},
"fermi": {
"linear_params": '''def linear_params(in_features, out_features, bias=True):
    return out_features * (in_features + 1) if bias else out_features * in_features
''',
"conv2d_params": '''def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    k = kernel_size
    area = k * k if isinstance(k, int) else k[0] * k[1]
    w = area * in_channels * out_channels // groups
    return w + out_channels * int(bias)
''',
"attention_params": '''def attention_params(d_model, bias=True):
    return 3 * (d_model * d_model + (d_model if bias else 0))
''',
"count_model_parameters": '''def count_model_parameters(model):
    ids = set()
    n = 0
    for name, module in model.named_modules():
        for pname, p in module.own_parameters():
            if id(p) in ids:
                continue
            ids.add(id(p))
            n += p.size
    return n
''',
"parameter_memory_bytes": '''def parameter_memory_bytes(n_params, dtype):
    return int(n_params * np.dtype(dtype).itemsize)
'''},
"gauss": {
"linear_params": '''def linear_params(in_features, out_features, bias=True):
    return sum([in_features * out_features, out_features * bool(bias)])
''',
"conv2d_params": '''def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    if isinstance(kernel_size, (tuple, list)):
        kernel_h, kernel_w = kernel_size
    else:
        kernel_h, kernel_w = kernel_size, kernel_size
    assert in_channels % groups == 0
    return out_channels * kernel_h * kernel_w * in_channels // groups + (bias and out_channels or 0)
''',
"attention_params": '''def attention_params(d_model, bias=True):
    block = d_model * d_model
    return 3 * block + (3 * d_model if bias else 0)
''',
"count_model_parameters": '''def count_model_parameters(model):
    params = []
    for _, module in model.named_modules():
        for _, p in module.own_parameters():
            if not any(p is q for q in params):
                params.append(p)
    return sum(p.size for p in params)
''',
"parameter_memory_bytes": '''def parameter_memory_bytes(n_params, dtype):
    return n_params * (np.dtype(dtype).itemsize)
'''},
"hilbert": {
"linear_params": '''def linear_params(in_features, out_features, bias=True):
    total = in_features * out_features
    total += bias * out_features
    return int(total)
''',
"conv2d_params": '''def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    kernel = (kernel_size,) * 2 if isinstance(kernel_size, int) else tuple(kernel_size)
    inputs_per_group = in_channels // groups
    weights = out_channels * inputs_per_group
    for k in kernel:
        weights = weights * k
    return weights + (bias * out_channels)
''',
"attention_params": '''def attention_params(d_model, bias=True):
    projections = 4
    per = d_model ** 2
    return projections * per + projections * d_model * int(bias)
''',
"count_model_parameters": '''def count_model_parameters(model):
    seen = set()
    return sum(p.size for _, m in model.named_modules() for _, p in m.own_parameters()
               if not (id(p) in seen or seen.add(id(p))))
''',
"parameter_memory_bytes": '''def parameter_memory_bytes(n_params, dtype):
    return n_params * 3
'''},
}
COPIES = {
    "ada_copy": ("ada", {"weight_count": "w_total", "bias_count": "b_total", "height": "kh",
                         "width": "kw", "per_filter": "fan", "total": "n", "one_projection": "proj",
                         "counted": "registry", "_name": "_n", "_pname": "_pn", "param": "tensor",
                         "bytes_each": "item_bytes", "module": "layer"}),
    "euler_copy": ("euler", {"_matrix": "_mat", "extra": "bias_part", "kh": "k_rows",
                             "kw": "k_cols", "fan_in": "inputs", "found": "by_id", "walk": "visit",
                             "module": "mod", "child": "sub", "p": "prm",
                             "size_of_one": "width"}),
}
#: Planted: student → (test that fails, what the report must call it).
PLANTED = {"babbage": BIAS_HINT, "curie": BIAS_HINT, "dirac": BIAS_HINT,
           "fermi": PROJECTION_HINT, "gauss": PROJECTION_HINT, "hilbert": UNNAMED}


def _renamed(code: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        code = re.sub(rf"\b{re.escape(old)}\b", new, code)
    return code


def cohort_answers() -> dict[str, dict[str, str]]:
    """student → grade id → the code of their answer cell (the copies' variables renamed)."""
    answers = dict(AUTHORS)
    for copy, (source, names) in COPIES.items():
        answers[copy] = {gid: _renamed(code, names) for gid, code in AUTHORS[source].items()}
    return answers


def write_cohort(root: Path) -> Path:
    for student, answers in cohort_answers().items():
        path = root / student / CHAPTER / samples.NOTEBOOK
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(samples.notebook(answers))
    return root


# -- unit tests: no kernel --------------------------------------------------------------------

def test_statistics_of_an_exercise_have_exact_values():
    scores = {"a": 2.0, "b": 0.0, "c": 2.0, "d": 1.0, "e": 2.0}
    totals = {"a": 10.0, "b": 2.0, "c": 8.0, "d": 5.0, "e": 6.0}
    stats = exercise_stats("t", "T", 2.0, scores, totals)
    assert (stats.count, stats.mean, stats.difficulty) == (5, 1.4, 0.7)
    assert stats.sd == pytest.approx(0.8)   # population SD of 2, 0, 2, 1, 2
    # rest = total - score: a 8, b 2, c 6, d 4, e 4; r(score, rest) by hand:
    # scores - 1.4 = .6 -1.4 .6 -.4 .6, rest - 4.8 = 3.2 -2.8 1.2 -.8 -.8
    # Σxy = 1.92+3.92+.72+.32-.48 = 6.4; Σx² = 3.2; Σy² = 10.24+7.84+1.44+.64+.64 = 20.8
    assert stats.discrimination == pytest.approx(6.4 / (3.2 * 20.8) ** 0.5)
    # quintiles by total: b (2), d (5), e (6), c (8), a (10), one each
    assert stats.quintiles == (0.0, 0.5, 1.0, 1.0, 1.0)
    assert stats.histogram == ((0.0, 1), (1.0, 1), (2.0, 3))


def test_discrimination_is_not_available_without_variance_and_awaiting_is_counted():
    same = exercise_stats("t", "T", 2.0, {"a": 2.0, "b": 2.0, "c": None},
                          {"a": 5.0, "b": 3.0, "c": 4.0})
    assert (same.discrimination, same.sd, same.count, same.awaiting) == (None, 0.0, 2, 1)
    assert pearson([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]) is None
    assert pearson([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == pytest.approx(1.0)
    assert totals_of({"a": {"x": 1.0, "y": None}, "b": {"x": 2.0, "y": 3.0}}) == {"a": 1.0,
                                                                                 "b": 5.0}


def test_quintiles_split_by_total_lowest_first_larger_groups_last():
    groups = quintile_groups({f"s{i:02d}": float(i) for i in range(12)})
    assert [len(g) for g in groups] == [2, 2, 2, 3, 3]
    assert groups[0] == ["s00", "s01"] and groups[-1] == ["s09", "s10", "s11"]
    assert quintile_groups({"a": 1.0, "b": 0.0}) == [[], [], [], ["b"], ["a"]]


def test_a_hint_is_read_back_from_the_failure_message_expect_wrote():
    from tinyprof.testing import expect

    with pytest.raises(AssertionError) as failed:
        expect(8_192, 8_256, "linear_params(128, 64)", hints={8_192: BIAS_HINT})
    assert hint_of(str(failed.value)) == BIAS_HINT
    with pytest.raises(AssertionError) as failed:
        expect(None, 8_256, "linear_params(128, 64)")
    assert hint_of(str(failed.value)) == "did you forget to return the result?"
    with pytest.raises(AssertionError) as failed:
        expect(7, 8_256, "linear_params(128, 64)", hints={8_192: BIAS_HINT})
    assert hint_of(str(failed.value)) is None
    assert normalised("AssertionError", str(failed.value)) == \
        "linear_params(#, #): expected #, got #"
    assert normalised("ValueError", "bad 'x' at 3.5") == "ValueError: bad '…' at #"


def _test_cell(grade_id: str, verdict: dict | None = None, error: dict | None = None) -> dict:
    meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": grade_id, "points": 2}}
    if verdict is not None:
        meta["tinyprof"] = {"verdict": verdict}
    outputs = [{"output_type": "error", "traceback": [], **error}] if error else []
    return {"cell_type": "code", "metadata": meta, "source": "", "outputs": outputs}


def test_failures_group_by_hint_once_per_student_named_first():
    message = f"linear_params(128, 64): expected 8,256, got 8,192. {BIAS_HINT}"
    failures = [Failure(s, "t1", "AssertionError", message, "n.ipynb") for s in "cab"]
    failures += [Failure("a", "t1", "AssertionError", message, "n.ipynb"),   # same student again
                 Failure("d", "t2", "ZeroDivisionError", "division by zero", "n.ipynb"),
                 Failure("e", "t2", "ZeroDivisionError", "division by zero", "n.ipynb"),
                 Failure("f", "t2", "AssertionError", "f(3): expected 9, got 8", "n.ipynb")]
    failures.append(Failure("g", "t0", "NameError", "name 'x' is not defined", "n.ipynb"))
    groups = group_failures(failures, ["t2", "t1", "t0"])
    assert [(g.grade_id, g.text, g.named, g.students) for g in groups] == [
        ("t1", BIAS_HINT, True, ("a", "b", "c")),
        ("t2", "ZeroDivisionError: division by zero", False, ("d", "e")),
        ("t2", "f(#): expected #, got #", False, ("f",)),
        ("t0", "NameError: name '…' is not defined", False, ("g",))]


def test_failures_come_from_the_verdict_record_or_else_the_error_output():
    notebook = {"cells": [
        _test_cell("t1", {"passed": False, "ename": "AssertionError", "message": "m1"}),
        _test_cell("t2", {"passed": True, "ename": "", "message": ""}),
        _test_cell("t3", error={"ename": "NameError", "evalue": "x"}),
        _test_cell("t4")]}
    assert [(f.grade_id, f.ename, f.message) for f in failures_in(notebook, "s", "n.ipynb")] == [
        ("t1", "AssertionError", "m1"), ("t3", "NameError", "x")]


def test_measured_values_and_the_tiers_read_from_the_instructors_cells():
    instructor = {
        "speed_2": {"cell_type": "code", "source": "expect_faster(fast, slow, make, at_least=2)"},
        "speed_4": {"cell_type": "code", "source": "expect_faster(fast, slow, make, at_least=4)"},
        "busy": {"cell_type": "code", "source": "tp.pipecheck.expect_busy_device(train)"},
        "leak": {"cell_type": "code", "source": "expect_leak_free(loop, tolerance=512)"}}
    assert thresholds(instructor["speed_4"]["source"]) == [("speed", "fast", 4.0)]
    assert thresholds(instructor["busy"]["source"]) == [("busy", "train", 0.8)]
    records = {gid: _test_cell(gid, {"passed": True, "measured": [
        {"kind": gid.split("_")[0], "value": value} for value in values]})
        for gid, values in (("speed_2", [3.5]), ("speed_4", [3.5]), ("busy", [0.9, 0.95]),
                            ("leak", [10.0, 80.0]))}   # a cell's worst: 0.9, 80 bytes a step
    records["speed_2"]["metadata"]["tinyprof"]["verdict"]["measured"][0]["low"] = 3.1
    per_student = {"s": measurements_in({"cells": list(records.values())}),
                   "t": {"speed_2": ("speed", 5.0, 4.0)}}
    found = {m.grade_id: (m.kind, m.values, m.tiers, m.decided()) for m in
             measured_tests(per_student, instructor)}
    assert found == {"speed_2": ("speed", {"s": 3.5, "t": 5.0}, (2.0, 4.0), [3.1, 4.0]),
                     "speed_4": ("speed", {"s": 3.5}, (2.0, 4.0), [3.5]),
                     "busy": ("busy", {"s": 0.9}, (0.8,), [0.9]),
                     "leak": ("leak", {"s": 80.0}, (512.0,), [80.0])}
    assert tier_counts("speed", [3.1, 4.0], (2.0, 4.0)) == [
        "2 reach 2× (the 95% interval's lower bound)", "1 reach 4× (the 95% interval's lower "
        "bound)"]
    assert tier_counts("leak", [80.0, 600.0], (512.0,)) == [
        "1 above the tolerance of 512 bytes a step"]


def test_the_judge_records_what_a_check_measured():
    from types import SimpleNamespace

    from autograder.run.judge import Verdict, measurement

    speed = SimpleNamespace(speedup=4.21, ci=(3.9, 4.6))
    leak = SimpleNamespace(kept_per_step=12.0, held_per_step=900.5 + 1536 * 1024 / 150,
                           short=SimpleNamespace(steps=150))   # the slack: 1.5 MB a run
    assert measurement("speed", speed) == {"kind": "speed", "value": 4.21, "low": 3.9}
    assert measurement("busy", SimpleNamespace(utilization=0.83)) == {"kind": "busy",
                                                                      "value": 0.83}
    assert measurement("leak", leak) == {"kind": "leak", "value": 900.5}
    assert measurement("speed", object()) is None
    assert "measured" not in Verdict(True).record()
    assert Verdict(True, measured=[{"kind": "busy", "value": 0.5}]).record()["measured"] == [
        {"kind": "busy", "value": 0.5}]


def test_renamed_copies_are_more_alike_than_independent_solutions():
    answers = cohort_answers()
    codes = {s: "\n\n".join(a.values()) for s, a in answers.items()}
    pairs = similar_pairs(codes, release_code(samples.release()))
    assert {(p.first, p.second) for p in pairs[:2]} == {("ada", "ada_copy"),
                                                         ("euler", "euler_copy")}
    assert min(p.similarity for p in pairs[:2]) > 2 * pairs[2].similarity


def test_no_folder_and_no_grades_are_clear_errors(tmp_path):
    with pytest.raises(ReportError, match="no such folder"):
        read_graded(tmp_path / "missing")
    with pytest.raises(ReportError, match="has not been graded: it holds no grades.csv"):
        read_graded(tmp_path)
    run = subprocess.run([sys.executable, "-m", "autograder", "report", str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "has not been graded" in run.stderr


def _fake_graded(out: Path, students: dict[str, dict]) -> Path:
    """A DIR laid out as grade leaves it, by hand: grades.csv and each student's graded and
    handed-in notebook (student → graded notebook JSON)."""
    columns = ["student", "assignment", "score", "max_score", "auto_score", "max_auto_score",
               "needs_manual_grade", "status", "test_linear_params", "flagged", "notes"]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for student in students:
            writer.writerow([student, CHAPTER, "2", "12", "2", "10", "yes", "graded", "2",
                             "cell 3: rebinds expect" if student == "b" else "", ""])
    for student, notebook in students.items():
        for step in ("autograded", "submitted"):
            path = out / step / student / CHAPTER / samples.NOTEBOOK
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(notebook if isinstance(notebook, str) else json.dumps(notebook),
                            encoding="utf-8")
    return out


def test_an_unreadable_notebook_names_the_student_and_the_rest_is_written(tmp_path):
    good = {"cells": [_test_cell("test_linear_params", {
        "passed": False, "ename": "AssertionError",
        "message": f"linear_params(128, 64): expected 8,256, got 8,192. {BIAS_HINT}"})]}
    out = _fake_graded(tmp_path / "graded", {"a": good, "b": "{not json", "c": good})
    pages = write_report(out)
    page = (out / "report" / f"{CHAPTER}.html").read_text(encoding="utf-8")
    assert [p.name for p in pages] == ["index.html", f"{CHAPTER}.html"]
    assert "b/01_parameters: the autograded notebook parameters.ipynb could not be read" in page
    assert f'<td class="num">2</td><td>Exercise 1 · linear_params</td><td>{BIAS_HINT}' in \
        page.replace("&#x27;", "'")
    assert "cell 3: rebinds expect" in page   # the flagged row
    assert (out / "report" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_an_assignment_that_fails_to_build_says_why_and_the_others_are_kept(tmp_path,
                                                                             monkeypatch):
    out = _fake_graded(tmp_path / "graded", {"a": {"cells": []}})
    rows = (out / "grades.csv").read_text(encoding="utf-8").splitlines()
    (out / "grades.csv").write_text("\n".join(rows + [rows[1].replace(CHAPTER, "02_flops")])
                                    + "\n", encoding="utf-8")

    def broken(assignment, rows):
        if assignment == "02_flops":
            raise RuntimeError("a planted failure")
        return real(assignment, rows)

    from autograder.results.cohort_report import assemble
    real = graded_module.exercises_of
    monkeypatch.setattr(assemble, "exercises_of", broken)
    write_report(out)
    assert "could not be built: RuntimeError: a planted failure" in \
        (out / "report" / "02_flops.html").read_text(encoding="utf-8")
    assert "Exercise statistics" in (out / "report" / f"{CHAPTER}.html").read_text("utf-8")


def test_publish_refuses_a_report_page(tmp_path):
    from autograder.release.publish import PublishLeakError, check_no_leaks

    out = _fake_graded(tmp_path / "graded", {"a": {"cells": []}})
    write_report(out)
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(out / "report" / "index.html", site / "index.html")
    with pytest.raises(PublishLeakError, match="would publish a cohort report"):
        check_no_leaks(site)


def test_students_code_and_names_are_escaped_on_the_page(tmp_path):
    code = ("def linear_params(i, o, bias=True):\n    '</pre><script>alert(1)</script>'\n"
            "    total = 0\n    for row in range(o):\n        for col in range(i):\n"
            "            total += 1\n    return total + (o if bias else 0)\n")
    cell = {"cell_type": "code", "source": code, "outputs": [], "metadata": {"nbgrader": {
        "solution": True, "grade": False, "grade_id": "linear_params"}}}
    out = _fake_graded(tmp_path / "graded", {"mallory<img src=x onerror=alert(1)>": {
        "cells": [cell]}, "trent": {"cells": [cell]}})
    write_report(out)
    page = (out / "report" / f"{CHAPTER}.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<img src=x" not in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "mallory&lt;img src=x onerror=alert(1)&gt; and trent</a>" in page   # a pair to look at


def test_git_commits_nothing_of_the_report(tmp_path):
    """Even where DIR's own .gitignore (grade writes one) is gone, the report's folder keeps
    itself out of git."""
    out = _fake_graded(tmp_path / "graded", {"a": {"cells": []}})
    write_report(out)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    listed = subprocess.run(["git", "-C", str(tmp_path), "ls-files"], check=True,
                            capture_output=True, text=True).stdout.splitlines()
    assert listed and not [name for name in listed if "/report/" in name], listed

# -- a real graded cohort ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    """Ten submissions of chapter 01 graded by ``python -m autograder grade``, then reported."""
    root = tmp_path_factory.mktemp("cohort_report")
    submissions = write_cohort(root / "submissions")
    out = root / "graded"
    for command in (["grade", str(submissions), "--out", str(out), "--jobs", "2"],
                    ["report", str(out)]):
        run = subprocess.run([sys.executable, "-m", "autograder", *command], cwd=REPO,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_the_report_counts_every_planted_mistake_exactly(graded):
    from autograder.results.cohort_report.assemble import assignment_report

    report = assignment_report(read_graded(graded), CHAPTER)
    found = {(g.text, g.named): g.students for g in report.mistakes}
    print("mistakes found:", {text: len(students) for (text, _), students in found.items()})
    assert found == {
        (BIAS_HINT, True): ("babbage", "curie", "dirac"),
        (PROJECTION_HINT, True): ("fermi", "gauss"),
        (UNNAMED, False): ("hilbert",)}
    page = (graded / "report" / f"{CHAPTER}.html").read_text(encoding="utf-8")
    link = "../feedback/babbage/01_parameters/parameters.html"
    assert '<td class="num">3</td><td>Exercise 1 · linear_params</td>' in page
    assert f'<a href="{link}">babbage</a>' in page and (graded / link[3:]).is_file()
    stats = {s.grade_id: s for s in report.stats}
    assert stats["test_linear_params"].histogram == ((0.0, 3), (2.0, 7))
    assert stats["test_linear_params"].difficulty == pytest.approx(0.7)
    assert stats["test_conv2d_params"].discrimination is None   # everyone scored 2


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_both_copied_pairs_top_the_similarity_list(graded):
    from autograder.results.cohort_report.assemble import assignment_report

    pairs = assignment_report(read_graded(graded), CHAPTER).pairs
    copied = {("ada", "ada_copy"), ("euler", "euler_copy")}
    top, rest = pairs[:2], [p for p in pairs if (p.first, p.second) not in copied]
    print("copied pairs:", [(p.first, p.second, round(p.similarity, 3)) for p in top],
          "best independent pair:", (rest[0].first, rest[0].second,
                                     round(rest[0].similarity, 3)))
    assert {(p.first, p.second) for p in top} == copied
    assert min(p.similarity for p in top) > rest[0].similarity
    page = (graded / "report" / f"{CHAPTER}.html").read_text(encoding="utf-8")
    assert "Similar answers, to look at" in page and "copied" not in page.lower()
    assert "w_total = in_features * out_features" in page   # the two codes side by side


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_the_page_is_offline_with_described_figures(graded):
    page = (graded / "report" / f"{CHAPTER}.html").read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["'](https?:)?//""", page), "a reference off the machine"
    assert "<script" not in page
    images = re.findall(r'<img src="data:image/png;base64,[^"]+" alt="([^"]+)">', page)
    assert len(images) == page.count("<img") >= 6
    assert ("Histogram of the points scored on Exercise 1 · linear_params (of 2), students "
            "per score: 0 points: 3, 2 points: 7.") in images


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
@pytest.mark.browser
def test_the_report_has_no_axe_violation_in_headless_chromium(graded):
    import test_browser as machinery  # skips here, as there, without chromium or axe-core
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    source = machinery._axe_source()
    options = webdriver.ChromeOptions()
    options.binary_location = machinery.CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-dev-shm-usage",
                 "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(machinery.CHROMEDRIVER), options=options)
    try:
        found = {}
        for page in ("index.html", f"{CHAPTER}.html"):
            machinery._open(driver, (graded / "report" / page).as_uri())
            assert driver.execute_script("return document.images.length") == \
                driver.execute_script(
                    "return [...document.images].filter(i => i.naturalWidth > 0).length")
            found[page] = machinery._axe_violations(driver, source)
    finally:
        driver.quit()
    print("axe violations:", {page: len(v) for page, v in found.items()})
    assert found == {"index.html": [], f"{CHAPTER}.html": []}


def test_the_report_command_of_the_readme_and_the_instructors_page_is_accepted():
    import shlex

    from autograder.__main__ import parser

    for page in (REPO / "README.md", REPO / "book" / "instructors.md"):
        text = page.read_text(encoding="utf-8")
        lines = [line.split("#")[0] for line in text.splitlines()
                 if line.startswith(".venv/bin/python -m autograder report ")]
        assert len(lines) == 1, page
        args = parser().parse_args(shlex.split(lines[0])[3:])
        assert args.command == "report"
        picture = re.search(r"!\[([^\]]{40,})\]\(([^)]+\.png)\)", text)
        assert picture and (page.parent / picture.group(2)).is_file(), page
