"""The judge (autograder/run/judge.py) against a real kernel: test cells run in the grader, the
kernel only answers with plain values, and nothing it does can decide a verdict.

One ipykernel is started for the module (no sandbox: the protocol is what is tested here; the
sandboxed path is graded end to end in tests/test_grading_forgery.py)."""

from __future__ import annotations

import pytest
from jupyter_client.manager import start_new_kernel

from autograder.run.channel import ExpressionFailed, KernelChannel
from autograder.run.judge import DEFAULT_PRELUDE, OWN_CLASS, Judge, KernelError, _parse
from tinyprof.wire import read_answered

PRELUDE = DEFAULT_PRELUDE + "\nfrom tinyprof.testing import reference_unavailable"


class Kernel:
    """A real kernel, its channel (autograder/run/channel.py: the grader's one way of asking a
    kernel) and the ``send`` and ``quick`` a Judge needs."""

    def __init__(self):
        self.manager, self.client = start_new_kernel(kernel_name="python3")
        self.channel = KernelChannel(self.manager, self.client, cpu_seconds=lambda: 0.0)
        self.quick_requests = 0

    def run(self, code: str) -> list[dict]:
        msg_id = self.client.execute(code, store_history=False)
        outputs = []
        while True:
            msg = self.client.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return outputs
            outputs.append(msg)

    def send(self, expression: str, cleanup: bool = False) -> str | None:
        """As the grader sends a request: an execute request, the text/plain of its value."""
        try:
            return self.channel.ask(expression, wall_s=30)
        except ExpressionFailed:
            return None

    def quick(self, request: str, cleanup: bool = False) -> str | None:
        """As the grader's quick route sends a request: on the comm the channel opens."""
        self.quick_requests += 1
        return self.channel.ask_quick(request, wall_s=30)

    def stop(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel():
    running = Kernel()
    running.run("import numpy as np\nimport tinyprof as tp\n"
                "def linear_params(i, o, bias=True):\n    return i * o + (o if bias else 0)\n")
    yield running
    running.stop()


def judge(kernel: Kernel, source: str):
    return Judge(kernel.send).run(source, PRELUDE, label="test")


@pytest.mark.kernel
def test_a_right_answer_passes_and_a_wrong_one_fails_with_the_hint(kernel):
    assert judge(kernel, "expect(linear_params(128, 64), 8256, 'Linear(128, 64)')").passed
    verdict = judge(kernel, "expect(linear_params(128, 64, bias=False), 8000, 'no bias',\n"
                            "       hints={8192: 'a hint'})")
    assert (verdict.passed, verdict.ename) == (False, "AssertionError")
    assert verdict.message == "no bias: expected 8,000, got 8,192. a hint"


@pytest.mark.kernel
def test_a_kernel_that_patches_isclose_decides_nothing(kernel):
    kernel.run("import math\nmath.isclose = lambda *a, **k: True\n"
               "def wrong(*a, **k):\n    return 1\n")
    verdict = judge(kernel, "expect(wrong(128, 64), 8256, 'Linear(128, 64)')")
    assert not verdict.passed and "got 1" in verdict.message


@pytest.mark.kernel
def test_an_object_equal_to_everything_has_no_value_here(kernel):
    kernel.run("class Eq(float):\n    __eq__ = lambda s, o: True\n    __hash__ = float.__hash__\n"
               "def sly(*a):\n    return Eq(1)\n")
    verdict = judge(kernel, "expect(sly(1), 8256, 'sly')")
    assert not verdict.passed and "in the student's kernel" in verdict.message


@pytest.mark.kernel
def test_the_students_exception_arrives_as_its_class_with_the_graders_words(kernel):
    kernel.run("def leaky(*a):\n    raise ValueError('SECRET ' + repr(a))\n")
    verdict = judge(kernel, "try:\n    leaky(12345)\nexcept ValueError:\n    pass\n"
                            "leaky(678)")
    assert (verdict.ename, verdict.message) == ("ValueError", "leaky raised ValueError")
    assert "SECRET" not in verdict.message and "678" not in verdict.message


@pytest.mark.kernel
def test_an_exception_of_the_students_own_class_is_not_named(kernel):
    """The name of a class the notebook defines is the kernel's choice (a channel of 80
    characters per failed test): feedback says "your own class"; the names of Python's and
    tinyprof's exceptions, a fixed list, are still shown."""
    kernel.run("class Leak_12345_abcde(ValueError):\n    pass\n"
               "class Plain_67890(Exception):\n    pass\n"
               "def own(*a):\n    raise Leak_12345_abcde('x')\n"
               "def plain(*a):\n    raise Plain_67890('x')\n"
               "def shape(*a):\n    raise tp.nn.ShapeError('x')\n")
    own = judge(kernel, "own(1)")
    assert (own.ename, own.message) == ("ValueError", "own raised " + OWN_CLASS)
    plain = judge(kernel, "plain(1)")
    assert (plain.ename, plain.message) == ("Exception", "plain raised " + OWN_CLASS)
    named = judge(kernel, "shape(1)")
    assert (named.ename, named.message) == ("ValueError", "shape raised ShapeError")


@pytest.mark.kernel
def test_arrays_come_back_as_arrays_and_arguments_get_the_calls_changes(kernel):
    kernel.run("def double(a):\n    a *= 2\n    return a.sum()\n"
               "def grow(items):\n    items.append(3)\n    return len(items)\n")
    verdict = judge(kernel, "import numpy as np\nx = np.arange(4.0)\ns = double(x)\n"
                            "expect(float(s), 12.0, 'sum')\nexpect(list(x), [0, 2, 4, 6], 'x')\n"
                            "items = [1, 2]\nexpect(grow(items), 3, 'len')\n"
                            "expect(items, [1, 2, 3], 'items')")
    assert verdict.passed, verdict.message


@pytest.mark.kernel
def test_tinyprof_is_switched_off_in_the_kernel_inside_the_block_only(kernel):
    kernel.run("def delegate(i, o):\n    return tp.count_parameters(tp.nn.Linear(i, o))\n"
               "def private(*a):\n    return tp.abtest._timed_rounds\n")
    inside = judge(kernel, "with reference_unavailable():\n    delegate(2, 3)")
    assert inside.ename == "ReferenceUnavailable"
    assert inside.message.startswith("building a tinyprof.nn.Linear is switched off")
    assert judge(kernel, "expect(delegate(2, 3), 9, 'after the block')").passed
    private = judge(kernel, "with reference_unavailable():\n    f = private()\n    f()")
    assert private.ename == "ReferenceUnavailable", private.message


@pytest.mark.kernel
def test_a_reference_taken_before_the_switch_opens_is_refused_in_the_kernel(kernel):
    kernel.run("def early(data, q, percentile=np.percentile):\n    return percentile(data, q)\n"
               "import numpy.lib._function_base_impl as impl\n"
               "def elsewhere(data, q):\n    return impl.percentile(data, q)\n")
    for name in ("early", "elsewhere"):
        verdict = judge(kernel, f"with reference_unavailable('numpy.percentile'):\n"
                                f"    {name}([3, 1, 2], 50)")
        assert verdict.ename == "ReferenceUnavailable", (name, verdict.message)
        assert judge(kernel, f"expect({name}([3, 1, 2], 50), 2.0, 'after the block')").passed


@pytest.mark.kernel
def test_requests_on_the_comm_get_the_verdicts_of_execute_requests(kernel):
    """The quick route (a comm message per request, as the grader sends a hidden test's calls)
    decides every verdict as the execute requests do: right, wrong with its hint, the
    student's exception, the switch refusing a delegation."""
    kernel.run("def wrong(i, o, bias=True):\n    return i * o\n"
               "def broken(*a):\n    raise KeyError('x')\n"
               "def delegating(i, o):\n    return tp.count_parameters(tp.nn.Linear(i, o))\n")
    sources = ["expect(linear_params(128, 64), 8256, 'right')",
               "expect(wrong(128, 64), 8256, 'wrong', hints={8192: 'the bias'})",
               "broken(1)",
               "with reference_unavailable():\n    delegating(2, 3)"]
    outcomes = []
    for source in sources:
        kernel.quick_requests = 0
        slow = Judge(kernel.send).run(source, PRELUDE, label="test")
        quick = Judge(kernel.send, quick=kernel.quick).run(source, PRELUDE, label="test")
        assert kernel.quick_requests and kernel.channel.on_comm, source   # the comm was used
        assert quick.record() == slow.record(), source
        outcomes.append((quick.passed, quick.ename))
    assert outcomes == [(True, ""), (False, "AssertionError"), (False, "KeyError"),
                        (False, "ReferenceUnavailable")]


@pytest.mark.kernel
def test_a_lost_comm_answer_is_read_back_and_the_call_never_run_twice(kernel):
    """IOPub may drop a message: a kernel that goes idle without sending the comm's answer
    has it read back by an execute request (the channel's lost-answer route), and the
    student's function ran once."""
    kernel.run("import tinyprof.remote as _remote\n"
               "_calls = []\n"
               "def counted(i, o):\n    _calls.append(1)\n    return i * o + o\n"
               "_keep_opened = _remote._opened\n"
               "def _dropping(comm, message):\n"
               "    _keep_opened(comm, message)\n"
               "    comm.send = lambda *a, **k: None\n"
               "_remote._opened = _dropping\n")
    dropping = KernelChannel(kernel.manager, kernel.client, cpu_seconds=lambda: 0.0)
    try:
        verdict = Judge(kernel.send, quick=lambda r, c=False: dropping.ask_quick(r, wall_s=30)
                        ).run("expect(counted(3, 4), 16, 'x')", PRELUDE, label="test")
        assert dropping.on_comm and verdict.passed, verdict.message
        assert kernel.send("len(_calls)") == "1"
        assert kernel.send(read_answered("not a request")) == "None"
    finally:
        kernel.run("_remote._opened = _keep_opened\n")

@pytest.mark.kernel
def test_a_kernel_that_stops_answering_fails_the_test_and_is_reported(kernel):
    silent = Judge(lambda code, cleanup=False: None).run(
        "expect(linear_params(1, 1), 2, 'x')", PRELUDE, label="test")
    assert (silent.passed, silent.ename) == (False, "KernelError")
    assert silent.review and "no answer" in silent.review[0]


def _quoted(text: str) -> str:
    import base64

    return repr(base64.b64encode(text.encode()).decode())


@pytest.mark.parametrize("text", [
    "not quoted", "'not base64!'", _quoted("not json"), _quoted("[1, 2]"),
    _quoted('{"value": {"pickle": "gASV"}}'), _quoted('{"value": {"ndarray": "AAAA"}}'),
    _quoted('{"value": ' + "[" * 5000 + "]" * 5000 + "}"), "x" * 9_000_000])
def test_malformed_answers_are_refused_without_unpickling(text):
    judge_ = Judge(lambda code, cleanup=False: text)
    with pytest.raises(KernelError):
        answer = _parse(text, "f")
        judge_._decode(answer["value"], "f")
