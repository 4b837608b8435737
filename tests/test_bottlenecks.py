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
        "layers.0", "Linear", "forward", 2 * 32 * 256 * 128 + 32 * 128, (x + y + params) * 4,
        "layers.0")
    assert work[("layers.0", "backward")] == LayerWork(
        "layers.0", "Linear", "backward", 2 * (2 * 32 * 256 * 128), (2 * x + y + 2 * params) * 4,
        "layers.0")
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


def test_plot_roofline_draws_the_roof_and_every_point_it_can():
    import matplotlib.pyplot as plt

    from tinyprof.plots import plot_roofline

    peaks = MachinePeaks(100e9, 20e9, cache_roofs=(("L2 512 KB", 80e9),))
    points = [{"name": "mm", "phase": "forward", "intensity": 50.0, "achieved": 80e9,
               "bound": "compute", "share": 0.6},
              {"name": "relu", "phase": "backward", "intensity": 0.125, "achieved": 1e9,
               "bound": "memory", "share": 0.3},
              {"name": "ln", "phase": "backward", "intensity": 0.0, "achieved": 0.0,
               "bound": "memory", "share": 0.1}]
    fig = plot_roofline(peaks, points)
    ax = fig.axes[0]
    roof, cache = ax.lines[0], ax.lines[1]
    x, y = roof.get_data()
    assert np.allclose(y, np.minimum(100e9, x * 20e9))
    assert np.allclose(cache.get_ydata(), np.minimum(100e9, cache.get_xdata() * 80e9))
    offsets = np.concatenate([c.get_offsets() for c in ax.collections])
    assert sorted(map(tuple, offsets)) == [(0.125, 1e9), (50.0, 80e9)]
    assert "(1 not shown: no FLOPs counted)" in ax.get_title(loc="left")
    plt.close(fig)


def test_roofline_labels_name_the_phase_and_never_cover_each_other():
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from tinyprof.plots import plot_roofline

    # Two GELU layers of a GPT sit on the very same point; a third point is far away.
    same = {"intensity": 0.25, "achieved": 2e9, "bound": "memory"}
    points = [{**same, "name": "h.0.mlp.act", "phase": "forward", "share": 0.3},
              {**same, "name": "h.1.mlp.act", "phase": "forward", "share": 0.29},
              {"name": "head", "phase": "backward", "intensity": 60.0, "achieved": 9e10,
               "bound": "compute", "share": 0.2}]
    fig = plot_roofline(MachinePeaks(100e9, 20e9), points)
    fig.canvas.draw()
    labels = {t.get_text(): t for t in fig.axes[0].texts}
    assert set(labels) == {"h.0.mlp.act fwd", "h.1.mlp.act fwd", "head bwd"}
    renderer = fig.canvas.get_renderer()
    first, second = (Text.get_window_extent(labels[n], renderer)   # the text, not its leader
                     for n in ("h.0.mlp.act fwd", "h.1.mlp.act fwd"))
    assert not first.overlaps(second), "labels of one spot must be listed, not overprinted"
    assert second.y1 <= first.y0 + 1 and abs(second.x0 - first.x0) < 1   # one under the other
    assert labels["h.1.mlp.act fwd"].arrow_patch and not labels["h.0.mlp.act fwd"].arrow_patch
    plt.close(fig)


def test_roofline_explorer_profiles_real_steps_and_follows_the_sliders():
    import matplotlib.pyplot as plt

    from tinyprof import models
    from tinyprof.widgets import roofline_explorer

    gpt = models.gpt2(vocab_size=300, n_ctx=64, d_model=32, n_layer=1, n_head=2)
    widget = roofline_explorer(gpt, batch=2, seq_len=16, batch_options=(1, 2, 4),
                               seq_options=(8, 16))
    first = widget.result.to_records()
    linear_rows = [r for r in first if r["type"] == "Linear"]
    assert {r["phase"] for r in linear_rows} == {"forward", "backward"}
    assert len(linear_rows) == 2 * 6      # q, k, v, out projections and the two MLP layers
    assert "batch 2, 16 tokens" in widget.text
    widget.children[0].value = 4
    bigger = {(r["name"], r["phase"]): r for r in widget.result.to_records()}
    for row in linear_rows:   # twice the rows: twice the FLOPs of every Linear
        assert bigger[(row["name"], row["phase"])]["flops"] == 2 * row["flops"]
    assert all(p.grad is None for p in gpt.parameters())
    plt.close("all")


def test_rows_are_typed_and_joined_to_the_roofline_by_module_path():
    """A profiler row is a frozen LayerRow (read as attributes or as a mapping) that carries the
    layer's path; place_layers joins on path and type, so a layer of another model recorded in
    the same block, whose display name is the same ("layers.0"), is never given this model's
    FLOPs."""
    from tinyprof.bottlenecks import work_by_path
    from tinyprof.bottlenecks.layer_profiler import LayerRow

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    other = nn.Sequential(nn.ReLU())             # its ReLU is also called "layers.0"
    x = np.ones((4, 8), dtype=np.float32)
    with LayerProfiler() as prof:
        model(x)
        other(x)
    rows = prof.rows()
    assert all(isinstance(r, LayerRow) for r in rows)
    linear = next(r for r in rows if r.type == "Linear")
    assert (linear.path, linear["name"], dict(linear)["calls"]) == ("layers.0", "layers.0", 1)
    impostor = next(r for r in rows if r.type == "ReLU" and r.name == "layers.0")
    assert impostor.path == "layers.0"
    with pytest.raises(KeyError, match="not 'self'"):
        linear["self"]
    placed = place_layers(prof, model, x.shape, PEAKS).to_records()
    assert sorted((r["name"], r["type"]) for r in placed) == [("layers.0", "Linear"),
                                                            ("layers.1", "ReLU")]
    assert set(work_by_path(model, x.shape)) == {(p, phase) for p in ("layers.0", "layers.1")
                                                 for phase in ("forward", "backward")}
