"""tinyprof.leaks: planted leaks recovered by their slope, plateaus and noise told apart, the
top-growing line named, and Student's t computed exactly (the interval's coverage:
tests/test_growth.py)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from tinyprof.leaks import (
    LEAKS,
    Trainer,
    collector_off,
    growth_per_step,
    leak_bytes_per_step,
    loop,
    memory_per_step,
    snapshot_of,
    t_quantile,
    top_growth,
    train,
)
from tinyprof.leaks.measure import give_back

#: What a kept array costs beyond its data: its header (numpy: 112 bytes), a list or dict
#: slot, a key, the cycle's record object; and the loop's own floats.
OVERHEAD = 1024


def test_t_quantile_matches_published_values():
    # Student's t table: 12.706 (1 dof), 2.228 (10), 2.042 (30), 1.984 (100); normal 1.960
    for dof, want in ((1, 12.7062047362), (10, 2.2281388520), (30, 2.0422724563),
                      (100, 1.9839715185)):
        assert t_quantile(0.975, dof) == pytest.approx(want, abs=1e-8)
    assert t_quantile(0.025, 10) == pytest.approx(-2.2281388520, abs=1e-8)
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959963985, abs=1e-6)


def _measured(leaks, steps=80, **kwargs):
    give_back()
    trainer = Trainer(tuple(leaks), seed=3, **kwargs)
    with collector_off():
        return memory_per_step(trainer.step, steps)


@pytest.mark.parametrize("leak", LEAKS)
def test_each_planted_leak_is_recovered_by_its_slope(leak):
    memory = _measured([leak])
    found = growth_per_step(memory.live, warmup=20, tolerance=OVERHEAD)
    planted = leak_bytes_per_step(leak)
    assert found.verdict == "leak", found
    # The slope is the planted arrays plus their small Python overhead; the interval, honest
    # about the readings' autocorrelation (a memo's series is nearly a staircase: n_eff 3 in a
    # fresh-clone run), covers that range without having to sit inside it, and stays narrow.
    assert planted <= found.slope <= planted + OVERHEAD, (planted, found)
    assert found.low <= planted + OVERHEAD and found.high >= planted, (planted, found)
    assert found.high - found.low < 0.05 * planted, (planted, found)   # 1.4 % seen (n_eff 3)


#: One leak measured in a fresh interpreter, as the chapter's kernel measures it: its RSS slope.
RESIDENT = """
import sys
from tinyprof.leaks import Trainer, collector_off, growth_per_step, memory_per_step
from tinyprof.leaks.measure import give_back
give_back()
trainer = Trainer((sys.argv[1],), seed=3)
with collector_off():
    memory = memory_per_step(trainer.step, 80)
