"""The library's layers: every import inside tinyprof/ points down, and nothing imports in a
cycle. A module may import modules of its own layer or of the layers below it, never above.

    base         units, table, ops, amdahl,         numbers, formatting, pure formulas,
                 torchprobe                         "is this torch?" (never imports torch)
    nn           nn.*                               layers with forward and backward
    models       models.* (builders, optim,         the model zoo and what runs it
                 vocabulary, training, variants,
                 datasets)
    params       params, torch_params               chapter 1: parameters
    shapes       shapes.*                           the shape walk the counts share
    flops        flops.* (torch_counter,            chapter 2: FLOPs
                 torch_formulas too)
    memory       memory.* (torch_step too)          chapter 3: memory
    timing       timing.* (harness, stats,          chapter 4: measured latency, A/B tests,
                 compare, context, abtest,          batch scaling, GPU timing (torch_cuda)
                 scaling, torch_cuda)
    plots        plots.*                            figures of what the layers below measure
    bottlenecks  bottlenecks.* (roofline,           chapter 5: what limits each layer
                 layer_profiler, placement,
                 torch_profiler, torch_placement)
    bench        bench.* (suite, regression,        chapter 6: variants side by side, baselines
                 reports, classic)
    pytorch      pytorch (its __init__ only)        chapter 7: the public face over the torch
                                                    modules of the wings above
    faster       faster.* (pipeline)                chapter 8: a slow step and its fixes
    loading      loading.* (files, storage,         chapter 09: the input pipeline, a device
                 dataset, timeline, device, cache,  that waits for data, and the fixes
                 prefetch, workers, model, loop)
    leaks        leaks.* (loop, measure, growth,    chapter 10: memory over many steps, leaks
                 snapshots)                         told from plateaus and found by line
    widgets      widgets.*                          explorers
    facade       profiler, tinyprof, testing,       one object over all of it; the grader's
                 remote, wire, memcheck,            seam (helpers, answers, their format)
                 pipecheck, prefetchcheck

Every wing sits on one floor, and the chapters' wings are in chapter order. The torch code
sits in the wing of its numpy counterpart (issue 34): its probe on the ground floor, its
parameter, FLOP, memory and timing modules and its profiler and roofline placement each
beside the numpy module it mirrors; ``tinyprof.pytorch`` holds no code of its own, only the
lazy names over them.

Modules that moved into a wing keep their old names as aliases of the same module object
(``tinyprof.roofline`` is ``tinyprof.bottlenecks.roofline``); inside the package every import
uses the new name, so that this graph sees it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from layering import find_cycle

PACKAGE = Path(__file__).resolve().parent.parent / "tinyprof"
LAYERS = [
    ("base", {"units", "table", "ops", "amdahl", "torchprobe"}),
    ("nn", {"nn"}),
    ("models", {"models"}),
    ("params", {"params", "torch_params"}),
    ("shapes", {"shapes"}),
    ("flops", {"flops"}),
    ("memory", {"memory"}),
    ("timing", {"timing"}),
    ("plots", {"plots"}),
    ("bottlenecks", {"bottlenecks"}),
    ("bench", {"bench"}),
    ("pytorch", {"pytorch"}),
    ("faster", {"faster"}),
    ("loading", {"loading"}),
    ("leaks", {"leaks"}),
    ("widgets", {"widgets"}),
    ("facade", {"profiler", "", "testing", "remote", "wire", "memcheck", "pipecheck",
                "prefetchcheck"}),
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
    """The module's entry in RANK: its top-level name below tinyprof ("" for the package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_has_a_layer():
    """And every room of the drawing exists: a new top-level module is placed deliberately."""
    assert {top(m) for m in GRAPH} == set(RANK), {top(m) for m in GRAPH} ^ set(RANK)


