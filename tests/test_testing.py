"""tinyprof.testing: the reference switch covers every public route (derived from the package,
aliases included) while tinyprof's own internals keep working, and the runtime check."""

from __future__ import annotations

import builtins
import sys
import types

import numpy as np
import pytest

import tinyprof as tp
import tinyprof.params
from tinyprof import models, nn
from tinyprof import testing as testing_module
from tinyprof.testing import (
    MARK,
    ReferenceUnavailable,
    TamperingDetected,
    expect,
    reference_unavailable,
    routes,
    tampering,
)


def _refused(call) -> str:
    with pytest.raises(ReferenceUnavailable) as caught:
        call()
    return str(caught.value)


def test_the_routes_are_derived_from_the_package():
    names = {route.name for route in routes()}
    assert {"tinyprof.count_parameters", "tinyprof.count_flops", "tinyprof.measure_latency",
            "tinyprof.Profiler.count_parameters", "tinyprof.Profiler.measure_memory",
            "tinyprof.nn.Linear", "tinyprof.nn.Module.parameters",
            "tinyprof.flops.formulas.linear_flops", "tinyprof.timing.bootstrap_median_ci",
            "tinyprof.models.gpt2"} <= names
    # the grading machinery (tinyprof._GRADING_MACHINERY) is never a route: the kernel's
    # answers are encoded (tinyprof.wire) while the switch is open
    assert not any(name.startswith(("tinyprof.testing", "tinyprof.remote", "tinyprof.wire"))
                   for name in names)
    # what exercises walk stays open
    assert not {"tinyprof.nn.Module.named_modules", "tinyprof.nn.Module.own_parameters",
                "tinyprof.nn.Linear.forward", "tinyprof.nn.Module.__call__"} & names


def test_a_new_public_function_is_covered_without_listing_it():
    namespace = {"__name__": "tinyprof.params"}
    exec("def brand_new_route(model):\n    return 42\n", namespace)  # noqa: S102
    tinyprof.params.brand_new_route = namespace["brand_new_route"]
    alias = tinyprof.params.brand_new_route
    try:
        assert "tinyprof.params.brand_new_route" in {r.name for r in routes()}
        with reference_unavailable():
            message = _refused(lambda: alias(None))
        assert message.startswith("tinyprof.params.brand_new_route is switched off")
        assert alias(None) == 42
    finally:
        del tinyprof.params.brand_new_route


def test_every_alias_of_a_route_is_switched_off_and_restored():
    from tinyprof import count_parameters as imported

    layer = nn.Linear(4, 3)
    bound = tp.Profiler().count_parameters

    def with_default(model, count=tp.count_parameters):
        return count(model)

    calls = {
        "tinyprof.count_parameters is switched off": [
            lambda: imported(layer), lambda: with_default(layer),
            lambda: tp.params.count_parameters(layer)],
        "tinyprof.Profiler.count_parameters is switched off": [lambda: bound(layer)],
        # the Profiler has a constructor (it is also the per-layer profiler): building one is
        # already refused
        "building a tinyprof.Profiler is switched off": [
            lambda: tp.Profiler().count_parameters(layer)],
        "building a tinyprof.nn.Linear is switched off": [
            lambda: sum(p.size for p in nn.Linear(128, 64).parameters())],
        "tinyprof.nn.Module.parameters is switched off": [lambda: list(layer.parameters())],
        "building a tinyprof.nn.Conv2d is switched off": [lambda: nn.Conv2d(3, 16, 3)],
        "tinyprof.models.mlp is switched off": [lambda: models.mlp((4, 2))],
    }
    with reference_unavailable():
        for start, attempts in calls.items():
            for attempt in attempts:
                assert _refused(attempt).startswith(start)
    assert imported(layer) == bound(layer) == with_default(layer) == 15
    assert tp.count_parameters(nn.Conv2d(3, 16, 3)) == 448


