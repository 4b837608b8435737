"""The grader's static review (autograder/intake/review.py): every attack on the tests is flagged,
and no honest solution or corpus submission of any chapter is."""

from __future__ import annotations

import json

import pytest
from chapters import NOTEBOOKS, SOLUTIONS
from test_autograde import CHAPTERS, CORPUS, _notebook_name, _solution_answers, _warning_answers
from test_autograde import _with_answers as with_answers

from autograder.intake.review import UNSURE, review
from autograder.results.flags import runtime_flags

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


HONEST = [(chapter, name) for chapter in CHAPTERS
          for name in getattr(CORPUS[chapter], "HONEST", {})]


def test_the_honest_corpus_covers_the_idioms_that_were_flagged_and_more():
    names = {name for _, name in HONEST}
    assert len(HONEST) >= 20, len(HONEST)
    assert {"gc.collect before a measurement", "autoreload", "setattr in __init__"} <= names


@pytest.mark.parametrize("chapter, idiom", HONEST)
def test_no_honest_idiom_is_flagged(chapter, idiom):
    """Each idiom of the honest corpus (tests/corpus/), as a cell the student added after the
    set-up cell of a solved notebook: not one flag, not even one that asks for a review."""
    release, source = _pair(chapter)
    notebook = with_answers(chapter, _solution_answers(chapter))
    cells = notebook["cells"]
    setup = next(i for i, cell in enumerate(cells) if cell["cell_type"] == "code")
    cells.insert(setup + 1, {"cell_type": "code", "metadata": {}, "outputs": [],
                             "execution_count": None,
                             "source": CORPUS[chapter].HONEST[idiom].strip()})
    assert [str(f) for f in review(notebook, release, source)] == []


