"""Measuring torch modules: per-module forward and backward time, training memory by component,
the roofline placement, and timing that waits for a GPU. Real modules, real steps; the slow
parts are real sleeps inside a module's forward or backward, so where the time went is known.

On a busy machine any stretch of wall time can grow (the process waits for a core), so the
profiler tests bound times only from below (a sleep lasts at least its length) and check where
each sleep went by its recorded interval: the calls whose [start, end] overlap it, not how short
the other rows stayed."""

from __future__ import annotations

import json
import time
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import tinyprof as tp  # noqa: E402
from tinyprof.bottlenecks.torch_placement import module_work  # noqa: E402
from tinyprof.pytorch import place_modules, synchronized, training_memory  # noqa: E402
from tinyprof.roofline import MachinePeaks  # noqa: E402

BACKWARD_SLEEP, FORWARD_SLEEP = 0.03, 0.01
#: (phase, start, end) of every sleep below, on the profiler's clock (time.perf_counter).
SLEPT: list[tuple[str, float, float]] = []


def sleep(phase: str, seconds: float) -> None:
    start = time.perf_counter()
    time.sleep(seconds)
    SLEPT.append((phase, start, time.perf_counter()))


class SleepInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        sleep("backward", BACKWARD_SLEEP)
        return grad


class SlowBackward(nn.Module):
    def forward(self, x):
        return SleepInBackward.apply(x)


class SlowForward(nn.Module):
    def forward(self, x):
        sleep("forward", FORWARD_SLEEP)
        return x + 1