def test_building_blocks_and_tinyprof_internals_keep_working():
    model = models.mlp((8, 4, 2))
    x = np.ones((3, 8), dtype=np.float32)
    with reference_unavailable():
        walked = sum(p.size for _, m in model.named_modules() for _, p in m.own_parameters())
        out = model(x)              # forward uses tinyprof.ops and as_float internally
        dtype = model.dtype         # a property that calls parameters() inside tinyprof
        model.backward(np.ones_like(out))
    assert walked == tp.count_parameters(model) == 8 * 4 + 4 + 4 * 2 + 2
    assert out.shape == (3, 2) and dtype == np.float32


def test_switched_off_code_is_restored_after_an_error():
    with pytest.raises(ZeroDivisionError), reference_unavailable():
        1 / 0  # noqa: B018
    assert tp.count_parameters(nn.Linear(2, 2)) == 6


def test_extras_switch_off_foreign_callables_and_data():
    samples = [3.0, 1.0, 2.0]
    with reference_unavailable("numpy.percentile", "tinyprof.memory.training.STATE_SLOTS"):
        assert _refused(lambda: np.percentile(samples, 50)).startswith("numpy.percentile")
        assert _refused(lambda: tp.memory.training.STATE_SLOTS()).startswith(
            "tinyprof.memory.training.STATE_SLOTS")
    assert np.percentile(samples, 50) == 2.0
    assert isinstance(tp.memory.training.STATE_SLOTS, dict)


def test_a_switched_off_function_is_refused_however_it_was_reached():
    """Issue 33: references taken before the block opened (a default argument, a container), the
    same numpy function held by another of numpy's modules, and a copy of a tinyprof function
    made by reflection all reach the switch; after the block each works again."""
    import numpy.lib._function_base_impl as numpy_impl

    layer = nn.Linear(4, 3)
    copy = types.FunctionType(tp.count_parameters.__code__, tp.count_parameters.__globals__,
                              "copy", tp.count_parameters.__defaults__)
    held = [np.percentile]

    def with_default(data, q, percentile=np.percentile):
        return percentile(data, q)

    calls = {"tinyprof.count_parameters": lambda: copy(layer),
             "numpy.percentile": [lambda: with_default([3, 1, 2], 50),
                                  lambda: held[0]([3, 1, 2], 50),
                                  lambda: numpy_impl.percentile([3, 1, 2], 50)]}
    with reference_unavailable("numpy.percentile"):
        assert _refused(calls["tinyprof.count_parameters"]).startswith(
            "tinyprof.count_parameters is switched off")
        for attempt in calls["numpy.percentile"]:
            assert _refused(attempt).startswith("numpy.percentile is switched off")
        assert np.median([3, 1, 2]) == 2.0   # what is not switched off still works
    assert copy(layer) == 15
    assert [attempt() for attempt in calls["numpy.percentile"]] == [2.0, 2.0, 2.0]


def test_rebound_helpers_are_put_back_and_announced(capsys):
    namespace = {"__name__": "__main__", "reference_unavailable": reference_unavailable}
    exec("expect = lambda *a, **k: None\n"  # noqa: S102
         "with reference_unavailable():\n    helper = expect\n", namespace)
    assert namespace["helper"] is expect and namespace["expect"] is expect
    assert capsys.readouterr().out == (f"{MARK} expect had been rebound by the notebook; the "
                                       "hidden tests put tinyprof's own back before running\n")


def test_the_helpers_cannot_be_reassigned():
    with pytest.raises(AttributeError, match="cannot be changed: the hidden tests rely on it"):
        testing_module.reference_unavailable = lambda *a: None
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del testing_module.expect
    assert testing_module.reference_unavailable is reference_unavailable


def _notebook_function():
    namespace = {"__name__": "__main__"}
    exec("def planted(*args, **kwargs):\n    return None\n", namespace)  # noqa: S102
    return namespace["planted"]


