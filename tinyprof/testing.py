"""Helpers for the chapters' test cells: failures that name the likely mistake, and hidden tests
that check the student's own code rather than tinyprof's, in a notebook the student controls.

``expect(got, want, what, hints)`` fails with "what: expected W, got G: <hint>", where the hint
is looked up by the wrong value the student produced (for example the value one gets by
forgetting the bias).

``expect_faster(candidate, baseline, make_inputs, at_least)`` grades a speed-up: the candidate
and the baseline run in interleaved rounds on fresh inputs, every output is checked against the
baseline's, and the test passes when the 95 % interval's lower bound reaches ``at_least``. Under
tinyprof's grader each side runs in its own kernel and is timed from outside (autograder/run/
speed.py); elsewhere (a plain kernel, stock nbgrader) it is measured here.

A grader that runs the test cells itself, outside the student's kernel (autograder/run/judge.py),
does so within ``judged_by(judge)``: there ``expect_faster`` above and ``reference_unavailable``
below leave their work to the judge (:class:`Judging`: ``switch`` and ``measure_speed``).

``reference_unavailable()`` switches off every public route to an answer while the hidden tests
run. The routes are found by walking the package (:func:`routes`), never listed by hand: every
public function of every tinyprof module, and every public method and constructor of every
tinyprof class, except the few building blocks an exercise walks (a layer's ``forward``,
``named_modules``, ``own_parameters``; a ``Parameter``'s fields). A switched-off function raises
ReferenceUnavailable when the notebook calls it, under any alias (its code object is swapped,
so ``from tinyprof import count_parameters`` or a bound ``Profiler().count_parameters`` is
caught too); tinyprof's own internals keep calling each other normally. What cannot take a
swapped code (a function with a closure, such as a dataclass's ``__init__``; a decorated one,
such as a ``contextlib.contextmanager``) is replaced by name, and a profile hook (``_Watch``)
follows its code: while the student's code is checked (each grader "call" request, or the
test's own ``with`` block), any run of a switched-off code, however it was reached, raises
ReferenceUnavailable unless tinyprof itself made the call; a refusal the notebook swallows
still fails the block. Speed measurements never run under the hook.

On entry it also puts back test helpers the notebook rebound (``expect = lambda *a: None``)
and raises TamperingDetected when notebook code was planted in tinyprof, ``builtins``,
``sys.modules`` or IPython's hooks, or a module the set-up cell imported (``np``, ``tp``) was
replaced. That check runs after the student's code and can be lied to; the grader's static
review of the submitted cells (autograder/intake/review.py) is the one an instructor relies on.
This module cannot be reassigned (``tinyprof.testing.expect = ...`` raises AttributeError).
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import importlib
import math
import os
import pkgutil
import sys
import sysconfig
import types
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterator, Mapping, Protocol

from tinyprof import _GRADING_MACHINERY

#: Methods of tinyprof.nn layers that exercises build on: they stay available.
BUILDING_BLOCKS = frozenset({"__call__", "forward", "backward", "children", "own_parameters",
                             "named_modules"})
#: Classes whose every member stays available: the parameter objects exercises read.
OPEN_CLASSES = ("tinyprof.nn.Parameter", "tinyprof.nn.ShapeOnly")
#: Printed by the hidden tests when they had to put a rebound helper back (the grader reads it).
MARK = "[tinyprof integrity]"

#: Set by :func:`judged_by` while the grader's judge runs a test cell outside the student's
#: kernel.
_JUDGE: contextvars.ContextVar[Any] = contextvars.ContextVar("tinyprof_judge", default=None)

#: The grading machinery itself (this module, the kernel's side of the grader's requests and
#: their format): never switched off, never reported as tinyprof's code. The modules are
#: listed by the package (``tinyprof._GRADING_MACHINERY``), not named here: this module is
#: below them (tinyprof.remote imports it), and the package's roll is read once, now.
_GRADING_MODULES = frozenset({__name__} | {f"tinyprof.{name}" for name in _GRADING_MACHINERY})

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_THIS_FILE = os.path.abspath(__file__)


class Judging(Protocol):
    """What a grader that runs the test cells itself (autograder/run/judge.py's ``Judge``) offers
    the helpers while it judges (:func:`judged_by`): the test runs in the grader, the
    student's code in the student's kernel."""

    def switch(self, extra: tuple[str, ...]) -> ContextManager[None]:
        """A context manager: ``reference_unavailable(*extra)`` opened in the student's
        kernel around the calls the test's ``with`` block makes there."""

    def measure_speed(self, candidate: Any, baseline: Callable, make_inputs: Callable,
                      *, rounds: int, rtol: float, atol: float) -> Any:
        """:func:`expect_faster`'s measurement, made by the grader: a
        :class:`~tinyprof.timing.speed.Speedup` (or an object with its ``tier_line``,
        ``reaches`` and ``describe``); AssertionError when an output differs."""


@contextlib.contextmanager
def judged_by(judge: Judging) -> Iterator[Judging]:
    """Within the block, :func:`reference_unavailable` and :func:`expect_faster` leave their
    work to ``judge`` (:class:`Judging`), a grader that runs the test cell outside the
    student's kernel: ``reference_unavailable(*extra)`` is ``judge.switch(extra)``, and
    ``expect_faster`` uses ``judge.measure_speed``. The previous judge (usually none) is back
    after the block; blocks nest, and each thread or task sees its own (a context variable)."""
    token = _JUDGE.set(judge)
    try:
        yield judge
    finally:
        _JUDGE.reset(token)


def current_judge() -> Any:
    """The judge :func:`judged_by` set for this thread or task, or None (the test runs in the
    student's kernel): what other helpers (``tinyprof.memcheck``) hand their work to."""
    return _JUDGE.get()


class ReferenceUnavailable(RuntimeError):
    """Raised when an exercise calls the tinyprof function it is meant to re-implement.

    ``route`` is the dotted name that was refused and ``kind`` what it is ("function",
    "method" or "constructor"); the message is :func:`unavailable_message` of the two, so a
    grader that receives only the name can say the same sentence."""

    def __init__(self, route: str, kind: str = "function"):
        self.route, self.kind = route, kind
        super().__init__(unavailable_message(route, kind))


def unavailable_message(route: str, kind: str = "function") -> str:
    """What a student is told when ``route`` (a dotted name of kind ``kind``) is refused."""
    if kind == "constructor":
        return (f"building a {route} is switched off while your function is checked: compute "
                "the answer from the formula yourself instead of building a tinyprof object "
                "and asking it")
    return (f"{route} is switched off while your function is checked: the exercise asks you to "
            "compute this yourself rather than call tinyprof's own implementation")


class TamperingDetected(RuntimeError):
    """The notebook changed what the hidden tests rely on: their result cannot be trusted."""


def _matches(got: Any, candidate: Any, rel: float) -> bool:
    try:
        return math.isclose(float(got), float(candidate), rel_tol=rel, abs_tol=0.0)
    except (TypeError, ValueError):
        return got == candidate


def expect(got: Any, want: Any, what: str, hints: Mapping[Any, str] | None = None,
           rel: float = 0.0, otherwise: str = "") -> None:
    """Assert ``got`` equals ``want`` (within relative tolerance ``rel``), else fail with a
    message naming ``what`` and, when ``got`` is a known wrong answer, the likely mistake."""
    if got is None:
        raise AssertionError(f"{what}: got None; did you forget to return the result?")
    if _matches(got, want, rel):
        return
    hint = next((text for value, text in (hints or {}).items() if _matches(got, value, 1e-9)),
                otherwise)
    wanted = f"{want:,}" if isinstance(want, int) and not isinstance(want, bool) else repr(want)
    raise AssertionError(f"{what}: expected {wanted}, got {shown(got)}"
                         + (f". {hint}" if hint else ""))


#: A value the student's code produced is quoted in a failure message up to this many
#: characters; a longer one is described (its type and size) instead.
SHOWN_CHARS = 80


def shown(value: Any) -> str:
    """``value`` as a failure message quotes it: its ``repr`` (integers with thousands
    separators) when at most SHOWN_CHARS characters long, else what it is and how big. A message
    stays readable, and what the student's code returns cannot fill the feedback page."""
    try:
        text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) \
            else repr(value)
    except Exception:  # noqa: BLE001 - an object whose repr fails is described by its type
        text = ""
    if text and len(text) <= SHOWN_CHARS:
        return text
    kind = type(value).__name__
    if isinstance(value, int):
        return f"an integer of {len(str(abs(value))):,} digits"
    if isinstance(value, str):
        return f"a string of {len(value):,} characters"
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        return f"an array of shape {shape} ({getattr(value, 'dtype', kind)})"
    try:
        return f"a {kind} of {len(value):,} items"
    except Exception:  # noqa: BLE001 - no length: say what it is
        return f"a {kind}"


