"""Hidden tests decided in the grader: the judge runs a test cell, the kernel the student's code.

nbgrader runs a test cell in the student's kernel, so a kernel that patches ``math.isclose``,
fakes its own execution or prints ``In`` could decide or read its own verdict. The grader runs
each test cell here instead, in the grading worker, in a namespace of its own:

- the libraries that compute expected values (``JUDGE_LIBRARIES``: numpy, tinyprof, math),
  imported as the instructor's notebook imports them;
- every other name the cell reads (the student's functions, the chapter's objects such as
  ``tiny`` or ``FakeClock``, a module the notebook imported such as ``tracemalloc``) stands for
  the object of that name in the student's kernel: a :class:`Kernel` handle.

Using a handle sends one request to the kernel (``tinyprof/remote.py``): read a public
attribute, or call it with the test's inputs. Inputs go as a pickle (the kernel learns the
inputs, never the expected values, tolerances or hints); functions the test defines and passes
in are shipped by value (cloudpickle) and run in the kernel. What comes back is plain data, JSON
with ``.npy`` arrays (the format both sides share, ``tinyprof/wire.py``), decoded without pickle
and size-capped; anything else stays in the kernel as another handle, which has no value of
its own: comparing, converting or testing it never asks the kernel. ``expect`` and every
comparison run here, so a kernel that lies gains nothing unless the values it returns are
right. A test's ``with reference_unavailable(...)`` block opens the same switch in the kernel
around the calls made inside it.

The verdict (:class:`Verdict`) is the grader's own: passed, or the failure message the test
raised (``expect``'s hint), or a sentence the grader writes for what happened in the kernel
(which exception type the student's code raised, a time-out, no answer). Test cells that stock
nbgrader runs in the kernel need no change: the same source runs here.
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import io
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from tinyprof import wire

from ..cells import TIMEOUT_ENAME

#: Top-level packages whose names a test uses here, in the grader, to compute expected values.
JUDGE_LIBRARIES = frozenset({"numpy", "tinyprof", "math"})
#: The grader's sentence when the runtime check in the kernel reports tampering (what the
#: kernel says about it is not shown: the static review names what was changed).
TAMPERED = ("the runtime check in the student's kernel found test machinery changed (the "
            "static review says where); this test scores 0")
#: A failure message longer than this is cut.
MAX_MESSAGE_CHARS = 1_200
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,79}")


#: What a test may use when the instructor's notebook cannot be read.
DEFAULT_PRELUDE = "import numpy as np\nimport tinyprof as tp\nfrom tinyprof.testing import expect"


class Interrupted(BaseException):
    """The conversation with the kernel ended for this test. A BaseException, so that a test's
    own ``except Exception`` (a test that checks what the student's code raises) cannot take
    it for the student's exception."""


class KernelError(Interrupted):
    """A request to the kernel got no answer, or a malformed one."""


class TestTimedOut(Interrupted):
    """The student's code ran past the test's CPU or wall-clock limit."""

    __test__ = False   # not a pytest class


class StudentError(Exception):
    """The student's code raised an exception that is not one of Python's own."""


#: Version of the verdict record kept in an autograded test cell's ``metadata.tinyprof``.
VERDICT_VERSION = 1


@dataclass
class Verdict:
    """A test cell's outcome, decided here: ``passed``, or ``ename: message``; ``printed`` is
    what the test itself printed; ``review`` holds sentences for the instructor (signs that the
    kernel was changed), never anything the kernel wrote."""

    passed: bool
    ename: str = ""
    message: str = ""
    printed: str = ""
    review: list[str] = field(default_factory=list)
    #: What the grader measured in the test (:func:`measurement`): a speed-up, the device's
    #: busy share, memory growth per step; read by the cohort report (results.cohort_report).
    measured: list[dict] = field(default_factory=list)

    def record(self) -> dict:
        """The typed record kept in the autograded notebook."""
        record = {"version": VERDICT_VERSION, "passed": self.passed, "ename": self.ename,
                  "message": self.message}
        return {**record, "measured": self.measured} if self.measured else record


def measurement(kind: str, result: Any) -> dict | None:
    """Plain data for what a speed (``speed``: the speed-up and its 95 % interval's lower
    bound), busy-device (``busy``: the share of the run the device was busy) or leak test
    (``leak``: bytes of growth per step beyond the slack its runs are allowed, the larger of
    what the loop kept and held: the number the test holds to its tolerance) measured;
    None when ``result`` does not have it (the measurement itself is never in doubt)."""
    try:
        if kind == "speed":
            return {"kind": kind, "value": round(float(result.speedup), 4),
                    "low": round(float(result.ci[0]), 4)}
        if kind == "busy":
            return {"kind": kind, "value": round(float(result.utilization), 4)}
        if kind == "leak":   # what expect_leak_free holds to its tolerance (memcheck.py)
            from tinyprof.memcheck import HELD_SLACK, KEPT_SLACK

            steps = result.short.steps
            return {"kind": kind, "value": round(float(max(
                result.kept_per_step - KEPT_SLACK / steps,
                result.held_per_step - HELD_SLACK / steps)), 1)}
    except Exception:  # noqa: BLE001 - a record for the report only: never fail a test for it
        return None
    return None


class Kernel:
    """An object in the student's kernel: a global of the notebook, or one a call returned.

    Reading a public attribute or calling it asks the kernel; nothing else does. It has no
    value here: ``==`` is identity, ``bool`` is True, ``float``/``len``/iteration fail."""

    __slots__ = ("_judge", "_ref", "_label")

    def __init__(self, judge: Judge, ref: tuple[str, Any], label: str):
        object.__setattr__(self, "_judge", judge)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_label", label)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"{self._label}.{name}: a test reads only public attributes "
                                 "of objects in the student's kernel")
        return self._judge.get(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._label} lives in the student's kernel and cannot be changed")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._judge.call(self, None, args, kwargs)

    def __enter__(self) -> Any:
        return self._judge.call(self, "__enter__", (), {})

    def __exit__(self, *exc_info: object) -> bool:
        self._judge.call(self, "__exit__", (None, None, None), {})
        return False   # never let the kernel swallow a failure

    def __repr__(self) -> str:
        return f"<{self._label} in the student's kernel>"

    def __reduce__(self) -> Any:
        raise TypeError(f"{self._label} lives in the student's kernel and cannot be copied")


