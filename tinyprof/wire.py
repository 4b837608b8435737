"""The grader's wire: the format of the student's kernel's answers, for both sides.

The grader (``autograder/run/judge.py``) runs a hidden test and asks the student's kernel
(:mod:`tinyprof.remote`) to read an attribute or call a function; this module is the one
definition of what comes back. The kernel encodes (:func:`encode`, :func:`frame`); the grader
decodes (:func:`unframe`, :func:`decode`). It lives in tinyprof because the student's kernel
has tinyprof and not the grader; only those two import it (``import tinyprof`` does not).

**A value** is JSON-ready data (:func:`encode`):

- None, bool, int, float (NaN and infinities included) and str as themselves; lists as arrays;
- ``{"tuple": [...]}`` and ``{"dict": [[key, value], ...]}``;
- ``{"ndarray": b}`` and ``{"scalar": b}``: a numpy array or scalar of a plain dtype, ``b`` the
  base64 of its ``.npy`` file (written and read with ``allow_pickle=False``);
- ``{"object": n}``: anything else, or anything nested deeper than :data:`MAX_DEPTH`: a handle
  on an object the kernel keeps under number n. What a handle means is each side's own: the
  kernel keeps the object (``keep``), the grader makes a stand-in for it (``handle``).

**An answer** is a JSON object, one of

- ``{"value": V}``, plus ``"copied": {position or keyword: V}`` for a call's arguments whose
  state after the call the grader asked back;
- ``{"raised": [names of the exception's classes, most derived first]}``, plus ``"route":
  [name, kind]`` when it is tinyprof's ReferenceUnavailable;
- ``{"missing": name}``: the grader named a global the notebook does not define.

**The framing**: the kernel's answer is the base64 of that JSON (:func:`frame`), so that its
``repr``, which is what the grader reads (the ``text/plain`` of an expression's value, or a
comm message the grader quotes the same way), is plain ASCII in quotes: ``'eyJ2YWx1ZSI6IDF9'``.

Nothing the kernel sends is trusted. Decoding never unpickles, reads at most
:data:`MAX_ANSWER_CHARS` characters, refuses nesting deeper than :data:`MAX_DECODE_DEPTH`, and
reads arrays with ``allow_pickle=False``; anything else is :class:`Malformed`, whose message
the grader completes with what was asked ("the kernel's answer to f " + message).

**The requests** (their vocabulary, for both sides: :data:`COMM_TARGET`, the kinds in
:data:`REQUESTS`, and the expressions the grader has a kernel evaluate, :func:`answer_request`,
:data:`LISTEN`, :func:`read_answered`, :data:`IMPORT_REMOTE`) are carried out by
:mod:`tinyprof.remote`, whose docstring says what each kind does.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
from typing import Any, Callable

#: Nesting deeper than this is handed over as a handle rather than encoded.
MAX_DEPTH = 24
#: An answer larger than this (characters of its quoted base64) is refused.
MAX_ANSWER_CHARS = 8_000_000
#: A decoded value nested deeper than this is refused (an honest kernel nests at most
#: MAX_DEPTH).
MAX_DECODE_DEPTH = 64

_QUOTED_BASE64 = re.compile(r"'([A-Za-z0-9+/=]*)'")


# -- the requests: what the grader may ask a kernel, named once for both sides ------------------

#: The comm target the grader's requests arrive on (``tinyprof.remote.listen``).
COMM_TARGET = "tinyprof.remote"
GET, CALL, SWITCH, UNSWITCH = "get", "call", "switch", "unswitch"
MAKE, TIME, PICK = "make", "time", "pick"
#: Every kind of request (the first item of a request's tuple).
REQUESTS = frozenset({GET, CALL, SWITCH, UNSWITCH, MAKE, TIME, PICK})
#: Requests that check the student's code: they take the comm where the kernel listens on it.
#: Those a speed test times (MAKE, TIME, PICK) always go as execute requests, in both kernels.
QUICK_REQUESTS = frozenset({GET, CALL, SWITCH, UNSWITCH})
#: The expression that has a kernel take requests on the comm too; its value is
#: ``repr(LISTENING)``.
LISTEN = '__import__("tinyprof.remote").remote.listen()'
LISTENING = "listening"
#: The expression a clean kernel evaluates first: the grader's side of the wire loaded.
IMPORT_REMOTE = "__import__('tinyprof.remote') and None"


def answer_request(payload: str) -> str:
    """The expression that has a kernel carry out one request (``payload``: base64 of its
    pickle, made by the grader)."""
    return f'__import__("tinyprof.remote").remote.answer("{payload}")'


def read_answered(msg_id: str) -> str:
    """The expression that reads back the answer to comm request ``msg_id``, when the kernel
    went idle without the grader seeing it."""
    return f'__import__("tinyprof.remote").remote.answered({msg_id!r})'



class Malformed(ValueError):
    """An answer the grader refuses; the message says what is wrong with it, as the predicate
    of a sentence about the answer ("is not valid JSON")."""


# -- the kernel's side -------------------------------------------------------------------------

def encode(value: Any, keep: Callable[[Any], int], depth: int = 0) -> Any:
    """``value`` as JSON-ready data (module docstring); anything that is not plain data is
    handed to ``keep``, which keeps it and returns its number n: ``{"object": n}``."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if depth < MAX_DEPTH:
        if kind is list:
            return [encode(item, keep, depth + 1) for item in value]
        if kind is tuple:
            return {"tuple": [encode(item, keep, depth + 1) for item in value]}
        if kind is dict:
            return {"dict": [[encode(k, keep, depth + 1), encode(v, keep, depth + 1)]
                             for k, v in value.items()]}
    array = _plain_array(value)
    return array if array is not None else held(value, keep)


