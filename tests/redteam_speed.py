"""Red team of chapter 08's speed tests: cheats against ``expect_faster`` and honest alternatives.

The contract attacked: ``tinyprof.testing.expect_faster(candidate, baseline, make_inputs,
at_least)``, graded from outside the kernel by ``autograder/run/speed.py``. The candidate (the
student's ``gelu_with_grad``, tier 1.25× over ``pipeline.gelu_slow``; or ``fast_step``, tiers
2×, 4× and 6× over ``pipeline.slow_step``) runs in the student's kernel, the baseline in a clean
sandboxed kernel; both are timed by the CPU time of their control groups, read by the grader,
over blocks of calls on fresh inputs made from seeds the grader draws; every output is read back
at random positions and projected; tinyprof is switched off in the student's kernel while timed;
the verdict is the bootstrap interval of the speedup against the tier. The grade must depend
only on the work of the function.

Each cheat is the code of the exercise's answer cell (``gelu_with_grad``'s unless
:data:`TARGETS` names ``fast_step``), written as the cleverest student in the class would, and
scores 0 when the speed test fails or the submission is flagged for tampering (by the static
review or the runtime check). The classes tried, one line each in every cheat's docstring:

- **the kernel's own request handling** (issue 45, item 1): the grader's requests are handled by
  the student's kernel, so a submission that answers them by a shorter route than ipykernel's
  pays less for each request than the clean kernel does; the tare taken off its blocks and the
  "rest" of its rounds then hold CPU time the function used. ``QUICK_KERNEL`` installs such a
  route (an execute handler that answers the grader's expression directly, without IPython's
  cell machinery and the four stream flushes, and that waits for the function's unfinished
  work before it answers); the cheats differ in how the code reaches the kernel past the
  static review: ``get_ipython`` under another name with ``.kernel`` unpacked from a tuple
  (issue 45), a ``%time`` line magic's argument, a string run by ``cProfile.run``, a file not
  named ``.py`` run by ``runpy``, an object whose ``__reduce__`` runs it under ``pickle.loads``
  (issue 45), ``doctest``, ``timeit``; and past the runtime check: ``do_execute`` replaced on
  ipykernel's class (the handler stays ipykernel's own), or the route installed by the first
  timed call, after the switch (and its check) opened;
- **the tare**: what an empty block costs, if read in the student's kernel, made dear;
- **statistics**: each part of a round (making the inputs, the block, reading the outputs
  back, the rest) is charged its own median excess over the clean kernel, so work moved to a
  different part in turn, each part carrying it in fewer than half the rounds, moves no median
  (the whole GELU moved, which leaves the blocks uneven and the interval wide; or half of it
  moved with the blocks kept even, through a route installed after the switch opened, or
  through the shell's ``user_expressions``, which the runtime check does not read);
- **request cost without the kernel object**: the output streams replaced by plain files
  (ipykernel flushes ``sys.stdout`` and ``sys.stderr`` around every request, each a hand-off
  to its IOPub thread) and the garbage collector frozen, all through functions the review
  allows (``contextlib``, ``gc``);
- **the clock**: work put off after the block (a thread finishes the outputs while the grader
  reads them back), with one call per block forced by a dear call right after the warm-up
  (issue 45); for ``fast_step``, whose slow baseline leaves only a few calls per block, the
  last call's update finished by a thread;
- **scope**: memory the function writes pre-faulted by a thread while the kernel is idle, so
  that page faults (the cost chapter 08's in-place fix removes) are paid outside the calls;
- **the grader's environment**: the tricks above switched on only when the kernel can tell it is
  graded (a sandbox with no network and its own control group).

The honest alternatives (:data:`HONEST`) are different correct code a good student writes; each
must keep full marks: the cube by multiplying with ``np.multiply``/``np.tanh(out=...)`` buffers,
a GELU careful of its dtype, the sigmoid form of the tanh, a GELU computed a block of rows at a
time, a GELU split over two threads joined before it returns, the chapter's solution of
``fast_step`` and a float32 step written another way.

tests/test_redteam_speed.py grades each one for real, through the grader's Execute preprocessor
in the bubblewrap sandbox, with the chapter's own test cell.
"""

from __future__ import annotations

#: The answer cells' set-up: what the chapter's set-up cell gives every answer.
SETUP = """import numpy as np
import tinyprof as tp
from tinyprof.faster import pipeline
from tinyprof.testing import expect_faster, reference_unavailable, same, which

images, labels = tp.models.datasets.digits_arrays()
MAX_SHIFT = pipeline.MAX_SHIFT
FEATURES, HIDDEN, CLASSES = pipeline.FEATURES, pipeline.HIDDEN, pipeline.CLASSES
LEARNING_RATE, WEIGHT_DECAY = pipeline.LEARNING_RATE, pipeline.WEIGHT_DECAY
SMOOTHING, GELU_C = pipeline.SMOOTHING, pipeline.GELU_C
"""

# --- building blocks of the cheats --------------------------------------------------------------

#: A GELU exactly as slow as ``pipeline.gelu_slow`` (the formula as it reads, x ** 3 and fresh
#: arrays), split so that a cheat can put off its second half: ``slow_t`` is the tanh (the
#: power function: most of the time), ``slow_finish`` writes y and y' from it.
SLOW_PARTS = """
def slow_t(h):
    return np.tanh(GELU_C * (h + 0.044715 * h ** 3))

def slow_finish(h, t, y, dy):
    y[...] = 0.5 * h * (1 + t)
    dy[...] = 0.5 * (1 + t) + 0.5 * h * (1 - t ** 2) * GELU_C * (1 + 3 * 0.044715 * h ** 2)
"""

