"""Speed graded outside the student's kernel (autograder/run/speed.py), against the cheats of
issue 30.

Each notebook defines ``fix``, a replacement for ``tinyprof.faster.slow_step`` (chapter 08's
training step), and is run by the grader's real Execute preprocessor: its kernel in the
bubblewrap sandbox with a control group, the baseline in a clean kernel of its own, the test
cell decided by the judge. The honest fix is several times faster; every cheat must fail the
2× tier: the baseline handed in as is, a patched clock, a thread or a process that burns CPU
while the baseline runs, an output remembered across calls, a slowed-down baseline, and a call
into tinyprof's own fix. Against issue 39, a ``gelu_with_grad`` timed against
``pipeline.gelu_slow`` puts its work off until the grader reads its outputs (an ndarray subclass,
an object with ``__array__``, a background thread, a replaced ``tinyprof.remote`` reader): each
must fail too, beside an honest GELU that passes; and chapter 08 is graded through ``python -m
autograder grade`` with issue 39's lazy student beside the solution. Against issue 45, the slow
twin saves on the grader's requests instead (a cheaper execute_request handler, session
serialisation, comm handling or per-request hooks, one call a block, a thread that finishes the
outputs while they are read, garbage collection off): none reaches the tier, and each that
replaces the kernel's request handling is refused by the runtime check; three honest GELUs
(in place with out=, fresh numpy arrays, every buffer made afresh) keep their point.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from chapters import REPO
from nbformat.v4 import new_code_cell, new_notebook
from traitlets.config import Config

from autograder import samples
from autograder.run.execute import GraderExecute

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")]

SETUP = ("import numpy as np\nimport tinyprof as tp\n"
         "from tinyprof.models.datasets import digits_arrays\n"
         "images, labels = digits_arrays()\n"
         "C = float(np.sqrt(2 / np.pi))\n")
#: The student's copy of the baseline: every bottleneck of tinyprof.faster.pipeline kept.
SLOW = """
import logging
log = logging.getLogger("student")

def statistics(dtype):
    up = images.reshape(-1, 8, 8).repeat(2, axis=1).repeat(2, axis=2).reshape(-1, 256)
    low, centre, high = np.percentile(up.astype(dtype), [5, 50, 95], axis=0).astype(dtype)
    return centre, high - low + 1

def load(idx, shifts, centre, scale, dtype):
    rows = []
    for i, (k, (dy, dx)) in enumerate(zip(idx, shifts)):
        img = images[k].reshape(8, 8).repeat(2, axis=0).repeat(2, axis=1).astype(dtype)
        img = np.pad(img, 2)[2 - dy:18 - dy, 2 - dx:18 - dx]
        log.debug(f"sample {i}: {images[k]}")
        rows.append((img.reshape(-1) - centre) / scale)
    return np.stack(rows)

def gelu(h):
    t = np.tanh(C * (h + 0.044715 * h ** 3))
    dy = 0.5 * (1 + t) + 0.5 * h * (1 - t ** 2) * C * (1 + 3 * 0.044715 * h ** 2)
    return 0.5 * h * (1 + t), dy

def loss(z, y):
    n, total, dz = len(z), 0.0, np.empty_like(z)
    for i in range(n):
        row = z[i] - z[i].max()
        logp = row - np.log(np.exp(row).sum())
        t = np.full(10, 0.01, dtype=z.dtype)
        t[y[i]] += 0.9
        total += -(t * logp).sum()
        dz[i] = (np.exp(logp) - t) / n
    return float(total / n), dz

def fix(weights, batch, dtype=np.float64):
    idx, shifts = batch["indices"], batch["shifts"]
    x = load(idx, shifts, *statistics(dtype), dtype)
    w = {k: np.array(v, dtype=dtype) for k, v in weights.items()}
    a, da = gelu(x @ w["W1"] + w["b1"])
    value, dz = loss(a @ w["W2"] + w["b2"], labels[idx].astype(np.int64))
    dh = (dz @ w["W2"].T) * da
    g = {"W1": x.T @ dh, "b1": dh.sum(0), "W2": a.T @ dz, "b2": dz.sum(0)}
    return value, {k: w[k] - 0.05 * (g[k] + 1e-4 * w[k]) for k in w}