def same(got: Any, want: Any, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """True when ``got`` has ``want``'s structure (tuples and lists item by item, dicts key by
    key) and its numbers and arrays are within atol + rtol·|want| of it, shapes equal. Calls no
    other tinyprof function, so that hidden tests can use it with tinyprof switched off."""
    import numpy as np

    if isinstance(want, dict):
        return (isinstance(got, dict) and set(got) == set(want)
                and all(same(got[k], want[k], rtol, atol) for k in want))
    if isinstance(want, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(want)
                and all(same(g, w, rtol, atol) for g, w in zip(got, want)))
    try:
        return (np.shape(got) == np.shape(want)
                and bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)))
    except (TypeError, ValueError):
        return False


def which(got: Any, variants: Mapping[str, Any], rtol: float = 1e-6, atol: float = 1e-9) -> str:
    """The name of the first of ``variants`` (name → value: the right answer and those of
    likely mistakes) that ``got`` is :func:`same` as, else ``"something else"``; for
    ``expect(which(got, variants), "right", what, hints={mistake: hint})``."""
    return next((name for name, value in variants.items() if same(got, value, rtol, atol)),
                "something else")


# --- speed -------------------------------------------------------------------------------------

#: Speed measurements made in this kernel (no grader), so that a chapter's tier cells (2×, 4×,
#: 8×) share one: measurement key → (the objects measured, kept alive, and the result).
_SPEED: dict[tuple, tuple[tuple, Any]] = {}