#: A GELU that is only a little faster than gelu_slow (x ** 3 kept, a temporary or two fewer):
#: the student who misses the tier by a little and looks for the rest elsewhere.
NEAR_MISS = """
def near_miss_gelu(h):
    cube = h ** 3
    t = np.tanh(GELU_C * (h + 0.044715 * cube))
    one_plus = 1 + t
    y = 0.5 * h * one_plus
    dy = 0.5 * one_plus + 0.5 * h * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * h * h)
    return y, dy
"""

#: Issue 45's forcing of one call per block: the grader's warm-up block runs under the switch's
#: profile hook (``sys.getprofile()`` is set, which any code can read), and the block right
#: after it chooses ``calls`` from the candidate's time; a call there made dear (80 ms of CPU)
#: makes the grader choose one call per block.
FORCE_ONE_CALL = """
import sys, time
_seen = {"watched": False, "spent": False}

def one_call_per_block():
    if sys.getprofile() is not None:
        _seen["watched"] = True
    elif _seen["watched"] and not _seen["spent"]:
        _seen["spent"] = True
        began = time.process_time()
        while time.process_time() - began < 0.08:
            pass
"""

#: The student's shorter route for the grader's requests: an execute handler that answers a
#: silent request whose only expression is the grader's (tinyprof.wire's format) by calling
#: tinyprof.remote.answer itself, without IPython's cell machinery and the stream flushes, after
#: waiting for the threads in the notebook's ``WAITING`` (work the function put off), and hands
#: every other request to ipykernel's handler.
QUICK_KERNEL = r'''
import re
import tinyprof.remote as remote
from IPython import get_ipython as _shell

def _install(shell, kernel):
    ordinary = kernel.shell_handlers["execute_request"]
    asked = re.compile(r'^__import__\("tinyprof\.remote"\)\.remote\.answer\("([A-Za-z0-9+/=]*)"\)$')

    async def quick_execute(stream, ident, parent):
        content = parent.get("content", {})
        expressions = content.get("user_expressions") or {}
        found = [asked.match(text) for text in expressions.values()]
        if content.get("code") or not content.get("silent") or not found or not all(found):
            return await ordinary(stream, ident, parent)
        waiting = shell.user_ns.get("WAITING", [])
        while waiting:
            waiting.pop().join()
        values = {key: {"status": "ok", "metadata": {},
                        "data": {"text/plain": repr(remote.answer(match.group(1)))}}
                  for key, match in zip(expressions, found)}
        kernel.session.send(stream, "execute_reply",
                            {"status": "ok", "execution_count": kernel.execution_count,
                             "user_expressions": values, "payload": []},
                            parent, ident=ident)

    kernel.shell_handlers["execute_request"] = quick_execute

_install(_shell(), _shell().kernel)
'''

#: A GELU as slow as gelu_slow whose last part (y and y' from the tanh) a thread finishes after
#: the call returns; the quick route waits for it before it answers the grader's next request.
DEFERRING_GELU = SLOW_PARTS + FORCE_ONE_CALL + """
import threading
WAITING = []

def gelu_with_grad(h):
    one_call_per_block()
    t = slow_t(h)
    y, dy = np.empty_like(h), np.empty_like(h)
    worker = threading.Thread(target=slow_finish, args=(h, t, y, dy))
    worker.start()
    WAITING.append(worker)
    return y, dy
"""


def _quick_kernel_source() -> str:
    """QUICK_KERNEL as one string constant of the cell (the review reads no string)."""
    return "QUICK_KERNEL = " + repr(QUICK_KERNEL) + "\n"


# --- the cheats ---------------------------------------------------------------------------------

CHEATS: dict[str, str] = {}

CHEATS["issue 45: the quick route reached through get_ipython under another name"] = (
    '"""The kernel\'s request handling replaced (issue 45): get_ipython imported under another '
    'name, .kernel unpacked from a tuple."""\n' + DEFERRING_GELU + """
import re
import tinyprof.remote as remote
from IPython import get_ipython as notebook_shell
(shell, kernel) = (notebook_shell(), notebook_shell().kernel)
ordinary = kernel.shell_handlers["execute_request"]
asked = re.compile(r'^__import__\\("tinyprof\\.remote"\\)\\.remote\\.answer'
                   r'\\("([A-Za-z0-9+/=]*)"\\)$')

async def quick_execute(stream, ident, parent):
    content = parent.get("content", {})
    expressions = content.get("user_expressions") or {}
    found = [asked.match(text) for text in expressions.values()]
    if content.get("code") or not content.get("silent") or not found or not all(found):
        return await ordinary(stream, ident, parent)
    while WAITING:
        WAITING.pop().join()
    values = {key: {"status": "ok", "metadata": {},
                    "data": {"text/plain": repr(remote.answer(match.group(1)))}}
              for key, match in zip(expressions, found)}
    kernel.session.send(stream, "execute_reply",
                        {"status": "ok", "execution_count": kernel.execution_count,
                         "user_expressions": values, "payload": []}, parent, ident=ident)

handlers = kernel.shell_handlers
handlers.update(execute_request=quick_execute)
""")

CHEATS["the quick route installed from a %time line magic"] = (
    '"""The kernel\'s request handling replaced by code in a %time magic\'s argument, which the '
    'review does not read."""\n' + DEFERRING_GELU + _quick_kernel_source()
    + "%time exec(QUICK_KERNEL, {'__name__': 'timed'})\n")

CHEATS["the quick route run by cProfile.run on a string"] = (
    '"""The kernel\'s request handling replaced by a string that cProfile.run executes (the '
    'chapter\'s own profiler)."""\n' + DEFERRING_GELU + _quick_kernel_source() + """
import cProfile
cProfile.Profile().run(QUICK_KERNEL)
""")

CHEATS["the quick route read by runpy from a file not named .py"] = (
    '"""The kernel\'s request handling replaced by a file written as .txt and run by runpy."""\n'
    + DEFERRING_GELU + _quick_kernel_source() + """
import runpy, tempfile
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as notes:
    notes.write(QUICK_KERNEL)
runpy.run_path(notes.name)
""")