def model_and_step():
    """Token ids → Embedding → SlowBackward → Linear → SlowForward → Linear, cross-entropy (a
    module) and SGD: one step of it."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(50, 16), SlowBackward(), nn.Linear(16, 32), SlowForward(),
                          nn.Linear(32, 50))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ids, targets = torch.randint(0, 50, (4, 6)), torch.randint(0, 50, (24,))

    def step():
        optimizer.zero_grad()
        loss_fn(model(ids).flatten(0, 1), targets).backward()
        optimizer.step()
    return model, step


def overlapping(calls, start: float, end: float) -> set[tuple[str, str]]:
    """(name, phase) of the recorded calls whose own [c.start, c.end] overlaps [start, end]."""
    return {(c.name, c.phase) for c in calls if c.start < end and start < c.end}


def test_profiler_times_each_module_forward_and_backward_and_the_optimizer(tmp_path):
    model, step = model_and_step()
    step()
    SLEPT.clear()
    with tp.Profiler(warmup=1) as prof:
        for _ in range(3):
            step()
    rows = {(r["name"], r["phase"]): r for r in prof.layers.rows()}
    assert rows[("1", "backward")]["calls"] == 2   # 3 steps, the first one warm-up
    assert rows[("1", "backward")]["self_s"] >= 2 * BACKWARD_SLEEP
    assert rows[("3", "forward")]["self_s"] >= 2 * FORWARD_SLEEP
    assert rows[("SGD", "optimizer")]["calls"] == 2
    # Each sleep went to its module and phase and nowhere else but the enclosing Sequential:
    # module 1's backward sleep overlaps no forward call and no other module's backward.
    calls = prof.layers.calls
    assert sorted(phase for phase, _, _ in SLEPT) == ["backward"] * 3 + ["forward"] * 3
    for phase, start, end in SLEPT:
        inner = "1" if phase == "backward" else "3"
        assert overlapping(calls, start, end) == {(inner, phase), ("Sequential", phase)}, phase
        assert any(c.name == inner and c.phase == phase and c.start <= start and end <= c.end
                   for c in calls), f"the {phase} sleep is not inside a {phase} call of {inner}"
    for phase in ("forward", "backward"):
        whole = rows[("Sequential", phase)]
        children = sum(r["total_s"] for (name, ph), r in rows.items()
                       if ph == phase and name in {"0", "1", "2", "3", "4"})
        assert whole["total_s"] == pytest.approx(whole["self_s"] + children, rel=1e-6)
    # Coverage: every sleep is in some call's self time (a hole in the backward would lose
    # 30 ms a step); the glue between calls is what a busy machine stretches, so no ratio here.
    covered = sum(c.self_seconds for c in calls)
    assert covered >= sum(end - start for _, start, end in SLEPT)
    assert prof.layers.coverage == pytest.approx(covered / prof.layers.wall_seconds, rel=1e-12)
    selfs = [r["self_s"] for r in prof.layers.rows()]
    assert selfs == sorted(selfs, reverse=True)
    assert prof.layers.share(lambda c: c.name == "1" and c.phase == "backward") == \
        rows[("1", "backward")]["share"]
    trace = json.loads(prof.export_chrome_trace(tmp_path / "trace.json").read_text())
    phases = {event["cat"] for event in trace["traceEvents"] if event["ph"] == "X"}
    assert phases == {"forward", "backward", "optimizer"}
    assert "Top" in str(prof.top_operations(5))


def test_the_first_layer_backward_is_timed_where_full_backward_hooks_say_zero():
    """A module whose input needs no gradient: torch's full backward hooks fire as soon as its
    output gradient arrives, before its own backward runs; tinyprof's segments do not."""
    class FirstLayer(nn.Module):   # a Linear whose backward also sleeps
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x):
            return SleepInBackward.apply(self.linear(x))

    torch.manual_seed(0)
    model = nn.Sequential(FirstLayer(), nn.Linear(8, 8))
    x = torch.randn(3, 8)
    times = {}

    def before(module, grad_output):
        times["pre"] = time.perf_counter()

    def after(module, grad_input, grad_output):
        times["post"] = time.perf_counter()

    handles = [model[0].register_full_backward_pre_hook(before),
               model[0].register_full_backward_hook(after)]
    SLEPT.clear()
    with warnings.catch_warnings():   # torch warns that the hook fires early: the point here
        warnings.simplefilter("ignore")
        model(x).sum().backward()
    for handle in handles:
        handle.remove()
    [(_, slept, _)] = SLEPT
    assert times["pre"] <= times["post"] <= slept   # both fired before the sleep began
    SLEPT.clear()
    with tp.Profiler() as prof:
        model(x).sum().backward()
    [(_, start, end)] = SLEPT
    [row] = [r for r in prof.layers.rows() if r["name"] == "0" and r["phase"] == "backward"]
    assert row["total_s"] >= BACKWARD_SLEEP
    assert overlapping(prof.layers.calls, start, end) == {("0", "backward"),
                                                          ("Sequential", "backward")}
    assert any(c.name == "0" and c.phase == "backward" and c.start <= start and end <= c.end
               for c in prof.layers.calls)


def test_training_memory_measured_equals_the_formulas_component_by_component():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    before = [p.detach().clone() for p in model.parameters()]
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    memory = training_memory(model, x, y, loss=nn.MSELoss(), optimizer="adam")
    params = 16 * 32 + 32 + 32 * 4 + 4
    saved = 4 * (8 * 16 + 8 * 32 + 8 * 32 + 2 * 8 * 4)   # x, fc out, GELU out, MSE's two
    assert memory.parameters.measured_bytes == memory.parameters.predicted_bytes == params * 4
    assert memory.activations.measured_bytes == memory.activations.predicted_bytes == saved
    assert memory.gradients.measured_bytes == params * 4
    assert memory.optimizer_state.measured_bytes == 2 * params * 4 + 4 * 4   # + step counters
    assert memory.optimizer_state.predicted_bytes == 2 * params * 4 + 4 * 4
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())
    assert "tracemalloc cannot see" in memory.title