def expect_faster(candidate: Callable, baseline: Callable, make_inputs: Callable[[int], tuple],
                  at_least: float = 2.0, *, rounds: int = 11, rtol: float = 1e-4,
                  atol: float = 1e-6) -> Any:
    """Assert that ``candidate`` computes what ``baseline`` computes, faster by ``at_least``:
    the lower bound of the 95 % bootstrap interval of median(baseline) / median(candidate),
    over ``rounds`` interleaved rounds of calls on fresh inputs ``make_inputs(seed)``
    (:func:`tinyprof.timing.speed.measure_speedup`). Prints what was measured; returns the
    :class:`~tinyprof.timing.speed.Speedup`. The same three functions measured again (another
    tier) reuse the measurement.

    The candidate must not call tinyprof: it is run once with tinyprof switched off
    (:func:`reference_unavailable`) before it is timed, and, under the grader, throughout."""
    judge = _JUDGE.get()
    if judge is not None:
        result = judge.measure_speed(candidate, baseline, make_inputs, rounds=rounds,
                                     rtol=rtol, atol=atol)
    else:
        result = _speed_here(candidate, baseline, make_inputs, rounds, rtol, atol,
                             sys._getframe(1).f_globals)
    print(result.tier_line(at_least))
    if not result.reaches(at_least):
        raise AssertionError(f"not {at_least:g}× faster with 95% confidence: {result.describe()}")
    return result


def _speed_here(candidate: Callable, baseline: Callable, make_inputs: Callable[[int], tuple],
                rounds: int, rtol: float, atol: float, namespace: dict) -> Any:
    """The measurement in this kernel, once per key (see :data:`_SPEED`)."""
    from .timing.speed import first_difference, measure_speedup

    code = getattr(candidate, "__code__", None)
    key = (id(candidate), id(code), id(baseline), id(make_inputs), rounds, rtol, atol)
    if key in _SPEED:
        return _SPEED[key][1]
    args = make_inputs(2**40)
    want = baseline(*args)
    with Switch((), namespace, watch=True):
        got = candidate(*args)
    found = first_difference(got, want, rtol, atol)
    if found:
        raise AssertionError(f"{found}; a faster version must compute what the baseline "
                             "computes")
    result = measure_speedup(candidate, baseline, make_inputs, rounds=rounds, rtol=rtol,
                             atol=atol)
    _SPEED[key] = ((candidate, code, baseline, make_inputs), result)
    return result