CHEATS["issue 45: the quick route run by pickle.loads"] = (
    '"""The kernel\'s request handling replaced by an object whose __reduce__ runs it when '
    'unpickled (issue 45)."""\n' + DEFERRING_GELU + _quick_kernel_source() + """
import pickle

class Settings:
    def __reduce__(self):
        return (exec, (QUICK_KERNEL, {"__name__": "settings"}))

pickle.loads(pickle.dumps(Settings()))
""")

#: The quick route, and an empty block (the request the grader may use as its tare, in this
#: kernel) made to cost 40 ms of CPU: what is taken off every block grows.
DEAR_TARE = QUICK_KERNEL.replace(
    "        values = {key:",
    """        answers = [remote.answer(match.group(1)) for match in found]
        kept = vars(remote)["_objects"]
        if kept and isinstance(kept[-1], list) and not kept[-1]:
            import time
            began = time.process_time()
            while time.process_time() - began < 0.04:
                pass
        values = {key:""").replace("repr(remote.answer(match.group(1)))", "repr(answers[0])")

CHEATS["the tare made dear: an empty block costs the kernel 40 ms"] = (
    '"""The tare: an empty block request, if the grader reads its cost in this kernel, burns 40 '
    'ms, which is then taken off every block."""\n' + SLOW_PARTS + """
def gelu_with_grad(h):
    t = slow_t(h)
    y, dy = np.empty_like(h), np.empty_like(h)
    slow_finish(h, t, y, dy)
    return y, dy

DEAR_TARE = """ + repr(DEAR_TARE) + """
import code
code.InteractiveInterpreter({"__name__": "setup"}).runsource(DEAR_TARE, "<settings>", "exec")
""")

#: Kernel-wide settings that make the grader's requests cheaper in this kernel, through
#: functions the review allows.
CHEAPER_REQUESTS = """
import contextlib, gc, os
quiet_out = contextlib.redirect_stdout(open(os.devnull, "w"))
quiet_err = contextlib.redirect_stderr(open(os.devnull, "w"))
quiet_out.__enter__()
quiet_err.__enter__()
gc.collect()
gc.freeze()
gc.disable()
"""

CHEATS["cheaper requests without the kernel object: plain-file streams, gc frozen"] = (
    '"""Request cost the kernel can influence without touching the kernel object: output streams '
    'replaced by plain files, the collector frozen and off."""\n' + NEAR_MISS
    + FORCE_ONE_CALL + CHEAPER_REQUESTS + """
def gelu_with_grad(h):
    one_call_per_block()
    y, dy = near_miss_gelu(h)
    return y, dy
""")

CHEATS["issue 45: a thread finishes the outputs while the grader reads them back"] = (
    '"""The clock: one call per block forced, y and y\' finished by a thread after the call '
    'returns, while the grader reads the outputs back (issue 45, no kernel access)."""\n'
    + SLOW_PARTS + FORCE_ONE_CALL + """
import threading

def gelu_with_grad(h):
    one_call_per_block()
    t = slow_t(h)
    y, dy = np.empty_like(h), np.empty_like(h)
    threading.Thread(target=slow_finish, args=(h, t, y, dy)).start()
    return y, dy
""")

CHEATS["pre-faulted memory: buffers touched by a thread while the kernel is idle"] = (
    '"""Scope: the pages the function writes are faulted in by a thread while the kernel waits '
    'for the grader, so that the calls pay no page faults."""\n' + NEAR_MISS + """
import queue, threading, time
READY = queue.Queue()
_last_call = [0.0]

def _touched():
    buffer = np.empty(256 * 512)
    buffer[::512] = 0.0          # one write per 4 kB page: every page faulted in
    return buffer

def _keep_ready():
    while True:
        if time.monotonic() - _last_call[0] > 0.003 and READY.qsize() < 160:
            READY.put(_touched())
        else:
            time.sleep(0.001)

threading.Thread(target=_keep_ready, daemon=True).start()

def _buffer(like):
    if like.size != 256 * 512 or like.dtype != np.float64:
        return np.empty_like(like)
    try:
        return READY.get_nowait().reshape(like.shape)
    except queue.Empty:
        return np.empty_like(like)

def gelu_with_grad(h):
    _last_call[0] = time.monotonic()
    t, y, dy, x2 = _buffer(h), _buffer(h), _buffer(h), _buffer(h)
    np.power(h, 3, out=t)
    t *= 0.044715
    t += h
    t *= GELU_C
    np.tanh(t, out=t)
    np.multiply(h, h, out=x2)
    x2 *= 3 * 0.044715
    x2 += 1
    np.multiply(t, t, out=dy)
    np.subtract(1, dy, out=dy)
    dy *= h
    dy *= 0.5 * GELU_C
    dy *= x2
    t += 1
    t *= 0.5
    dy += t
    np.multiply(t, h, out=y)
    _last_call[0] = time.monotonic()
    return y, dy
""")

CHEATS["the grader's environment told apart: cheaper requests only when graded"] = (
    '"""The environment: the request-cost settings switched on only in a kernel with no network '
    'and a control group of its own (the grader\'s sandbox)."""\n' + NEAR_MISS + FORCE_ONE_CALL
    + """
import urllib.request

def graded():
    try:
        with open("/proc/self/cgroup") as groups:
            own_group = "tinyprof" in groups.read()
    except OSError:
        own_group = False
    try:
        urllib.request.urlopen("http://1.1.1.1", timeout=0.3).close()
        online = True
    except OSError:
        online = False
    return own_group or not online

if graded():
""" + "".join("    " + line + "\n" for line in CHEAPER_REQUESTS.strip().splitlines()) + """
def gelu_with_grad(h):
    one_call_per_block()
    return near_miss_gelu(h)
""")

