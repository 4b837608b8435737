"""tinyprof.memory: tracemalloc measurements that are right inside and outside an outer trace, and a
training step's memory measured component by component against the formulas."""

from __future__ import annotations

import dataclasses
import math
import tracemalloc

import numpy as np
import pytest

from tinyprof import models
from tinyprof.memory import (
    MemoryTimeline,
    MissingActivationFormulaError,
    activation_bytes,
    activation_rows,
    activation_table,
    max_batch_size,
    measure_memory,
    predict_training_memory,
    training_memory,
)
from tinyprof.memory.training import measure_step, phase_peaks
from tinyprof.models import random_input
from tinyprof.nn import (
    GELU,
    Conv2d,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    Module,
    MSELoss,
    MultiHeadAttention,
    Parameter,
    ReLU,
    Sequential,
    TiedLMHead,
)
from tinyprof.optim import SGD, Adam
from tinyprof.shapes import SHAPE_RULES, MissingFormulaError, register_shape

MB8 = 8_000_000
GPT_CONFIG = dict(vocab_size=1000, n_ctx=64, d_model=128, n_layer=2, n_head=4)


@pytest.fixture(autouse=True)
def no_trace_left_running():
    yield
    running = tracemalloc.is_tracing()
    tracemalloc.stop()
    assert not running, "a test left tracemalloc running"


def mlp_case(dtype=np.float32):
    model = models.mlp(dtype=dtype)
    return model, np.random.default_rng(0).standard_normal((64, 784)).astype(dtype)


def gpt_case(dtype=np.float32):
    model = models.gpt2(**GPT_CONFIG, dtype=dtype)
    return model, np.random.default_rng(0).integers(0, 1000, size=(4, 64))


# -- measure_memory -------------------------------------------------------------------------------
def test_peak_and_retained_of_a_known_array():
    m = measure_memory(np.ones, (1000, 1000))          # float64: 8,000,000 bytes
    assert m.peak_bytes == pytest.approx(MB8, rel=0.01)
    assert m.retained_bytes == pytest.approx(MB8, rel=0.01)
    assert m.result.shape == (1000, 1000) and not m.nested
    assert "8.0 MB" in str(m)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.peak_bytes = 0


def test_retained_bytes_of_returning_versus_freeing_a_big_array():
    def keeps():
        return np.ones(2_000_000, np.float32)

    def frees():
        return float(np.ones(2_000_000, np.float32).sum())

    kept, freed = measure_memory(keeps), measure_memory(frees)
    assert kept.retained_bytes == pytest.approx(MB8, rel=0.01)
    assert freed.peak_bytes == pytest.approx(MB8, rel=0.01)
    assert freed.retained_bytes < 10_000, "the array was freed: only a float should remain"
    assert freed.result == 2_000_000.0


def test_arguments_are_passed_and_tracing_stays_off():
    m = measure_memory(np.full, (10, 10), fill_value=3.0)
    assert m.result.sum() == 300.0
    assert not tracemalloc.is_tracing()
    with pytest.raises(ZeroDivisionError):
        measure_memory(lambda: 1 / 0)
    assert not tracemalloc.is_tracing(), "an exception must not leave tracing on"


