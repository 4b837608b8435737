"""Layers on the roofline: FLOPs and bytes per call from the shapes (exact), and the bound each
layer gets from its measured time against a roofline whose peaks are set by the test."""

import numpy as np
import pytest

from tinyprof import nn
from tinyprof.bottlenecks import LayerWork, layer_work, place_layers
from tinyprof.layer_profiler import LayerProfiler
from tinyprof.roofline import MachinePeaks

# generous call overhead (10 µs): a call under 0.5 ms that the roofline explains < 10 % of is
# overhead; the ridge sits at 100e9 / 20e9 = 5 FLOPs per byte
PEAKS = MachinePeaks(flops_per_second=100e9, bytes_per_second=20e9, call_overhead_s=1e-5)


def test_linear_work_from_shapes():
    model = nn.Sequential(nn.Linear(256, 128), nn.ReLU())
    work = layer_work(model, (32, 256))
    x, y, params = 32 * 256, 32 * 128, 256 * 128 + 128
    assert work[("layers.0", "forward")] == LayerWork(
        "layers.0", "Linear", "forward", 2 * 32 * 256 * 128 + 32 * 128, (x + y + params) * 4)
    assert work[("layers.0", "backward")] == LayerWork(
        "layers.0", "Linear", "backward", 2 * (2 * 32 * 256 * 128), (2 * x + y + 2 * params) * 4)
    relu = work[("layers.1", "forward")]
    assert (relu.flops, relu.bytes) == (32 * 128, 2 * 32 * 128 * 4)
    assert relu.intensity == pytest.approx(0.125)


def test_bytes_follow_the_dtype():
    work = layer_work(nn.Linear(10, 10, dtype=np.float64), (1, 10))
    assert work[("Linear", "forward")].bytes == (10 + 10 + 110) * 8


def _profile(model, x, calls=3):
    with LayerProfiler(warmup=1) as prof:
        for _ in range(calls):
            model(x)
    return prof


def test_bounds_from_measured_time():
    rng = np.random.default_rng(0)
    big = nn.Linear(1024, 1024, rng=rng)
    big_x = rng.standard_normal((512, 1024), dtype=np.float32)
    relu, relu_x = nn.ReLU(), rng.standard_normal(2**23, dtype=np.float32)
    tiny, tiny_x = nn.Linear(4, 4, rng=rng), np.ones((1, 4), dtype=np.float32)
    cases = [(big, big_x, "compute"), (relu, relu_x, "memory"), (tiny, tiny_x, "overhead")]
    for layer, x, want in cases:
        table = place_layers(_profile(layer, x), layer, x.shape, PEAKS)
        (row,) = table.to_records()
        assert row["bound"] == want, (type(layer).__name__, row)
        assert row["achieved"] == pytest.approx(row["flops"] / row["time"])
        assert row["attainable"] == PEAKS.attainable(row["intensity"])
        assert 1.0 <= row["step speedup at roof"]


def test_containers_carry_no_row_of_their_own():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    x = np.ones((4, 8), dtype=np.float32)
    names = {r["name"] for r in place_layers(_profile(model, x), model, x.shape, PEAKS)}
    assert names == {"layers.0", "layers.1"}
