"""The student's-kernel side of trusted grading: answer the grader's requests with plain values.

When tinyprof's grader decides a hidden test's verdict, the test itself runs in the grader (the
judge, ``autograder/run/judge.py``); the kernel only runs the student's code on the test's inputs.
Each request is one expression the grader has the kernel evaluate as a ``user_expressions``
entry of an otherwise empty, silent execute request (outside the notebook's history, with no
output to wait for)::

    __import__("tinyprof.remote").remote.answer("<base64 of a pickle made by the grader>")

or, for the requests a hidden test makes most ("get", "call", "switch", "unswitch"), the same
base64 text as a message on a comm the grader opens once per kernel after :func:`listen`
(target :data:`COMM_TARGET`): the answer comes back as a comm message. A comm message costs
the kernel a fraction of an execute request, which runs IPython's cell machinery and waits for
four flushes of the output streams around nothing (``benchmarks/bench_grading.py``). The last
comm answer is also kept (:func:`answered`), so a grader that saw the kernel go idle without
it can still read it.

A request (a tuple) is one of

- ``("get", target, attribute)``: ``getattr(target, attribute)``;
- ``("call", target, method, args, kwargs, copy_back)``: ``target(*args, **kwargs)``, or
  ``target.method(...)`` when ``method`` is a name; ``copy_back`` lists the positions and keyword
  names of arguments (lists, dicts, arrays) whose state after the call the grader wants back,
  so a test can check that the caller's data was left alone;
- ``("switch", extra[, keep])`` / ``("unswitch",)``: enter / leave
  ``reference_unavailable(*extra)`` (``unswitch`` also settles an allocator a ``time`` held)
  around the calls in between, exactly as the test's ``with``
  block does in a notebook (``keep``: packages left on, a pipeline test's chapter tools); while
  it is open, each ``call`` runs under its profile hook (``tinyprof.testing.switch.Watch``), which
  refuses any run of a switched-off implementation however it was reached, and which a
  ``time`` request never pays for;
- ``("make", make_inputs, seeds)``: ``make_inputs(seed)`` for each seed, kept here as a list of
  argument tuples (the answer is its handle): inputs made where they are used, so that no
  megabytes cross the wire (``make_inputs`` runs as tinyprof's own code even while the
  switch is on);
- ``("time", target, n)``: ``target(*args)`` for each ``args`` of the list kept as object n,
  one after the other, the outputs kept here (the answer is their handle) and the inputs let
  go: the block of calls whose CPU time the grader reads from outside
  (``tinyprof.testing.expect_faster``); never under the profile hook, except a warm-up block
  the grader asks for with a fourth element ``True`` (its time is not used). It holds the
  memory allocator (``tinyprof.timing.allocator``: what a block frees stays for the next), as
  the speed test does in a kernel, until the ``unswitch`` that ends the test settles it (in
  the student's kernel; the clean kernel gets no switch and stays held; ``make`` alone does
  not hold it: the leak check makes its inputs with it);
- ``("pick", n, fractions, seed, sketches)``: the outputs of object n (a ``time`` answer),
  each plain numpy array (exact type ``np.ndarray``, a numeric dtype) replaced by
  ``("sampled", "numpy.ndarray", shape, values, sketch, l1, l2)``: its elements at the flat
  positions ``floor(u · size)`` for each u of ``fractions`` (``values``, floats); ``sketches``
  random projections of all its elements, ``sketch[j] = Σ_i r_ji · x_i`` in float64, with
  random signs ``r_ji = ±1`` drawn from ``default_rng([seed, k])`` for the k-th array of the
  answer (one bit of ``bytes`` each, in chunks of ``OutputReader.CHUNK`` elements); and
  ``l1 = Σ_i |x_i|``, ``l2 = Σ_i x_i²``, which the grader's bound needs
  (``tinyprof.timing.speed.Sampled``). ``fractions`` and ``seed`` are drawn by the grader
  after the block ran, so a sample names an element that differs and the sketch makes every
  element count: whatever work an output put off is done here, inside the round the grader
  charges. Anything that is not such an array, a number, None, a string or a list, tuple or
  dict of them is reported as ``("refused", "module.Class")`` (an ndarray subclass, an
  object with ``__array__``: things that can put off their work until read). The grader
  decides from what it gets back, never from this code alone; the outputs are then let go.

Targets inside a request are pickled as persistent ids: ``("global", name)`` is the notebook's
global ``name``; ``("object", n)`` is an object an earlier answer handed over by number. So the
kernel learns a test's inputs, never its expected values, tolerances or hints.

The answer is the expression's value, in the format :mod:`tinyprof.wire` defines for both
sides: ``{"value": V}`` (plus ``"copied"``), ``{"raised": [...]}`` or ``{"missing": name}``,
as base64 of its JSON; a value that is not plain data stays here, in :data:`_objects`, and
the grader gets its number. Nothing here is trusted by the grader: a kernel that lies gains
nothing unless the values it returns are right.
"""