"""
#: The student's fix: every bottleneck removed, in plain numpy.
HONEST = """
up = images.reshape(-1, 8, 8).repeat(2, axis=1).repeat(2, axis=2)
low, mid, high = np.percentile(up.reshape(-1, 256).astype(np.float64), [5, 50, 95], axis=0)
CENTRE, SCALE = mid.astype(np.float32), (high - low + 1).astype(np.float32)
PADDED = np.pad(up.astype(np.float32), ((0, 0), (2, 2), (2, 2)))
OFFSETS = np.arange(16)

def fix(weights, batch):
    idx, shifts = batch["indices"], batch["shifts"]
    n = len(idx)
    rows = (OFFSETS[None, :] - shifts[:, :1] + 2)[:, :, None]
    cols = (OFFSETS[None, :] - shifts[:, 1:] + 2)[:, None, :]
    x = (PADDED[idx[:, None, None], rows, cols].reshape(n, 256) - CENTRE) / SCALE
    w = {k: v.astype(np.float32) for k, v in weights.items()}
    h = x @ w["W1"] + w["b1"]
    t = np.tanh(C * (h + 0.044715 * h * h * h))
    a = 0.5 * h * (1 + t)
    da = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * C * (1 + 3 * 0.044715 * h * h)
    z = a @ w["W2"] + w["b2"]
    z -= z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    t = np.full((n, 10), 0.01, dtype=np.float32)
    t[np.arange(n), labels[idx]] += 0.9
    dz = (np.exp(logp) - t) / n
    dh = (dz @ w["W2"].T) * da
    g = {"W1": x.T @ dh, "b1": dh.sum(0), "W2": a.T @ dz, "b2": dz.sum(0)}
    return float(-(t * logp).sum() / n), {k: w[k] - 0.05 * (g[k] + 1e-4 * w[k]) for k in w}
"""
TEST = ("from tinyprof.testing import expect_faster\n"
        "expect_faster(fix, tp.faster.slow_step, tp.faster.make_inputs, at_least=2)")

CHEATS = {
    "the baseline handed in as is": SLOW,
    # a clock that the runtime check cannot tell from the library's (no notebook code in it)
    "a patched clock": SLOW + (
        "import functools, time\n"
        "for name in ('perf_counter', 'process_time', 'monotonic', 'time', 'thread_time'):\n"
        "    setattr(time, name, functools.partial(float, 0.0))\n"),
    "a thread that burns CPU while the baseline runs": SLOW + (
        "import threading\n"
        "def burn():\n    x = np.ones(200_000)\n    while True:\n        np.sqrt(x, out=x)\n"
        "threading.Thread(target=burn, daemon=True).start()\n"),
    "a process that burns CPU while the baseline runs": SLOW + (
        "import os\nif os.fork() == 0:\n    while True:\n        pass\n"),
    "an output remembered across calls": HONEST.replace("def fix(", "def honest(") + (
        "kept = {}\ndef fix(weights, batch):\n    if 'out' not in kept:\n"
        "        kept['out'] = honest(weights, batch)\n    return kept['out']\n"),
    # numpy's tanh made 100x slower in this kernel (no notebook code in it), and a candidate that
    # avoids it: timed in the kernel, the baseline would be the slow one
    "a slowed-down baseline": SLOW.replace(
        "t = np.tanh(C * (h + 0.044715 * h ** 3))",
        "e = np.exp(2 * C * (h + 0.044715 * h ** 3))\n    t = (e - 1) / (e + 1)") + (
        "import math\nnp.tanh = np.vectorize(math.tanh)\n"),
    "a call into tinyprof's own fix": "fix = tp.faster.fast_step\n",
}

# --- deferred work: outputs whose work is put off until the grader reads them (issue 39) ------

GELU_TEST = ("from tinyprof.testing import expect_faster\n"
             "from tinyprof.faster import pipeline\n"
             "expect_faster(gelu_with_grad, pipeline.gelu_slow, pipeline.make_activations, "
             "at_least=1.25)")
#: The student's GELU written exactly as slowly as ``pipeline.gelu_slow``.
GELU_SLOW = """
def slow_gelu(h):
    t = np.tanh(C * (h + 0.044715 * h ** 3))
    y = 0.5 * h * (1 + t)
    dy = 0.5 * (1 + t) + 0.5 * h * (1 - t ** 2) * C * (1 + 3 * 0.044715 * h ** 2)
    return y, dy