def test_every_wing_sits_on_one_floor_in_chapter_order():
    """A floor holds whole top-level modules (no wing is split over floors, as the torch wing
    once was), and the chapters' wings stand in the chapters' order: 1 params, 2 flops,
    3 memory, 4 timing, 5 bottlenecks, 6 bench, 7 pytorch, 8 faster, 9 loading, 10 leaks."""
    assert not [t for _, tops in LAYERS for t in tops if "." in t]
    chapters = ["params", "flops", "memory", "timing", "bottlenecks", "bench", "pytorch",
                "faster", "loading", "leaks"]
    assert [RANK[wing] for wing in chapters] == sorted(RANK[wing] for wing in chapters)
    assert len({RANK[wing] for wing in chapters}) == len(chapters)


def test_the_torch_modules_sit_beside_their_numpy_counterparts():
    """``tinyprof.pytorch`` is only a face: it has no module of its own but its __init__, and
    each torch module is on the floor of the numpy module it mirrors."""
    assert sorted(m for m in GRAPH if m.startswith("tinyprof.pytorch")) == ["tinyprof.pytorch"]
    assert not GRAPH["tinyprof.pytorch"]
    beside = {"torchprobe": "units", "torch_params": "params", "flops.torch_counter": "flops",
              "flops.torch_formulas": "flops", "memory.torch_step": "memory",
              "timing.torch_cuda": "timing", "bottlenecks.torch_profiler": "bottlenecks",
              "bottlenecks.torch_placement": "bottlenecks"}
    for torch_module, numpy_wing in beside.items():
        assert RANK[top(f"tinyprof.{torch_module}")] == RANK[numpy_wing], torch_module


def test_the_wings_are_ordered_timing_bottlenecks_bench():
    order = [name for name, _ in LAYERS]
    assert order.index("timing") < order.index("bottlenecks") < order.index("bench")
    assert not any(t.startswith(("tinyprof.bottlenecks", "tinyprof.bench"))
                   for m in GRAPH if top(m) == "timing" for t in GRAPH[m])
    assert not any(t.startswith("tinyprof.bench") for m in GRAPH if top(m) == "bottlenecks"
                   for t in GRAPH[m])


def test_no_module_imports_an_old_name():
    """Inside the package every import names a module where it lives (an old name would be
    an edge this graph cannot see)."""
    from tinyprof import _MOVED

    old = {f"tinyprof.{name}" for name in _MOVED}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                assert target not in old, f"{name} imports {target}, an old name"


@pytest.mark.parametrize("old", ["abtest", "scaling", "roofline", "layer_profiler", "suite",
                                 "regression", "reports", "classic", "optim", "training",
                                 "variants", "datasets", "memory.training",
                                 "pytorch.dispatch", "pytorch.params", "pytorch.flops",
                                 "pytorch.formulas", "pytorch.memory", "pytorch.timing",
                                 "pytorch.profiler", "pytorch.roofline"])
def test_an_old_module_name_is_the_same_module(old):
    import importlib

    from tinyprof import _MOVED

    moved = importlib.import_module(f"tinyprof.{old}")
    assert moved is importlib.import_module(f"tinyprof.{_MOVED[old]}")
    assert moved.__spec__.name == moved.__name__ == f"tinyprof.{_MOVED[old]}"


#: Names reached through the torch wing's old module paths by users, chapter 07's notebook and
#: hidden tests, the benchmarks and the tests (each must stay the one object it names now).
OLD_TORCH_PATHS = [
    "tinyprof.pytorch.dispatch.is_torch_module", "tinyprof.pytorch.dispatch.synchronized",
    "tinyprof.pytorch.params.count_parameters", "tinyprof.pytorch.params.parameter_counts",
    "tinyprof.pytorch.flops.count_flops", "tinyprof.pytorch.flops.conv_flops",
    "tinyprof.pytorch.flops.numel", "tinyprof.pytorch.flops.OP_FLOPS",
    "tinyprof.pytorch.flops.UNCOUNTED", "tinyprof.pytorch.flops.MODULE_FLOPS",
    "tinyprof.pytorch.flops.ModuleFlops", "tinyprof.pytorch.formulas.numel",
    "tinyprof.pytorch.formulas.Call", "tinyprof.pytorch.memory.training_memory",
    "tinyprof.pytorch.memory.STATE_SLOTS", "tinyprof.pytorch.timing.cuda_event_seconds",
    "tinyprof.pytorch.profiler.TorchRecorder", "tinyprof.pytorch.roofline.module_work",
    "tinyprof.pytorch.roofline.place_modules",
]