@pytest.mark.parametrize("where", ["builtins", "tinyprof", "class", "sys.modules", "hook",
                                   "machinery"])
def test_notebook_code_planted_where_the_tests_look_is_detected(where):
    planted = _notebook_function()
    undo = []
    if where == "builtins":
        builtins.sorted_by_student = planted  # replacing a real builtin would break pytest
        undo.append(lambda: delattr(builtins, "sorted_by_student"))
        want = "builtins.sorted_by_student was replaced by notebook code"
    elif where == "tinyprof":
        saved = tp.count_parameters
        tp.count_parameters = planted
        undo.append(lambda: setattr(tp, "count_parameters", saved))
        want = "tinyprof.count_parameters was replaced by notebook code"
    elif where == "class":
        saved = vars(nn.Module)["named_modules"]
        nn.Module.named_modules = planted
        undo.append(lambda: setattr(nn.Module, "named_modules", saved))
        want = "tinyprof.nn.Module.named_modules was replaced by notebook code"
    elif where == "sys.modules":
        fake = types.ModuleType("tinyprof.testing")
        sys.modules["tinyprof.testing"] = fake
        undo.append(lambda: sys.modules.__setitem__("tinyprof.testing", testing_module))
        want = "sys.modules['tinyprof.testing'] was replaced"
    elif where == "hook":
        sys.displayhook, saved = planted, sys.displayhook
        undo.append(lambda: setattr(sys, "displayhook", saved))
        want = "sys.displayhook holds notebook code"
    else:   # a roll that would leave tinyprof.params on: not notebook code, still refused
        saved = tp._GRADING_MACHINERY
        tp._GRADING_MACHINERY = saved | {"params"}
        undo.append(lambda: setattr(tp, "_GRADING_MACHINERY", saved))
        want = "tinyprof._GRADING_MACHINERY was rebound"
    try:
        assert want in tampering()
        with pytest.raises(TamperingDetected, match="cannot be trusted in this kernel"):
            with reference_unavailable():
                pass
    finally:
        for step in undo:
            step()
    assert tampering() == []


def test_a_fake_module_in_the_notebook_is_detected():
    namespace = {"__name__": "__main__", "reference_unavailable": reference_unavailable,
                 "np": np, "tp": types.ModuleType("tinyprof")}
    with pytest.raises(TamperingDetected, match="tp is not the module 'tinyprof' that Python "
                                                "imported"):
        exec("with reference_unavailable():\n    pass\n", namespace)  # noqa: S102


def test_expect_names_the_mistake():
    with pytest.raises(AssertionError, match=r"linear: expected 8,256, got 8,192\. forgot"):
        expect(8_192, 8_256, "linear", hints={8_192: "forgot the bias"})


def test_same_and_which_compare_structures_and_name_the_matching_mistake():
    import numpy as np

    from tinyprof.testing import reference_unavailable, same, which

    step = (2.5, {"W": np.arange(6.0).reshape(2, 3), "b": np.zeros(3)})
    assert same((2.5, {"W": np.arange(6.0).reshape(2, 3) + 1e-12, "b": np.zeros(3)}), step)
    assert not same((2.5, {"W": np.arange(6.0).reshape(3, 2), "b": np.zeros(3)}), step)  # shape
    assert not same((2.5, {"W": np.arange(6.0).reshape(2, 3)}), step)                    # a key
    assert not same([2.5], step) and not same("2.5", 2.5)
    assert same([2.5, step[1]], step)          # a list for a tuple (what the grader sends back)
    variants = {"right": 1.0, "doubled": 2.0}
    with reference_unavailable():              # usable by hidden tests, tinyprof switched off
        assert which(2.0, variants) == "doubled"
        assert which(1.0 + 1e-7, variants, rtol=1e-6) == "right"
        assert which(3.0, variants) == "something else"


# --- the profile hook: a switch that follows code, not names (issue 33) -----------------------