ANSWER = "def linear_params(i, o, bias=True):\n    return 1\n"
#: Why a read of the process's identity or environment is flagged (intake/tells.py).
TELL = "code that can tell the graded run from its author's own and behave otherwise"
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
    # issue 19: verdict forgery and what leads to it
    "import math\nmath.isclose = lambda *a, **k: True\n":
        "line 2: assigns math.isclose (the module math)",
    "import math as m\nsetattr(m, 'is' + 'close', print)\n": "line 2: setattr() on the module math",
    "import IPython\nshell = getattr(IPython, 'get_' + 'ipython')()\n":
        "line 2: getattr() on ipython-module with a computed attribute name",
    "import numpy\nf = getattr(numpy, 'all' + 'close')\n":
        "line 2: getattr() on the module numpy with a computed attribute name",
    "x = object()\nsetattr(x, 'a' + 'b', 1)\n": "line 2: setattr() with a computed attribute name"
                                                 + UNSURE,
    "print(In[-1])\n": "line 1: reads In, the notebook's input/output history (where the tests' "
                       "code would be)",
    "text = _ih[3]\n": "line 1: reads _ih, the notebook's input/output history (where the tests' "
                       "code would be)",
    "print(_i12)\n": "line 1: reads _i12, the notebook's input/output history (where the tests' "
                     "code would be)",
    "%history\n": "line 1: runs %history, which reads the notebook's input history",
    "shell = get_ipython()\n": "line 1: reaches the kernel object (get_ipython())",
    "import IPython\nk = IPython.get_ipython()\n":
        "line 2: uses IPython.get_ipython, which reaches the kernel's internals",
    "import ipykernel\napp = ipykernel.kernelapp\n":
        "line 2: uses ipykernel.kernelapp, which reaches the kernel's internals",
    "import __main__\n": "line 1: imports __main__, the notebook's own namespace",
    "open('helper.py', 'w').write('x = 1')\n":
        "line 1: writes a Python file, which an import would run without review",
    "from pathlib import Path\nPath('helper.py').write_text('x = 1')\n":
        "line 2: writes a Python file, which an import would run without review",
    "%%writefile helper.py\nx = 1\n":
        "line 1: writes a Python file (%%writefile), which an import would run without review",
    "import quiet_helper\n": "line 1: imports quiet_helper, which the course environment does "
                             "not have (a file the notebook wrote itself?)",
    "f = tp.abtest._timed_rounds\n":
        "line 1: uses tp.abtest._timed_rounds, a private name of tinyprof",
    "from tinyprof.abtest import _timed_rounds\n":
        "line 1: imports tinyprof.abtest._timed_rounds, a private name of tinyprof",
    "f = getattr(tp.abtest, '_timed_rounds')\n":
        "line 1: uses a private name of tinyprof (getattr(tp.abtest, '_timed_rounds'))",
    # issue 33: ways into a module's namespace, and the hooks a profile-based switch uses
    "import tinyprof.testing as mod\nns = mod.__dict__\nns['expect'] = print\n":
        "line 3: writes through ns, an alias of a namespace",
    "ns = vars(tp.testing)\nns.update(expect=print)\n":
        "line 2: writes through ns, an alias of a namespace",
    "import inspect\nns = inspect.getmodule(expect).__dict__\nns['expect'] = print\n":
        "line 3: writes through ns, an alias of a namespace" + UNSURE,
    "import inspect\nvars(inspect.getmodule(expect))['expect'] = print\n":
        "line 2: writes to vars(inspect.getmodule(expect))" + UNSURE,
    "import gc\nfound = gc.get_referrers(expect)\n":
        "line 2: uses gc.get_referrers, which reaches every object of the kernel, the tests' "
        "own included",
    "from gc import get_objects\n":
        "line 1: uses gc.get_objects, which reaches every object of the kernel, the tests' own "
        "included",
    "import gc as g\nf = getattr(g, 'get_objects')\n":
        "line 2: uses gc.get_objects, which reaches every object of the kernel, the tests' own "
        "included",
    "import gc\ndef use(m):\n    return m.get_objects()\nuse(gc)\n":
        "line 4: hands the gc module on (gc), out of the review's sight" + UNSURE,
    "import threading\nthreading.setprofile(None)\n":
        "line 2: uses threading.setprofile, which sets the hook of every new thread",
    "import sys\nsys.monitoring.free_tool_id(2)\n": "line 2: uses sys.monitoring",
    "import sys\nsys.setprofile(None)\n": "line 2: calls sys.setprofile",
    "import sys\nsys.settrace(None)\n": "line 2: calls sys.settrace",
    "import sys as s\noff = getattr(s, 'setprofile')\n": "line 2: uses sys.setprofile",
    "from sys import setprofile\n": "line 1: imports sys.setprofile, which can change what the "
                                    "tests import or how cells run",
    "from threading import setprofile\n":
        "line 1: uses threading.setprofile, which sets the hook of every new thread",
    "import threading\nthreading._start_new_thread(print, ())\n":
        "line 2: uses threading._start_new_thread, which starts a thread without the hidden "
        "tests' profile hook",
    "import _thread\n": "line 1: imports _thread, whose threads start without the hidden tests' "
                        "profile hook",
    "import sys\nsys.modules['tinyprof.abtest'] = None\n": "line 2: uses sys.modules",
    "import tinyprof.abtest as ab\nobject.__setattr__(ab, 'verdict', print)\n":
        "line 2: uses .__setattr__, which reaches into code or frames",
    "class Fields:\n    def __init__(self, **kw):\n        for k, v in kw.items():\n"
    "            setattr(self, k, v)\nFields.__init__(tp.testing, expect=print)\n":
        "line 5: calls Fields.__init__ on an object other than self (it can set the attributes "
        "of a module)" + UNSURE,
    "class Sly:\n    def __init__(self, k, v):\n        self = tp.testing\n"
    "        setattr(self, k, v)\n":
        "line 4: setattr() on tinyprof, which the tests rely on",
    "class Sly:\n    def method(self, k, v):\n        setattr(self, k, v)\n":
        "line 3: setattr() with a computed attribute name" + UNSURE,
    "class Sly:\n    def __init__(self, k, v):\n        (lambda self: setattr(self, k, v))(tp)\n":
        "line 3: setattr() with a computed attribute name" + UNSURE,
    "class Sly:\n    def __post_init__(self):\n        object.__setattr__(tp.testing, 'x', 1)\n":
        "line 3: uses .__setattr__, which reaches into code or frames",
    # issue 45: the kernel that handles the grader's requests, reached past the review
    "from IPython import get_ipython as shell_of\nk, n = shell_of().kernel, 0\n"
    "k.shell_handlers['execute_request'] = print\n":
        "line 2: uses shell_of().kernel, the kernel that handles the grader's requests",
    "from IPython import get_ipython as g\n(a, (k, b)) = (1, (g(), 2))\nk.kernel.session = None\n":
        "line 3: reaches the kernel object (k, bound to get_ipython or to what it returns)",
    "import IPython\nns = IPython.__dict__\nshell = ns['get_' + 'ipython']()\n":
        "line 2: reads IPython.__dict__, a module's namespace (its names reached by key, out of "
        "the review's sight)",
    "import sys\nmods = sys.__dict__['modules']\n":
        "line 2: reads sys.__dict__, a module's namespace (its names reached by key, out of the "
        "review's sight)",
    "import pickle\npickle.loads(b'cbuiltins\\nexec\\n(Vx = 1\\ntR.')\n":
        "line 2: uses pickle.loads, which runs whatever code a pickle names (code the review "
        "cannot see)",
    "from pickle import loads as decode\n":
        "line 1: uses pickle.loads, which runs whatever code a pickle names (code the review "
        "cannot see)",
    "import numpy\nnumpy.load('saved.npy', allow_pickle=True)\n":
        "line 2: loads with allow_pickle, which runs whatever code a pickle names (code the "
        "review cannot see)",
    "import comm\nmanager = comm.get_comm_manager()\n":
        "line 2: uses comm.get_comm_manager, which reaches the kernel's internals",
    "from traitlets.config import Application\napp = Application.instance()\n":
        "line 2: uses Application.instance, which reaches the kernel's internals",
    "from ipykernel.kernelapp import IPKernelApp\nk = IPKernelApp.instance().kernel\n":
        "line 2: uses IPKernelApp.instance, which reaches the kernel's internals",
    # Found by the red team of chapter 09 (tests/redteam_prefetcher.py): a match pattern's capture
    # rebinds a name as an assignment does, and getclosurevars reads a function's closure.
    "match print:\n    case expect:\n        pass\n":
        "line 1: rebinds expect, a test helper the test cells use",
    "match {'a': 1}:\n    case {**expect}:\n        pass\n":
        "line 1: rebinds expect, a test helper the test cells use",
    "import inspect\nfound = inspect.getclosurevars(print)\n":
        "line 2: uses inspect.getclosurevars, which reaches into frames or closures",
    # Issue 45: what tells the graded run from the student's own (intake/tells.py), each unsure.
    "import os as system\nKERNEL = system.getpid()\n":
        "line 2: reads os.getpid, the process id (a fork of the kernel has another): " + TELL
        + UNSURE,
    "from os import getppid\n":
        "line 1: reads os.getppid, the parent's process id: " + TELL + UNSURE,
    "import traceback as tb\ncallers = tb.extract_stack()\n":
        "line 2: reads the call stack (traceback.extract_stack), which shows who called the code "
        "(the grader's request, when graded): " + TELL + UNSURE,
    "from inspect import stack\n":
        "line 1: reads the call stack (inspect.stack), which shows who called the code (the "
        "grader's request, when graded): " + TELL + UNSURE,
    "limits = open('/proc/' + 'self/limits').read()\n":
        "line 1: names the path '/proc/self/limits', which describes the process or the machine "
        "(its limits, network, process tree, user or home): " + TELL + UNSURE,
    "from pathlib import Path\nup = float(Path(f'/proc/uptime').read_text().split()[0])\n":
        "line 2: names the path '/proc/uptime', which describes the process or the machine (its "
        "limits, network, process tree, user or home): " + TELL + UNSURE,
    "import http.client\nnames = http.client.socket.if_nameindex()\n":
        "line 2: reads socket.if_nameindex, the network interfaces: " + TELL + UNSURE,
    "import os\ngraded = 'USER' not in os.environ\n":
        "line 2: reads the machine's environment variables ('USER' not in os.environ), which "
        "differ where it is graded: " + TELL + UNSURE,
    "import os\nhome = os.environ.get('HOME')\n":
        "line 2: reads the machine's environment variables (os.environ.get), which differ where "
        "it is graded: " + TELL + UNSURE,
    "import os\nuser = os.getenv('USER')\n":
        "line 2: reads the machine's environment variables (os.getenv('USER')), which differ "
        "where it is graded: " + TELL + UNSURE,
    "import getpass\nme = getpass.getuser()\n":
        "line 2: reads getpass.getuser, the user name: " + TELL + UNSURE,
    "from pathlib import Path\nhere = Path.cwd()\n":
        "line 2: reads Path.cwd, the working folder's path: " + TELL + UNSURE,
    "import time\nfresh = time.process_time() < 0.5\n":
        "line 2: reads time.process_time, the CPU time the process has used so far (a fork of "
        "the kernel starts at 0): " + TELL + UNSURE,
    # Found by issue 45's second red team (tests/redteam_leak_free.py, s8-red).
    "import gc\ngraded = gc.get_freeze_count() > 0\n":
        "line 2: reads gc.get_freeze_count, the collector's frozen objects (the grader's fork "
        "freezes them): " + TELL + UNSURE,
    "import os\nsmall = os.statvfs('.').f_blocks\n":
        "line 2: reads os.statvfs, the size of a folder's file system (the sandbox's is a small "
        "tmpfs): " + TELL + UNSURE,
    "import shutil\nfree = shutil.disk_usage('.').total\n":
        "line 2: reads shutil.disk_usage, the size of a folder's file system (the sandbox's is a "
        "small tmpfs): " + TELL + UNSURE,
    "import os\nbare = not os.path.isdir('/var/tmp')\n":
        "line 2: names the path '/var/tmp', which describes the process or the machine (its "
        "limits, network, process tree, user or home): " + TELL + UNSURE,
    "import socket\nfamily = socket.AF_INET6\n":
        "line 2: reads socket.AF_INET6, whether an IPv6 socket can be made (the sandbox refuses "
        "them): " + TELL + UNSURE,
    "import sys\ngraded = 'tinyprof.remote' in sys.modules\n":
        "line 2: names the grader's module 'tinyprof.remote', imported only where a notebook is "
        "graded: " + TELL + UNSURE,
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