def test_the_torch_names_users_rely_on_resolve_to_the_same_objects():
    """Every public ``tinyprof.pytorch.X`` and every name above, by attribute, by ``from ...
    import`` and by ``import tinyprof.pytorch.<module>``, is the object where it lives now; a
    patch through an old path reaches the module that runs; and none of it imports torch."""
    code = f"""
import importlib, sys
from unittest import mock
import tinyprof, tinyprof.pytorch as face
for name in face.__all__:
    value = getattr(face, name)
    home = importlib.import_module(value.__module__) if hasattr(value, '__module__') else None
    assert home is None or getattr(home, name, value) is value, name
    assert not value.__module__.startswith('tinyprof.pytorch'), (name, value.__module__)
for dotted in {OLD_TORCH_PATHS!r}:
    module_name, _, attr = dotted.rpartition('.')
    old_module = importlib.import_module(module_name)
    new_module = importlib.import_module('tinyprof.' + tinyprof._MOVED[module_name[9:]])
    assert old_module is new_module is getattr(face, module_name.rpartition('.')[2]), dotted
    assert getattr(old_module, attr) is getattr(new_module, attr), dotted
    exec(f'from {{module_name}} import {{attr}} as got')
    assert got is getattr(new_module, attr), dotted
import tinyprof.flops.torch_counter as counter
with mock.patch('tinyprof.pytorch.flops.example_input', 'patched'):
    assert counter.example_input == 'patched'
print('torch' in sys.modules)
"""
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "False"


def test_the_command_lines_keep_their_old_names():
    done = subprocess.run([sys.executable, "-m", "tinyprof.regression", "--help"],
                          capture_output=True, text=True, check=True)
    assert "usage: python -m tinyprof.regression" in done.stdout and not done.stderr


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module):
    upward = sorted(t for t in GRAPH[module] if RANK[top(t)] > RANK[top(module)])
    assert not upward, f"{module} (layer {LAYERS[RANK[top(module)]][0]}) imports " + ", ".join(
        f"{t} (layer {LAYERS[RANK[top(t)]][0]})" for t in upward)


def test_no_import_cycle():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_the_pieces_live_where_the_layers_say():
    import tinyprof
    from tinyprof import models, nn

    assert models.GPT is nn.GPT and nn.GPT.__module__ == "tinyprof.nn.gpt"
    assert models.random_input.__module__ == "tinyprof.models.builders"
    assert tinyprof.ab_test.__module__ == "tinyprof.timing.abtest"
    assert tinyprof.place_layers.__module__ == "tinyprof.bottlenecks.placement"
    assert tinyprof.check_regression.__module__ == "tinyprof.bench.regression"
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


def test_one_figure_policy():
    """Every figure tinyprof draws is made by plots.style.new_figure (made by pyplot, closed at
    once): no other module creates one (plt.subplots, plt.figure or Figure(...)), and drawing
    leaves pyplot's list of figures as it was."""
    import re

    made = re.compile(r"plt\.subplots\(|plt\.figure\(|[^.\w]Figure\(")
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "plots" / "style.py":
            continue
        found = made.findall(path.read_text(encoding="utf-8"))
        assert not found, f"{module_name(path)} makes a figure itself ({found}): use new_figure"
    code = ("import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"
            "import tinyprof as tp\n"
            "stats = tp.timing.LatencyStats.from_samples([1e-3, 1.1e-3, 1.2e-3, 0.9e-3])\n"
            "figs = [tp.plots.plot_latency(stats), tp.plots.plot_amdahl(0.5)]\n"
            "print(plt.get_fignums(), [type(f).__name__ for f in figs])")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert shown == "[] ['DescribedFigure', 'DescribedFigure']"