class Judge:
    """Runs test cells here; ``send(expression, cleanup)`` has the kernel evaluate one
    expression and returns the ``text/plain`` of its value (None when it gave none);
    ``cleanup`` requests are sent even when the test's time is up. ``quick(request,
    cleanup)``, where given, carries ``tinyprof.wire.QUICK_REQUESTS`` by a cheaper route (the
    grader's comm, tinyprof.remote.listen): it takes the request itself (base64 of its
    pickle) and returns the same text."""

    def __init__(self, send: Callable[[str, bool], str | None],
                 fatal: tuple[type[BaseException], ...] = (), speed: Any = None,
                 quick: Callable[[str, bool], str | None] | None = None, memory: Any = None,
                 pipeline: Any = None):
        self.send, self.fatal, self.speed, self.quick = send, fatal, speed, quick
        self.memory = memory   # memory_check.LeakBench: expect_leak_free's readings
        self.pipeline = pipeline   # pipeline_check.PipelineBench: expect_busy_device's device
        self.broken = False   # a fatal error ended the conversation: send nothing more
        self.measured: list[dict] = []   # what this test measured (Verdict.measured)
        self._routes: dict[str, str] | None = None
        self._extras: set[str] = set()

    # -- running a test cell ----------------------------------------------------------------

    def run(self, source: str, prelude: str, label: str = "test") -> Verdict:
        """Run a test cell's ``source`` after ``prelude`` (the instructor's library imports);
        the verdict holds what the test's speed, busy-device and leak checks measured."""
        self.measured = []
        verdict = self._decide(source, prelude, label)
        verdict.measured = list(self.measured)
        return verdict

    def _decide(self, source: str, prelude: str, label: str) -> Verdict:
        import tinyprof.testing as testing

        namespace: dict[str, Any] = {"__name__": "tinyprof_judge", "__builtins__": builtins}
        printed = io.StringIO()
        try:
            with testing.judged_by(self):
                exec(compile(prelude, "<judge prelude>", "exec"), namespace)  # noqa: S102
                code = compile(source, f"<{label}>", "exec")
                for name in sorted(kernel_names(source, namespace)):
                    namespace[name] = Kernel(self, ("global", name), name)
                with contextlib.redirect_stdout(printed):
                    exec(code, namespace)  # noqa: S102 - the instructor's test, run here
        except self.fatal:
            raise
        except TestTimedOut as limit:
            return Verdict(False, TIMEOUT_ENAME, _cut(str(limit)), _cut(printed.getvalue()))
        except KernelError as broken:
            return Verdict(False, "KernelError", _cut(str(broken)), _cut(printed.getvalue()),
                           review=[f"the kernel broke the grader's protocol: {broken}"])
        except AssertionError as failure:
            return Verdict(False, "AssertionError", _cut(str(failure)), _cut(printed.getvalue()),
                           review=list(getattr(failure, "review", [])))
        except testing.TamperingDetected:
            return Verdict(False, "TamperingDetected", TAMPERED, _cut(printed.getvalue()),
                           review=[TAMPERED])
        except Exception as error:  # noqa: BLE001 - any other failure is the test's failure
            return Verdict(False, type(error).__name__, _cut(str(error)), _cut(printed.getvalue()))
        return Verdict(True, printed=_cut(printed.getvalue()))

    # -- requests ---------------------------------------------------------------------------

    def get(self, target: Kernel, name: str) -> Any:
        return self._ask((wire.GET, target, name), f"{target._label}.{name}")

    def call(self, target: Kernel, method: str | None, args: tuple, kwargs: dict) -> Any:
        """``target(*args, **kwargs)`` (or ``target.method(...)``) in the kernel; lists, dicts
        and arrays among the arguments get the state the call left them in."""
        mutable = (list, dict) + _ndarray_type()
        copy_back = [i for i, a in enumerate(args) if isinstance(a, mutable)] + \
            [k for k, a in kwargs.items() if isinstance(a, mutable)]
        label = target._label if method is None else f"{target._label}.{method}"
        answer = self._ask((wire.CALL, target, method, tuple(args), dict(kwargs), copy_back),
                           label, whole=True)
        for key, state in answer.get("copied", {}).items():
            original = args[int(key)] if key.isdigit() else kwargs.get(key)
            _restore(original, self._decode(state))
        return self._decode(answer.get("value"), label)

    def make(self, make_inputs: Callable, seeds: list[int]) -> Kernel:
        """``make_inputs(seed)`` for each seed, made and kept in the kernel; their handle."""
        return self._handle(self._ask((wire.MAKE, make_inputs, list(seeds)), "the inputs"),
                            "the inputs")

    def time_calls(self, target: Any, calls: Kernel, watched: bool = False) -> Kernel:
        """``target(*args)`` for each ``args`` of ``calls`` (a :meth:`make` handle on a list)
        in the kernel, one block; the outputs stay there (a handle for :meth:`pick`).
        ``watched``: under the switch's profile hook, as a "call" is (for a block whose time
        is not used: the hook slows every Python call)."""
        label = getattr(target, "_label", None) or getattr(target, "__name__", "the function")
        request = (wire.TIME, target, calls._ref[1]) + ((True,) if watched else ())
        return self._handle(self._ask(request, label), label)

    @staticmethod
    def _handle(answer: Any, label: str) -> Kernel:
        if type(answer) is not Kernel or answer._ref[0] != "object":
            raise KernelError(f"the kernel's answer to {label} is not a handle")
        return answer

    def pick(self, outputs: Kernel, fractions: list[float], seed: int, sketches: int) -> Any:
        """The outputs of a :meth:`time_calls` block, each array read at the positions
        ``floor(u · size)``, u in ``fractions``, and projected whole on ``sketches`` vectors
        of random signs drawn from ``seed`` (``("sampled", type, shape, values, sketch, l1,
        l2)``, tinyprof.remote)."""
        return self._ask((wire.PICK, outputs._ref[1], list(fractions), int(seed), int(sketches)),
                         "the outputs")

    def measure_speed(self, candidate: Any, baseline: Callable, make_inputs: Callable,
                      **settings: Any) -> Any:
        """``expect_faster``'s measurement, made by the grader (autograder/run/speed.py)."""
        if self.speed is None:
            raise RuntimeError("this grader runs no clean kernel, so it cannot time a speed "
                               "test: grade with python -m autograder grade")
        return self._measured("speed", self.speed.measure(self, candidate, baseline,
                                                          make_inputs, **settings))

    def measure_leaks(self, loop: Any, **settings: Any) -> Any:
        """``expect_leak_free``'s run, memory read by the grader (run/memory_check.py)."""
        if self.memory is None:
            raise RuntimeError("this grader cannot read the kernel's memory: grade with python -m "
                               "autograder grade")
        got, check = self.memory.measure(self, loop, **settings)
        self._measured("leak", check)
        return got, check

    def measure_pipeline(self, loop: Any, task: Any) -> tuple[Any, Any]:
        """``expect_busy_device``'s run on the grader's storage and device
        (run/pipeline_check.py): the values, and the device's BusyCheck."""
        if self.pipeline is None:
            raise RuntimeError("this grader serves no storage and device to the kernel: grade "
                               "with python -m autograder grade")
        if type(loop) is not Kernel:
            raise TypeError("expect_busy_device runs a function of the student's notebook: pass it "
                            f"by its name, got {type(loop).__name__}")
        got, check = self.pipeline.measure(self, loop, task)
        self._measured("busy", check)
        return got, check

    def _measured(self, kind: str, result: Any) -> Any:
        """Keep what a check measured for the verdict's record; ``result`` unchanged."""
        found = measurement(kind, result)
        if found is not None:
            self.measured.append(found)
        return result

    def _route(self, claimed: Any) -> tuple[str, str] | None:
        """The route a ReferenceUnavailable named, if it is one the switch really turns off
        (a kernel's other text never reaches the student)."""
        from tinyprof.testing import routes

        if not (isinstance(claimed, list) and len(claimed) == 2
                and all(isinstance(part, str) for part in claimed)):
            return None
        if self._routes is None:
            self._routes = {route.name: route.kind for route in routes()}
        name, kind = claimed
        if name in self._extras:
            return name, "function"
        return (name, self._routes[name]) if name in self._routes else None

    @contextlib.contextmanager
    def switch(self, extra: tuple[str, ...], keep: tuple[str, ...] = ()) -> Iterator[None]:
        """``reference_unavailable(*extra)`` opened in the kernel for the calls in the block
        (``keep``: packages of tinyprof left on)."""
        self._extras.update(extra)
        self._ask((wire.SWITCH, tuple(extra)) + ((tuple(keep),) if keep else ()),
                  "reference_unavailable")
        try:
            yield
        except BaseException:
            self._close_switch(quiet=True)
            raise
        self._close_switch(quiet=False)

    def _close_switch(self, quiet: bool) -> None:
        """Switch tinyprof back on in the kernel, even after a time-out (the rest of the
        notebook runs tinyprof's own code); ``quiet`` when another failure is on its way."""
        if self.broken:
            return
        try:
            self._ask((wire.UNSWITCH,), "reference_unavailable", cleanup=True)
        except Interrupted:
            if not quiet:
                raise

    def _ask(self, request: tuple, label: str, whole: bool = False,
             cleanup: bool = False) -> Any:
        payload = base64.b64encode(_pickle(request)).decode("ascii")
        try:
            if self.quick is not None and request[0] in wire.QUICK_REQUESTS:
                text = self.quick(payload, cleanup)
            else:
                text = self.send(wire.answer_request(payload), cleanup)
        except self.fatal:
            self.broken = True
            raise
        answer = _parse(text, label)
        if "missing" in answer:
            raise NameError(f"{label} is not defined in your notebook: did the cell that "
                            "defines it run without an error?")
        if "raised" in answer:
            _raise_students(answer["raised"], label, self._route(answer.get("route")))
        if "value" not in answer:
            raise KernelError(f"the kernel's answer to {label} has no value")
        return answer if whole else self._decode(answer["value"], label)

    def _decode(self, data: Any, label: str = "the answer") -> Any:
        """The value in an answer (tinyprof.wire.decode: never unpickles), each kernel object
        as a :class:`Kernel` handle."""
        def handle(number: int) -> Kernel:
            return Kernel(self, ("object", number), f"the object {label} returned")

        try:
            return wire.decode(data, handle)
        except wire.Malformed as wrong:
            raise KernelError(f"the kernel's answer to {label} {wrong}") from None