#: The quick route one level down: ipykernel's own execute handler is kept (the bound method in
#: ``shell_handlers``), but the class's ``do_execute``, which it calls, answers the grader's
#: expression directly; the streams it flushes afterwards are plain files (contextlib).
QUICK_DO_EXECUTE = r'''
import contextlib, os, re
import ipykernel.ipkernel as ipkernel
import tinyprof.remote as remote

ordinary = ipkernel.IPythonKernel.do_execute
asked = re.compile(r'^__import__\("tinyprof\.remote"\)\.remote\.answer\("([A-Za-z0-9+/=]*)"\)$')

async def do_execute(self, code, silent, store_history=True, user_expressions=None,
                     allow_stdin=False, **more):
    expressions = user_expressions or {}
    found = [asked.match(text) for text in expressions.values()]
    if code or not silent or not found or not all(found):
        return await ordinary(self, code, silent, store_history, user_expressions, allow_stdin,
                              **more)
    waiting = self.shell.user_ns.get("WAITING", [])
    while waiting:
        waiting.pop().join()
    return {"status": "ok", "execution_count": self.execution_count, "payload": [],
            "user_expressions": {key: {"status": "ok", "metadata": {},
                                       "data": {"text/plain": repr(remote.answer(m.group(1)))}}
                                 for key, m in zip(expressions, found)}}

ipkernel.IPythonKernel.do_execute = do_execute
contextlib.redirect_stdout(open(os.devnull, "w")).__enter__()
contextlib.redirect_stderr(open(os.devnull, "w")).__enter__()
'''

CHEATS["the quick route one level down: do_execute replaced on ipykernel's class"] = (
    '"""The kernel\'s request handling replaced below its handler (the handler stays ipykernel\'s '
    'own), run by timeit from a string."""\n' + DEFERRING_GELU + "QUICK_DO_EXECUTE = "
    + repr(QUICK_DO_EXECUTE) + """
import timeit
timeit.timeit(QUICK_DO_EXECUTE, number=1)
""")

#: The quick route that installs itself only once a switch is open and removes itself as soon
#: as a request arrives with the switch closed: a runtime check made when the switch opens or
#: after it closes sees ipykernel's own handler.
PASSING_KERNEL = QUICK_KERNEL.replace(
    """        content = parent.get("content", {})
""", """        if not vars(remote)["_switch"]:
            kernel.shell_handlers["execute_request"] = ordinary
            shell.user_ns["INSTALLED"][0] = False
            return await ordinary(stream, ident, parent)
        content = parent.get("content", {})
""").replace("""    kernel.shell_handlers["execute_request"] = quick_execute
""", """    kernel.shell_handlers["execute_request"] = quick_execute
    shell.user_ns["INSTALLED"][0] = True
""")

CHEATS["the quick route installed in the timed block and gone when the switch closes"] = (
    '"""The kernel\'s request handling replaced only between the switch\'s opening and its '
    'closing (installed by the first timed call), out of a runtime check\'s sight."""\n'
    + SLOW_PARTS + FORCE_ONE_CALL + "PASSING_KERNEL = " + repr(PASSING_KERNEL) + """
import runpy, tempfile, threading
WAITING, INSTALLED = [], [False]
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as notes:
    notes.write(PASSING_KERNEL)

def gelu_with_grad(h):
    one_call_per_block()
    if sys.getprofile() is None and not INSTALLED[0] and _seen["watched"]:
        runpy.run_path(notes.name)
    t = slow_t(h)
    y, dy = np.empty_like(h), np.empty_like(h)
    if not INSTALLED[0]:
        slow_finish(h, t, y, dy)
        return y, dy
    worker = threading.Thread(target=slow_finish, args=(h, t, y, dy))
    worker.start()
    WAITING.append(worker)
    return y, dy
""")

#: The statistics of the per-part charge: each part of a round (making the inputs, the block,
#: reading the outputs back) is charged its median excess over the clean kernel, part by part.
#: The quick route, installed once the switch is open and gone when it closes (as above), moves
#: the function's work into a different part in turn: in one round of three the whole GELU is
#: computed while the grader's inputs are made (the make request), in the next the last third
#: of it while the outputs are read back (the pick request), in the third the function does it
#: all in its block. Each part carries the work in fewer than half the rounds, so no part's
#: median moves, and the block's median is the round that did two thirds of the work.
ROTATING_KERNEL = r"""
import base64, io, pickle, re
import tinyprof.remote as remote
from IPython import get_ipython as _shell

class _Peek(pickle.Unpickler):
    def persistent_load(self, pid):
        return None

def _install(shell, kernel):
    ordinary = kernel.shell_handlers["execute_request"]
    asked = re.compile(r'^__import__\("tinyprof\.remote"\)\.remote\.answer\("([A-Za-z0-9+/=]*)"\)$')
    state = shell.user_ns["STATE"]
    kept = vars(remote)["_objects"]

    async def rotating_execute(stream, ident, parent):
        if not vars(remote)["_switch"]:
            kernel.shell_handlers["execute_request"] = ordinary
            state["installed"] = False
            return await ordinary(stream, ident, parent)
        content = parent.get("content", {})
        expressions = content.get("user_expressions") or {}
        found = [asked.match(text) for text in expressions.values()]
        if content.get("code") or not content.get("silent") or len(found) != 1 or not found[0]:
            return await ordinary(stream, ident, parent)
        payload = found[0].group(1)
        kind = _Peek(io.BytesIO(base64.b64decode(payload))).load()[0]
        if kind == "make":
            state["round"] += 1
            state["where"] = ("make", "pick", "block")[state["round"] % 3]
        if kind == "pick":
            while state["pending"]:
                state["pending"].pop()()
        state["in_block"] = kind == "time"
        answer = remote.answer(payload)
        state["in_block"] = False
        if kind == "make" and state["where"] == "make" and kept and isinstance(kept[-1], list):
            for args in kept[-1]:
                state["ready"][id(args[0])] = shell.user_ns["whole_gelu"](args[0])
        kernel.session.send(stream, "execute_reply",
                            {"status": "ok", "execution_count": kernel.execution_count,
                             "user_expressions": {key: {"status": "ok", "metadata": {},
                                                        "data": {"text/plain": repr(answer)}}
                                                  for key in expressions},
                             "payload": []}, parent, ident=ident)

    kernel.shell_handlers["execute_request"] = rotating_execute
    state["installed"] = True

_install(_shell(), _shell().kernel)
"""