from __future__ import annotations

import base64
import io
import pickle
from typing import Any

from . import wire

#: The comm target name the grader's requests arrive on (:func:`listen`; tinyprof.wire names
#: the requests for both sides).
COMM_TARGET = wire.COMM_TARGET

_objects: list[Any] = []        # objects handed to the grader, by number
_switch: list[Any] = []         # the reference_unavailable() block now open, if any
_answered: dict[str, str] = {}  # the last comm answer, by the message id of its request
_allocator_held: list[bool] = []  # whether a speed test held the memory allocator (and could)


class _Missing(Exception):
    """The grader named a global the notebook does not define."""


class _Unpickler(pickle.Unpickler):
    """Resolves the grader's persistent ids to this kernel's objects."""

    def __init__(self, data: bytes, namespace: dict):
        super().__init__(io.BytesIO(data))
        self.namespace = namespace

    def persistent_load(self, pid: Any) -> Any:
        kind, key = pid
        if kind == "global":
            if key not in self.namespace:
                raise _Missing(key)
            return self.namespace[key]
        if kind == "object" and isinstance(key, int) and 0 <= key < len(_objects):
            return _objects[key]
        raise pickle.UnpicklingError(f"unknown reference {pid!r}")


def answer(request: str) -> str:
    """Carry out one request (base64 pickle); the answer as base64 of its JSON."""
    from IPython import get_ipython

    namespace = get_ipython().user_ns
    try:
        reply = _carry_out(_Unpickler(base64.b64decode(request), namespace).load(), namespace)
    except _Missing as missing:
        reply = {"missing": str(missing)}
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the grader decides what it means
        reply = {"raised": [cls.__name__ for cls in type(error).__mro__]}
        route = getattr(error, "route", None)
        if isinstance(route, str):
            reply["route"] = [route, str(getattr(error, "kind", "function"))]
    return wire.frame(reply)


def listen() -> str:
    """Take the grader's requests on comm target :data:`COMM_TARGET` too; ``"listening"``."""
    from IPython import get_ipython

    get_ipython().kernel.comm_manager.register_target(COMM_TARGET, _opened)
    return wire.LISTENING


def _opened(comm: Any, message: dict) -> None:
    """A comm the grader opened: each message's ``request`` is answered on the same comm."""
    def on_request(msg: dict) -> None:
        request = msg.get("content", {}).get("data", {}).get("request")
        reply = answer(request)
        _answered.clear()
        _answered[str(msg.get("header", {}).get("msg_id"))] = reply
        comm.send({"answer": reply})
    comm.on_msg(on_request)


def answered(msg_id: str) -> str | None:
    """The answer to the comm request ``msg_id``, if it was the last one answered."""
    return _answered.get(msg_id)


def _carry_out(request: tuple, namespace: dict) -> dict:
    kind = request[0]
    if kind == wire.GET:
        _, target, attribute = request
        return {"value": encode(getattr(target, attribute))}
    if kind == wire.CALL:
        _, target, method, args, kwargs, copy_back = request
        function = target if method is None else getattr(target, method)
        with _watched(True):   # the student's code is checked: the hook follows code
            value = function(*args, **kwargs)
        copied = {str(key): encode(args[key] if isinstance(key, int) else kwargs[key])
                  for key in copy_back}
        return {"value": encode(value), "copied": copied}
    if kind == wire.MAKE:
        _, make_inputs, seeds = request
        make = _unswitched(make_inputs)
        made = [make(seed) for seed in seeds]
        return {"value": wire.held([args if isinstance(args, tuple) else (args,)
                                    for args in made], _keep)}
    if kind == wire.TIME:
        target, number = request[1], request[2]
        calls, _objects[number] = _objects[number], None
        _hold_allocator()
        with _watched(request[3:] == (True,)):   # a warm-up block: checked like a "call"
            outputs = [target(*args) for args in calls]
        return {"value": wire.held(outputs, _keep)}
    if kind == wire.PICK:
        _, number, fractions, seed, sketches = request
        outputs, _objects[number] = _objects[number], None
        return {"value": encode(OutputReader(fractions, seed, sketches).read(outputs))}
    if kind == wire.SWITCH:
        from tinyprof.testing import Switch

        _close_switches()   # one left open by a test that was interrupted

        keep = tuple(request[2]) if len(request) > 2 else ()   # packages left on
        switch = Switch(tuple(request[1]), namespace, keep=keep)   # hook: on around each "call"
        switch.__enter__()
        _switch.append(switch)
        return {"value": None}
    if kind == wire.UNSWITCH:
        _close_switches()
        _settle_allocator()
        return {"value": None}
    raise ValueError(f"unknown request {kind!r}")


