"""The grader's layers: every import inside autograder/ points down, nothing imports in a cycle,
and the command line stays light (nbgrader, nbconvert, nbclient and jupyter_client load only
where a notebook is actually run or graded; dask and distributed only with ``--scheduler``).

    base     cells, course, records, launcher, caches,     what every stage shares; launcher.py
             resources, budget, zmqpoll                    runs inside the sandbox
    files    intake, repair, home, report, exercises, lms  reading submissions, writing reports
    kernel   isolation, sandbox                            a student's kernel in its sandbox
    grading  judge, speed, execute, feedback, integrity,   one submission, in a worker process
             worker
    cohort   gradebook, pool, cluster, grade, export       the whole cohort, in the parent (cluster:
                                                           also the Dask task on a worker)
    cli      __main__, demo, release, publish, samples,    commands and course tooling
             nbgrader_config
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from layering import find_cycle

PACKAGE = Path(__file__).resolve().parent.parent / "autograder"
LAYERS = [
    ("base", {"cells", "course", "records", "launcher", "caches", "resources", "budget",
              "zmqpoll"}),
    ("files", {"intake", "repair", "home", "report", "exercises", "lms"}),
    ("kernel", {"isolation", "sandbox"}),
    ("grading", {"judge", "speed", "execute", "feedback", "integrity", "worker"}),
    ("cohort", {"gradebook", "pool", "cluster", "grade", "export"}),
    ("cli", {"__main__", "__init__", "demo", "release", "publish", "samples", "nbgrader_config"}),
]
RANK = {name: rank for rank, (_, names) in enumerate(LAYERS) for name in names}
#: Imported by ``python -m autograder ...`` before any notebook runs.
HEAVY = ("nbgrader", "nbconvert", "nbclient", "jupyter_client", "nbformat", "zmq", "tinyprof",
         "dask", "distributed")


def top(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def imports_of(path: Path) -> set[str]:
    """The autograder modules ``path`` imports (top-level names), anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autograder."):
            found.add(node.module.split(".")[1])
    return {name for name in found if name in RANK} - {top(path)}


GRAPH: dict[str, set[str]] = {}
for _path in sorted(PACKAGE.rglob("*.py")):
    GRAPH.setdefault(top(_path), set()).update(imports_of(_path))


def test_every_module_has_a_layer():
    assert set(GRAPH) <= set(RANK), sorted(set(GRAPH) - set(RANK))


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module):
    upward = sorted(t for t in GRAPH[module] if RANK[t] > RANK[module])
    assert not upward, f"{module} ({LAYERS[RANK[module]][0]}) imports " + ", ".join(
        f"{t} ({LAYERS[RANK[t]][0]})" for t in upward)


def test_no_import_cycle():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


@pytest.mark.parametrize("modules", [
    ["autograder.__main__"], ["autograder.grade", "autograder.intake", "autograder.report",
                              "autograder.integrity", "autograder.pool", "autograder.records"],
    ["autograder.cluster"], ["autograder.export", "autograder.lms", "autograder.exercises"]])
def test_the_command_line_modules_load_no_notebook_machinery(modules):
    code = (f"import sys; import {', '.join(modules)}; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=PACKAGE.parent).stdout.strip()
    assert loaded == "[]", f"{modules} load {loaded}"


def test_launcher_needs_only_the_standard_library():
    """launcher.py runs inside the sandbox with ``python -S``: no package of ours or anyone's."""
    assert imports_of(PACKAGE / "launcher.py") == set()
    tree = ast.parse((PACKAGE / "launcher.py").read_text(encoding="utf-8"))
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module}
    assert roots <= set(sys.stdlib_module_names) | {"__future__"}, roots