def handle_key(handle: Kernel) -> tuple:
    """What a handle stands for in the kernel (a global's name, or a kept object's number),
    hashable: the same object of the kernel gives the same key."""
    return handle._ref


def kernel_names(source: str, namespace: dict) -> set[str]:
    """Names ``source`` reads that neither it, the namespace nor builtins define: the names of
    the student's kernel."""
    tree = ast.parse(source)
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return {name for name in read - bound
            if name not in namespace and not hasattr(builtins, name)}


def prelude(instructor: dict) -> str:
    """The import statements of the instructor's notebook (outside graded cells) that bind
    names of JUDGE_LIBRARIES: what a test cell may use here to compute expected values."""
    from ..cells import nbgrader_meta, source

    lines = []
    for cell in instructor.get("cells", []):
        meta = nbgrader_meta(cell)
        if cell.get("cell_type") != "code" or meta.get("grade") or meta.get("solution"):
            continue
        try:
            tree = ast.parse(source(cell))
        except SyntaxError:   # a cell with magics: its imports are on lines of their own
            tree = ast.parse("\n".join(line for line in source(cell).splitlines()
                                       if line.startswith(("import ", "from "))))
        for node in tree.body:
            if isinstance(node, ast.Import) and all(
                    a.name.split(".")[0] in JUDGE_LIBRARIES for a in node.names):
                lines.append(ast.unparse(node))
            elif isinstance(node, ast.ImportFrom) and not node.level and \
                    (node.module or "").split(".")[0] in JUDGE_LIBRARIES:
                lines.append(ast.unparse(node))
    return "\n".join(dict.fromkeys(lines))


