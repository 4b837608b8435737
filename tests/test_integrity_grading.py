"""In-process cheating (issue 10, item 4) graded through the real ``python -m autograder grade``:
each attack loses the points it stole or is flagged in grades.csv, its feedback page and the
summary; the honest solution is neither penalised nor flagged."""

from __future__ import annotations

import html

import pytest
from chapters import grade_cli

from autograder import samples

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.cohort]

TESTS = ["test_linear_params", "test_conv2d_params", "test_attention_params",
         "test_count_model_parameters", "test_parameter_memory_bytes"]
DUMMY = {gid: f"def {gid}(*args, **kwargs):\n    return 0\n" for gid in
         ("linear_params", "conv2d_params", "attention_params", "count_model_parameters",
          "parameter_memory_bytes")}
#: answers that hand every exercise but the last to tinyprof
DELEGATED = {
    "linear_params": "def linear_params(i, o, bias=True):\n    return tp.count_parameters("
                     "nn.Linear(i, o, bias=bias, shape_only=True))\n",
    "conv2d_params": "def conv2d_params(i, o, k, groups=1, bias=True):\n"
                     "    return tp.count_parameters(nn.Conv2d(i, o, k, groups=groups, bias=bias,"
                     " shape_only=True))\n",
    "attention_params": "def attention_params(d, bias=True):\n"
                        "    return tp.Profiler().count_parameters(nn.MultiHeadAttention(d, 1, "
                        "bias=bias, shape_only=True))\n",
    "count_model_parameters": "from tinyprof import count_parameters as _count\n"
                              "def count_model_parameters(model):\n    return _count(model)\n",
}
PATCH_SWITCH = """import tinyprof.testing
from contextlib import nullcontext
try:
    tinyprof.testing.reference_unavailable = lambda *a: nullcontext()
except AttributeError:
    pass
"""
FAKE_MODULE = """import sys, types
from contextlib import nullcontext
_fake = types.ModuleType("tinyprof.testing")
_fake.expect, _fake.reference_unavailable = expect, lambda *a: nullcontext()
sys.modules["tinyprof.testing"] = _fake
"""
FAKE_TP = """import types
tp = types.ModuleType("tinyprof")
tp.count_parameters = lambda model: 0
"""
SHADOW_TP = """import types
tp = types.SimpleNamespace(count_parameters=lambda model: 0)
"""
AST_HOOK = """import ast
class _Quiet(ast.NodeTransformer):
    pass
get_ipython().ast_transformers.append(_Quiet())
"""


def _with(first: str, answers: dict[str, str]) -> dict[str, str]:
    """``answers`` with ``first`` put at the top of the first answer cell."""
    merged = dict(answers)
    merged["linear_params"] = first + merged["linear_params"]
    return merged


#: What the grader says when the runtime check in the kernel (tinyprof.testing, opened there by
#: the judge) reports tampering: its own sentence, never the kernel's.
RUNTIME = ("cells test_linear_params, test_conv2d_params, test_attention_params, "
           "test_count_model_parameters, test_parameter_memory_bytes: the runtime check in the "
           "student's kernel found test machinery changed")

#: student → (answers, tests that must score 0 or None when the score is not the point, the
#: fragments every flag list must contain)
COHORT = {
    "honest": (samples.solutions(), set(), []),
    "rebinder": (_with("expect = lambda *a, **k: None\n", DUMMY), set(TESTS), [
        "cell linear_params, line 1: rebinds expect, a test helper the test cells use"]),
    "patcher": (_with(PATCH_SWITCH, {**samples.solutions(), **DELEGATED}), set(TESTS[:4]), [
        "cell linear_params, line 4: assigns tinyprof.testing.reference_unavailable (tinyprof, "
        "which the tests rely on)"]),
    "faker": (_with(FAKE_MODULE, {**samples.solutions(), **DELEGATED}), None, [
        "cell linear_params, line 5: uses sys.modules"]),
    "faketp": (_with(FAKE_TP, samples.solutions()), set(TESTS), [
        "cell linear_params, line 2: rebinds tp, a name the test cells use",
        RUNTIME]),
    "shadow": (_with(SHADOW_TP, samples.solutions()), set(TESTS), [
        "cell linear_params, line 2: rebinds tp, a name the test cells use",
        RUNTIME]),
    "hooker": (_with(AST_HOOK, samples.solutions()), set(TESTS), [
        "cell linear_params, line 4: calls get_ipython().ast_transformers.append, IPython's "
        "machinery (hooks, transformers, events)",
        RUNTIME]),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    submissions = tmp_path_factory.mktemp("submissions")
    for student, (answers, _, _) in COHORT.items():
        folder = submissions / student / samples.CHAPTER
        folder.mkdir(parents=True)
        (folder / samples.NOTEBOOK).write_bytes(samples.notebook(answers))
    out = tmp_path_factory.mktemp("graded")
    rows, printed = grade_cli(submissions, out)
    return out, {row["student"]: row for row in rows}, printed


@pytest.mark.parametrize("student", sorted(COHORT))
def test_each_attack_loses_its_points_or_is_flagged(graded, student):
    out, rows, summary = graded
    _, zeroed, fragments = COHORT[student]
    row = rows[student]
    assert row["status"] == "graded"
    if zeroed is not None:
        assert {t: float(row[t]) for t in TESTS} == {t: 0.0 if t in zeroed else 2.0
                                                     for t in TESTS}
    flags = row["flagged"].split(" | ") if row["flagged"] else []
    for fragment in fragments:
        assert any(flag.startswith(fragment) for flag in flags), (fragment, flags)
    assert bool(flags) == bool(fragments)
    page = html.unescape((out / "feedback" / student / samples.CHAPTER / "parameters.html")
                         .read_text(encoding="utf-8"))
    for flag in flags:
        assert f"FLAGGED for the instructor to review: {flag}" in page
        assert f"  ! {student}/{samples.CHAPTER}: {flag}" in summary


def test_the_summary_counts_the_flagged(graded):
    _, _, summary = graded
    assert f"{len(COHORT) - 1} flagged for review:" in summary
