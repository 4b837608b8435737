"""The runtime check: notebook code planted where the hidden tests look, and helpers put back.

:func:`guard` runs when a test opens the switch (:func:`tinyprof.testing.reference_unavailable`):
test helpers the notebook rebound (``expect = lambda *a: None``) are put back, announced with
:data:`MARK` on stdout (the grader reads it into a flag), and :class:`TamperingDetected` is raised
when :func:`tampering` finds notebook code in tinyprof, ``builtins``, ``sys.modules`` or
IPython's hooks, a module the set-up cell imported (``np``, ``tp``) replaced, or a kernel whose
handling of the grader's requests is not ipykernel's own (:func:`_handling_problems`: its shell
handlers, its session's serialisation, its comm manager and comms; a kernel that handles the
grader's requests more cheaply than a clean one would be credited the difference by a speed
test). The check runs
after the student's code and can be lied to; the grader's static review of the submitted cells
(autograder/intake/review.py) is the one an instructor relies on.
"""

from __future__ import annotations

import builtins
import inspect
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
    return problems + _hook_problems() + _handling_problems()


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


# --- the kernel's handling of the grader's requests ------------------------------------------

#: The packages whose code handles a request in an IPython kernel.
HANDLING_PACKAGES = ("ipykernel", "jupyter_client", "comm", "traitlets", "zmq", "tornado",
                     "IPython")
#: Shell messages that ipykernel hands to its comm manager.
COMM_MESSAGES = frozenset({"comm_open", "comm_msg", "comm_close"})


def _kernel() -> Any:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None)


def _handlers_of(kernel: Any) -> list[tuple[str, Any]]:
    """The objects whose methods handle the grader's requests: the kernel, its session (which
    signs, packs and unpacks every message) and its comm manager."""
    objects = [("the kernel", kernel), ("the kernel's session", getattr(kernel, "session", None)),
               ("the kernel's comm manager", getattr(kernel, "comm_manager", None))]
    return [(label, obj) for label, obj in objects if obj is not None]


def _package_dirs() -> list[str]:
    dirs = []
    for name in HANDLING_PACKAGES:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None)
        if isinstance(where, str):
            dirs.append(os.path.dirname(os.path.abspath(where)) + os.sep)
    return dirs


def _functions(value: Any) -> list[Any]:
    """The functions behind a class attribute (a property's, a static or class method's)."""
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if f is not None]
    if isinstance(value, (staticmethod, classmethod)):
        return [value.__func__]
    return [value] if isinstance(value, types.FunctionType) else []


def _remember_handling() -> dict[tuple[type, str], Any]:
    """Every function the classes of the kernel's request handling define, as they were when
    this module was imported (the set-up cell, before any student code)."""
    kernel = _kernel()
    if kernel is None:
        return {}
    return {(cls, name): value for _, obj in _handlers_of(kernel)
            for cls in type(obj).__mro__ for name, value in list(vars(cls).items())
            if _functions(value)}


def _handling_problems() -> list[str]:
    """Sentences naming what of the kernel's request handling is not ipykernel's own: a shell
    handler that is not the method ipykernel's class defines, bound to the kernel (or to its
    comm manager for comm messages); a class of the kernel, session or comm manager, or a
    function of one, that is not the packages' code as imported before the notebook ran;
    a function set on one of those objects; a session packer that is not jupyter_client's."""
    kernel = _kernel()
    if kernel is None:
        return []
    dirs, problems = _package_dirs(), []
    manager = getattr(kernel, "comm_manager", None)
    for table in ("shell_handlers", "control_handlers"):
        for msg_type, handler in list((getattr(kernel, table, None) or {}).items()):
            owner = manager if msg_type in COMM_MESSAGES and table == "shell_handlers" \
                else kernel
            if not _bound_original(handler, owner, msg_type):
                problems.append(f"the kernel's handler of {msg_type} messages is not "
                                "ipykernel's own")
    for label, obj in _handlers_of(kernel):
        problems += _object_problems(label, obj, dirs)
    for comm in list((getattr(manager, "comms", None) or {}).values()):
        problems += _object_problems("a comm of the kernel", comm, dirs)
        problems += _callback_problems(comm)
    problems += _packer_problems(getattr(kernel, "session", None))
    return sorted(set(problems))


def _bound_original(handler: Any, owner: Any, name: str) -> bool:
    """Whether ``handler`` is ``owner.name`` as the class of ``owner`` defines it."""
    if not isinstance(handler, types.MethodType) or handler.__self__ is not owner:
        return False
    for cls in type(owner).__mro__:
        if name in vars(cls):
            return handler.__func__ is vars(cls)[name]
    return False


def _genuine(function: Any, dirs: list[str]) -> bool:
    """Code of the handling packages (through a decorator's ``__wrapped__``), not the
    notebook's."""
    if _from_notebook(function):
        return False
    try:
        function = inspect.unwrap(function)
    except ValueError:   # a cycle of __wrapped__
        return False
    code = getattr(function, "__code__", None)
    filename = os.path.abspath(getattr(code, "co_filename", "") or "")
    return not _from_notebook(function) and any(filename.startswith(d) for d in dirs)


def _object_problems(label: str, obj: Any, dirs: list[str]) -> list[str]:
    problems = []
    for cls in type(obj).__mro__:
        module = str(getattr(cls, "__module__", ""))
        if cls is not object and module.split(".")[0] not in HANDLING_PACKAGES:
            problems.append(f"{label} is of a class defined by {module}, not ipykernel")
            continue
        for name, value in list(vars(cls).items()):
            kept = _HANDLING.get((cls, name))
            if any(not _genuine(f, dirs) for f in _functions(value)) or \
                    (_HANDLING and kept is not None and kept is not value):
                problems.append(f"{label}'s {cls.__name__}.{name} was replaced")
    methods = {name for cls in type(obj).__mro__ for name, value in vars(cls).items()
               if _functions(value)}
    for name, value in list(getattr(obj, "__dict__", {}).items()):
        inner = getattr(value, "__func__", value)
        if callable(inner) and (_from_notebook(inner) or name in methods
                                and not _genuine(inner, dirs)):
            problems.append(f"{label}.{name} was set to code that is not ipykernel's")
    return problems


def _callback_problems(comm: Any) -> list[str]:
    """The grader's comm (tinyprof.wire.COMM_TARGET) answers through tinyprof.remote only."""
    from tinyprof import wire

    if getattr(comm, "target_name", None) != wire.COMM_TARGET:
        return []
    callback = getattr(comm, "_msg_callback", None)
    code = getattr(callback, "__code__", None)
    remote = sys.modules.get("tinyprof.remote")
    if code is None or remote is None or \
            os.path.abspath(code.co_filename) != os.path.abspath(remote.__file__) or \
            _from_notebook(callback):
        return ["the grader's comm in the kernel answers through code that is not tinyprof's"]
    return []


def _packer_problems(session: Any) -> list[str]:
    """The session's ``pack`` and ``unpack`` (which serialise every message) are functions of
    jupyter_client.session, as its ``packer`` setting chose them."""
    module = sys.modules.get("jupyter_client.session")
    if session is None or module is None:
        return []
    own = set(map(id, vars(module).values()))
    return [f"the kernel's session.{name} is not jupyter_client's"
            for name in ("pack", "unpack")
            if id(getattr(session, name, None)) not in own
            or _from_notebook(getattr(session, name, None))]


_SETUP = _remember_setup()
_HANDLING = _remember_handling()
