"""The runtime check: notebook code planted where the hidden tests look, and helpers put back.

:func:`guard` runs when a test opens the switch (:func:`tinyprof.testing.reference_unavailable`):
test helpers the notebook rebound (``expect = lambda *a: None``) are put back, announced with
:data:`MARK` on stdout (the grader reads it into a flag), and :class:`TamperingDetected` is raised
when :func:`tampering` finds notebook code in tinyprof, ``builtins``, ``sys.modules`` or
IPython's hooks, or a module the set-up cell imported (``np``, ``tp``) replaced. The check runs
after the student's code and can be lied to; the grader's static review of the submitted cells
(autograder/intake/review.py) is the one an instructor relies on.
"""

from __future__ import annotations

import builtins
import os
import sys
import types
from typing import Any

from tinyprof import _GRADING_MACHINERY

from .catalog import GRADING_FILES, is_internal, ours
from .errors import TamperingDetected

#: Printed by the hidden tests when they had to put a rebound helper back (the grader reads it).
MARK = "[tinyprof integrity]"
#: The genuine test helpers (name → object) and the testing package's modules, given by the
#: package once it has loaded (:func:`remember`).
_GENUINE: dict[str, Any] = {}
_MODULES: dict[str, types.ModuleType] = {}


def _notebook_file(filename: str) -> bool:
    return "ipykernel_" in filename or filename.startswith("<ipython-input")


def _from_notebook(obj: Any) -> bool:
    """True for functions, classes and instances defined by notebook code (``__main__``)."""
    for candidate in (obj, getattr(obj, "__func__", None), getattr(obj, "func", None)):
        if candidate is None:
            continue
        try:
            if getattr(candidate, "__module__", None) == "__main__" \
                    or type(candidate).__module__ == "__main__":
                return True
            code = getattr(candidate, "__code__", None)
            if code is not None and _notebook_file(code.co_filename):
                return True
        except Exception:  # noqa: BLE001 - an object that fights inspection is suspect
            return True
    return False


def remember(package: types.ModuleType, helpers: dict[str, Any]) -> None:
    """Called once by the package, before it is sealed: the genuine test helpers (name →
    object, as the package binds them) and the package's modules, which the checks compare
    with what the kernel holds later."""
    _GENUINE.update(helpers)
    _MODULES.update({name: module for name, module in sys.modules.items()
                     if name == package.__name__ or name.startswith(package.__name__ + ".")})
    _MODULES[package.__name__] = package


def guard(namespace: dict) -> None:
    """Put back rebound helpers (and say so), then refuse to test a tampered kernel."""
    for name, genuine in _GENUINE.items():
        if name in namespace and namespace[name] is not genuine:
            namespace[name] = genuine
            print(f"{MARK} {name} had been rebound by the notebook; the hidden tests put "
                  "tinyprof's own back before running")
    problems = _namespace_problems(namespace) + tampering()
    if problems:
        raise TamperingDetected(
            "the hidden tests cannot be trusted in this kernel: " + "; ".join(problems)
            + ". This submission is flagged for the instructor to review.")


def _namespace_problems(namespace: dict) -> list[str]:
    """Module objects in the notebook that are not the modules Python imported, and names the
    set-up cell bound to a module (``np``, ``tp``, ``nn``) now bound to something else: either
    would change the expected values the hidden tests compute."""
    problems = [f"{name} is not the module {value.__name__!r} that Python imported"
                for name, value in list(namespace.items())
                if isinstance(value, types.ModuleType)
                and sys.modules.get(getattr(value, "__name__", None)) is not value]
    setup = _SETUP.get(id(namespace), {})
    return problems + [f"{name} was rebound (the set-up cell imported it as {module.__name__})"
                       for name, module in setup.items()
                       if name in namespace and namespace[name] is not module
                       and not isinstance(namespace[name], types.ModuleType)]


