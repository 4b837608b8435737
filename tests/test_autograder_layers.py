"""The grader's layers, read from the stage map in ``autograder/__init__.py``: every import
inside autograder/ points down that table (to its own layer or one listed above it), nothing
imports in a cycle, every module and subpackage has exactly one layer, and the command line stays
light (nbgrader, nbconvert, nbclient and jupyter_client load only where a notebook is actually
run or graded; dask and distributed only with ``--scheduler``)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from layering import find_cycle

PACKAGE = Path(__file__).resolve().parent.parent / "autograder"
HEAVY = ("nbgrader", "nbconvert", "nbclient", "jupyter_client", "nbformat", "zmq", "tinyprof",
         "dask", "distributed")


def stage_map() -> list[tuple[str, set[str]]]:
    """The layer table of the package docstring: (layer, its modules and subpackages), lowest
    first. A row is ``    NAME   a, b/, c   prose``; a row of only two columns continues the
    names of the row above."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8")))
    table = doc.split("Layers, lowest first", 1)[1].split("\n\n", 1)[1].split("\n\n", 1)[0]
    layers: list[tuple[str, set[str]]] = []
    for line in table.splitlines():
        columns = re.split(r"\s{2,}", line.strip())
        if line.startswith("    ") and not line.startswith("     "):
            layers.append((columns[0], set()))
            columns = columns[1:]
        if columns and re.fullmatch(r"[\w/]+(, [\w/]+)*,?", columns[0]):
            layers[-1][1].update(n.rstrip("/") for n in columns[0].rstrip(",").split(", "))
    return layers


LAYERS = stage_map()
RANK = {unit: rank for rank, (_, units) in enumerate(LAYERS) for unit in units}
RANK["__init__"] = len(LAYERS) - 1   # the package itself, which holds the map


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str) -> str:
    """The table's name for a module: its subpackage, or the module itself at the top."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> set[str]:
    """Every autograder module ``path`` imports, at the top or inside a function."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            names = [f"{target}.{alias.name}" for alias in node.names]
            found |= {n for n in names if n in MODULES} or {target}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autograder"):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found |= {n for n in names if n in MODULES} or {node.module}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("autograder")}
    return {module for module in found if module in MODULES} - {name}


FILES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
MODULES = set(FILES)
GRAPH = {module: imports_of(path) for module, path in FILES.items()}


def test_the_stage_map_has_layers():
    assert [name for name, _ in LAYERS] == ["shared", "release", "intake", "kernel", "run",
                                            "results", "dispatch", "cohort", "commands"]


def test_every_module_has_one_layer():
    units = {unit(module) for module in MODULES}
    assert units <= set(RANK), f"not in the stage map: {sorted(units - set(RANK))}"
    assert set(RANK) - {"__init__"} <= units, f"no such module: {sorted(set(RANK) - units)}"
    named = [u for _, units_ in LAYERS for u in units_]
    assert len(named) == len(set(named)), "a module is in two layers"


def test_every_stage_module_is_in_the_stage_map():
    """Each module of a stage's subpackage is named (``name``) in the package docstring."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8")))
    named = {n.rsplit(".", 1)[-1] for n in re.findall(r"``([\w.]+)``", doc)}
    missing = sorted(module for module in MODULES if module.count(".") == 2
                     and unit(module) != "samples" and module.rsplit(".", 1)[1] not in named)
    assert not missing, f"modules the stage map does not place: {missing}"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module):
    own = RANK[unit(module)]
    upward = sorted(t for t in GRAPH[module] if RANK[unit(t)] > own)
    assert not upward, f"{module} ({LAYERS[own][0]}) imports " + ", ".join(
        f"{t} ({LAYERS[RANK[unit(t)]][0]})" for t in upward)


def test_no_import_cycle():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_no_cycle_between_stages():
    stages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        stages.setdefault(unit(module), set()).update(unit(t) for t in targets)
    for name, targets in stages.items():
        targets.discard(name)
    cycle = find_cycle(stages)
    assert cycle is None, "stages import each other: " + " → ".join(cycle or [])


@pytest.mark.parametrize("modules", [
    ["autograder.__main__"],
    ["autograder.grade", "autograder.intake.collect", "autograder.results.report",
     "autograder.intake.review", "autograder.dispatch.pool", "autograder.records"],
    ["autograder.dispatch.cluster"],
    ["autograder.results.export", "autograder.results.lms", "autograder.results.exercises"]])
def test_the_command_line_modules_load_no_notebook_machinery(modules):
    code = (f"import sys; import {', '.join(modules)}; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=PACKAGE.parent).stdout.strip()
    assert loaded == "[]", f"{modules} load {loaded}"


def test_launcher_needs_only_the_standard_library():
    """launcher.py runs inside the sandbox with ``python -S``: no package of ours or anyone's."""
    launcher = PACKAGE / "kernel" / "launcher.py"
    assert GRAPH["autograder.kernel.launcher"] == set()
    tree = ast.parse(launcher.read_text(encoding="utf-8"))
    roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module}
    assert roots <= set(sys.stdlib_module_names) | {"__future__"}, roots


def test_no_two_classes_share_a_name():
    """A class name says which class it is anywhere in the grader (issue 34: two ``Task``)."""
    where: dict[str, list[str]] = {}
    for module, path in FILES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(module)
    shared = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert not shared, shared


#: What only ``run/channel.py`` may touch: a kernel client's channels and requests.
KERNEL_TALK = re.compile(r"\.(shell_channel|iopub_channel|kernel_info\(|execute\(\"\"|"
                         r"session\.msg\()")


def test_only_the_channel_talks_to_a_kernel():
    """Issue 39: one room for asking a kernel anything (channel.py); the executor, the judge and
    the speed bench go through it."""
    talking = sorted(module for module, path in FILES.items()
                     if module != "autograder.run.channel"
                     and KERNEL_TALK.search(path.read_text(encoding="utf-8")))
    assert talking == [], f"modules that talk to a kernel's client directly: {talking}"


def private_imports(path: Path) -> list[str]:
    """``from X import _name`` (other than as an alias of a public name) and ``module._name``
    where ``module`` is imported: a private name of another module used here."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    found = [f"from {node.module or '.'} import {alias.name}" for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) for alias in node.names
             if alias.name.startswith("_") and not alias.name.startswith("__")]
    found += [f"{node.value.id}.{node.attr}" for node in ast.walk(tree)
              if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id in imported and node.attr.startswith("_")
              and not node.attr.startswith("__") and node.value.id not in ("os", "sys")]
    return found


@pytest.mark.parametrize("module", sorted(m for m in FILES if m.startswith("autograder.run")))
def test_no_private_name_crosses_into_the_run_stage(module):
    assert private_imports(FILES[module]) == []
