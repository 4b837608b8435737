"""tinyprof.wire, the format of the kernel's answers: what the kernel encodes, the grader decodes
to the same values (arrays bit for bit, handles through each side's own callback), and what the
kernel could send instead is refused without unpickling."""

from __future__ import annotations

import base64
import io
import json
import math
import pickle

import numpy as np
import pytest

from tinyprof import wire


class Kept:
    """Both sides' handles in one: the kernel keeps objects, the grader names them."""

    def __init__(self):
        self.objects: list = []

    def keep(self, value) -> int:
        self.objects.append(value)
        return len(self.objects) - 1

    def handle(self, number: int) -> tuple[str, int]:
        return ("handle", number)


def _round_trip(value, kept: Kept | None = None):
    """``value`` encoded, framed, quoted as the grader reads it, unframed and decoded."""
    kept = kept or Kept()
    text = repr(wire.frame({"value": wire.encode(value, kept.keep)}))
    return wire.decode(wire.unframe(text)["value"], kept.handle)


@pytest.mark.parametrize("value", [
    None, True, False, 0, -7, 2**80, 1.5, -0.0, "", "naïve ∑", [1, "a", None],
    (1, 2.5, "x"), (), {"a": 1, 2: [3, 4], (5, 6): {"b": (7,)}}, {}, [[[]]],
    {"nested": [({"deep": (1, [2, {"x": None}])},)]}])
def test_plain_values_come_back_equal_and_of_the_same_types(value):
    got = _round_trip(value)
    assert got == value
    assert repr(got) == repr(value)   # a tuple stays a tuple, a key keeps its type


def test_nan_and_infinities_come_back():
    got = _round_trip([math.nan, math.inf, -math.inf, (math.nan,)])
    assert math.isnan(got[0]) and got[1] == math.inf and got[2] == -math.inf
    assert math.isnan(got[3][0])


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4), np.array([np.nan, np.inf, -0.0]),
    np.zeros((0, 5)), np.array(3.25), np.array([True, False]), np.arange(6, dtype=np.int8),
    np.array([1 + 2j]), np.array(["ab", "c"]), np.asfortranarray(np.ones((2, 3)))])
def test_arrays_come_back_bit_for_bit(array):
    got = _round_trip({"x": array})["x"]
    assert type(got) is np.ndarray and got.dtype == array.dtype and got.shape == array.shape
    assert got.tobytes() == array.tobytes()


def test_numpy_scalars_come_back_as_scalars():
    got = _round_trip((np.float16(1.5), np.int64(-3), np.bool_(True)))
    assert [type(item) for item in got] == [np.float16, np.int64, np.bool_]
    assert got == (1.5, -3, True)


def test_what_is_not_plain_data_is_a_handle_on_each_side():
    """The kernel keeps it (``keep``), the grader gets a handle (``handle``) for its number;
    subclasses of plain types are not plain data, and object arrays never become .npy."""
    kept = Kept()
    odd, objects = object(), np.array([None, 1], dtype=object)

    class Text(str):
        pass

    got = _round_trip([odd, (objects, Text("x")), {"f": len}], kept)
    assert got == [("handle", 0), (("handle", 1), ("handle", 2)), {"f": ("handle", 3)}]
    assert kept.objects[0] is odd and kept.objects[1] is objects and kept.objects[3] is len
    assert wire.held([1, 2], kept.keep) == {"object": 4} and kept.objects[4] == [1, 2]


def test_nesting_deeper_than_max_depth_is_handed_over_as_a_handle():
    kept = Kept()
    deep: list = []
    inner = deep
    for _ in range(wire.MAX_DEPTH + 5):
        inner.append([])
        inner = inner[0]
    got = _round_trip(deep, kept)
    for _ in range(wire.MAX_DEPTH):
        got = got[0]
    assert got == ("handle", 0)
    assert len(kept.objects) == 1