def _remember_setup() -> dict[int, dict[str, types.ModuleType]]:
    """The modules the notebook (``__main__``) had imported when it imported this module: the
    set-up cell's ``np``, ``tp``, ``nn``..., keyed by the namespace's id."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") != "__main__":
        frame = frame.f_back
    if frame is None:
        return {}
    return {id(frame.f_globals): {name: value for name, value in frame.f_globals.items()
                                  if isinstance(value, types.ModuleType)
                                  and not name.startswith("_")}}


def tampering() -> list[str]:
    """Sentences naming notebook code planted where the hidden tests look: tinyprof's modules
    and classes, builtins, sys.modules, and IPython's hooks. Empty when none is found."""
    problems = _modules_problems() + _tinyprof_problems()
    problems += [f"builtins.{name} was replaced by notebook code"
                 for name, value in list(vars(builtins).items()) if _from_notebook(value)]
    return problems + _hook_problems()


def _modules_problems() -> list[str]:
    problems = []
    if sys.modules.get("builtins") is not builtins:
        problems.append("sys.modules['builtins'] was replaced")
    problems += [f"sys.modules[{name!r}] was replaced" for name, module in _MODULES.items()
                 if sys.modules.get(name) is not module]
    package = sys.modules.get("tinyprof")
    if getattr(package, "_GRADING_MACHINERY", None) is not _GRADING_MACHINERY:
        problems.append("tinyprof._GRADING_MACHINERY was rebound")
    for name, module in list(sys.modules.items()):
        if name == "tinyprof" or name.startswith("tinyprof."):
            where = getattr(module, "__file__", None) or ""
            if not isinstance(module, types.ModuleType) or not is_internal(where) and \
                    os.path.abspath(where) not in GRADING_FILES:
                problems.append(f"sys.modules[{name!r}] is not tinyprof's own module")
    testing = _MODULES.get(__name__.rpartition(".")[0])
    for name, genuine in _GENUINE.items():
        if testing is not None and vars(testing).get(name) is not genuine:
            problems.append(f"{testing.__name__}.{name} was replaced")
    return problems


def _tinyprof_problems() -> list[str]:
    problems = []
    for name, module in list(sys.modules.items()):
        if not (name == "tinyprof" or name.startswith("tinyprof.")) \
                or not isinstance(module, types.ModuleType):
            continue
        owners = [(name, module)] + [(f"{name}.{k}", v) for k, v in vars(module).items()
                                     if isinstance(v, type) and ours(v)]
        for label, owner in owners:
            for attr, value in list(vars(owner).items()):
                if _from_notebook(value):
                    problems.append(f"{label}.{attr} was replaced by notebook code")
    return sorted(set(problems))


def _hook_problems() -> list[str]:
    hooks: list[tuple[str, Any]] = [
        ("sys.displayhook", sys.displayhook), ("sys.excepthook", sys.excepthook),
        ("sys.settrace", sys.gettrace()), ("sys.setprofile", sys.getprofile())]
    hooks += [("sys.meta_path", finder) for finder in sys.meta_path]
    hooks += [("sys.path_hooks", hook) for hook in sys.path_hooks]
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        for event, callbacks in getattr(shell.events, "callbacks", {}).items():
            hooks += [(f"IPython event {event}", c) for c in callbacks]
        for attr in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers"):
            hooks += [(f"IPython {attr}", t) for t in getattr(shell, attr, [])]
        manager = getattr(shell, "input_transformer_manager", None)
        for attr in ("cleanup_transforms", "line_transforms", "token_transformers"):
            hooks += [(f"IPython {attr}", t) for t in getattr(manager, attr, [])]
        hooks += [("IPython displayhook", getattr(shell, "displayhook", None)),
                  ("IPython display_pub", getattr(shell, "display_pub", None)),
                  ("IPython custom exception handler", getattr(shell, "CustomTB", None))]
        formatter = getattr(shell, "display_formatter", None)
        for kind, printer in getattr(formatter, "formatters", {}).items():
            for table in ("type_printers", "deferred_printers"):
                hooks += [(f"IPython {kind} printer", p)
                          for p in getattr(printer, table, {}).values()]
    return sorted({f"{where} holds notebook code" for where, hook in hooks
                   if hook is not None and _from_notebook(hook)})


_SETUP = _remember_setup()
