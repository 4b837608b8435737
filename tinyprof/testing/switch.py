"""Switching tinyprof off while the student's code is checked: the gates, the hook, the switch.

:class:`Switch` (what :func:`tinyprof.testing.reference_unavailable` returns) turns off every
route of :func:`~tinyprof.testing.catalog.routes`, and any extra dotted names, for the block. A
switched-off function raises ReferenceUnavailable when the notebook calls it, under any alias:
its code object is swapped for a gate's (:class:`_Gate`), so ``from tinyprof import
count_parameters`` or a bound ``Profiler().count_parameters`` is caught too, while tinyprof's
own internals keep calling each other. What cannot take a swapped code (a function with a
closure, a decorated one) is replaced by name, and a profile hook (:class:`Watch`) follows its
code: while the student's code is checked, any run of a switched-off code, however it was
reached, raises ReferenceUnavailable unless tinyprof itself made the call; a refusal the
notebook swallows still fails the block. Speed measurements never run under the hook.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from typing import Any, Callable

from .catalog import (
    GRADING_FILES,
    PACKAGE_DIR,
    Route,
    is_internal,
    raw_attribute,
    resolve,
    routes,
)
from .errors import ReferenceUnavailable, TamperingDetected
from .integrity import guard


class _Gate:
    """Called instead of a switched-off callable: refuses the notebook, serves tinyprof."""

    def __init__(self, name: str, kind: str, original: Callable[..., Any],
                 home: str | None = None):
        self.name, self.kind, self.original, self.home = name, kind, original, home

    def __call__(self, args: tuple, kwargs: dict) -> Any:
        caller = sys._getframe(2).f_code.co_filename  # 0: here, 1: the gated function
        if is_internal(caller) or (self.home is not None and caller == self.home):
            return self.original(*args, **kwargs)
        raise ReferenceUnavailable(self.name, self.kind)


_GATE_CODE = _Gate.__call__.__code__


def _template(*args: Any, __gate__: Any = None, **kwargs: Any) -> Any:
    return __gate__(args, kwargs)


def _wrapper(gate: _Gate) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        return gate(args, kwargs)
    refuse.__name__ = refuse.__qualname__ = gate.name.rpartition(".")[2]
    return refuse


def _refuser(name: str) -> Callable[..., Any]:
    """For data or foreign objects named as extras: refuses every call, from anyone."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ReferenceUnavailable(name)
    return refuse


def _transparent(filename: str) -> bool:
    """Python's own library, installed packages and frozen modules: code that only passes a
    call on (``contextlib``'s wrappers, ``functools.partial``, numpy's dispatch), so the hook
    looks past it for the code that made the call."""
    return filename.startswith(_LIBRARY) and not filename.startswith(PACKAGE_DIR) \
        or filename.startswith("<frozen ")


_LIBRARY = tuple(sorted({os.path.join(os.path.abspath(path), "") for key, path
                         in sysconfig.get_paths().items()
                         if key in ("stdlib", "platstdlib", "purelib", "platlib")}))


def _served(frame: types.FrameType | None) -> bool:
    """Whether the call made from ``frame`` is tinyprof serving itself: the first frame back
    that is not library code (:func:`_transparent`) is tinyprof's own (not the grading
    machinery's) or a gate's. The notebook, the hidden tests and the grader's requests are
    not."""
    while frame is not None:
        code = frame.f_code
        if code is _GATE_CODE:
            return True
        filename = code.co_filename
        if filename.startswith(PACKAGE_DIR):
            return is_internal(filename)
        if not _transparent(filename):
            return False
        frame = frame.f_back
    return False


