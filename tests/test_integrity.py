"""The grader's static review (autograder/integrity.py): every attack on the tests is flagged,
and no honest solution or corpus submission of any chapter is."""

from __future__ import annotations

import json

import pytest
from chapters import NOTEBOOKS, SOLUTIONS
from test_autograde import CHAPTERS, CORPUS, _notebook_name, _solution_answers, _warning_answers
from test_autograde import _with_answers as with_answers

from autograder.integrity import review, runtime_flags

CHAPTER = "01_parameters"


def _pair(chapter: str) -> tuple[dict, dict]:
    name = _notebook_name(chapter)
    return (json.loads((NOTEBOOKS / chapter / name).read_text()),
            json.loads((SOLUTIONS / chapter / name).read_text()))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_honest_or_corpus_submission_is_flagged(chapter):
    release, source = _pair(chapter)
    corpus = CORPUS[chapter]
    cohort = {"instructor copy": source, "blank": release,
              "solution": with_answers(chapter, _solution_answers(chapter)),
              "warnings": with_answers(chapter, _warning_answers(chapter)),
              "hard-coded": with_answers(chapter, corpus.HARD_CODED),
              "mistakes": with_answers(chapter, {g: c for g, (c, _) in corpus.MISTAKES.items()}),
              "delegated": with_answers(chapter, {g: c for g, (c, _)
                                                  in getattr(corpus, "DELEGATED", {}).items()})}
    for label, notebook in cohort.items():
        assert review(notebook, release, source) == [], label


ANSWER = "def linear_params(i, o, bias=True):\n    return 1\n"
ATTACKS = {
    "expect = lambda *a, **k: None\n": "line 1: rebinds expect, a test helper the test cells use",
    "def f():\n    global expect\n    expect = print\n":
        "line 1: rebinds expect, a test helper the test cells use",
    "import tinyprof.testing\nfrom contextlib import nullcontext\n"
    "tinyprof.testing.reference_unavailable = lambda *a: nullcontext()\n":
        "line 3: assigns tinyprof.testing.reference_unavailable (tinyprof, which the tests rely "
        "on)",
    "setattr(tp.testing, 'expect', print)\n":
        "line 1: setattr() on tinyprof, which the tests rely on",
    "t = tp.testing\ndel t.expect\n":
        "line 2: deletes t.expect (tinyprof, which the tests rely on)",
    "import sys, types\nsys.modules['tinyprof.testing'] = types.SimpleNamespace()\n":
        "line 2: uses sys.modules",
    "from sys import modules\n": "line 1: imports sys.modules, which can change what the tests "
                                 "import or how cells run",
    "import builtins\n": "line 1: imports builtins, which can rewrite the tests' environment",
    "__builtins__.len = None\n": "line 1: assigns __builtins__.len (builtins)",
    "def int(x):\n    return 0\n": "line 1: rebinds int, a builtin the test cells use",
    "np = None\n": "line 1: rebinds np, a name the test cells use",
    "get_ipython().ast_transformers.append(object())\n":
        "line 1: calls get_ipython().ast_transformers.append, IPython's machinery (hooks, "
        "transformers, events)",
    "ip = get_ipython()\nip.events.register('pre_run_cell', print)\n":
        "line 2: calls ip.events.register, IPython's machinery (hooks, transformers, events)",
    "get_ipython().input_transformers_post.append(str)\n":
        "line 1: calls get_ipython().input_transformers_post.append, IPython's machinery "
        "(hooks, transformers, events)",
    "import sys\nsys.displayhook = print\n": "line 2: assigns sys.displayhook (sys)",
    "%config InteractiveShell.ast_node_interactivity = 'all'\n":
        "line 1: runs the %config magic, which can change how later cells run",
    "%%time\nimport builtins\n": "line 1: (in its %%time body, line 1) imports builtins, which "
                                 "can rewrite the tests' environment",
    "globals()['expect'] = print\n": "line 1: writes to globals()",
    "exec('expect = print')\n": "line 1: calls exec(), which runs code the review cannot see",
    "type(nn.Linear(1, 1)).__init__ = None\n":
        "line 1: assigns type(nn.Linear(1, 1)).__init__, patching a class through its instances",
    "object.__setattr__(tp.testing, 'expect', print)\n":
        "line 1: uses .__setattr__, which reaches into code or frames",
    "from IPython import get_ipython as g\ng().events.register('post_run_cell', print)\n":
        "line 2: calls g().events.register, IPython's machinery (hooks, transformers, events)",
    "import os\nos.sys.modules.pop('tinyprof.testing')\n": "line 2: uses sys.modules",
    "f = tp.count_parameters.__code__\n":
        "line 1: uses .__code__, which reaches into code or frames",
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_each_attack_is_flagged_with_its_line(attack):
    release, source = _pair(CHAPTER)
    notebook = with_answers(CHAPTER, {"linear_params": attack + ANSWER})
    assert f"cell linear_params, {ATTACKS[attack]}" in [str(f) for f in
                                                        review(notebook, release, source)]


def test_an_attack_in_an_added_cell_or_an_edited_instructor_cell_is_flagged():
    release, source = _pair(CHAPTER)
    notebook = with_answers(CHAPTER, {})
    cells = notebook["cells"]
    cells.insert(3, {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": "import builtins\n"})
    cells[1]["source"] = "".join(cells[1]["source"]) + "\nexpect = print\n"
    assert [str(f) for f in review(notebook, release, source)] == [
        "cell 2, line 15: rebinds expect, a test helper the test cells use",
        "cell 4, line 1: imports builtins, which can rewrite the tests' environment"]


def test_repeating_the_instructors_own_statements_is_not_flagged():
    release, source = _pair(CHAPTER)
    code = ("import numpy as np\nimport tinyprof as tp\nfrom tinyprof import models, nn\n"
            "from tinyprof.testing import expect\nrng = np.random.default_rng(0)\n")
    notebook = with_answers(CHAPTER, {"linear_params": code + ANSWER})
    assert review(notebook, release, source) == []


def test_a_test_edited_by_the_student_is_not_reviewed_as_it_never_runs():
    release, source = _pair(CHAPTER)
    notebook = with_answers(CHAPTER, {"test_linear_params": "import builtins\n"})
    assert review(notebook, release, source) == []


def test_runtime_flags_are_read_from_the_graded_notebook():
    graded = {"cells": [
        {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "test_a"}}, "outputs": [
            {"output_type": "stream", "name": "stdout",
             "text": "[tinyprof integrity] expect had been rebound\nother\n"}]},
        {"cell_type": "code", "metadata": {}, "outputs": [
            {"output_type": "error", "ename": "TamperingDetected", "evalue": "builtins.len",
             "traceback": []}]}]}
    assert runtime_flags(graded) == [
        "cell test_a: the hidden tests' runtime check: expect had been rebound",
        "cell 2: the hidden tests' runtime check found tampering: builtins.len"]