CHEATS["per-part medians: the work moved to another part of the round in turn"] = (
    '"""Statistics: each part of a round is charged its own median excess, so work moved into '
    'a different part in turn (make, read-back, block) moves no median."""\n' + SLOW_PARTS + """
import runpy, sys, tempfile
STATE = {"installed": False, "round": 0, "where": "block", "in_block": False, "pending": [],
         "ready": {}}
ROTATING_KERNEL = """ + repr(ROTATING_KERNEL) + """
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as notes:
    notes.write(ROTATING_KERNEL)

def whole_gelu(h):
    y, dy = np.empty_like(h), np.empty_like(h)
    slow_finish(h, slow_t(h), y, dy)
    return y, dy

def gelu_with_grad(h):
    timed = sys.getprofile() is None
    if timed and not STATE["installed"]:
        runpy.run_path(notes.name)
    if not (timed and STATE["installed"] and STATE["in_block"]):
        return whole_gelu(h)
    if STATE["where"] == "make":
        ready = STATE["ready"].pop(id(h), None)
        if ready is not None:
            return ready
    if STATE["where"] == "pick":
        cube = h ** 3
        y, dy = np.empty_like(h), np.empty_like(h)
        def finish():
            slow_finish(h, np.tanh(GELU_C * (h + 0.044715 * cube)), y, dy)
        STATE["pending"].append(finish)
        return y, dy
    return whole_gelu(h)
""")

#: The same, with the block kept even so that the interval stays narrow: every block computes the
#: GELU of the first half of the rows; the second half is computed in another part of the round
#: in turn: while the inputs are made, after the block's answer is sent (while the grader talks
#: to the clean kernel: only in rounds where the candidate goes first, which the kernel tells from
#: the time since its last read-back: the baseline's block, at least 0.1 s, lies between them
#: otherwise), or while the outputs are read back, whichever has carried it least often so far.
#: A thread puts ipykernel's handler back as soon as the switch closes, before the next test
#: opens it again.
EVEN_KERNEL = r"""
import base64, io, pickle, re, threading, time
import tinyprof.remote as remote
from IPython import get_ipython as _shell

class _Peek(pickle.Unpickler):
    def persistent_load(self, pid):
        return None

def _install(shell, kernel):
    ordinary = kernel.shell_handlers["execute_request"]
    asked = re.compile(r'^__import__\("tinyprof\.remote"\)\.remote\.answer\("([A-Za-z0-9+/=]*)"\)$')
    state = shell.user_ns["STATE"]
    kept = vars(remote)["_objects"]
    ahead = shell.user_ns["ahead"]

    def run_pending():
        while state["pending"]:
            state["pending"].pop()()

    async def even_execute(stream, ident, parent):
        if not vars(remote)["_switch"]:
            kernel.shell_handlers["execute_request"] = ordinary
            state["installed"] = False
            return await ordinary(stream, ident, parent)
        content = parent.get("content", {})
        expressions = content.get("user_expressions") or {}
        found = [asked.match(text) for text in expressions.values()]
        if content.get("code") or not content.get("silent") or len(found) != 1 or not found[0]:
            return await ordinary(stream, ident, parent)
        payload = found[0].group(1)
        kind = _Peek(io.BytesIO(base64.b64decode(payload))).load()[0]
        if kind == "make":
            gap = time.monotonic() - state["last_pick"]
            state["shortest"] = min(state.get("shortest", gap), gap)
            first = gap < max(0.1, state["shortest"] + 0.05)
            allowed = ("other", "make", "pick") if first else ("make", "pick")
            state["where"] = min(allowed, key=lambda part: state["count"][part])
            state["count"][state["where"]] += 1
        if kind == "pick":
            run_pending()
        state["in_block"] = kind == "time"
        answer = remote.answer(payload)
        state["in_block"] = False
        if kind == "make" and state["where"] == "make" and kept and isinstance(kept[-1], list):
            for args in kept[-1] if state["every_call"] else kept[-1][:1]:
                state["ready"][id(args[0])] = ahead(*args)
        kernel.session.send(stream, "execute_reply",
                            {"status": "ok", "execution_count": kernel.execution_count,
                             "user_expressions": {key: {"status": "ok", "metadata": {},
                                                        "data": {"text/plain": repr(answer)}}
                                                  for key in expressions},
                             "payload": []}, parent, ident=ident)
        if kind == "time" and state["where"] == "other":
            run_pending()
        if kind == "pick":
            state["last_pick"] = time.monotonic()

    def restore_when_closed():
        while vars(remote)["_switch"]:
            time.sleep(0.001)
        kernel.shell_handlers["execute_request"] = ordinary
        state["installed"] = False

    kernel.shell_handlers["execute_request"] = even_execute
    state["installed"] = True
    threading.Thread(target=restore_when_closed, daemon=True).start()

_install(_shell(), _shell().kernel)
"""