"""
#: The honest classmate: x³ as two multiplies, the work in place in three buffers.
GELU_HONEST = """
def gelu_with_grad(h):
    x2 = h * h
    t = x2 * 0.044715
    t += 1
    t *= h
    t *= C
    np.tanh(t, out=t)
    dy = t * t
    np.subtract(1, dy, out=dy)
    dy *= h
    dy *= 0.5 * C
    x2 *= 3 * 0.044715
    x2 += 1
    dy *= x2
    t += 1
    t *= 0.5
    dy += t
    t *= h
    return t, dy
"""
#: Outputs that are never computed: reading an element computes that element (issue 39's
#: student, who got 2 of 2 when the grader read back only 256 elements of each output).
LAZY = GELU_SLOW + """
class Lazy(np.ndarray):
    def __array_finalize__(self, obj):
        self.source = getattr(obj, "source", None)
        self.part = getattr(obj, "part", 0)

    def __getitem__(self, key):
        if self.source is not None and self.ndim == 1:
            return slow_gelu(self.source.reshape(-1)[key])[self.part]
        return super().__getitem__(key)

def gelu_with_grad(h):
    out = []
    for part in (0, 1):
        lazy = np.empty(h.shape, h.dtype).view(Lazy)
        lazy.source, lazy.part = h, part
        out.append(lazy)
    return tuple(out)
"""
DEFERRED = {
    "an ndarray subclass that computes an element when it is read": LAZY,
    "an object with __array__ that computes when it is read": GELU_SLOW + """
class Deferred:
    def __init__(self, h, part):
        self.h, self.part, self.shape, self.dtype = h, part, h.shape, h.dtype

    def __array__(self, dtype=None, copy=None):
        return slow_gelu(self.h)[self.part]

def gelu_with_grad(h):
    return Deferred(h, 0), Deferred(h, 1)
""",
    "a thread that fills the outputs after the calls": GELU_SLOW + """
import queue, threading
jobs = queue.Queue()
def work():
    while True:
        h, y, dy = jobs.get()
        y[...], dy[...] = slow_gelu(h)
threading.Thread(target=work, daemon=True).start()

def gelu_with_grad(h):
    y, dy = np.empty_like(h), np.empty_like(h)
    jobs.put((h, y, dy))
    return y, dy
""",
    # the kernel's reader replaced: it turns the lazy outputs into plain arrays when read
    "a replaced tinyprof.remote reader that computes the outputs when read": LAZY + """
import tinyprof.remote as remote
_read = remote.OutputReader.read
def read(self, value, depth=0):
    if isinstance(value, Lazy):
        value = np.asarray(slow_gelu(value.source)[value.part])
    return _read(self, value, depth)
remote.OutputReader.read = read
""",
    # ... or computes only the elements it is asked for and leaves the others at zero
    "a replaced tinyprof.remote reader that computes only the sampled elements": LAZY + """
import tinyprof.remote as remote
_read = remote.OutputReader.read
def read(self, value, depth=0):
    if isinstance(value, Lazy):
        flat = np.zeros(value.size)
        picks = [int(u * value.size) for u in self.fractions]
        flat[picks] = value.reshape(-1)[picks]
        value = flat.reshape(value.shape)
    return _read(self, value, depth)
remote.OutputReader.read = read
""",
}


def grade_cell(student: str, folder: Path, test_source: str = TEST) -> dict:
    """The grader's record of the speed test cell of a notebook whose answer is ``student``."""
    test = new_code_cell(test_source)
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "speed",
                                 "points": 1, "locked": True, "schema_version": 3}
    nb = new_notebook(cells=[new_code_cell(SETUP + student), test])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    GraderExecute(config=Config(), timeout=120).preprocess(nb, {"metadata": {"path": str(folder)}})
    cell = nb.cells[1]
    return {**cell.metadata["tinyprof"], "outputs": [nbformat.from_dict(o) for o in cell.outputs]}


def test_an_honest_fix_is_timed_from_outside_and_reaches_its_tier(tmp_path):
    record = grade_cell(HONEST, tmp_path)
    assert record["verdict"]["passed"], record
    printed = record["outputs"][0]["text"]
    assert "Tier 2×: reached" in printed
    assert "timed by the CPU time of each kernel" in printed
    assert "faster than tinyprof.faster.pipeline.slow_step" in printed


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_no_cheat_gains_the_speed_point(cheat, tmp_path):
    record = grade_cell(CHEATS[cheat], tmp_path)
    assert not record["verdict"]["passed"], (cheat, record)
    message = record["verdict"]["message"]
    expected = {"an output remembered across calls": "call 2 (fresh inputs)",
                "a call into tinyprof's own fix": "switched off"}.get(cheat, "not 2× faster")
    assert expected in message, (cheat, message)