def test_inside_an_outer_trace_tracing_stays_on_and_the_outer_peak_survives():
    tracemalloc.start()
    try:
        big = np.ones(2 * MB8 // 8)          # the outer caller's 16 MB peak …
        del big
        before, outer_peak = tracemalloc.get_traced_memory()
        assert outer_peak >= 2 * MB8
        inner = measure_memory(np.ones, 100_000)   # … then a small measured call (800 KB)
        assert tracemalloc.is_tracing(), "measure_memory stopped a trace it did not start"
        assert inner.nested
        assert inner.peak_bytes == pytest.approx(800_000, rel=0.02)
        current, peak = tracemalloc.get_traced_memory()
        assert current - before >= 800_000, "the outer trace must still see the allocation"
        assert peak >= outer_peak, "reset_peak() inside must not lower the outer caller's peak"
        assert peak < outer_peak + 10_000
    finally:
        tracemalloc.stop()


def test_nested_measurements_each_see_their_own_peak():
    def outer_work():
        temporary = np.ones(2 * MB8 // 8)   # 16 MB, freed before the inner measurement
        del temporary
        return measure_memory(np.ones, MB8 // 8)   # 8 MB kept

    outer = measure_memory(outer_work)
    inner = outer.result
    assert inner.nested and not outer.nested
    assert inner.peak_bytes == pytest.approx(MB8, rel=0.01)
    assert outer.peak_bytes == pytest.approx(2 * MB8, rel=0.01)   # not just the inner 8 MB
    assert outer.retained_bytes == pytest.approx(MB8, rel=0.01)

    def small_then_big():
        return measure_memory(lambda: float(np.ones(3 * MB8 // 8).sum()))

    assert measure_memory(small_then_big).peak_bytes == pytest.approx(3 * MB8, rel=0.01)


# -- MemoryTimeline -------------------------------------------------------------------------------
def test_timeline_deltas_and_peaks_between_marks():
    with MemoryTimeline() as timeline:
        a = np.ones(MB8 // 8)
        timeline.mark("a")
        b = np.ones(MB8 // 16)
        del a
        timeline.mark("b, a freed")
        del b
        timeline.mark("all freed")
    a_mark, b_mark, end = timeline.marks
    assert a_mark.traced_bytes == pytest.approx(MB8, rel=0.01)
    assert b_mark.traced_bytes == pytest.approx(MB8 / 2, rel=0.01)
    assert b_mark.delta_bytes == pytest.approx(-MB8 / 2, rel=0.01)
    assert b_mark.peak_bytes == pytest.approx(1.5 * MB8, rel=0.01)   # both alive for a moment
    assert end.peak_bytes == pytest.approx(MB8 / 2, rel=0.01)
    assert abs(end.traced_bytes) < 10_000
    assert timeline["a"] is a_mark
    table = timeline.table()
    assert table.column("label") == ["a", "b, a freed", "all freed"]
    assert "12.0 MB" in str(table)
    assert not tracemalloc.is_tracing()
    with pytest.raises(RuntimeError, match="inside"):
        timeline.mark("after the block")


def test_timeline_inside_an_outer_trace():
    tracemalloc.start()
    try:
        big = np.ones(3 * MB8 // 8)
        del big
        outer_peak = tracemalloc.get_traced_memory()[1]
        with MemoryTimeline() as timeline:
            kept = np.ones(MB8 // 8)
            timeline.mark("kept")
        assert tracemalloc.is_tracing()
        assert timeline["kept"].traced_bytes == pytest.approx(MB8, rel=0.01)
        assert tracemalloc.get_traced_memory()[1] >= outer_peak
        del kept
    finally:
        tracemalloc.stop()


# -- what each layer saves ------------------------------------------------------------------------
def _layer_cases():
    rng = np.random.default_rng(0)
    table = Parameter(rng.standard_normal((50, 16)).astype(np.float32))
    return {   # each saves 100 KB or more, so a formula missing any array is off by > 10 %
        "Linear": (Linear(64, 32, rng=rng), (64, 10, 64)),
        "ReLU": (ReLU(), (320, 1000)),
        "GELU": (GELU(), (320, 500)),
        "LayerNorm": (LayerNorm(64), (64, 10, 64)),
        "Conv2d": (Conv2d(3, 8, 3, stride=2, padding=1, rng=rng), (8, 3, 32, 32)),
        "Embedding": (Embedding(100, 16, rng=rng), (64, 256)),
        "Flatten": (Flatten(), (4, 8, 5, 5)),
        "attention": (MultiHeadAttention(64, 4, rng=rng), (4, 32, 64)),
        "causal attention": (MultiHeadAttention(64, 4, causal=True, rng=rng), (4, 32, 64)),
        "TiedLMHead": (TiedLMHead(table), (64, 32, 16)),
    }


@pytest.mark.parametrize("name", list(_layer_cases()))
def test_each_layer_saves_exactly_what_its_formula_says(name):
    layer, shape = _layer_cases()[name]
    rng = np.random.default_rng(1)
    if isinstance(layer, Embedding):
        x = rng.integers(0, 100, size=shape)
    else:
        x = rng.standard_normal(shape).astype(np.float32)
    layer(x.copy())                                # warm-up: the layer's attributes exist
    m = measure_memory(lambda: layer(x.copy()))    # the copy is the input a layer may keep
    kept = m.retained_bytes - m.result.nbytes      # what stays besides the output
    formula = activation_bytes(layer, shape)
    assert formula >= 100_000 or name == "Flatten"
    assert kept == pytest.approx(formula, rel=0.01, abs=4_000), \
        f"{name}: forward keeps {kept:,} bytes, the formula says {formula:,}"


def test_attention_formula_is_five_activations_plus_the_probabilities():
    b, s, d, h = 2, 24, 64, 4
    assert activation_bytes(MultiHeadAttention(d, h), (b, s, d)) == (5 * b * s * d
                                                                      + b * h * s * s) * 4


def test_backward_releases_what_forward_saved():
    model, x = mlp_case()

    def step():
        model(x.copy())
        model.backward(np.ones((64, 10), np.float32))

    m = measure_memory(step)
    grads = sum(p.grad.nbytes for p in model.parameters())
    assert m.peak_bytes > grads
    assert m.retained_bytes == pytest.approx(grads, rel=0.02), \
        "after backward only the gradients may remain"
    with pytest.raises(RuntimeError, match="forward"):
        model.backward(np.ones((64, 10), np.float32))


def test_a_layer_without_formula_is_refused_by_name():
    class Mystery(Module):
        def forward(self, x):
            return x

    with pytest.raises(MissingFormulaError, match="Mystery"):
        activation_bytes(Sequential(Linear(4, 4), Mystery()), (2, 4))
    register_shape(Mystery)(lambda layer, x: x)
    try:
        with pytest.raises(MissingActivationFormulaError, match="Mystery 'layers.1'"):
            activation_bytes(Sequential(Linear(4, 4), Mystery()), (2, 4))
    finally:
        SHAPE_RULES.unregister(Mystery)


def test_training_memory_of_a_layer_without_formula_measures_and_predicts_nothing():
    class Doubler(Module):
        def forward(self, x):
            return 2 * x

        def backward(self, grad):
            return 2 * grad

    model, x = Sequential(Linear(784, 64), Doubler(), Linear(64, 10)), mlp_case()[1]
    report = training_memory(model, x)
    assert report.activations.predicted_bytes is None and report.activations.ratio is None
    assert "Doubler" in report.activations.formula
    assert report.activations.measured_bytes > 64 * 784 * 4   # the saved batch, at least
    assert report.gradients.ratio == pytest.approx(1.0, abs=0.05)


def test_activation_table_lists_layers_and_the_loss():
    model, _ = gpt_case()
    table = activation_table(model, (4, 64), loss=MSELoss())
    assert table.column("name")[:3] == ["wte", "wpe", "h.0.ln_1"]
    assert table.column("name")[-1] == "(loss)"
    rows, output_shape = activation_rows(model, (4, 64))
    assert output_shape == (4, 64, 1000)
    assert sum(table.column("bytes")) == sum(r.nbytes for r in rows) + 4 * 64 * 1000 * 4


# -- training memory: measured against predicted -------------------------------------------------
@pytest.mark.parametrize("case", [mlp_case, gpt_case], ids=["mlp", "gpt"])
@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_every_component_matches_its_formula_within_5_percent(case, optimizer):
    model, x = case()
    report = training_memory(model, x, optimizer=optimizer)
    params = sum(p.nbytes for p in model.parameters())
    assert report.parameters.measured_bytes == report.parameters.predicted_bytes == params
    for name in ("activations", "gradients"):
        component = report[name]
        assert component.ratio == pytest.approx(1.0, abs=0.05), \
            f"{name}: measured {component.measured_bytes:,}, " \
            f"predicted {component.predicted_bytes:,}"
    state = report.optimizer_state
    slots = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    assert state.predicted_bytes == slots * params
    assert state.measured_bytes == pytest.approx(slots * params, abs=0.05 * params)
    assert dict(report.optimizer_state_bytes) == {"sgd": 0, "momentum": params, "adam": 2 * params}


def test_gpt_numbers_by_hand():
    model, x = gpt_case()
    report = predict_training_memory(model, (4, 64), "adam")
    b, s, d, h, v, layers = 4, 64, 128, 4, 1000, 2
    per_block = 2 * (b * s * d + b * s) + 5 * b * s * d + b * h * s * s + 13 * b * s * d
    floats = layers * per_block + (b * s * d + b * s) + b * s * d + b * s * v
    ints = b * s + s + b * s                     # token ids, positions, targets
    assert report.activations.predicted_bytes == 4 * floats + 8 * ints
    params = 1000 * 128 + 64 * 128 + 2 * (12 * 128**2 + 13 * 128) + 2 * 128
    assert report.parameters.predicted_bytes == 4 * params
    assert report.optimizer_state.predicted_bytes == 8 * params


@pytest.mark.parametrize("case", [mlp_case, gpt_case], ids=["mlp", "gpt"])
def test_float64_doubles_every_component(case):
    r32, r64 = (training_memory(*case(dtype), optimizer="adam") for dtype in (np.float32,
                                                                              np.float64))
    for name in ("parameters", "gradients", "optimizer state"):
        assert r64[name].predicted_bytes == 2 * r32[name].predicted_bytes
        assert r64[name].measured_bytes == pytest.approx(2 * r32[name].measured_bytes, rel=0.01)
    assert r64.activations.ratio == pytest.approx(1.0, abs=0.05)
    ratio = r64.activations.measured_bytes / r32.activations.measured_bytes
    if case is gpt_case:   # all floats but ids, positions and targets (3 KB of 7 MB)
        assert ratio == pytest.approx(2.0, abs=0.01)
    else:                  # the ReLU masks are bool in any dtype: they do not double
        masks, targets = 64 * (256 + 128), 64 * 8
        a32, a64 = r32.activations.predicted_bytes, r64.activations.predicted_bytes
        assert a64 == 2 * (a32 - masks - targets) + masks + targets
        assert 1.8 < ratio < 2.0


def test_profiling_does_not_train_the_model():
    model, x = gpt_case()
    before = [p.data.copy() for p in model.parameters()]
    report = training_memory(model, x, optimizer="adam")
    for param, old in zip(model.parameters(), before, strict=True):
        np.testing.assert_array_equal(param.data, old)
        assert param.grad is None
    assert report.forward_peak_bytes >= report.activations.measured_bytes
    params, state = report.parameters.measured_bytes, report.optimizer_state.measured_bytes
    # a later step: the Adam state is already allocated during forward and backward
    assert report.peak_bytes >= params + state + report.forward_peak_bytes
    assert report.peak_bytes >= params + report.step_peak_bytes
    labels = [m.label for m in report.timeline]
    assert labels == ["after forward", "after backward", "after optimizer step"]


def test_report_prints_and_converts_to_plain_data():
    model, x = mlp_case()
    report = training_memory(model, x, optimizer="momentum")
    records = report.table().to_records()
    assert [r["component"] for r in records] == ["parameters", "activations", "gradients",
                                                 "optimizer state"]
    assert records[0]["ratio"] == 1.0
    text = str(report)
    assert "momentum" in text and "940.6 KB" in text   # 235,146 parameters × 4 bytes
    assert "after backward" in str(report.timeline_table())


def test_an_optimizer_instance_is_used_and_must_own_the_parameters():
    model, x = mlp_case()
    adam = Adam(model.parameters())
    report = training_memory(model, x, optimizer=adam)
    assert adam.state_bytes() == 2 * report.parameters.measured_bytes
    assert report.optimizer_state.ratio == pytest.approx(1.0, abs=0.05)
    other = models.mlp((4, 2))
    with pytest.raises(ValueError, match="optimizer must hold"):
        training_memory(model, x, optimizer=SGD(other.parameters()))


def test_gpt2_small_prediction_works_shape_only():
    small = models.gpt2("small", shape_only=True)
    report = predict_training_memory(small, (1, 1024), "adam")
    assert report.parameters.predicted_bytes == 497_759_232
    assert report.gradients.predicted_bytes == 497_759_232
    assert report.optimizer_state.predicted_bytes == 2 * 497_759_232
    assert report.predicted_total_bytes > 2e9          # Adam on GPT-2 small cannot fit 2 GB
    assert "predicted" in report.table().columns and "measured" not in report.table().columns


# -- the largest batch that fits -------------------------------------------------------------------
class Hog(Module):
    """One parameter; forward saves exactly 1,000,000 bytes per sample until backward."""

    def __init__(self):
        self.weight = Parameter(np.ones(1, np.float32))

    def forward(self, x):
        self._saved = np.ones((x.shape[0], 250_000), np.float32)
        return x * self.weight.data

    def backward(self, grad):
        self.pop_saved("_saved")
        self.weight.accumulate_grad(np.array([grad.sum()], np.float32))
        return grad


def _peak(model, x, loss=None):
    """Parameters + the traced peak of one measured training step (what max_batch_size fits)."""
    marks, _ = measure_step(model, x, loss=loss)
    return max(phase_peaks(marks, sum(p.nbytes for p in model.parameters())).values())


def test_max_batch_size_of_a_model_with_known_per_sample_cost():
    hog = Hog()
    fit = max_batch_size(hog, (1,), 50e6, loss="mse")
    assert fit.per_sample_bytes == pytest.approx(1_000_000, rel=0.001)
    assert 0 < fit.fixed_bytes < 20_000
    assert fit.batch_size == 49 == math.floor((50e6 - fit.fixed_bytes) / fit.per_sample_bytes)
    assert fit.phase == "forward"
    assert _peak(hog, random_input(hog, (49, 1)), "mse") <= 50e6
    assert _peak(hog, random_input(hog, (50, 1)), "mse") > 50e6


def test_max_batch_size_of_the_mlp_agrees_with_a_measurement_at_that_batch():
    model = models.mlp()
    fit = max_batch_size(model, (784,), 12e6)
    assert 500 < fit.batch_size < 5000
    assert _peak(model, random_input(model, (fit.batch_size, 784))) <= 12e6
    assert _peak(model, random_input(model, (int(fit.batch_size * 1.02) + 1, 784))) > 12e6
    assert "largest batch within 12.0 MB" in str(fit)
    assert len(fit.table()) == 4


def test_max_batch_size_predicted_for_gpt2_small():
    small = models.gpt2("small", shape_only=True)
    at_1024 = max_batch_size(small, (1024,), 2e9, optimizer="sgd")
    assert at_1024.method == "predict" and at_1024.batch_size == 0   # not even one sequence
    fit = max_batch_size(small, (128,), 2e9, optimizer="sgd")
    total = {b: predict_training_memory(small, (b, 128), "sgd").predicted_total_bytes
             for b in (fit.batch_size, fit.batch_size + 1)}
    assert fit.batch_size >= 1
    assert total[fit.batch_size] <= 2e9 < total[fit.batch_size + 1]
    # parameters + gradients, plus the 128 int64 positions that do not grow with the batch
    assert fit.fixed_bytes == pytest.approx(2 * 497_759_232 + 128 * 8, abs=1)


# -- bad input ------------------------------------------------------------------------------------
def test_errors_name_the_argument():
    model, x = mlp_case()
    with pytest.raises(TypeError, match="fn must be callable"):
        measure_memory(42)
    for budget in (0, -1e6):
        with pytest.raises(ValueError, match="budget_bytes"):
            max_batch_size(model, (784,), budget)
    with pytest.raises(ValueError, match="batch_sizes"):
        max_batch_size(model, (784,), 1e9, batch_sizes=(4, 4))
    with pytest.raises(TypeError, match="sample"):
        max_batch_size(model, "784", 1e9)
    empty = Sequential(ReLU())
    for call in (lambda: training_memory(empty, x), lambda: predict_training_memory(empty, (2, 3)),
                 lambda: max_batch_size(empty, (3,), 1e9)):
        with pytest.raises(ValueError, match="has no parameters"):
            call()
    with pytest.raises(ValueError, match="unknown name 'rmsprop'"):
        training_memory(model, x, optimizer="rmsprop")
    with pytest.raises(ValueError, match="predict_training_memory"):
        training_memory(models.mlp(shape_only=True), x)
    with pytest.raises(TypeError, match="model must be a tinyprof Module"):
        predict_training_memory("gpt2", (1, 8))


def test_one_container_policy_in_both_registries():
    """A layer made of other layers states its own work in the FLOP registry (no_own_work) and
    what it saves in the activation registry (nothing_saved) alike: one without a formula
    stops the count with an error that says so, and a container that keeps nothing gets no
    row, as in the FLOP table."""
    from tinyprof import nn
    from tinyprof.flops import no_own_work, register_flops
    from tinyprof.flops import unregister as unregister_flops
    from tinyprof.memory import activation_rows, nothing_saved, register_activation_formula
    from tinyprof.memory.activations import ACTIVATION_FORMULAS
    from tinyprof.shapes import CONTAINER_FLOWS, register_container

    class Pair(nn.Module):
        def __init__(self):
            self.a, self.b = nn.Linear(4, 4), nn.ReLU()

        def forward(self, x):
            return self.b(self.a(x))

    @register_container(Pair)
    def pair_flow(layer, x, visit):
        return visit(layer.b, visit(layer.a, x))

    register_flops(Pair)(no_own_work)
    try:
        with pytest.raises(MissingActivationFormulaError, match="nothing_saved"):
            activation_rows(Pair(), (2, 4))
        register_activation_formula(Pair)(nothing_saved)
        rows, out = activation_rows(Pair(), (2, 4))
        assert [r.type for r in rows] == ["Linear", "ReLU"] and out == (2, 4)
        assert [r.type for r in activation_rows(nn.Sequential(nn.Linear(4, 4)), (2, 4))[0]] \
            == ["Linear"]
    finally:
        unregister_flops(Pair)
        CONTAINER_FLOWS.unregister(Pair)
        ACTIVATION_FORMULAS.unregister(Pair)