CHEATS["per-part medians: half the work moved to another part in turn, the block even"] = (
    '"""Statistics: each part of a round is charged its own median excess, so half the work, '
    'moved to a different part in turn (make, after the block, read-back), moves no median; '
    'the block stays even."""\n' + SLOW_PARTS + """
import runpy, sys, tempfile
STATE = {"installed": False, "where": "block", "in_block": False, "pending": [], "ready": {},
         "last_pick": 0.0, "count": {"make": 0, "pick": 0, "other": 0}, "every_call": True}
EVEN_KERNEL = """ + repr(EVEN_KERNEL) + """
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as notes:
    notes.write(EVEN_KERNEL)

def whole_gelu(h):
    y, dy = np.empty_like(h), np.empty_like(h)
    slow_finish(h, slow_t(h), y, dy)
    return y, dy

def half_into(h, y, dy, rows):
    slow_finish(h[rows], slow_t(h[rows]), y[rows], dy[rows])

def ahead(h):
    y, dy = np.empty_like(h), np.empty_like(h)
    half_into(h, y, dy, slice(h.shape[0] // 2, None))
    return y, dy

def gelu_with_grad(h):
    timed = sys.getprofile() is None
    if timed and not STATE["installed"]:
        runpy.run_path(notes.name)
    if not (timed and STATE["installed"] and STATE["in_block"]):
        return whole_gelu(h)
    first, second = slice(0, h.shape[0] // 2), slice(h.shape[0] // 2, None)
    ready = STATE["ready"].pop(id(h), None) if STATE["where"] == "make" else None
    y, dy = ready if ready is not None else (np.empty_like(h), np.empty_like(h))
    half_into(h, y, dy, first)
    if ready is None:
        STATE["pending"].append(lambda: half_into(h, y, dy, second))
    return y, dy
""")

#: The same rotation, one object further from the runtime check: the kernel, its session and its
#: comm manager stay ipykernel's own, and the shell's ``user_expressions`` (an attribute of the
#: shell object, which ipykernel's ``do_execute`` calls for every request of the grader's) is
#: replaced from the start; work for after the block's answer is left to the kernel's event loop.
SHELL_KERNEL = r"""
import asyncio, base64, io, pickle, re, time
import tinyprof.remote as remote
from IPython import get_ipython as _shell

class _Peek(pickle.Unpickler):
    def persistent_load(self, pid):
        return None

def _install(shell):
    ordinary = shell.user_expressions
    asked = re.compile(r'^__import__\("tinyprof\.remote"\)\.remote\.answer\("([A-Za-z0-9+/=]*)"\)$')
    state = shell.user_ns["STATE"]
    kept = vars(remote)["_objects"]
    ahead = shell.user_ns["ahead"]

    def run_pending():
        while state["pending"]:
            state["pending"].pop()()

    def user_expressions(expressions):
        found = [asked.match(text) for text in expressions.values()]
        if not vars(remote)["_switch"] or len(found) != 1 or not found[0]:
            return ordinary(expressions)
        payload = found[0].group(1)
        kind = _Peek(io.BytesIO(base64.b64decode(payload))).load()[0]
        if kind == "make":
            gap = time.monotonic() - state["last_pick"]
            state["shortest"] = min(state.get("shortest", gap), gap)
            first = gap < max(0.1, state["shortest"] + 0.05)
            allowed = ("other", "make", "pick") if first else ("make", "pick")
            state["where"] = min(allowed, key=lambda part: state["count"][part])
            state["count"][state["where"]] += 1
        if kind == "pick":
            run_pending()
        state["in_block"] = kind == "time"
        answer = remote.answer(payload)
        state["in_block"] = False
        if kind == "make" and state["where"] == "make" and kept and isinstance(kept[-1], list):
            for args in kept[-1]:
                state["ready"][id(args[0])] = ahead(*args)
        if kind == "time" and state["where"] == "other":
            asyncio.get_event_loop().call_soon(run_pending)
        if kind == "pick":
            state["last_pick"] = time.monotonic()
        return {key: {"status": "ok", "metadata": {}, "data": {"text/plain": repr(answer)}}
                for key in expressions}

    shell.user_expressions = user_expressions
    state["installed"] = True

_install(_shell())
"""

CHEATS["per-part medians, through the shell: user_expressions replaced from the start"] = (
    '"""Statistics as above, through an object the runtime check does not read: the shell\'s '
    'user_expressions, replaced once by a string run by timeit."""\n' + SLOW_PARTS + """
import sys, timeit
STATE = {"installed": False, "where": "block", "in_block": False, "pending": [], "ready": {},
         "last_pick": 0.0, "count": {"make": 0, "pick": 0, "other": 0}}
SHELL_KERNEL = """ + repr(SHELL_KERNEL) + """

def whole_gelu(h):
    y, dy = np.empty_like(h), np.empty_like(h)
    slow_finish(h, slow_t(h), y, dy)
    return y, dy

def half_into(h, y, dy, rows):
    slow_finish(h[rows], slow_t(h[rows]), y[rows], dy[rows])

def ahead(h):
    y, dy = np.empty_like(h), np.empty_like(h)
    half_into(h, y, dy, slice(h.shape[0] // 2, None))
    return y, dy

timeit.timeit(SHELL_KERNEL, number=1)

def gelu_with_grad(h):
    if not (sys.getprofile() is None and STATE["in_block"]):
        return whole_gelu(h)
    first, second = slice(0, h.shape[0] // 2), slice(h.shape[0] // 2, None)
    ready = STATE["ready"].pop(id(h), None) if STATE["where"] == "make" else None
    y, dy = ready if ready is not None else (np.empty_like(h), np.empty_like(h))
    half_into(h, y, dy, first)
    if ready is None:
        STATE["pending"].append(lambda: half_into(h, y, dy, second))
    return y, dy
""")

# --- fast_step: a slow baseline leaves only a few calls per block -------------------------------

