"""Chapter 08's pipeline: every fix keeps the answer, the stages are what the profiler sees, and
the analysis predicts with Amdahl's law from measured stage times."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tinyprof.bottlenecks.layer_profiler import LayerProfiler
from tinyprof.faster import analysis, pipeline

#: float32 rounding of a step's loss and new weights (measured: 2e-8 absolute on the weights,
#: 2e-8 relative on the loss), well under the smallest real change of the step: weight decay
#: alone moves a weight by up to 1.5e-6.
RTOL, ATOL = 1e-6, 1e-7


@pytest.fixture(scope="module")
def baseline():
    weights, batch = pipeline.make_inputs(3)
    return weights, batch, pipeline.slow_step(weights, batch)


def assert_same_step(got, want):
    (loss, new), (want_loss, want_new) = got, want
    assert isinstance(loss, float)
    assert loss == pytest.approx(want_loss, rel=RTOL)
    assert new.keys() == want_new.keys() == {"W1", "b1", "W2", "b2"}
    for name in want_new:
        assert new[name].shape == want_new[name].shape
        np.testing.assert_allclose(new[name], want_new[name], rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("fix", pipeline.FIXES)
def test_each_fix_alone_gives_the_baselines_loss_and_weights(baseline, fix):
    weights, batch, want = baseline
    copies = {k: v.copy() for k, v in weights.items()}, {k: v.copy() for k, v in batch.items()}
    assert_same_step(pipeline.step(weights, batch, (fix,)), want)
    for before, after in zip(copies, (weights, batch)):       # the caller's arrays untouched
        assert all(np.array_equal(before[k], after[k]) for k in before)


def test_all_fixes_together_give_the_baselines_loss_and_weights(baseline):
    weights, batch, want = baseline
    assert_same_step(pipeline.fast_step(weights, batch), want)
    assert_same_step(pipeline.step(weights, batch, pipeline.FIXES), want)
    assert pipeline.fast_step(weights, batch)[1]["W1"].dtype == np.float32
    assert want[1]["W1"].dtype == np.float64


def test_the_tolerance_sees_a_missing_weight_decay(baseline):
    """The comparison above is tight enough to catch the smallest planted difference."""
    weights, batch, (loss, new) = baseline
    no_decay = {k: new[k] + pipeline.LEARNING_RATE * pipeline.WEIGHT_DECAY * weights[k]
                for k in new}
    with pytest.raises(AssertionError):
        assert_same_step((loss, no_decay), (loss, new))


def test_the_stage_functions_agree_with_their_slow_versions():
    images, indices, shifts, centre, scale = pipeline.make_load_inputs(4, size=9)
    shifts[:4] = [[2, 2], [-2, -2], [2, -2], [-2, 0]]
    np.testing.assert_allclose(pipeline.load_fast(images, indices, shifts, centre, scale),
                               pipeline.load_slow(images, indices, shifts, centre, scale))
    (h,) = pipeline.make_activations(5, size=7)
    for fast, slow in zip(pipeline.gelu_fast(h), pipeline.gelu_slow(h)):
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-15)
    z, labels = pipeline.make_logits(6, size=11)
    loss, dz = pipeline.loss_batched(z, labels)
    want_loss, want_dz = pipeline.loss_per_sample(z, labels)
    assert loss == pytest.approx(want_loss, rel=1e-12)
    np.testing.assert_allclose(dz, want_dz, rtol=1e-12, atol=1e-15)


def test_stages_are_what_the_layer_profiler_records():
    weights, batch = pipeline.make_inputs(0, size=16)
    for fixes in ((), pipeline.FIXES):
        with LayerProfiler() as prof:
            pipeline.step(weights, batch, fixes)
        assert [call.name for call in prof.calls] == list(analysis.STAGES)
        assert {call.kind for call in prof.calls} == {"Stage"}
        assert all(call.self_seconds > 0 for call in prof.calls)


def test_bad_fix_names_are_refused_by_name():
    weights, batch = pipeline.make_inputs(0, size=4)
    with pytest.raises(ValueError, match="unknown fix 'float16'.*quiet_logging"):
        pipeline.step(weights, batch, ("float32", "float16"))
    with pytest.raises(TypeError, match=r"write \('float32',\)"):
        pipeline.stages("float32")
    with pytest.raises(ValueError, match="'fast'"):
        analysis.stage_seconds(("fast",))


def test_predicted_speedup_is_amdahl_on_stage_times():
    before = {"load": 0.05, "hidden": 0.02, "rest": 0.03}
    assert analysis.predicted_speedup(before, {"load": 0.01}) == pytest.approx(0.1 / 0.06)
    # 1/((1 − p) + p/k) with p = 0.5 and k = 5
    assert analysis.predicted_speedup(before, {"load": 0.01}) == pytest.approx(1 / (0.5 + 0.5 / 5))
    assert analysis.predicted_speedup(before, {"load": 0.05}) == 1.0
    with pytest.raises(ValueError, match="update"):
        analysis.predicted_speedup(before, {"update": 0.01})


def test_predicted_seconds_scales_each_stage_by_each_fix_alone():
    baseline = {"statistics": 1.0, "load": 4.0, "hidden": 2.0, "loss": 1.0, "update": 2.0}
    alone = {fix: dict(baseline) for fix in pipeline.FIXES}
    alone["quiet_logging"]["load"] = 2.0          # load halved
    alone["vectorised_loading"]["load"] = 1.0     # load quartered
    alone["float32"] = {stage: t / 2 for stage, t in baseline.items()}
    assert analysis.predicted_seconds(baseline, alone, ()) == 10.0
    assert analysis.predicted_seconds(baseline, alone, ("quiet_logging",)) == 8.0
    # Two fixes of one stage multiply their factors (the assumption that over-predicts).
    assert analysis.predicted_seconds(baseline, alone, ("quiet_logging",
                                                        "vectorised_loading")) == 6.5
    assert analysis.predicted_seconds(baseline, alone, ("float32",)) == 5.0


def test_stage_seconds_measures_every_stage_and_the_fixes_remove_the_costs():
    slow, fast = analysis.stage_seconds((), steps=2), analysis.stage_seconds(pipeline.FIXES, 2)
    assert list(slow) == list(fast) == [*analysis.STAGES, analysis.OTHER]
    # Computed once instead of a sort of every pixel's column per step.
    assert fast["statistics"] < slow["statistics"] / 10
    # One gather instead of 256 Python iterations with a formatted message each.
    assert fast["load"] < slow["load"] / 5
    assert all(seconds > 0 for seconds in slow.values())
    assert fast[analysis.OTHER] > 0          # casting the weights and reading the labels


def test_stage_work_counts_the_matmuls_and_halves_the_bytes_in_float32():
    slow, fast = analysis.stage_work(()), analysis.stage_work(pipeline.FIXES)
    B, F, H, C = pipeline.BATCH, pipeline.FEATURES, pipeline.HIDDEN, pipeline.CLASSES
    assert slow["hidden"][0] == 2 * B * F * H + B * H + analysis.GELU_FLOPS * B * H
    assert slow["update"][0] >= 2 * B * F * H + 4 * B * H * C
    assert fast["statistics"] == (0.0, 0.0) and slow["statistics"][0] > 0
    for stage in ("hidden", "loss", "update"):
        assert fast[stage][0] == slow[stage][0]
        assert fast[stage][1] * 2 == slow[stage][1]
    assert slow["hidden"][0] / slow["hidden"][1] > slow["load"][0] / slow["load"][1]


def test_every_pair_of_fixes_keeps_the_answer(baseline):
    weights, batch, want = baseline
    for pair in itertools.combinations(pipeline.FIXES, 2):
        assert_same_step(pipeline.step(weights, batch, pair), want)