print(growth_per_step(memory.rss, warmup=20, tolerance=1024).slope)
"""


@pytest.mark.parametrize("leak", LEAKS)
def test_each_planted_leak_grows_a_fresh_process_resident_set_at_its_rate(leak):
    """In a fresh process (the chapter's kernel) what is kept is resident: the RSS slope is the
    planted bytes. Not measured inside pytest's own process: after a thousand tests its heap has
    free holes, and a leak of 32 kB arrays refills them before it asks the system for pages."""
    if not Path("/proc/self/statm").exists():
        pytest.skip("RSS is read from /proc")
    run = subprocess.run([sys.executable, "-c", RESIDENT, leak], capture_output=True,
                         text=True, timeout=120, check=True)
    assert float(run.stdout) == pytest.approx(leak_bytes_per_step(leak), rel=0.1), run.stdout


def test_leak_free_loop_is_within_the_tolerance():
    memory = _measured([])
    found = growth_per_step(memory.live, warmup=20, tolerance=OVERHEAD)
    assert found.verdict == "within tolerance", found
    assert found.slope < OVERHEAD


def test_a_memo_that_fills_and_stops_is_a_plateau_not_a_leak():
    memory = _measured(["cache"], steps=100, memo_limit=55)
    found = growth_per_step(memory.live, warmup=20, tolerance=OVERHEAD)
    assert found.verdict == "plateau", found
    assert abs(found.late) < OVERHEAD


def test_noise_around_a_level_is_within_tolerance_and_a_noisy_leak_is_a_leak():
    rng = np.random.default_rng(0)
    level = 1e8 + rng.normal(0, 50_000, 200)
    assert growth_per_step(level, warmup=20, tolerance=OVERHEAD).verdict == "within tolerance"
    leaking = level + 20_000 * np.arange(200)
    found = growth_per_step(leaking, warmup=20)
    assert found.verdict == "leak" and found.low < 20_000 < found.high


def test_the_loop_learns_and_its_leaks_do_not_change_its_losses():
    clean = train(40, seed=5)
    assert clean[-1] < clean[0]
    assert train(40, seed=5, leaks=LEAKS) == clean


def _line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("leak, function, text", [
    ("history", Trainer.step, "recon = hidden @ self.w2"),
    ("cache", loop.normalise, "return (raw - raw.mean"),
    ("hook", Trainer.step, "hidden = np.tanh"),
    ("cycle", Trainer.step, "error = recon - x"),
])
def test_the_top_growing_line_is_the_planted_line(leak, function, text):
    trainer = Trainer((leak,), seed=2)
    trainer.run(loop.BATCHES + 2)   # past the memo's filling
    tracemalloc.start(4)
    try:
        with collector_off():
            before = tracemalloc.take_snapshot()
            trainer.run(20)
            after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    top = top_growth(before, after, n=3)
    assert (top[0].filename, top[0].lineno) == (inspect.getsourcefile(function),
                                                _line_of(function, text)), top
    assert top[0].size_diff == pytest.approx(20 * leak_bytes_per_step(leak), rel=0.02)
    by_stack = top_growth(before, after, n=1, key="traceback")[0]
    assert by_stack.frames[0] == (top[0].filename, top[0].lineno)
    if leak == "cache":   # the stack names the memo's line in the step, which called normalise
        assert by_stack.frames[1] == (inspect.getsourcefile(Trainer.step),
                                      _line_of(Trainer.step, "self.cache[key] = normalise"))


def test_top_growth_on_known_snapshots():
    before = snapshot_of([("a.py", 1, 100), ("b.py", 2, 500), ("c.py", 3, 50)])
    after = snapshot_of([("a.py", 1, 100), ("b.py", 2, 800), ("c.py", 3, 1050), ("d.py", 9, 40)])
    top = top_growth(before, after, n=5)
    assert [(g.where, g.size_diff) for g in top] == [("c.py:3", 1000), ("b.py:2", 300),
                                                     ("d.py:9", 40)]
    stacks = snapshot_of([((("x.py", 5), ("y.py", 1)), 10), ((("x.py", 5), ("z.py", 2)), 30)])
    found = top_growth(snapshot_of([]), stacks, key="traceback")
    assert [g.frames for g in found] == [(("x.py", 5), ("z.py", 2)), (("x.py", 5), ("y.py", 1))]


@pytest.mark.slow
def test_torch_habits_keep_what_the_chapter_says():
    """Plain backward() frees the saved tensors: total_loss += loss keeps graph nodes only;
    retain_graph=True, or evaluations kept with gradients on, keep saved tensors every step."""
    pytest.importorskip("torch")
    kept = {habit: loop.torch_kept(6, habit) for habit in loop.TORCH_HABITS}
    assert kept["total_loss += loss.item()"] == [(0, 0)] * 6
    saved, nodes = zip(*kept["total_loss += loss"])
    assert saved == (0,) * 6 and np.all(np.diff(nodes) > 0), kept["total_loss += loss"]
    for habit in ("total_loss += loss, backward(retain_graph=True)",
                  "eval losses kept, gradients on"):
        saved, nodes = zip(*kept[habit])
        per_step = np.diff(saved)
        assert np.all(per_step > 0) and np.all(per_step == per_step[0]), (habit, saved)
    assert loop.torch_graph_bytes(6, keep_graph=False) == [0] * 6
    with pytest.raises(ValueError, match="unknown habit"):
        loop.torch_kept(1, "total_loss += loss.detach()")