# --- the routes: every public callable of the package ----------------------------------------

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
        if info.name in _GRADING_MODULES:
            continue
        if info.name in torch_modules and "torch" not in sys.modules:
            continue  # the torch wing's modules: nobody can call them before torch is loaded
        try:
            found.append(importlib.import_module(info.name))
        except ImportError:  # an optional dependency is missing: nobody can call it either
            continue
    return found


def _ours(obj: Any) -> bool:
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and (module == "tinyprof" or module.startswith("tinyprof.")) \
        and module not in _GRADING_MODULES


def _preferred(names: list[str]) -> str:
    """The shortest public spelling: ``tinyprof.count_parameters`` over ``tinyprof.params...``,
    and any public one over a private one."""
    return min(names, key=lambda n: ("._" in n, n.count("."), len(n), n))


def _class_routes(cls: type, name: str) -> Iterator[Route]:
    from tinyprof.nn import Module

    if issubclass(cls, BaseException) or any(cls is _raw(*_resolve(open_class))
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
            if _dunder(attr) or isinstance(value, types.ModuleType) or not _ours(value):
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


# --- switching routes off --------------------------------------------------------------------

#: Files of the grading machinery: a call from them is the test's (or the grader's request on
#: the test's behalf), never tinyprof's own, so the switch applies to it.
_GRADING_FILES = frozenset(os.path.join(_PACKAGE_DIR, *name.split(".")[1:]) + ".py"
                           for name in _GRADING_MODULES)


def _internal(filename: str) -> bool:
    """Code of tinyprof itself (not the grading machinery): its calls pass through the
    switch."""
    return filename.startswith(_PACKAGE_DIR) and os.path.abspath(filename) not in _GRADING_FILES


class _Gate:
    """Called instead of a switched-off callable: refuses the notebook, serves tinyprof."""

    def __init__(self, name: str, kind: str, original: Callable[..., Any],
                 home: str | None = None):
        self.name, self.kind, self.original, self.home = name, kind, original, home

    def __call__(self, args: tuple, kwargs: dict) -> Any:
        caller = sys._getframe(2).f_code.co_filename  # 0: here, 1: the gated function
        if _internal(caller) or (self.home is not None and caller == self.home):
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


def _resolve(dotted: str) -> tuple[Any, str] | None:
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


def _transparent(filename: str) -> bool:
    """Python's own library, installed packages and frozen modules: code that only passes a
    call on (``contextlib``'s wrappers, ``functools.partial``, numpy's dispatch), so the hook
    looks past it for the code that made the call."""
    return filename.startswith(_LIBRARY) and not filename.startswith(_PACKAGE_DIR) \
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
        if filename.startswith(_PACKAGE_DIR):
            return _internal(filename)
        if not _transparent(filename):
            return False
        frame = frame.f_back
    return False


class _Watch:
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
        if filename.startswith(_PACKAGE_DIR):
            if os.path.abspath(filename) in _GRADING_FILES:
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
    def __init__(self, watch: _Watch):
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
    (:class:`_Watch`) is on inside the block too; the grader's requests (tinyprof.remote)
    turn it on around each call instead, and leave it off around speed measurements."""

    def __init__(self, extra: tuple[str, ...], namespace: dict | None = None,
                 watch: bool = False):
        self.extra = extra
        self.namespace = namespace
        self.undo: list[Callable[[], None]] = []
        self.handled: set[int] = set()       # ids of everything switched off
        self.stand_ins: dict[int, Any] = {}  # id of an original replaced by attribute → stand-in
        self.codes: dict[int, _Gate] = {}    # id of a switched-off code object → its gate
        self.watch = _Watch()
        self._watching = self.watch.watching() if watch else None

    def __enter__(self) -> None:
        namespace = self.namespace if self.namespace is not None else sys._getframe(1).f_globals
        _guard(namespace)
        try:
            for route in routes():
                self._switch_off(route)
            for dotted in self.extra:
                found = _resolve(dotted)
                if found is not None and id(_raw(*found)) not in self.handled:
                    original = _raw(*found)
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
        original = _raw(owner, attr)
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


def _raw(owner: Any, attr: str) -> Any:
    return owner.__dict__.get(attr, getattr(owner, attr)) if hasattr(owner, "__dict__") \
        else getattr(owner, attr)


def _extra_stand_in(dotted: str, original: Any) -> Any:
    """A named extra: callables refuse the notebook but serve their own module; data refuses."""
    if not callable(original) or isinstance(original, type):
        return _refuser(dotted)
    code = getattr(original, "__code__", None)
    home = getattr(code, "co_filename", None)
    return _wrapper(_Gate(dotted, "function", original, home))


def reference_unavailable(*extra: str, namespace: dict | None = None) -> Any:
    """Within the block, every route of :func:`routes` (and any ``extra`` dotted names, such as
    ``"numpy.percentile"`` or a data table like ``"tinyprof.memory.training.STATE_SLOTS"``)
    raises ReferenceUnavailable when the notebook uses it; all are restored after. The switch
    changes code, not only names: a function's code is swapped for a gate, so references taken
    before the block (default arguments, containers), numpy's extras reached through another
    numpy module, and copies made by reflection reach the gate too.

    On entry, test helpers the notebook rebound are put back, and TamperingDetected is raised
    when notebook code was planted in tinyprof, builtins, sys.modules or IPython's hooks.
    ``namespace`` is the notebook's (default: the caller's globals).

    When the grader runs the test itself (autograder/run/judge.py, :func:`judged_by`), the
    block is opened in the student's kernel around the calls the test makes there, and nothing
    is switched off here."""
    judge = _JUDGE.get()
    return Switch(extra, namespace, watch=True) if judge is None else judge.switch(extra)


# --- the runtime check -----------------------------------------------------------------------

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


def _helpers() -> dict[str, Any]:
    return {"expect": expect, "expect_faster": expect_faster, "same": same, "which": which,
            "reference_unavailable": reference_unavailable,
            "ReferenceUnavailable": ReferenceUnavailable, "TamperingDetected": TamperingDetected}


def _guard(namespace: dict) -> None:
    """Put back rebound helpers (and say so), then refuse to test a tampered kernel."""
    for name, genuine in _helpers().items():
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
    if sys.modules.get(__name__) is not _THIS_MODULE:
        problems.append(f"sys.modules[{__name__!r}] was replaced")
    package = sys.modules.get("tinyprof")
    if getattr(package, "_GRADING_MACHINERY", None) is not _GRADING_MACHINERY:
        problems.append("tinyprof._GRADING_MACHINERY was rebound")
    for name, module in list(sys.modules.items()):
        if name == "tinyprof" or name.startswith("tinyprof."):
            where = getattr(module, "__file__", None) or ""
            if not isinstance(module, types.ModuleType) or not _internal(where) and \
                    os.path.abspath(where) not in _GRADING_FILES:
                problems.append(f"sys.modules[{name!r}] is not tinyprof's own module")
    for name, genuine in _helpers().items():
        if vars(_THIS_MODULE).get(name) is not genuine:
            problems.append(f"{__name__}.{name} was replaced")
    return problems


def _tinyprof_problems() -> list[str]:
    problems = []
    for name, module in list(sys.modules.items()):
        if not (name == "tinyprof" or name.startswith("tinyprof.")) \
                or not isinstance(module, types.ModuleType):
            continue
        owners = [(name, module)] + [(f"{name}.{k}", v) for k, v in vars(module).items()
                                     if isinstance(v, type) and _ours(v)]
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


# --- sealing: the test helpers cannot be reassigned --------------------------------------------


class _Sealed(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name == "__annotations__":  # type hints change nothing a test runs (Sphinx sets them)
            return super().__setattr__(name, value)
        raise AttributeError(f"{__name__}.{name} cannot be changed: the hidden tests rely on it")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{__name__}.{name} cannot be deleted: the hidden tests rely on it")


_SETUP = _remember_setup()
_THIS_MODULE = sys.modules[__name__]
types.ModuleType.__setattr__(_THIS_MODULE, "__class__", _Sealed)