#: A tinyprof function with a closure (a dataclass's generated ``__init__``), which the switch
#: cannot swap the code of: captured before the switch opens, only the hook sees it run.
_CAPTURED_INIT = tp.LatencyStats.__init__


def _median_by_captured_init(times, _init=_CAPTURED_INIT):
    stats = object.__new__(tp.LatencyStats)
    _init(stats, tuple(times))
    return stats.median


def test_a_closure_holding_function_captured_before_the_switch_is_refused():
    assert _CAPTURED_INIT.__closure__, "the case needs a function whose code cannot be swapped"
    assert _median_by_captured_init([1.0, 3.0, 2.0]) == 2.0
    with pytest.raises(ReferenceUnavailable) as caught:
        with reference_unavailable():
            _median_by_captured_init([1.0, 3.0, 2.0])
    assert caught.value.route == "tinyprof.LatencyStats"
    assert caught.value.kind == "constructor"
    assert _median_by_captured_init([4.0]) == 4.0   # restored after the block


def test_a_decorated_function_captured_before_the_switch_is_refused():
    scoped = tp.ops.scoped          # a contextmanager: contextlib's wrapper around a generator
    with pytest.raises(ReferenceUnavailable, match="tinyprof.ops.scoped"):
        with reference_unavailable():
            with scoped("stolen"):
                pass


def test_a_refusal_the_notebook_swallows_still_fails_the_block():
    def sly(times):
        try:
            return _median_by_captured_init(times)
        except Exception:  # noqa: BLE001 - the attack: hide the refusal, then delegate again
            return _median_by_captured_init(times)

    with pytest.raises(ReferenceUnavailable, match="tinyprof.LatencyStats"):
        with reference_unavailable():
            sly([1.0, 2.0])


def test_a_closure_holding_function_run_in_a_thread_is_refused():
    import threading

    outcome = []

    def worker():
        try:
            outcome.append(_median_by_captured_init([1.0, 2.0]))
        except ReferenceUnavailable as refused:
            outcome.append(refused.route)

    with pytest.raises(ReferenceUnavailable):
        with reference_unavailable():
            thread = threading.Thread(target=worker)
            thread.start()
            thread.join()
    assert outcome == ["tinyprof.LatencyStats"]


def test_tinyprof_internal_call_chains_still_work_under_the_hook():
    stats = tp.LatencyStats.from_samples([1.0, 1.0, 1.0, 5.0, 1.0, 1.1, 0.9, 3.0])
    layer = nn.Linear(3, 2)
    with reference_unavailable():
        # a cached property building TimingWarnings (a dataclass __init__, watched), and a
        # layer's forward calling tinyprof.ops.matmul (switched off for the notebook)
        assert [w.kind for w in stats.warnings] == ["unstable"]
        assert layer(np.ones((4, 3))).shape == (4, 2)


def test_the_hook_is_removed_afterwards_and_a_previous_profiler_is_restored():
    import threading

    def previous(frame, event, arg):
        return None

    sys.setprofile(previous)
    threading.setprofile(previous)
    try:
        with reference_unavailable():
            assert sys.getprofile() is not previous
            assert threading.getprofile() is not previous
        assert sys.getprofile() is previous and threading.getprofile() is previous
        with pytest.raises(ReferenceUnavailable):
            with reference_unavailable():
                _median_by_captured_init([1.0])
        assert sys.getprofile() is previous and threading.getprofile() is previous
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    with reference_unavailable():
        pass
    assert sys.getprofile() is None and threading.getprofile() is None