#: A float32 step with the data set kept in memory, but its statistics computed again at every
#: step, the batch loaded a sample at a time and the loss computed a row at a time (the student
#: who is short of the 6× tier).
STEP_NEAR_MISS = """
up = images.reshape(-1, 8, 8).repeat(2, axis=1).repeat(2, axis=2)
PADDED = np.pad(up.astype(np.float32), ((0, 0), (2, 2), (2, 2)))
LABELS = labels.astype(np.int64)

def forward(weights, batch):
    idx, shifts = batch["indices"], batch["shifts"]
    n = len(idx)
    low, mid, high = np.percentile(up.reshape(-1, 256).astype(np.float32), [5, 50, 95], axis=0)
    CENTRE, SCALE = mid.astype(np.float32), (high - low + 1).astype(np.float32)
    x = np.empty((n, 256), dtype=np.float32)
    for i, (k, (dy, dx)) in enumerate(zip(idx, shifts)):
        x[i] = (PADDED[k, 2 - dy:18 - dy, 2 - dx:18 - dx].reshape(-1) - CENTRE) / SCALE
    w = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items()}
    h = x @ w["W1"] + w["b1"]
    t = np.tanh(GELU_C * (h + 0.044715 * h * h * h))
    a = 0.5 * h * (1 + t)
    da = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * h * h)
    z = a @ w["W2"] + w["b2"]
    total, dz = 0.0, np.empty_like(z)
    for i in range(n):
        row = z[i] - z[i].max()
        logp = row - np.log(np.exp(row).sum())
        target = np.full(CLASSES, SMOOTHING / CLASSES, dtype=z.dtype)
        target[LABELS[idx[i]]] += 1 - SMOOTHING
        total += -(target * logp).sum()
        dz[i] = (np.exp(logp) - target) / n
    return float(total / n), w, x, a, da, dz

def update(w, g):
    return w - LEARNING_RATE * (g + WEIGHT_DECAY * w)
"""

TARGETS = {}

CHEATS["fast_step: the last call's update finished by a thread during the read-back"] = (
    '"""The clock, where the slow baseline leaves a few calls per block: each step\'s largest '
    'update (W1) is finished by a thread after it returns, waited for only by the next call."""\n'
    + STEP_NEAR_MISS + """
import threading
_pending = []

def _finish_w1(w, x, dh, out):
    out[...] = update(w["W1"], x.T @ dh)

def fast_step(weights, batch):
    while _pending:
        _pending.pop().join()
    loss, w, x, a, da, dz = forward(weights, batch)
    dh = (dz @ w["W2"].T) * da
    new = {"W1": np.empty_like(w["W1"]), "b1": update(w["b1"], dh.sum(0)),
           "W2": update(w["W2"], a.T @ dz), "b2": update(w["b2"], dz.sum(0))}
    worker = threading.Thread(target=_finish_w1, args=(w, x, dh, new["W1"]))
    worker.start()
    _pending.append(worker)
    return loss, new
""")
TARGETS["fast_step: the last call's update finished by a thread during the read-back"] = \
    "fast_step"

CHEATS["fast_step: the quick route, a few calls per block"] = (
    '"""The kernel\'s request handling replaced where blocks are short (a few calls of a slow '
    'baseline), run by doctest from a docstring."""\n' + STEP_NEAR_MISS + """
WAITING = []

def fast_step(weights, batch):
    loss, w, x, a, da, dz = forward(weights, batch)
    dh = (dz @ w["W2"].T) * da
    grads = {"W1": x.T @ dh, "b1": dh.sum(0), "W2": a.T @ dz, "b2": dz.sum(0)}
    return loss, {k: update(w[k], grads[k]) for k in w}
""" + _quick_kernel_source() + '''
import doctest

def settings():
    """
    >>> exec(QUICK_KERNEL, {"__name__": "settings"})
    """

doctest.run_docstring_examples(settings, {"QUICK_KERNEL": QUICK_KERNEL}, name="settings")
''')
TARGETS["fast_step: the quick route, a few calls per block"] = "fast_step"


# --- honest alternatives --------------------------------------------------------------------------

HONEST: dict[str, str] = {}

HONEST["the cube by multiplying, np.multiply and np.tanh into buffers"] = '''
def gelu_with_grad(h):
    """GELU and GELU' with x³ as x·x·x and every operation written into three buffers."""
    square = np.multiply(h, h)
    inner = np.multiply(square, h)
    inner *= 0.044715
    np.add(inner, h, out=inner)
    inner *= GELU_C
    t = np.tanh(inner, out=inner)
    dy = np.multiply(t, t)
    np.subtract(1.0, dy, out=dy)
    np.multiply(dy, h, out=dy)
    dy *= 0.5 * GELU_C
    np.multiply(square, 3 * 0.044715, out=square)
    square += 1.0
    dy *= square
    t += 1.0
    t *= 0.5
    dy += t
    np.multiply(t, h, out=t)
    return t, dy
'''

HONEST["a GELU careful of its dtype"] = '''
def gelu_with_grad(h):
    """Every constant and buffer in h's own dtype: float64 stays float64, float32 float32."""
    dtype = h.dtype.type
    c, k = dtype(GELU_C), dtype(0.044715)
    half, one, three_k = dtype(0.5), dtype(1), dtype(3 * 0.044715)
    x2 = np.empty_like(h)
    t = np.empty_like(h)
    dy = np.empty_like(h)
    np.multiply(h, h, out=x2)
    np.multiply(x2, k, out=t)
    t += one
    t *= h
    t *= c
    np.tanh(t, out=t)
    np.multiply(t, t, out=dy)
    np.subtract(one, dy, out=dy)
    dy *= h
    dy *= half * c
    x2 *= three_k
    x2 += one
    dy *= x2
    t += one
    t *= half
    dy += t
    t *= h
    return t, dy
'''

HONEST["the sigmoid form of the tanh"] = '''
def gelu_with_grad(h):
    """½(1 + tanh z) = 1 / (1 + e^(−2z)), so GELU = h·s and GELU' = s + h·s(1 − s)·2c(1 + 3kh²)."""
    z = h * h
    z *= 0.044715
    z += 1.0
    z *= h
    z *= -2.0 * GELU_C
    np.exp(z, out=z)
    z += 1.0
    s = np.reciprocal(z, out=z)
    dy = 1.0 - s
    dy *= s
    dy *= 2.0 * GELU_C
    dy *= h
    x2 = h * h
    x2 *= 3 * 0.044715
    x2 += 1.0
    dy *= x2
    dy += s
    return s * h, dy
'''