class Watch:
    """A profile hook that follows code, not names: a run of a switched-off implementation,
    however it was reached (a closure or decorated function captured before the switch
    opened, a container, another module holding it, a copy made by reflection), raises
    ReferenceUnavailable unless tinyprof itself made the call (:func:`_served`).

    Codes are matched by identity, and copies of tinyprof's own functions by
    ``(co_filename, co_firstlineno)``. A refusal the notebook catches is still remembered
    (``refused``), so the block that installed the hook fails anyway: CPython removes a
    profile function that raises, and a swallowed refusal must not leave the rest of the call
    unwatched and unpunished.

    The hook is ``sys.setprofile`` plus ``threading.setprofile`` (Python 3.11; on 3.12+ the
    same calls still work, built on ``sys.monitoring``). Its cost is one Python call per
    Python call and return (benchmarks/bench_reference_hook.py), so it is installed only
    around the calls that check the student's code, never around timed blocks. On 3.12+,
    ``sys.monitoring.set_local_events(tool, code, PY_START)`` on the watched codes alone would
    cost nothing elsewhere; not written while the course runs 3.11. Not seen: a function whose
    cached result is returned by C code without running it (``functools.lru_cache``)."""

    def __init__(self) -> None:
        self.codes: dict[int, tuple[types.CodeType, _Gate]] = {}   # id of a code → it, gate
        self.files: dict[str, dict[int, _Gate]] = {}   # file of one → first line → gate
        self.refused: list[ReferenceUnavailable] = []
        self.active = False
        self.hook = self._hook()

    def add(self, function: Any, gate: _Gate) -> None:
        """Watch ``function``'s code and the codes it wraps (``__wrapped__``, a bound method's
        ``__func__``): each one of tinyprof's own files or made for it alone (``<string>``, as
        a dataclass's ``__init__``), never a library wrapper's code that other functions
        share (``contextlib``'s)."""
        seen = 0
        while function is not None and seen < 16:
            seen += 1
            code = getattr(getattr(function, "__func__", function), "__code__", None)
            if isinstance(code, types.CodeType):
                self.add_code(code, gate)
            function = getattr(function, "__wrapped__", None)

    def add_code(self, code: types.CodeType, gate: _Gate) -> None:
        filename = code.co_filename
        if filename.startswith(PACKAGE_DIR):
            if os.path.abspath(filename) in GRADING_FILES:
                return
            self.files.setdefault(filename, {}).setdefault(code.co_firstlineno, gate)
        elif not filename.startswith("<") or filename.startswith("<frozen "):
            return
        else:
            self.files.setdefault(filename, {})   # ("<string>"): matched by identity only
        self.codes.setdefault(id(code), (code, gate))

    def _hook(self) -> Callable[[types.FrameType, str, Any], None]:
        """The profile function: a closure that does as little as it can on each of the
        many events (every Python call and return): one look-up of the code's file, and
        :meth:`_check` only for a file that holds a watched code (tinyprof's own, or the
        ``<string>`` of a generated one)."""
        files, check = self.files, self._check

        def hook(frame: types.FrameType, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code.co_filename in files:
                check(frame, frame.f_code)
        return hook

    def _check(self, frame: types.FrameType, code: types.CodeType) -> None:
        if not self.active:
            sys.setprofile(None)   # a thread that outlived the block
            return
        found = self.codes.get(id(code))
        gate = found[1] if found is not None else \
            self.files.get(code.co_filename, {}).get(code.co_firstlineno)
        if gate is None or _served(frame.f_back):
            return
        refusal = ReferenceUnavailable(gate.name, gate.kind)
        self.refused.append(refusal)
        raise refusal

    def watching(self) -> "_Watching":
        """A context manager: the hook on in this thread and in threads started meanwhile;
        the previous profile functions back after (the first refusal, even a caught one, is
        raised at the end of the block when the block itself did not raise)."""
        return _Watching(self)


class _Watching:
    def __init__(self, watch: Watch):
        self.watch = watch
        self.previous: tuple[Any, Any] = (None, None)

    def __enter__(self) -> None:
        import threading

        self.previous = (sys.getprofile(), threading.getprofile())
        self.watch.refused.clear()
        self.watch.active = True
        threading.setprofile(self.watch.hook)
        sys.setprofile(self.watch.hook)

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        import threading

        current = sys.getprofile()
        sys.setprofile(self.previous[0])
        threading.setprofile(self.previous[1])
        self.watch.active = False
        refused = list(self.watch.refused)
        self.watch.refused.clear()
        if refused and kind is None:
            raise ReferenceUnavailable(refused[0].route, refused[0].kind)
        if current is not self.watch.hook and not refused:
            # (CPython drops a profile function that raised: only then may it be gone)
            raise TamperingDetected(
                "the hidden tests' profile hook was replaced or removed while the student's "
                "code ran (sys.setprofile, cProfile): this submission is flagged for the "
                "instructor to review")


class Switch:
    """The context manager reference_unavailable() returns. With ``watch``, the profile hook
    (:class:`Watch`) is on inside the block too; the grader's requests (tinyprof.remote)
    turn it on around each call instead, and leave it off around speed measurements."""

    def __init__(self, extra: tuple[str, ...], namespace: dict | None = None,
                 watch: bool = False, keep: tuple[str, ...] = ()):
        self.extra = extra
        self.keep = tuple(keep)   # packages left on (a test whose loop uses a chapter's tools)
        self.namespace = namespace
        self.undo: list[Callable[[], None]] = []
        self.handled: set[int] = set()       # ids of everything switched off
        self.stand_ins: dict[int, Any] = {}  # id of an original replaced by attribute → stand-in
        self.codes: dict[int, _Gate] = {}    # id of a switched-off code object → its gate
        self.watch = Watch()
        self._watching = self.watch.watching() if watch else None

    def __enter__(self) -> None:
        namespace = self.namespace if self.namespace is not None else sys._getframe(1).f_globals
        guard(namespace)
        try:
            for route in routes():
                if not _kept(route, self.keep):
                    self._switch_off(route)
            for dotted in self.extra:
                found = resolve(dotted)
                if found is not None and id(raw_attribute(*found)) not in self.handled:
                    original = raw_attribute(*found)
                    self._extra_code(dotted, original)
                    self._replace(*found, _extra_stand_in(dotted, original))
            self._aliases(namespace)
            self._copies()
            if self._watching is not None:
                self._watching.__enter__()
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self._watching is not None and self.watch.active:
                self._watching.__exit__(*(exc_info or (None, None, None)))
        finally:
            for undo in reversed(self.undo):
                undo()
            self.undo.clear()
            self.handled.clear()
            self.stand_ins.clear()
            self.codes.clear()
            self.watch.codes.clear()
            self.watch.files.clear()

    def _switch_off(self, route: Route) -> None:
        target = route.target
        function = target.__func__ if isinstance(target, (staticmethod, classmethod)) else target
        if id(function) in self.handled:
            return
        gate = _Gate(route.name, route.kind, function)
        if isinstance(function, types.FunctionType) and not function.__closure__:
            self._swap_code(function, gate)
            return
        self.watch.add(function, gate)
        stand_in = _wrapper(gate)
        if isinstance(target, (staticmethod, classmethod)):
            stand_in = type(target)(stand_in)
        for owner, attr in route.places:
            self._replace(owner, attr, stand_in)

    def _extra_code(self, dotted: str, original: Any) -> None:
        """A named extra that is a Python function, or a numpy function whose implementation is
        one: its code is switched off too, so that a reference taken before the block, or the
        same function held by another module (``numpy.lib._function_base_impl.percentile``),
        reaches the gate (which serves the function's own module)."""
        function = getattr(original, "_implementation", original)
        if not isinstance(function, types.FunctionType) or id(function) in self.handled:
            return
        gate = _Gate(dotted, "function", function, function.__code__.co_filename)
        if function.__closure__:
            self.watch.add(function, gate)
        else:
            self._swap_code(function, gate)

    def _copies(self) -> None:
        """Functions that share a switched-off code object but are other function objects
        (copies made by reflection, ``types.FunctionType(f.__code__, ...)``) are switched off
        as well: one walk over the objects the garbage collector tracks."""
        import gc

        function, codes = types.FunctionType, self.codes
        found = [obj for obj in gc.get_objects()
                 if type(obj) is function and id(obj.__code__) in codes]
        for obj in found:
            gate = codes[id(obj.__code__)]
            if id(obj) not in self.handled and not obj.__closure__:
                self._swap_code(obj, _Gate(gate.name, gate.kind, obj, gate.home))

    def _swap_code(self, function: types.FunctionType, gate: _Gate) -> None:
        """Every reference to ``function`` now reaches the gate; the original runs on a copy."""
        code, defaults = function.__code__, function.__defaults__
        kwdefaults = function.__kwdefaults__
        copy = types.FunctionType(code, function.__globals__, function.__name__, defaults)
        copy.__kwdefaults__ = kwdefaults
        gate.original = copy
        self.handled.add(id(copy))   # the gate's own copy serves tinyprof: never a route
        names = {"co_name": code.co_name}
        if hasattr(code, "co_qualname"):
            names["co_qualname"] = code.co_qualname
        function.__code__ = _template.__code__.replace(**names)
        function.__defaults__, function.__kwdefaults__ = None, {"__gate__": gate}
        self.handled.add(id(function))
        self.codes[id(code)] = gate
        self.watch.add_code(code, gate)

        def undo() -> None:
            function.__code__ = code
            function.__defaults__, function.__kwdefaults__ = defaults, kwdefaults
        self.undo.append(undo)

    def _replace(self, owner: Any, attr: str, stand_in: Any) -> None:
        original = raw_attribute(owner, attr)
        self.handled.add(id(original))
        self.stand_ins[id(original)] = stand_in
        setattr(owner, attr, stand_in)
        self.undo.append(lambda: setattr(owner, attr, original))

    def _aliases(self, namespace: dict) -> None:
        """Names in the notebook bound to an object replaced by attribute get the stand-in."""
        for name, value in list(namespace.items()):
            stand_in = self.stand_ins.get(id(value))
            if stand_in is None or isinstance(stand_in, (staticmethod, classmethod)):
                continue
            namespace[name] = stand_in

            def undo(name: str = name, value: Any = value, stand_in: Any = stand_in) -> None:
                if namespace.get(name) is stand_in:
                    namespace[name] = value
            self.undo.append(undo)


def _kept(route: Route, keep: tuple[str, ...]) -> bool:
    """Whether ``route`` is bound in one of the packages ``keep`` names (a function of its
    modules, a method of its classes)."""
    homes = [getattr(owner, "__name__", "") if isinstance(owner, types.ModuleType)
             else getattr(owner, "__module__", "") for owner, _ in route.places]
    return bool(homes) and all(any(home == package or home.startswith(package + ".")
                                   for package in keep) for home in homes)


def _extra_stand_in(dotted: str, original: Any) -> Any:
    """A named extra: callables refuse the notebook but serve their own module; data refuses."""
    if not callable(original) or isinstance(original, type):
        return _refuser(dotted)
    code = getattr(original, "__code__", None)
    home = getattr(code, "co_filename", None)
    return _wrapper(_Gate(dotted, "function", original, home))