def _hold_allocator() -> None:
    """Hold the memory allocator for a speed test's blocks (``tinyprof.timing.allocator``):
    what a block frees stays for the next, whatever the notebook ran before. Again before every
    block, in case the student's code changed it."""
    from .timing import allocator

    _allocator_held[:] = [_unswitched(allocator.hold_freed_memory)()]


def _settle_allocator() -> None:
    """Settle the allocator once a switch block that held it ends (the speed test's), so that
    the notebook's later cells do not keep every byte they free."""
    if _allocator_held:
        from .timing import allocator

        _allocator_held.clear()
        _unswitched(allocator.settle)()


def _watched(wanted: bool) -> Any:
    """The open switch's profile hook as a context manager when ``wanted`` and a switch is
    open; otherwise one that does nothing."""
    if wanted and _switch:
        return _switch[-1].watch.watching()
    import contextlib

    return contextlib.nullcontext()


def _unswitched(function: Any) -> Any:
    """The function itself when the switch has swapped its code for a gate (tinyprof.testing),
    so that the grader's own input maker runs while the student's code is checked."""
    gate = (getattr(function, "__kwdefaults__", None) or {}).get("__gate__")
    original = getattr(gate, "original", None)
    return original if callable(original) else function


class OutputReader:
    """Reads a block's outputs back for the grader (the ``pick`` request, module docstring)."""

    #: Elements projected at a time (bounds the memory of the signs and the buffer).
    CHUNK = 1 << 16

    def __init__(self, fractions: list, seed: int, sketches: int):
        self.fractions, self.seed, self.sketches = fractions, seed, sketches
        self.arrays = 0   # arrays read so far: the k of default_rng([seed, k])

    def read(self, value: Any, depth: int = 0) -> Any:
        import sys

        numpy = sys.modules.get("numpy")
        kind = type(value)
        if value is None or kind in (bool, int, float, complex, str):
            return value
        if depth <= wire.MAX_DEPTH and kind in (list, tuple):
            items = [self.read(item, depth + 1) for item in value]
            return items if kind is list else tuple(items)
        if depth <= wire.MAX_DEPTH and kind is dict:
            return {key: self.read(item, depth + 1) for key, item in value.items()}
        if numpy is not None and kind is numpy.ndarray and value.dtype.kind in "biuf":
            return self._array(numpy, value)
        if numpy is not None and isinstance(value, numpy.generic) and \
                kind.__module__ == "numpy" and not value.dtype.hasobject:
            return value
        return ("refused", _type_name(kind))

    def _array(self, numpy: Any, value: Any) -> tuple:
        flat = value.reshape(-1)
        positions = [int(u * flat.size) for u in self.fractions] if flat.size else []
        rng = numpy.random.default_rng([self.seed, self.arrays])
        self.arrays += 1
        # each chunk copied into one float64 buffer, then the same work whatever the dtype:
        # reading costs a float32 output what it costs a float64 one
        buffer = numpy.empty(min(flat.size, self.CHUNK))
        sketch, l1, l2 = numpy.zeros(self.sketches), 0.0, 0.0
        for start in range(0, flat.size, self.CHUNK):
            part = buffer[:min(self.CHUNK, flat.size - start)]
            numpy.copyto(part, flat[start:start + part.size])
            count = self.sketches * part.size   # random signs: one bit each
            bits = numpy.unpackbits(numpy.frombuffer(rng.bytes(-(-count // 8)), numpy.uint8),
                                    count=count).reshape(self.sketches, part.size)
            total = part.sum()
            sketch += 2 * (bits.astype(numpy.float64) @ part) - total   # Σ (2b − 1)·x
            l1 += float(numpy.abs(part).sum())
            l2 += float(part @ part)
        return ("sampled", _type_name(type(value)), tuple(value.shape),
                flat[positions].astype(float).tolist(), sketch.tolist(), l1, l2)


def _type_name(kind: type) -> str:
    """``module.Class``: how an output's type is reported to the grader."""
    return f"{kind.__module__}.{kind.__qualname__}"


def _close_switches() -> None:
    while _switch:
        _switch.pop().__exit__(None, None, None)


def encode(value: Any) -> Any:
    """``value`` as :func:`tinyprof.wire.encode` writes it, anything that is not plain data
    kept here (in :data:`_objects`) and handed over by number."""
    return wire.encode(value, _keep)


def _keep(value: Any) -> int:
    """Keep ``value`` for the grader's later requests; its number."""
    _objects.append(value)
    return len(_objects) - 1


__all__ = ["COMM_TARGET", "OutputReader", "answer", "answered", "encode", "listen"]