def test_the_review_reads_the_copy_the_worker_repaired_without_repairing_again(tmp_path,
                                                                             monkeypatch):
    """A notebook is repaired once, by the grading worker (intake/repair.py); the parent's
    review reads the worker's copy as it is, and repairs only a file no worker got to."""
    import autograder.intake.review as static_review
    from autograder.intake.repair import repair

    release, source = _pair(CHAPTER)
    notebook = with_answers(CHAPTER, {"linear_params": "import builtins\n" + ANSWER,
                                      "test_linear_params": "import ctypes\n"})
    expected = [str(f) for f in review(notebook, release, source)]
    handed_in, repaired = tmp_path / "handed_in.ipynb", tmp_path / "repaired.ipynb"
    handed_in.write_text(json.dumps(notebook))
    repaired.write_text(json.dumps(repair(notebook, release, source)[0]))
    calls = []
    monkeypatch.setattr(static_review, "repair", lambda *args: calls.append(args) or
                        repair(*args))
    name = _notebook_name(CHAPTER)
    found = static_review.review_file(handed_in, CHAPTER, name, repaired=repaired)
    assert ([str(f) for f in found], calls) == (expected, [])
    found = static_review.review_file(handed_in, CHAPTER, name, repaired=tmp_path / "none")
    assert [str(f) for f in found] == expected and len(calls) == 1
    assert expected == ["cell linear_params, line 1: imports builtins, which can rewrite the "
                        "tests' environment"]


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