def test_an_honest_gelu_reaches_its_tier_and_its_slow_twin_does_not(tmp_path):
    honest = grade_cell(GELU_HONEST, tmp_path, GELU_TEST)
    assert honest["verdict"]["passed"], honest
    twin = grade_cell(GELU_SLOW + "gelu_with_grad = slow_gelu\n", tmp_path, GELU_TEST)
    assert not twin["verdict"]["passed"], twin
    assert "not 1.25× faster" in twin["verdict"]["message"], twin


@pytest.mark.parametrize("cheat", sorted(DEFERRED))
def test_no_deferred_work_gains_the_speed_point(cheat, tmp_path):
    """Every element of every output enters the check (a random projection of all of them,
    drawn after the block), so work put off until the grader reads an output is done inside
    the round, where it is charged, or the output is wrong; and what is not a plain array is
    refused, decided on the grader's side."""
    record = grade_cell(DEFERRED[cheat], tmp_path, GELU_TEST)
    assert not record["verdict"]["passed"], (cheat, record)
    message = record["verdict"]["message"]
    expected = {"an ndarray subclass that computes an element when it is read":
                "is a __main__.Lazy; a speed test takes plain numpy arrays",
                "an object with __array__ that computes when it is read":
                "is a __main__.Deferred; a speed test takes plain numpy arrays",
                "a replaced tinyprof.remote reader that computes only the sampled elements":
                "outside the elements read back one by one"}.get(cheat, "")
    assert expected in message, (cheat, message)


# --- request handling: what the student's kernel saves on the grader's requests (issue 45) -----