HONEST["a GELU a block of rows at a time"] = '''
ROWS = 32

def gelu_with_grad(h):
    """The fast formula on 32 rows at a time (the temporaries stay in cache), into two outputs."""
    y, dy = np.empty_like(h), np.empty_like(h)
    for start in range(0, h.shape[0], ROWS):
        x = h[start:start + ROWS]
        x2 = x * x
        t = x2 * 0.044715
        t += 1.0
        t *= x
        t *= GELU_C
        np.tanh(t, out=t)
        d = dy[start:start + ROWS]
        np.multiply(t, t, out=d)
        np.subtract(1.0, d, out=d)
        d *= x
        d *= 0.5 * GELU_C
        x2 *= 3 * 0.044715
        x2 += 1.0
        d *= x2
        t += 1.0
        t *= 0.5
        d += t
        np.multiply(t, x, out=y[start:start + ROWS])
    return y, dy
'''

HONEST["a GELU split over two threads, joined before it returns"] = '''
from concurrent.futures import ThreadPoolExecutor
POOL = ThreadPoolExecutor(2)

def _gelu_rows(h, y, dy):
    x2 = h * h
    t = x2 * 0.044715
    t += 1.0
    t *= h
    t *= GELU_C
    np.tanh(t, out=t)
    np.multiply(t, t, out=dy)
    np.subtract(1.0, dy, out=dy)
    dy *= h
    dy *= 0.5 * GELU_C
    x2 *= 3 * 0.044715
    x2 += 1.0
    dy *= x2
    t += 1.0
    t *= 0.5
    dy += t
    np.multiply(t, h, out=y)

def gelu_with_grad(h):
    """Each half of the rows in a thread of a pool; both joined before the call returns."""
    y, dy = np.empty_like(h), np.empty_like(h)
    half = h.shape[0] // 2
    parts = [POOL.submit(_gelu_rows, h[s], y[s], dy[s])
             for s in (slice(0, half), slice(half, None))]
    for part in parts:
        part.result()
    return y, dy
'''


def _solution_fast_step() -> str:
    """The chapter's solution cells that ``fast_step`` uses (load_batch, gelu_with_grad,
    smoothed_loss, fast_step), as the instructor wrote them."""
    from autograder import samples

    answers = samples.solutions("08_faster", "faster.ipynb")
    return "\n\n".join(answers[cell] for cell in ("load_batch", "gelu_with_grad",
                                                  "smoothed_loss", "fast_step"))


HONEST["fast_step: the chapter's solution"] = "SOLUTION_FAST_STEP"
TARGETS["fast_step: the chapter's solution"] = "fast_step"

HONEST["fast_step: float32 written another way"] = '''
UP = images.reshape(-1, 8, 8).repeat(2, axis=1).repeat(2, axis=2)
LOW, MID, HIGH = np.percentile(UP.reshape(-1, FEATURES).astype(np.float32), [5, 50, 95], axis=0)
CENTRE, SCALE = MID.astype(np.float32), (HIGH - LOW + 1).astype(np.float32)
PADDED = np.pad(UP.astype(np.float32), ((0, 0), (MAX_SHIFT, MAX_SHIFT), (MAX_SHIFT, MAX_SHIFT)))
WINDOWS = np.lib.stride_tricks.sliding_window_view(PADDED, (16, 16), axis=(1, 2))
TARGET_OFF = np.float32(SMOOTHING / CLASSES)

def fast_step(weights, batch):
    """The padded images seen through a sliding window (one window per shift), normalised
    after the gather, the loss on all rows at once, the update as decay then step."""
    idx, shifts = batch["indices"], batch["shifts"]
    n = len(idx)
    x = WINDOWS[idx, MAX_SHIFT - shifts[:, 0], MAX_SHIFT - shifts[:, 1]].reshape(n, FEATURES)
    x = (x - CENTRE) / SCALE
    w = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items()}
    h = x @ w["W1"]
    h += w["b1"]
    t = h * h
    t *= 0.044715
    t += 1
    t *= h
    t *= GELU_C
    np.tanh(t, out=t)
    da = 1 - t * t
    da *= h
    da *= 0.5 * GELU_C * (1 + 3 * 0.044715 * h * h)
    t += 1
    t *= 0.5
    da += t
    a = t * h
    z = a @ w["W2"]
    z += w["b2"]
    z -= z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    target = np.full((n, CLASSES), TARGET_OFF, dtype=np.float32)
    target[np.arange(n), labels[idx]] += np.float32(1 - SMOOTHING)
    loss = float(-(target * logp).sum() / n)
    dz = np.exp(logp)
    dz -= target
    dz /= n
    dh = dz @ w["W2"].T
    dh *= da
    grads = {"W1": x.T @ dh, "b1": dh.sum(axis=0), "W2": a.T @ dz, "b2": dz.sum(axis=0)}
    return loss, {k: w[k] * np.float32(1 - LEARNING_RATE * WEIGHT_DECAY)
                  - np.float32(LEARNING_RATE) * grads[k] for k in w}
'''
TARGETS["fast_step: float32 written another way"] = "fast_step"


def answer(name: str) -> str:
    """The answer cell of cheat or honest alternative ``name`` (the chapter's set-up first)."""
    code = CHEATS.get(name) or HONEST[name]
    if code == "SOLUTION_FAST_STEP":
        code = _solution_fast_step()
    return SETUP + code


def target(name: str) -> str:
    """The function the test grades: ``gelu_with_grad`` or ``fast_step``."""
    return TARGETS.get(name, "gelu_with_grad")


__all__ = ["CHEATS", "HONEST", "SETUP", "TARGETS", "answer", "target"]