# -- the wire --------------------------------------------------------------------------------

def _pickle(request: tuple) -> bytes:
    """The request as a pickle for the kernel: Kernel handles as persistent ids, functions and
    classes the test defined by value (cloudpickle)."""
    import cloudpickle

    class Pickler(cloudpickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            return obj._ref if type(obj) is Kernel else None

    buffer = io.BytesIO()
    Pickler(buffer, protocol=5).dump(request)
    return buffer.getvalue()


def _parse(text: str | None, label: str) -> dict:
    """The answer in the repr of the expression's value (tinyprof.wire.unframe)."""
    if text is None:
        raise KernelError(f"the kernel gave no answer to {label}: it may have been changed so "
                          "that it no longer runs the grader's requests")
    try:
        return wire.unframe(text)
    except wire.Malformed as wrong:
        raise KernelError(f"the kernel's answer to {label} {wrong}") from None


def _raise_students(names: Any, label: str, route: tuple[str, str] | None = None) -> None:
    """Raise, here, what the student's code raised there: the first of its classes that Python
    or tinyprof defines, with a message of the grader's (the kernel's text is never shown;
    ``route``, already checked against the switch's routes, names what was refused). The
    message names the exception's class only if a library defines it (_shown): a class of the
    student's own has a name the kernel chose."""
    from tinyprof.testing import ReferenceUnavailable, TamperingDetected

    names = [n for n in names if isinstance(n, str) and _IDENTIFIER.fullmatch(n)] \
        if isinstance(names, list) else []
    shown = _shown(names)
    if "ReferenceUnavailable" in names:
        if route is not None:
            raise ReferenceUnavailable(*route)
        raise ReferenceUnavailable("tinyprof's own implementation")
    if "TamperingDetected" in names:
        raise TamperingDetected(TAMPERED)
    for name in names:
        found = getattr(builtins, name, None)
        if isinstance(found, type) and issubclass(found, Exception) and \
                not issubclass(found, (KernelError,)):
            raise found(f"{label} raised {shown}")
    raise StudentError(f"{label} raised {shown}")


#: What feedback says of an exception whose class the student's notebook defined.
OWN_CLASS = "an exception of your own class"


def _shown(names: list[str]) -> str:
    """How feedback names the exception whose class and bases are ``names``: the class's own
    name when Python, numpy or tinyprof defines an exception of that name (a word from a fixed
    list, which carries nothing the kernel chose), else OWN_CLASS."""
    if not names:
        return "an exception"
    return names[0] if names[0] in _library_exceptions() else OWN_CLASS


def _library_exceptions() -> frozenset[str]:
    """The names of the exception classes of Python (builtins) and of JUDGE_LIBRARIES, as
    imported here."""
    import tinyprof  # noqa: F401 - its exception classes are counted once imported

    found, todo = set(), [BaseException]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.split(".")[0] in JUDGE_LIBRARIES | {"builtins"}:
            found.add(cls.__name__)
    return frozenset(found)


def _ndarray_type() -> tuple[type, ...]:
    import numpy as np

    return (np.ndarray,)


def _restore(original: Any, state: Any) -> None:
    """Put the kernel's after-the-call state of an argument into the test's own object."""
    if isinstance(original, list) and isinstance(state, list):
        original[:] = state
    elif isinstance(original, dict) and isinstance(state, dict):
        original.clear()
        original.update(state)
    elif isinstance(original, _ndarray_type()) and isinstance(state, _ndarray_type()) and \
            state.shape == original.shape:
        original[...] = state


def _cut(text: str) -> str:
    text = "".join(ch for ch in text if ch in "\n\t" or ch.isprintable())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + " […]"


__all__ = ["JUDGE_LIBRARIES", "Judge", "Kernel", "KernelError", "StudentError", "Verdict",
           "handle_key", "kernel_names", "prelude"]
