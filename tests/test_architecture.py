"""The library's layers: every import inside tinyprof/ points down, and nothing imports in a
cycle. A module may import modules of its own layer or of the layers below it, never above.

    base       units, table, ops, amdahl, datasets,       numbers, formatting, pure formulas;
               pytorch.dispatch                           "is this torch?" without torch
    nn         nn.*, optim                                 layers with forward and backward
    models     models, training, variants                 the model zoo and what runs it
    analysis   params, shapes, flops, memory              counted or predicted by shape
               (and the torch wing's params, flops, memory)
    measuring  timing, roofline, layer_profiler,          measured on this machine
               bottlenecks, scaling, abtest, suite,
               regression, classic, pytorch (the rest of
               the wing for torch modules)
    present    plots, widgets, reports                    figures, explorers, reports
    facade     profiler, tinyprof, testing                one object over all of it
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tinyprof"
LAYERS = [
    ("base", {"units", "table", "ops", "amdahl", "datasets", "pytorch.dispatch"}),
    ("nn", {"nn", "optim"}),
    ("models", {"models", "training", "variants"}),
    ("analysis", {"params", "shapes", "flops", "memory", "pytorch.params", "pytorch.flops",
                  "pytorch.memory"}),
    ("measuring", {"timing", "roofline", "layer_profiler", "bottlenecks", "scaling", "abtest",
                   "suite", "regression", "classic", "pytorch"}),
    ("present", {"plots", "widgets", "reports"}),
    ("facade", {"profiler", "", "testing", "remote"}),
]
RANK = {top: rank for rank, (_, tops) in enumerate(LAYERS) for top in tops}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every tinyprof module ``path`` imports, at the top or inside a function."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:   # from . import x: x may be a module
                found |= {f"{target}.{alias.name}" for alias in node.names}
            else:
                found.add(target)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tinyprof"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tinyprof")}
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    return {target for target in found if target in modules and target != name}


GRAPH = {module_name(p): imports_of(p) for p in sorted(PACKAGE.rglob("*.py"))}


def top(module: str) -> str:
    """The module's entry in RANK: its top-level name, or its dotted name below tinyprof when
    it has a layer of its own (the torch wing's modules sit in the layers of their numpy
    counterparts)."""
    parts = module.split(".")
    own = ".".join(parts[1:])
    return own if own in RANK else parts[1] if len(parts) > 1 else ""


def test_every_module_has_a_layer():
    assert {top(m) for m in GRAPH} <= set(RANK), {top(m) for m in GRAPH} - set(RANK)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module):
    upward = sorted(t for t in GRAPH[module] if RANK[top(t)] > RANK[top(module)])
    assert not upward, f"{module} (layer {LAYERS[RANK[top(module)]][0]}) imports " + ", ".join(
        f"{t} (layer {LAYERS[RANK[top(t)]][0]})" for t in upward)


def test_no_import_cycle():
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(GRAPH[module]):
            if state.get(target) == "open":
                cycle = path[path.index(target):] + [target] if target in path else [target]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])


def test_the_pieces_live_where_the_layers_say():
    import tinyprof
    from tinyprof import models, nn

    assert models.GPT is nn.GPT and nn.GPT.__module__ == "tinyprof.nn.gpt"
    assert models.random_input.__module__ == "tinyprof.models"
    assert tinyprof.plots.plot_latency.__module__ == "tinyprof.plots.latency"
    timing_files = (PACKAGE / "timing").rglob("*.py")
    assert not any("matplotlib" in f.read_text(encoding="utf-8") for f in timing_files)


def test_import_tinyprof_stays_light():
    code = ("import sys, tinyprof; heavy = {'matplotlib', 'ipywidgets', 'IPython', 'sklearn'}; "
            "print(sorted(heavy & set(sys.modules)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "[]"


def test_the_torch_wing_and_its_dispatch_never_import_torch():
    """``import tinyprof``, a numpy count and ``import tinyprof.pytorch`` leave torch unloaded:
    only the wing's modules that need torch import it, when a torch module is handed in."""
    code = ("import sys, tinyprof as tp\n"
            "assert tp.pytorch.dispatch.is_torch_module(tp) is False\n"
            "from tinyprof import models\n"
            "tp.count_parameters(models.mlp()); tp.count_flops(models.mlp(), (1, 784))\n"
            "print('torch' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "False"