#: The slow twin, made to take one call per block: its second call (the one that chose
#: ``calls`` when the candidate's own time chose it) burns 80 ms of CPU.
ONE_CALL = GELU_SLOW + """
import time
_calls = [0]
def gelu_with_grad(h):
    _calls[0] += 1
    if _calls[0] == 2:
        end = time.process_time() + 0.08
        while time.process_time() < end:
            pass
    return slow_gelu(h)
"""
#: The kernel's execute_request handler replaced by one that evaluates the grader's
#: user_expressions itself, skipping IPython's cell machinery and the stream flushes (about
#: 2 ms of CPU a request here), reached through a renamed get_ipython.
QUICK_EXECUTE = """
from IPython import get_ipython as shell_of
_shell = shell_of()
_kernel, _ = _shell.kernel, None
_original = _kernel.shell_handlers["execute_request"]

async def _quick(stream, ident, parent):
    content = parent["content"]
    asked = content.get("user_expressions") or {}
    if content.get("code") != "" or not asked:
        return await _original(stream, ident, parent)
    found = {}
    for name, expression in asked.items():
        try:
            found[name] = {"status": "ok", "data": {"text/plain": repr(eval(expression,
                           _shell.user_ns))}, "metadata": {}}
        except Exception as error:
            found[name] = {"status": "error", "ename": type(error).__name__,
                           "evalue": str(error), "traceback": []}
    _kernel.session.send(stream, "execute_reply", {"status": "ok", "payload": [],
                         "execution_count": _shell.execution_count,
                         "user_expressions": found}, parent, ident)

_kernel.shell_handlers["execute_request"] = _quick
"""
#: Part of the outputs finished by a thread after the call returns, while the grader reads
#: the other kernel or the outputs (no access to the kernel's internals).
FINISHING = """
import queue, threading, time
_jobs = queue.Queue()

def _finish():
    while True:
        h, t, dy = _jobs.get()
        time.sleep(0.001)
        dy[...] = 0.5 * (1 + t) + 0.5 * h * (1 - t ** 2) * C * (1 + 3 * 0.044715 * h ** 2)

threading.Thread(target=_finish, daemon=True).start()
_calls = [0]

def gelu_with_grad(h):
    _calls[0] += 1
    if _calls[0] == 2:
        end = time.process_time() + 0.08
        while time.process_time() < end:
            pass
    t = np.tanh(C * (h + 0.044715 * h ** 3))
    dy = np.empty_like(h)
    _jobs.put((h, t, dy))
    return 0.5 * h * (1 + t), dy
"""
HANDLING = {
    # issue 45's two: 3.2× (CI 3.0–3.6×) and 1.18×–1.30× before
    "the slow twin with a cheaper execute_request handler, one call a block":
        ONE_CALL + QUICK_EXECUTE,
    "one call a block, outputs finished by a thread while the grader reads them": FINISHING,
    # and the red team's own
    "the slow twin taking one call a block": ONE_CALL,
    "the slow twin with the kernel's per-request hooks replaced": GELU_SLOW + """
gelu_with_grad = slow_gelu
from IPython import get_ipython
_kernel = get_ipython().kernel
_kernel.pre_handler_hook = _kernel.post_handler_hook = lambda: None
""",
    "the slow twin with a cheaper serialisation in the kernel's session": GELU_SLOW + """
gelu_with_grad = slow_gelu
import json
from IPython import get_ipython
from jupyter_client.jsonutil import json_default
_session = get_ipython().kernel.session
_session.pack = lambda message: json.dumps(message, default=json_default,
                                           separators=(",", ":")).encode()
""",
    "the slow twin with execute_request patched in the kernel's class": GELU_SLOW + """
gelu_with_grad = slow_gelu
from IPython import get_ipython
_kernel = get_ipython().kernel
_original = type(_kernel).execute_request
async def execute_request(self, stream, ident, parent):
    return await _original(self, stream, ident, parent)
type(_kernel).execute_request = execute_request
_kernel.shell_handlers["execute_request"] = _kernel.execute_request
""",
    "the slow twin with the comm manager's comm_msg replaced": GELU_SLOW + """
gelu_with_grad = slow_gelu
from IPython import get_ipython
_manager = get_ipython().kernel.comm_manager
_kernel = get_ipython().kernel
def comm_msg(stream, ident, msg):
    comm = _manager.comms.get(msg["content"]["comm_id"])
    if comm is not None:
        comm.handle_msg(msg)
_kernel.shell_handlers["comm_msg"] = comm_msg
""",
    "the slow twin with garbage collection off (cheaper handling, no internals)": GELU_SLOW + """
gelu_with_grad = slow_gelu
import gc
gc.disable()
""",
}


#: Cheats whose outputs a thread of theirs finishes after the call returned: when the grader reads
#: them back before that thread ran (a loaded machine: fresh-clone CI at 236a824), they are
#: wrong, and the cheat loses for that instead of its speed (0 points either way).
RACING_THE_READ_BACK = frozenset({
    "one call a block, outputs finished by a thread while the grader reads them"})
WRONG_OUTPUTS = "a faster version must compute what the baseline computes"


def _printed(record: dict) -> str:
    return "".join(output.get("text", "") for output in record["outputs"])


@pytest.mark.parametrize("cheat", sorted(HANDLING))
def test_no_saving_on_the_graders_requests_gains_the_speed_point(cheat, tmp_path):
    """Issue 45: ``calls`` comes from the baseline alone, with blocks long enough that a
    request's handling is at most 2 % of one; a block is charged less the clean kernel's tare,
    never the student's; making, reading back and the rest are each charged for their own
    excess; and a kernel whose request handling is not ipykernel's own is refused by the
    runtime check."""
    record = grade_cell(HANDLING[cheat], tmp_path, GELU_TEST)
    verdict = record["verdict"]
    assert not verdict["passed"], (cheat, record)
    if "get_ipython" in HANDLING[cheat] or "shell_of" in HANDLING[cheat]:
        assert verdict["ename"] == "TamperingDetected", (cheat, verdict)
    elif cheat in RACING_THE_READ_BACK and WRONG_OUTPUTS in verdict["message"]:
        assert "differ" in verdict["message"], (cheat, verdict)
    else:
        assert "not 1.25× faster" in verdict["message"], (cheat, verdict)
        calls = int(verdict["message"].split(" interleaved rounds of ")[1].split()[0])
        assert calls > 1, ("the candidate chose its own block", verdict)