def test_tied_weights_count_once_in_training_memory():
    torch.manual_seed(0)
    wte = nn.Embedding(30, 8)
    head = nn.Linear(8, 30, bias=False)
    head.weight = wte.weight
    model = nn.Sequential(wte, head)
    memory = training_memory(model, torch.randint(0, 30, (2, 5)), optimizer="sgd")
    assert memory.parameters.measured_bytes == 30 * 8 * 4
    assert memory.gradients.measured_bytes == 30 * 8 * 4
    assert memory.optimizer_state.measured_bytes == 0


def test_each_module_on_the_roofline():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
    x = torch.randn(8, 16)
    work = module_work(model, inputs=x)
    linear = work[("0", "forward")]
    assert linear.flops == 2 * 8 * 16 * 32 + 8 * 32
    assert linear.bytes == (8 * 16 + 8 * 32 + 16 * 32 + 32) * 4
    assert work[("0", "backward")].flops == 2 * 8 * 16 * 32   # dW only: x needs no gradient
    with tp.Profiler() as prof:
        for _ in range(3):
            model(x).sum().backward()
    peaks = MachinePeaks(flops_per_second=1e11, bytes_per_second=1e10)
    table = place_modules(prof, model, inputs=x, peaks=peaks)
    placed = {(r["name"], r["phase"]): r for r in table}
    assert {("0", "forward"), ("0", "backward"), ("1", "forward")} <= set(placed)
    assert all(r["bound"] in ("compute", "memory", "overhead") for r in table)
    assert placed[("0", "forward")]["flops"] == linear.flops


def test_modules_and_layers_are_placed_in_one_table_with_one_format():
    """A torch Linear and a tinyprof Linear of the same shapes have the same work per phase,
    and place_modules prints the columns and formats of tp.place_layers (shares by
    format_percent, speedups by format_ratio)."""
    from tinyprof.bottlenecks.placement import (
        PLACEMENT_COLUMNS,
        PLACEMENT_FORMATS,
        work_by_path,
    )
    from tinyprof.units import format_percent

    x = torch.randn(8, 16)
    torch_work = module_work(nn.Linear(16, 32), inputs=x.requires_grad_())
    numpy_work = work_by_path(tp.nn.Linear(16, 32), (8, 16))    # float32, as torch's
    for phase in ("forward", "backward"):
        mine, theirs = torch_work[("Linear", phase)], numpy_work[("", phase)]
        assert (mine.flops, mine.bytes) == (theirs.flops, theirs.bytes), phase
    x = x.detach()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
    with tp.Profiler() as prof:
        for _ in range(2):
            model(x).sum().backward()
    peaks = MachinePeaks(flops_per_second=1e11, bytes_per_second=1e10)
    table = place_modules(prof, model, inputs=x, peaks=peaks)
    assert table.columns == PLACEMENT_COLUMNS and table.formats == PLACEMENT_FORMATS
    assert table.formats["share"] is format_percent
    assert table.title.startswith("Modules on this machine's roofline")


def test_ab_test_takes_torch_callables_and_cpu_timing_is_not_wrapped():
    a = torch.randn(96, 96)

    def once():
        return a @ a

    def twice():
        a @ a
        return a @ a

    assert synchronized(once) is once      # CPU: nothing to wait for
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # a pool thread preempted on a busy machine stalls one call
    try:                       # of a 96 x 96 matmul by more than the whole call takes
        result = tp.ab_test(twice, once, rounds=30)
    finally:
        torch.set_num_threads(threads)
    assert result.speedup > 1.3      # twice the work (the verdict also weighs the machine's noise)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_timers_wait_for_the_device():
    from tinyprof.pytorch import cuda_event_seconds

    model = nn.Linear(2048, 2048).cuda()
    x = torch.randn(4096, 2048, device="cuda")
    assert synchronized(model, x) is not model
    stats = tp.measure_latency(model, x, warmup=3, iterations=10)
    events = cuda_event_seconds(model, x)
    assert stats.median == pytest.approx(sorted(events)[len(events) // 2], rel=0.5)
    with tp.Profiler() as prof:
        model(x).sum().backward()
    assert prof._torch.synchronize is True