def test_the_graders_call_requests_run_under_the_hook_and_its_time_requests_do_not():
    """tinyprof.remote: a "call" made while the switch is open is watched; a "time" request (a
    speed measurement) runs with no profile function at all."""
    from tinyprof import remote

    seen = []

    def answer(times):
        seen.append(sys.getprofile())
        return _median_by_captured_init(times)

    def honest(times):
        seen.append(sys.getprofile())
        return float(np.median(times))

    namespace = {"answer": answer, "honest": honest}
    remote._carry_out(("switch", ()), namespace)
    try:
        with pytest.raises(ReferenceUnavailable, match="tinyprof.LatencyStats"):
            remote._carry_out(("call", answer, None, ([1.0, 2.0],), {}, ()), namespace)
        reply = remote._carry_out(("call", honest, None, ([1.0, 2.0],), {}, ()), namespace)
        assert reply["value"] == 1.5
        assert seen[0] is not None and seen[1] is not None
        number = len(remote._objects)
        remote._objects.append([([1.0, 2.0],)])
        seen.clear()
        remote._carry_out(("time", honest, number), namespace)
        assert seen == [None]
    finally:
        remote._carry_out(("unswitch",), namespace)
    assert sys.getprofile() is None
    assert _median_by_captured_init([5.0]) == 5.0


def test_switching_the_hook_off_during_the_call_is_tampering():
    def off_then_delegate(times):
        sys.setprofile(None)   # the static review flags this line too
        return _median_by_captured_init(times)

    with pytest.raises(TamperingDetected, match="profile hook was replaced or removed"):
        with reference_unavailable():
            off_then_delegate([1.0, 2.0])
    assert sys.getprofile() is None


def test_a_warm_up_time_request_runs_under_the_hook_when_the_grader_asks():
    from tinyprof import remote

    def fast_step(times):
        return _median_by_captured_init(times)

    namespace = {"fast_step": fast_step}
    remote._carry_out(("switch", ()), namespace)
    try:
        number = len(remote._objects)
        remote._objects.append([([1.0, 2.0],)])
        with pytest.raises(ReferenceUnavailable, match="tinyprof.LatencyStats"):
            remote._carry_out(("time", fast_step, number, True), namespace)
        remote._objects.append([([1.0, 2.0],)])
        reply = remote._carry_out(("time", fast_step, number + 1), namespace)   # timed: unseen
        assert "object" in reply["value"]
    finally:
        remote._carry_out(("unswitch",), namespace)


class _RecordingJudge:
    """A judge as judged_by expects one (testing.Judging): it records what it is asked."""

    def __init__(self):
        self.asked: list[tuple] = []

    def switch(self, extra):
        import contextlib

        self.asked.append(("switch", extra))
        return contextlib.nullcontext()

    def measure_speed(self, candidate, baseline, make_inputs, *, rounds, rtol, atol):
        self.asked.append(("measure_speed", candidate, rounds))
        raise AssertionError("measured by the judge")


def test_judged_by_hands_the_helpers_work_to_the_judge_and_gives_it_back_after():
    """Inside ``judged_by(judge)`` reference_unavailable switches nothing off here (the judge
    opens it in the student's kernel) and expect_faster asks the judge; blocks nest, and
    after the outermost block the helpers work in this process again."""
    outer, inner = _RecordingJudge(), _RecordingJudge()
    with testing_module.judged_by(outer) as given:
        assert given is outer
        with reference_unavailable("numpy.percentile"):
            assert tp.count_parameters(models.mlp()) > 0   # not switched off here
        with testing_module.judged_by(inner):
            with pytest.raises(AssertionError, match="measured by the judge"):
                testing_module.expect_faster(len, len, lambda seed: ((),), rounds=3)
        with reference_unavailable():
            pass
    assert outer.asked == [("switch", ("numpy.percentile",)), ("switch", ())]
    assert inner.asked == [("measure_speed", len, 3)]
    with reference_unavailable():
        _refused(lambda: tp.count_parameters(models.mlp()))


def test_judged_by_gives_the_judge_back_when_the_block_fails():
    judge = _RecordingJudge()
    with pytest.raises(KeyError), testing_module.judged_by(judge):
        raise KeyError("the test failed")
    with reference_unavailable():
        _refused(lambda: tp.count_parameters(models.mlp()))
    assert judge.asked == []
