"""What the switch turns off: every route to an answer, derived from the package.

:func:`routes` walks tinyprof (never a list kept by hand): every module-level function and
every method and constructor of every tinyprof class, except the building blocks exercises walk
(:data:`BUILDING_BLOCKS`, :data:`OPEN_CLASSES`). The grading machinery itself (this package,
the kernel's side of the grader's requests and their format: ``tinyprof._GRADING_MACHINERY``) is
never a route and never counts as tinyprof's own code (:func:`is_grading_module`,
:data:`GRADING_FILES`, :func:`is_internal`).
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Iterator

from tinyprof import _GRADING_MACHINERY

#: Methods of tinyprof.nn layers that exercises build on: they stay available.
BUILDING_BLOCKS = frozenset({"__call__", "forward", "backward", "children", "own_parameters",
                             "named_modules"})
#: Classes whose every member stays available: the parameter objects exercises read.
OPEN_CLASSES = ("tinyprof.nn.Parameter", "tinyprof.nn.ShapeOnly")

#: tinyprof's folder, with a trailing separator.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: The grading machinery's modules, as the package lists them (read once, now: notebook code
#: runs later). A package among them (this one) brings its submodules.
GRADING_MODULES = frozenset(f"tinyprof.{name}" for name in _GRADING_MACHINERY)


def is_grading_module(name: str) -> bool:
    """Whether module ``name`` is part of the grading machinery (or inside a package of it)."""
    return name in GRADING_MODULES or name.rpartition(".")[0] in GRADING_MODULES


def _grading_files() -> frozenset[str]:
    files = set()
    for name in GRADING_MODULES:
        path = os.path.join(PACKAGE_DIR, *name.split(".")[1:])
        if os.path.isdir(path):
            files |= {os.path.join(path, entry) for entry in os.listdir(path)
                      if entry.endswith(".py")}
        else:
            files.add(path + ".py")
    return frozenset(files)


#: Files of the grading machinery: a call from them is the test's (or the grader's request on
#: the test's behalf), never tinyprof's own, so the switch applies to it.
GRADING_FILES = _grading_files()


def is_internal(filename: str) -> bool:
    """Code of tinyprof itself (not the grading machinery): its calls pass through the
    switch."""
    return filename.startswith(PACKAGE_DIR) and os.path.abspath(filename) not in GRADING_FILES


@dataclass
class Route:
    """One callable the switch turns off: its best public name, and where it is bound."""

    name: str
    target: Any
    kind: str  # "function", "method" or "constructor"
    places: list[tuple[Any, str]] = field(default_factory=list)


def _tinyprof_modules() -> list[types.ModuleType]:
    """tinyprof and every submodule (imported now, so none appears during a test)."""
    import tinyprof

    found = [tinyprof]
    torch_modules = {f"tinyprof.{home}" for old, home in tinyprof._MOVED.items()
                     if old.startswith("pytorch.")}
    for info in pkgutil.walk_packages(tinyprof.__path__, "tinyprof."):
        if is_grading_module(info.name):
            continue
        if info.name in torch_modules and "torch" not in sys.modules:
            continue  # the torch wing's modules: nobody can call them before torch is loaded
        try:
            found.append(importlib.import_module(info.name))
        except ImportError:  # an optional dependency is missing: nobody can call it either
            continue
    return found


def ours(obj: Any) -> bool:
    """Whether ``obj`` was defined by tinyprof itself (not by its grading machinery)."""
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and (module == "tinyprof" or module.startswith("tinyprof.")) \
        and not is_grading_module(module)


def _preferred(names: list[str]) -> str:
    """The shortest public spelling: ``tinyprof.count_parameters`` over ``tinyprof.params...``,
    and any public one over a private one."""
    return min(names, key=lambda n: ("._" in n, n.count("."), len(n), n))


def _class_routes(cls: type, name: str) -> Iterator[Route]:
    from tinyprof.nn import Module

    if issubclass(cls, BaseException) or any(cls is raw_attribute(*resolve(open_class))
                                             for open_class in OPEN_CLASSES):
        return
    layer = issubclass(cls, Module)
    for attr, value in vars(cls).items():
        if _dunder(attr) and attr not in ("__init__", "__call__"):
            continue
        if layer and attr in BUILDING_BLOCKS:
            continue
        function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
        if not isinstance(function, types.FunctionType):
            continue  # properties and data: an exercise may read them
        kind = "constructor" if attr == "__init__" else "method"
        yield Route(name if kind == "constructor" else f"{name}.{attr}", value, kind,
                    [(cls, attr)])


def _dunder(name: str) -> bool:
    """Python's and IPython's own protocol names (``__len__``, ``_repr_html_``): never a route
    to an answer, and called by the display machinery rather than by the notebook."""
    return (name.startswith("__") and name.endswith("__")) or \
        (name.startswith(("_repr_", "_ipython_")) and name.endswith("_"))


def routes() -> list[Route]:
    """Every route to an answer, derived from the package: module-level functions and classes'
    methods and constructors, private ones (``tp.abtest._timed_rounds``) included (aliases
    merged, best public name first)."""
    functions: dict[int, tuple[Any, list[str], list[tuple[Any, str]]]] = {}
    classes: dict[int, tuple[type, list[str]]] = {}
    for module in _tinyprof_modules():
        for attr, value in vars(module).items():
            if _dunder(attr) or isinstance(value, types.ModuleType) or not ours(value):
                continue
            dotted = f"{module.__name__}.{attr}"
            if isinstance(value, type):
                classes.setdefault(id(value), (value, []))[1].append(dotted)
            elif callable(value):
                entry = functions.setdefault(id(value), (value, [], []))
                entry[1].append(dotted)
                entry[2].append((module, attr))
    found = [Route(_preferred(names), value, "function", places)
             for value, names, places in functions.values()]
    for cls, names in classes.values():
        found += _class_routes(cls, _preferred(names))
    return sorted(found, key=lambda route: route.name)


def resolve(dotted: str) -> tuple[Any, str] | None:
    """``(owner, attribute)`` that the dotted name ``module.attr`` or ``module.Class.attr``
    names, or None when there is no such thing."""
    module_name, _, attr = dotted.rpartition(".")
    try:
        owner = importlib.import_module(module_name)
    except ImportError:
        module_path, _, cls = module_name.rpartition(".")
        try:
            owner = getattr(importlib.import_module(module_path), cls)
        except (ImportError, AttributeError, ValueError):
            return None
    return (owner, attr) if hasattr(owner, attr) else None


def raw_attribute(owner: Any, attr: str) -> Any:
    """``owner``'s own attribute as stored (a staticmethod object, not the function)."""
    return owner.__dict__.get(attr, getattr(owner, attr)) if hasattr(owner, "__dict__") \
        else getattr(owner, attr)