#: Honest GELUs besides GELU_HONEST (np.tanh in place, out=): numpy with fresh arrays only,
#: the cube and the square as multiplies, nothing kept between calls.
GELU_FRESH = """
def gelu_with_grad(h):
    h2 = h * h
    t = np.tanh(C * h * (1 + 0.044715 * h2))
    half = 0.5 * (1 + t)
    dy = half + 0.5 * h * (1 - t * t) * C * (1 + 3 * 0.044715 * h2)
    return h * half, dy
"""
#: In place with np.multiply and np.add's out=, every buffer made afresh at each call.
GELU_OUT = """
def gelu_with_grad(h):
    x2 = np.multiply(h, h)
    inner = np.multiply(x2, 0.044715)
    np.add(inner, 1, out=inner)
    np.multiply(inner, h, out=inner)
    np.multiply(inner, C, out=inner)
    t = np.tanh(inner, out=inner)
    dy = np.multiply(t, t)
    np.subtract(1, dy, out=dy)
    np.multiply(dy, h, out=dy)
    np.multiply(dy, 0.5 * C, out=dy)
    np.multiply(x2, 3 * 0.044715, out=x2)
    np.add(x2, 1, out=x2)
    np.multiply(dy, x2, out=dy)
    np.add(t, 1, out=t)
    np.multiply(t, 0.5, out=t)
    np.add(dy, t, out=dy)
    return np.multiply(t, h, out=t), dy
"""


@pytest.mark.parametrize("honest", ["GELU_HONEST", "GELU_FRESH", "GELU_OUT"])
def test_honest_gelus_keep_their_speed_point(honest, tmp_path):
    record = grade_cell(globals()[honest], tmp_path, GELU_TEST)
    assert record["verdict"]["passed"], (honest, record)
    assert "Tier 1.25×: reached" in _printed(record), (honest, record)


# --- chapter 08 through `python -m autograder grade --jobs 2` --------------------------------

CHAPTER, NOTEBOOK = "08_faster", "faster.ipynb"


def _speed_cells() -> list[str]:
    """The grade ids of chapter 08's test cells that time ``fast_step``."""
    source = json.loads((REPO / "solutions" / CHAPTER / NOTEBOOK).read_text(encoding="utf-8"))
    return [cell["metadata"]["nbgrader"]["grade_id"] for cell in source["cells"]
            if cell["metadata"].get("nbgrader", {}).get("grade")
            and "expect_faster(fast_step" in "".join(cell["source"])]


def _as_is() -> dict[str, str]:
    """The solution with ``fast_step`` replaced by the student's copy of the baseline."""
    answers = samples.solutions(CHAPTER, NOTEBOOK)
    step = next(gid for gid, code in answers.items() if "def fast_step" in code)
    return {**answers, step: SETUP + SLOW + "\nfast_step = fix\n"}


#: A loader that loops over the samples, a few numpy calls each: right, and slow (issue 38).
LOOP_LOAD = """
def load_batch(images, indices, shifts, centre, scale):
    rows = []
    for index, (dy, dx) in zip(indices, shifts):
        image = images[index].reshape(8, 8).repeat(2, axis=0).repeat(2, axis=1).astype(np.float64)
        moved = np.roll(image, (dy, dx), axis=(0, 1))
        if dy > 0:
            moved[:dy] = 0
        elif dy < 0:
            moved[dy:] = 0
        if dx > 0:
            moved[:, :dx] = 0
        elif dx < 0:
            moved[:, dx:] = 0
        rows.append((moved.reshape(-1) - centre) / scale)
    return np.stack(rows)
"""
#: The loss one row at a time: right, and slow.
ROW_LOSS = """
def smoothed_loss(z, labels):
    n = z.shape[0]
    total, dz = 0.0, np.empty_like(z)
    for i in range(n):
        row = z[i] - z[i].max()
        log_p = row - np.log(np.exp(row).sum())
        t = np.full(CLASSES, SMOOTHING / CLASSES, dtype=z.dtype)
        t[labels[i]] += 1 - SMOOTHING
        total += -(t * log_p).sum()
        dz[i] = (np.exp(log_p) - t) / n
    return float(total / n), dz
"""
#: The solution's GELU computed in float32: fast, and only float32-accurate.
FLOAT32_GELU = """
def gelu_with_grad(h):
    x = h.astype(np.float32)
    x2 = x * x
    t = x2 * x
    t *= np.float32(0.044715)
    t += x
    t *= np.float32(GELU_C)
    np.tanh(t, out=t)
    dy = t * t
    np.subtract(np.float32(1), dy, out=dy)
    dy *= x
    dy *= np.float32(0.5 * GELU_C)
    x2 *= np.float32(3 * 0.044715)
    x2 += np.float32(1)
    dy *= x2
    t += np.float32(1)
    t *= np.float32(0.5)
    dy += t
    t *= x
    return t, dy
"""