def test_decoding_refuses_nesting_deeper_than_an_honest_kernel_sends():
    data: object = 1
    for _ in range(wire.MAX_DECODE_DEPTH + 1):
        data = [data]
    with pytest.raises(wire.Malformed, match="nested too deeply"):
        wire.decode(data, Kept().handle)
    assert wire.decode(data[0], Kept().handle) is not None


def _quoted(text: str) -> str:
    return repr(base64.b64encode(text.encode()).decode())


def _npy(array: np.ndarray, allow_pickle: bool = False) -> str:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return base64.b64encode(buffer.getvalue()).decode()


#: Bombs unpickled so far (none, ever: the grader never unpickles what the kernel sends).
UNPICKLED: list[str] = []


class Bomb:
    def __reduce__(self):
        return (UNPICKLED.append, ("a bomb",))


@pytest.mark.parametrize(("data", "reason"), [
    ({"pickle": base64.b64encode(pickle.dumps(Bomb())).decode()}, "is malformed"),
    ({"ndarray": _npy(np.array([Bomb()], dtype=object), allow_pickle=True)},
     "holds a malformed array"),
    ({"ndarray": "AAAA"}, "holds a malformed array"),
    ({"ndarray": "not base64!"}, "holds a malformed array"),
    ({"scalar": 3}, "is malformed"),
    ({"object": True}, "is malformed"),
    ({"object": "0"}, "is malformed"),
    ({"tuple": [1], "dict": []}, "is malformed"),
    ({"dict": [[1, 2, 3]]}, "is malformed"),
    ({"dict": [[[1], 2]]}, "has an unhashable key"),
    ({"set": [1]}, "is malformed")])
def test_values_encode_never_makes_are_refused_without_unpickling(data, reason):
    with pytest.raises(wire.Malformed, match=reason):
        wire.decode(data, Kept().handle)
    assert not UNPICKLED


@pytest.mark.parametrize(("text", "reason"), [
    (None, "not the grader's encoding"), (b"'e30='", "not the grader's encoding"),
    ("'" + "A" * wire.MAX_ANSWER_CHARS + "'", "larger than the 8,000,000 characters"),
    ("e30=", "not the grader's encoding"), ("'e30=' + 'e30='", "not the grader's encoding"),
    ("'not base64!'", "not the grader's encoding"), ("'e30'", "not valid JSON"),
    (_quoted("not json"), "not valid JSON"), (_quoted("[" * 100_000), "not valid JSON"),
    (_quoted("[1, 2]"), "is malformed"), (_quoted('"value"'), "is malformed")])
def test_frames_that_are_not_an_answer_are_refused(text, reason):
    with pytest.raises(wire.Malformed, match=reason):
        wire.unframe(text)


def test_a_frame_is_quoted_ascii_base64_of_the_answers_json():
    answer = {"value": [1, {"tuple": []}], "copied": {"0": None}}
    text = wire.frame(answer)
    assert text.isascii() and json.loads(base64.b64decode(text)) == answer
    assert wire.unframe(f"  {text!r}\n") == answer


def test_both_sides_use_the_one_format():
    """The kernel's side (tinyprof.remote) and the grader's (autograder/run/judge.py) hold no copy
    of it: their encode and decode are wire's."""
    from autograder.run import judge
    from tinyprof import remote

    for module in (remote, judge):
        source = open(module.__file__, encoding="utf-8").read()
        for copy in ("json.dumps", "json.loads", "allow_pickle", "np.load(", "numpy.save(",
                     '"ndarray"', '"tuple"'):
            assert copy not in source, f"{module.__name__} holds a copy of the format: {copy}"
    number = len(remote._objects)
    odd = object()
    assert remote.encode([odd, 1]) == [{"object": number}, 1]
    assert remote._objects[number] is odd
    got = judge.Judge(lambda *a: None)._decode({"object": number}, "f")
    assert type(got) is judge.Kernel and got._ref == ("object", number)
