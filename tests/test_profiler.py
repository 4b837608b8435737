"""The seed-compatible facade: classic keys, every value counted or measured, checked against
the functions it maps onto; and the measured roofline it takes its bottleneck from."""

from __future__ import annotations

import numpy as np
import pytest

import tinyprof as tp
from tinyprof.roofline import MachinePeaks, machine_peaks


@pytest.fixture(scope="module")
def mlp_and_input():
    model = tp.models.mlp((256, 512, 10))
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    return model, x


@pytest.fixture(scope="module")
def gpt_and_ids():
    model = tp.models.gpt2(vocab_size=500, n_ctx=32, d_model=64, n_layer=2, n_head=4)
    ids = np.random.default_rng(0).integers(0, 500, (2, 32))
    return model, ids


def test_counts_are_the_library_counts(gpt_and_ids):
    model, ids = gpt_and_ids
    profiler = tp.Profiler()
    assert profiler.count_parameters(model) == tp.count_parameters(model)
    assert profiler.count_flops(model, ids.shape) == tp.count_flops(model, ids.shape)
    assert tp.Profiler().count_flops(tp.nn.Linear(128, 64), (1, 128)) == 16_384


def test_measure_memory_is_measured_and_matches_the_formulas(mlp_and_input):
    model, x = mlp_and_input
    memory = tp.Profiler().measure_memory(model, x.shape)
    assert set(memory) == {"parameter_memory_mb", "activation_memory_mb", "peak_memory_mb",
                           "memory_efficiency"}
    assert memory["parameter_memory_mb"] == tp.parameter_bytes(model) / 1e6
    predicted = tp.predict_training_memory(model, x.shape, "sgd").activations.predicted_bytes
    assert memory["activation_memory_mb"] * 1e6 == pytest.approx(predicted, rel=0.05)
    assert memory["peak_memory_mb"] > memory["parameter_memory_mb"] + \
        memory["activation_memory_mb"] * 0.9
    assert 0 < memory["memory_efficiency"] <= 1


def test_profile_forward_pass_keys_and_consistency(mlp_and_input):
    model, x = mlp_and_input
    result = tp.Profiler().profile_forward_pass(model, x)
    assert result["parameters"] == 256 * 512 + 512 + 512 * 10 + 10
    assert result["flops"] == 2 * 64 * (256 * 512 + 512 * 10)
    assert result["latency_ms"] > 0
    seconds = result["latency_ms"] / 1e3
    assert result["gflops_per_second"] == pytest.approx(result["flops"] / seconds / 1e9)
    peaks = machine_peaks()
    assert result["bottleneck"] == peaks.bound(result["arithmetic_intensity"])
    assert result["is_memory_bound"] != result["is_compute_bound"]
    assert result["computational_efficiency"] == pytest.approx(
        result["flops"] / seconds / peaks.flops_per_second)


def test_profile_backward_pass_counts_the_real_backward(gpt_and_ids):
    model, ids = gpt_and_ids
    before = [p.grad for p in model.parameters()]
    result = tp.Profiler().profile_backward_pass(model, ids)
    assert result["backward_flops"] == tp.count_flops(model, ids.shape, backward=True)
    assert result["total_flops"] == result["forward_flops"] + result["backward_flops"]
    params_mb = tp.parameter_bytes(model) / 1e6
    estimates = result["optimizer_memory_estimates"]
    assert estimates["sgd"] == 0
    assert estimates["momentum"] == pytest.approx(params_mb)
    assert estimates["adam"] == pytest.approx(2 * params_mb)
    assert result["gradient_memory_mb"] == pytest.approx(params_mb, rel=0.05)
    assert result["total_latency_ms"] >= result["backward_latency_ms"] >= 0
    assert [p.grad for p in model.parameters()] == before, "profiling must not leave gradients"


def test_backward_flops_differ_from_the_two_times_rule(gpt_and_ids):
    model, ids = gpt_and_ids
    forward = tp.count_flops(model, ids.shape)
    backward = tp.count_flops(model, ids.shape, backward=True)
    assert backward == 2 * forward, "every matmul of this GPT has an input and a weight gradient"
    first_linear = tp.nn.Sequential(tp.nn.Linear(8, 8), tp.nn.ReLU(), tp.nn.Linear(8, 8))
    skipped = tp.count_flops(first_linear, (4, 8), backward=True, skip_first_input_grad=True)
    assert skipped == 2 * tp.count_flops(first_linear, (4, 8)) - 2 * 4 * 8 * 8


def test_quick_profile_prints_and_returns(mlp_and_input, capsys):
    model, x = mlp_and_input
    result = tp.quick_profile(model, x)
    printed = capsys.readouterr().out
    assert f"{result['flops']:,}" in printed and "bottleneck" in printed


def test_roofline_arithmetic():
    peaks = MachinePeaks(flops_per_second=100e9, bytes_per_second=20e9)
    assert peaks.ridge_intensity == 5.0
    assert peaks.attainable(1.0) == 20e9
    assert peaks.attainable(50.0) == 100e9
    assert peaks.bound(4.9) == "memory" and peaks.bound(5.0) == "compute"


def test_machine_peaks_are_measured_and_cached():
    first = machine_peaks()
    assert first is machine_peaks()
    assert 1e8 < first.flops_per_second < 1e14
    assert 1e8 < first.bytes_per_second < 1e13