def _with(**answers: str) -> dict[str, str]:
    """The solution with the named answer cells replaced."""
    return {**samples.solutions(CHAPTER, NOTEBOOK), **answers}


#: Issue 39's student: outside a burst of back-to-back calls its GELU computes in full (so the
#: chapter's visible and hidden checks pass); inside one (the grader's timed block) it returns
#: LAZY's outputs, which compute an element only when it is read.
BURST = """
import time
C = float(np.sqrt(2 / np.pi))
""" + LAZY.replace("def gelu_with_grad(h):", "def lazy_gelu(h):") + """
_last = [0.0]
def gelu_with_grad(h):
    now, before = time.perf_counter(), _last[0]
    _last[0] = now
    return lazy_gelu(h) if now - before < 0.01 else slow_gelu(h)
"""


def _lazy() -> dict[str, str]:
    """The solution with ``gelu_with_grad`` replaced by issue 39's lazy student's."""
    answers = samples.solutions(CHAPTER, NOTEBOOK)
    cell = next(gid for gid, code in answers.items() if "def gelu_with_grad" in code)
    return {**answers, cell: BURST}


@pytest.fixture(scope="module")
def chapter(tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("speed08")
    cohort = {"ada": samples.solutions(CHAPTER, NOTEBOOK), "blank": {}, "asis": _as_is(),
              "loops": _with(load_batch=LOOP_LOAD, smoothed_loss=ROW_LOSS),
              "f32": _with(gelu_with_grad=FLOAT32_GELU),
              "lazy": _lazy()}
    for student, answers in cohort.items():
        folder = root / "in" / student / CHAPTER
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_bytes(samples.notebook(answers, chapter=CHAPTER,
                                                         name=NOTEBOOK))
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", str(root / "in"),
                          "--out", str(root / "out"), "--jobs", "2"], cwd=REPO,
                         capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with open(root / "out" / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    for student, row in rows.items():
        page = root / "out" / "feedback" / student / CHAPTER / "faster.html"
        row["feedback"] = page.read_text(encoding="utf-8") if page.exists() else ""
    return rows


def test_chapter_08_speed_points_go_to_the_solution_only(chapter):
    cells = _speed_cells()
    assert len(cells) >= 2, cells
    assert all(float(chapter["ada"][cell]) > 0 for cell in cells), chapter["ada"]
    for student in ("blank", "asis"):
        assert all(float(chapter[student][cell] or 0) == 0 for cell in cells), chapter[student]
    assert chapter["ada"]["auto_score"] == chapter["ada"]["max_auto_score"], chapter["ada"]


def test_chapter_08_loops_lose_their_speed_points_and_float32_is_named(chapter):
    """Issue 38: a loader that loops over the samples and a loss that loops over the rows are
    right and slow: they pass their tests and lose their speed points (the solution keeps
    every point); a float32 GELU misses the GELU test with a message that names the dtype."""
    ada, loops, f32, blank = (chapter[s] for s in ("ada", "loops", "f32", "blank"))
    for cell in ("speed_load_batch", "speed_smoothed_loss"):
        assert float(ada[cell]) > 0, ada
        assert float(loops[cell] or 0) == 0, (cell, loops)
    for cell in ("test_load_batch", "test_smoothed_loss"):
        assert float(loops[cell]) == float(ada[cell]) > 0, (cell, loops)
    assert float(loops["auto_score"]) < float(ada["auto_score"]), loops
    assert float(f32["test_gelu_with_grad"] or 0) == 0, f32
    assert "not in h's dtype" in f32["feedback"], f32["feedback"][-2000:]
    assert float(blank["auto_score"] or 0) == 0, blank


def test_chapter_08_gelu_speed_points_go_to_no_output_computed_only_when_read(chapter):
    assert float(chapter["ada"]["speed_gelu_with_grad"]) > 0, chapter["ada"]
    assert float(chapter["lazy"]["speed_gelu_with_grad"] or 0) == 0, chapter["lazy"]