def held(value: Any, keep: Callable[[Any], int]) -> dict:
    """``value`` as a handle, whatever it is: ``{"object": keep(value)}``."""
    return {"object": keep(value)}


def _plain_array(value: Any) -> dict | None:
    """A numpy array or scalar of a plain dtype as base64 ``.npy``; None for anything else
    (numpy is not imported here: a kernel that has not imported it has no arrays)."""
    import sys

    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(value, (numpy.ndarray, numpy.generic)):
        return None
    array = numpy.asarray(value)
    if array.dtype.hasobject:
        return None
    buffer = io.BytesIO()
    numpy.save(buffer, array, allow_pickle=False)
    tag = "ndarray" if isinstance(value, numpy.ndarray) else "scalar"
    return {tag: base64.b64encode(buffer.getvalue()).decode("ascii")}


def frame(answer: dict) -> str:
    """The answer as the kernel hands it back: base64 of its JSON (NaN allowed)."""
    return base64.b64encode(json.dumps(answer, allow_nan=True).encode()).decode("ascii")


# -- the grader's side -------------------------------------------------------------------------

def unframe(text: Any) -> dict:
    """The answer in ``text``, the repr of what :func:`frame` returned (``'<base64>'``):
    size-capped, base64 checked, JSON parsed; Malformed when it is not an answer."""
    if isinstance(text, str) and len(text) > MAX_ANSWER_CHARS:
        raise Malformed(f"is larger than the {MAX_ANSWER_CHARS:,} characters the grader reads")
    quoted = _QUOTED_BASE64.fullmatch(text.strip()) if isinstance(text, str) else None
    if quoted is None:
        raise Malformed("is not the grader's encoding")
    try:
        answer = json.loads(base64.b64decode(quoted.group(1), validate=True))
    except (ValueError, RecursionError, binascii.Error):
        raise Malformed("is not valid JSON") from None
    if type(answer) is not dict:
        raise Malformed("is malformed")
    return answer


def decode(data: Any, handle: Callable[[int], Any], depth: int = 0) -> Any:
    """The value :func:`encode` made into ``data``, each ``{"object": n}`` as ``handle(n)``;
    never unpickles. Malformed for anything encode does not make."""
    if depth > MAX_DECODE_DEPTH:
        raise Malformed("is nested too deeply")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(item, handle, depth + 1) for item in data]
    if type(data) is not dict or len(data) != 1:
        raise Malformed("is malformed")
    (tag, body), = data.items()
    if tag == "tuple" and type(body) is list:
        return tuple(decode(item, handle, depth + 1) for item in body)
    if tag == "dict" and type(body) is list and all(type(p) is list and len(p) == 2
                                                    for p in body):
        pairs = [(decode(k, handle, depth + 1), decode(v, handle, depth + 1)) for k, v in body]
        try:
            return dict(pairs)
        except TypeError:
            raise Malformed("has an unhashable key") from None
    if tag in ("ndarray", "scalar") and type(body) is str:
        array = _load_npy(body)
        return array if tag == "ndarray" else array[()]
    if tag == "object" and type(body) is int:
        return handle(body)
    raise Malformed("is malformed")


def _load_npy(text: str) -> Any:
    """An array from base64 ``.npy``, never unpickled."""
    import numpy as np

    try:
        return np.load(io.BytesIO(base64.b64decode(text, validate=True)), allow_pickle=False)
    except Exception:  # noqa: BLE001 - anything malformed is the kernel's fault
        raise Malformed("holds a malformed array") from None


__all__ = ["CALL", "COMM_TARGET", "GET", "IMPORT_REMOTE", "LISTEN", "LISTENING", "MAKE",
           "MAX_ANSWER_CHARS", "MAX_DECODE_DEPTH", "MAX_DEPTH", "Malformed", "PICK",
           "QUICK_REQUESTS", "REQUESTS", "SWITCH", "TIME", "UNSWITCH", "answer_request",
           "decode", "encode", "frame", "held", "read_answered", "unframe"]