def test_a_loop_variable_named_like_the_history_is_not_the_history():
    release, source = _pair(CHAPTER)
    code = "for _i in range(3):\n    print(_i)\n"
    notebook = with_answers(CHAPTER, {"linear_params": code + ANSWER})
    assert review(notebook, release, source) == []


def test_review_sentences_of_the_grader_are_flags_and_a_judged_cell_is_not_reread():
    """A judged test cell's outputs are the grader's own; its record's ``review`` lines (signs
    the kernel was changed) are the flags, not what its outputs say."""
    graded = {"cells": [
        {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "test_a"}, "tinyprof": {
            "verdict": {"version": 1, "passed": False, "ename": "KernelError", "message": "x"},
            "review": ["the kernel broke the grader's protocol: no answer"]}},
         "outputs": [{"output_type": "error", "ename": "TamperingDetected", "evalue": "forged",
                      "traceback": []}]}]}
    assert runtime_flags(graded) == [
        "cell test_a: the kernel broke the grader's protocol: no answer"]


def test_the_summary_lists_certain_and_review_flags_apart(tmp_path):
    """A flag whose rule honest code can also trip says so, and the summary lists it under a
    heading of its own, after the flags that only tampering raises."""
    from autograder.results.report import GradeRow, certainty, summary

    release, source = _pair(CHAPTER)
    code = {"ada": "import sys\nsys.modules.pop('tinyprof.testing')\n",
            "bob": "x = object()\nsetattr(x, 'a' + 'b', 1)\n"}
    rows = [GradeRow(student, CHAPTER, flags=[str(f) for f in review(
        with_answers(CHAPTER, {"linear_params": attack + ANSWER}), release, source)])
        for student, attack in code.items()]
    assert [[certainty(flag) for flag in row.flags] for row in rows] == [["certain"], ["review"]]
    lines = summary(rows, [], tmp_path).splitlines()
    start = lines.index("2 flagged for review:")
    assert lines[start + 1:start + 5] == [
        " certain (only tampering does this):",
        f"  ! ada/{CHAPTER}: cell linear_params, line 2: uses sys.modules",
        " review (honest code can do this too):",
        f"  ? bob/{CHAPTER}: cell linear_params, line 2: setattr() with a computed attribute "
        "name" + UNSURE]
