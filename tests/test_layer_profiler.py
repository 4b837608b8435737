"""The per-layer profiler: exact call counts per layer and phase, self ≤ total, containers'
self time = total − children, warm-up calls left out, Chrome trace JSON with one complete event
per call, methods restored afterwards, and Amdahl on the measured shares."""

import json
import threading

import numpy as np
import pytest

import tinyprof as tp
from tinyprof import nn
from tinyprof.amdahl import amdahl_speedup
from tinyprof.layer_profiler import LayerProfiler

ORIGINAL_LINEAR = (nn.Linear.forward, nn.Linear.backward)


@pytest.fixture
def mlp_step():
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(32, 64, rng=rng), nn.ReLU(), nn.Linear(64, 64, rng=rng),
                          nn.ReLU(), nn.Linear(64, 10, rng=rng))
    x = rng.standard_normal((16, 32)).astype(np.float32)
    grad = np.ones((16, 10), dtype=np.float32) / 160

    def step():
        model(x)
        model.backward(grad)
    return model, step


def test_every_call_counted_per_layer_and_phase(mlp_step):
    _, step = mlp_step
    with LayerProfiler() as prof:
        for _ in range(3):
            step()
    counts = {(r["name"], r["phase"]): r["calls"] for r in prof.rows()}
    expected = {(name, phase): 3 for name in ("Sequential", "layers.0", "layers.1", "layers.2",
                                              "layers.3", "layers.4")
                for phase in ("forward", "backward")}
    assert counts == expected
    assert len(prof.calls) == 36
    kinds = {r["name"]: r["type"] for r in prof.rows()}
    assert kinds["layers.0"] == "Linear" and kinds["layers.1"] == "ReLU"


def test_self_and_total_time(mlp_step):
    _, step = mlp_step
    with LayerProfiler() as prof:
        step()
    for call in prof.calls:
        assert 0 <= call.self_seconds <= call.total_seconds
    for i, call in enumerate(prof.calls):
        children = [c for c in prof.calls if c.parent == i]
        assert call.children_seconds == pytest.approx(sum(c.total_seconds for c in children))
        assert all(c.start >= call.start and c.end <= call.end for c in children)
    top = [c for c in prof.calls if c.parent is None]
    assert [c.name for c in top] == ["Sequential", "Sequential"]
    assert [c.phase for c in top] == ["forward", "backward"]
    assert sum(r["share"] for r in prof.rows()) == pytest.approx(1.0)
    assert sum(r["self_s"] for r in prof.rows()) == pytest.approx(
        sum(c.total_seconds for c in top))


def test_warmup_calls_are_marked_and_left_out(mlp_step):
    _, step = mlp_step
    with LayerProfiler(warmup=1) as prof:
        for _ in range(3):
            step()
    assert {r["calls"] for r in prof.rows()} == {2}
    assert sum(c.warmup for c in prof.calls) == 12
    first = [c for c in prof.calls if c.name == "layers.0" and c.phase == "forward"]
    assert [c.warmup for c in first] == [True, False, False]
    with pytest.raises(ValueError, match="warmup"):
        LayerProfiler(warmup=-1)


def test_chrome_trace_has_one_complete_event_per_call(mlp_step, tmp_path):
    _, step = mlp_step
    with tp.Profiler() as prof:
        step()
        step()
    path = prof.export_chrome_trace(tmp_path / "step.json")
    trace = json.loads(path.read_text())["traceEvents"]
    events = [e for e in trace if e["ph"] == "X"]
    assert [e["args"]["name"] for e in trace if e["ph"] == "M"] == ["layers"]
    assert {e["tid"] for e in trace} == {threading.get_ident()}
    assert len(events) == len(prof.layers.calls) == 24
    for event, call in zip(events, prof.layers.calls):
        assert event["ph"] == "X" and event["name"] == call.name and event["cat"] == call.phase
        assert event["dur"] >= 0 and event["ts"] >= 0
        assert event["args"]["type"] == call.kind
    assert {e["cat"] for e in events} == {"forward", "backward"}


def test_methods_restored_even_after_an_error(mlp_step):
    model, step = mlp_step
    with pytest.raises(ValueError):
        with LayerProfiler():
            step()
            model(np.ones((2, 3), dtype=np.float32))  # wrong width: Linear raises
    assert (nn.Linear.forward, nn.Linear.backward) == ORIGINAL_LINEAR
    with LayerProfiler() as prof:   # and a new profiler can start
        step()
    assert prof.rows()


def test_one_profiler_at_a_time():
    with LayerProfiler():
        with pytest.raises(RuntimeError, match="already recording"):
            LayerProfiler().__enter__()


def test_subclass_calling_super_is_one_call():
    class Doubled(nn.ReLU):
        def forward(self, x):
            return 2 * super().forward(x)

    layer = Doubled()
    with LayerProfiler() as prof:
        layer(np.ones(4, dtype=np.float32))
    assert [(c.kind, c.phase) for c in prof.calls] == [("Doubled", "forward")]


def test_top_operations_table_and_amdahl(mlp_step, capsys):
    _, step = mlp_step
    with tp.Profiler() as prof:
        step()
    table = prof.top_operations(3)
    assert len(table) == 3 and table.columns == ["name", "type", "phase", "calls", "self_s",
                                                 "total_s", "share"]
    selfs = table.column("self_s")
    assert selfs == sorted(selfs, reverse=True)
    prof.print_top_operations(3)
    assert "coverage" in capsys.readouterr().out
    layers = prof.layers
    p = layers.share("Linear")
    assert 0 < p < 1
    assert layers.amdahl("Linear", 2.0) == pytest.approx(amdahl_speedup(p, 2.0))
    assert layers.share("forward") + layers.share("backward") == pytest.approx(1.0)
    assert layers.amdahl("forward", 1.0) == pytest.approx(1.0)


def test_a_profiler_records_one_block_and_refuses_a_second(mlp_step):
    """Entering the same profiler again used to mix two blocks (coverage above 1, negative trace
    timestamps): it is refused, and the first block's record is left as it was."""
    _, step = mlp_step
    prof = tp.Profiler()
    with prof:
        step()
    calls, wall = len(prof.layers.calls), prof.layers.wall_seconds
    with pytest.raises(RuntimeError, match="already recorded a `with` block.*make a new one"):
        with prof:
            step()
    assert len(prof.layers.calls) == calls and prof.layers.wall_seconds == wall
    assert LayerProfiler._active is None and prof.layers.coverage <= 1.0
    assert min(e["ts"] for e in prof.layers.chrome_trace()["traceEvents"] if e["ph"] == "X") >= 0
    with tp.Profiler():        # a new one records as usual
        step()


def test_overhead_is_reported_as_a_lower_bound_and_setup_apart(mlp_step):
    from tinyprof.layer_profiler import overhead_per_call

    _, step = mlp_step
    with tp.Profiler() as prof:
        step()
    layers = prof.layers
    per_call = overhead_per_call()
    assert 0 < per_call < 1e-3
    assert layers.overhead_fraction == pytest.approx(len(layers.calls) * per_call
                                                     / layers.wall_seconds)
    assert layers.setup_seconds > 0      # wrapping every layer class, outside the wall time
    title = prof.top_operations(3).title
    assert "profiler overhead ≥" in title and "to enter and leave the block" in title
