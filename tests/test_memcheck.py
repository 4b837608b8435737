"""The leak check's verdict from two runs' memory (tinyprof.memcheck): what grows, what a run
that raised still says. The readings here are given, not measured: the measured runs are
test_leak_grading's (in the sandbox) and test_leaks' (in this process)."""

from __future__ import annotations

import math
import random
import threading
import time
from collections import Counter

import pytest

from tinyprof.memcheck import (
    BUDGET,
    HELD_SPAN_S,
    KEPT_SLACK,
    MEAN_GAP_S,
    MIN_READINGS,
    PRINTED_SEEDS,
    TOLERANCE,
    TYPED_SEEDS,
    CleanLosses,
    LeakCheck,
    Raised,
    Run,
    TaskCount,
    draw_seeds,
    held_alike,
    held_level,
    measure_run,
    measure_twice,
    raise_for_raised,
)
from tinyprof.testing import TamperingDetected

MB = 2**20


def run(steps: int, kept: float = 0.0, held: float = 0.0) -> Run:
    return Run(steps=steps, kept=kept, held=held, readings=50, seconds=0.5)


def check(short: Run, long: Run) -> LeakCheck:
    return LeakCheck(short, long, "given readings")


def test_a_flat_loop_passes_and_a_kept_history_grows():
    flat = check(run(500, 2 * MB, 19 * MB), run(1000, 2 * MB + 16_000, 19 * MB))
    assert flat.failure() is None
    assert flat.kept_per_step == 32.0
    leaky = check(run(500, 500 * 32 * 1024, 19 * MB), run(1000, 1000 * 32 * 1024, 19 * MB))
    assert leaky.kept_per_step == 32 * 1024
    assert leaky.failure().startswith("what the loop keeps after it returns grows 32")


def test_the_slack_is_shared_over_n_steps():
    just_inside = TOLERANCE + KEPT_SLACK / 500
    assert check(run(500, 0, 0), run(1000, 500 * just_inside - 1, 0)).failure() is None
    assert check(run(500, 0, 0), run(1000, 500 * just_inside + 500, 0)).failure()


def test_either_run_above_the_budget_fails():
    """A loop that fills a file until the folder is full, in its shorter run first: the longer
    run then fails at once and holds nothing, and only the shorter run's memory shows it."""
    shorter_full = check(run(400, 64 * MB, 58 * MB), run(800, 0, 0))
    assert shorter_full.kept_per_step < 0
    message = shorter_full.failure()
    assert message and "while the loop runs 400 steps" in message and "40" in message
    assert check(run(400, 0, BUDGET - 1), run(800, 0, BUDGET - 1)).failure() is None


def test_a_run_that_raised_gives_its_growth_first():
    error = OSError("the object train_fixed raised OSError")
    grows = check(run(700, 35 * MB, 30 * MB), run(1400, 64 * MB, 60 * MB))
    with pytest.raises(AssertionError, match="grows .*; the 1400-step run also raised OSError$"):
        raise_for_raised({700: [0.5] * 700, 1400: Raised(error)}, grows)


def test_a_run_that_raised_without_growth_raises_its_error():
    error = ValueError("the object train_fixed raised ValueError")
    flat = check(run(700, 0, 0), run(1400, 0, 0))
    with pytest.raises(ValueError, match="raised ValueError"):
        raise_for_raised({700: Raised(error), 1400: Raised(error)}, flat)
    raise_for_raised({700: [0.5] * 700, 1400: [0.5] * 1400}, flat)   # nothing raised: nothing


def test_a_tampering_is_never_hidden_behind_growth():
    grows = check(run(700, 0, 0), run(1400, 64 * MB, 0))
    with pytest.raises(TamperingDetected):
        raise_for_raised({1400: Raised(TamperingDetected("patched"))}, grows)


def test_measure_twice_reads_a_run_whose_finish_raised():
    """Both runs are measured and both values kept, the failing one as Raised; the memory read
    is what this fake group holds: 50 kB a step written, until 64 MB."""
    held = {"bytes": 0}

    def start(n: int) -> int:
        held["bytes"] = min(64 * MB, held["bytes"] + 50_000 * n)
        return n

    def finish(n: int) -> list[float]:
        if held["bytes"] >= 64 * MB:
            raise OSError("no space left")
        held["bytes"] = 0   # the loop removed its file
        return [0.0] * n

    values, check = measure_twice(lambda: held["bytes"], lambda: None, start, finish, 700,
                                  "a fake group", random.Random(3))
    assert set(values) == {check.short.steps, check.long.steps}
    assert isinstance(values[check.long.steps], Raised)
    assert "grows" in check.failure()


def test_the_loop_must_not_grow_on_either_seed():
    """The N and 2N runs on a drawn seed are held to the same tolerance as those on the typed
    seed: a loop that leaks only for typed seeds, or only for drawn ones, grows on one of them;
    a memo the kernel filled for one seed earlier (a plateau there only) is no leak."""
    flat = check(run(500, 2 * MB, 19 * MB), run(1000, 2 * MB, 19 * MB))

    def on_drawn(short: Run, long: Run) -> LeakCheck:
        return LeakCheck(flat.short, flat.long, "given readings", other=short, other_long=long,
                         seeds=(7, 1_234_567_891))

    plateau = on_drawn(run(500, 5 * MB, 22 * MB), run(1000, 5 * MB + 16_000, 22 * MB))
    assert plateau.failure() is None, plateau.failure()
    only_typed = LeakCheck(run(500, 500 * 50_000, 19 * MB), run(1000, 1000 * 50_000, 19 * MB),
                           "given readings", other=run(500, 0, 19 * MB),
                           other_long=run(1000, 0, 19 * MB), seeds=(7, 99_999))
    assert only_typed.failure().startswith("what the loop keeps after it returns grows")
    only_drawn = on_drawn(run(500, 500 * 30_000, 19 * MB), run(1000, 1000 * 30_000, 19 * MB))
    message = only_drawn.failure()
    assert message and message.startswith("on seed 1234567891, what the loop keeps after it "
                                          "returns grows"), message
    held_only = on_drawn(run(500, 0, 19 * MB), run(1000, 0, 19 * MB + 500 * 30_000))
    assert "what the loop holds while it runs grows" in held_only.failure()


def test_draw_seeds_gives_a_typed_seed_and_a_drawn_one():
    rng = random.Random(5)
    pairs = [draw_seeds(rng) for _ in range(400)]
    assert all(typed in TYPED_SEEDS and drawn not in TYPED_SEEDS for typed, drawn in pairs)
    printed = sum(typed in PRINTED_SEEDS for typed, _ in pairs) / len(pairs)
    assert 0.4 < printed < 0.65, f"the chapter's seeds in {printed:.0%} of the checks, not half"


def test_memory_that_shrinks_with_the_steps_fails_too():
    # A loop that leaks at step counts the longer run never has (odd ones, below 800) keeps
    # more after N steps than after 2N: the red team's unless_the_steps_could_be_2n.
    check = LeakCheck(run(501, kept=7_000_000, held=23_000_000), run(1002, kept=300_000),
                      "given")
    assert "more after 501 steps than after 1002" in check.failure()
    noisy = LeakCheck(run(501, kept=900_000), run(1002, kept=0), "given")
    assert noisy.failure() is None   # within the slack two leak-free runs differ by


def test_memory_that_shrinks_on_the_other_seed_fails():
    check = LeakCheck(run(400), run(800), "given", other=run(400, kept=9_000_000),
                      other_long=run(800), seeds=(7, 123456789))
    assert check.failure().startswith("on seed 123456789, what the loop keeps")


def test_a_run_the_reader_barely_saw_is_run_again():
    """A 0.2 s run during which the reader got one turn (a machine too busy to schedule it:
    fresh-clone CI, "held 0 B" against the longer run's 15 MB) is measured again, and the run
    that counts is one the reader watched; a run of a few milliseconds is not run again."""
    state = {"starts": Counter(), "bytes": 0, "starved": False}

    def start(n: int) -> int:
        state["starts"][n] += 1
        state["starved"] = state["starts"][n] == 1   # a first run: the reader's turns stop
        state["bytes"] = 15 * MB   # the fork's memory, for the whole run
        time.sleep(0.2)
        return n

    def finish(n: int) -> list[float]:
        state["bytes"], state["starved"] = 0, False
        return [0.0] * n

    def read() -> int:
        if state["starved"] and threading.current_thread() is not threading.main_thread():
            time.sleep(0.5)
            return 0
        return state["bytes"]

    values, check = measure_twice(read, lambda: None, start, finish, 300, "a fake group",
                                  random.Random(1))
    runs = (check.short, check.long)
    assert all(state["starts"][run.steps] == 2 for run in runs), state["starts"]
    assert all(run.readings >= MIN_READINGS and run.held == 15 * MB for run in runs), runs
    assert values[check.long.steps] == [0.0] * check.long.steps and check.failure() is None

    quick: Counter = Counter()
    _, check = measure_twice(lambda: 0, lambda: None, lambda n: quick.update([n]) or n,
                             lambda n: [0.0] * n, 10, "a fake group", random.Random(2))
    assert set(quick.values()) == {1} and check.short.readings < MIN_READINGS


def timed(values: list[float], gap: float = MEAN_GAP_S) -> tuple[list[tuple[float, float]],
                                                                   float]:
    """Readings of ``values`` taken ``gap`` seconds apart, and the time the run ended."""
    return [(k * gap, value) for k, value in enumerate(values)], len(values) * gap


def test_held_is_a_level_however_small_its_share_of_the_run():
    """Held is the highest level the memory stayed at for half of HELD_SPAN_S: a history held
    over the last tenth of a run only, after an idle start (tests/redteam_leak_free.py's
    idle_before_the_steps, which a 90th percentile over the run missed), is held in full; what a
    step's temporaries, or a pool's workers starting, hold for a few milliseconds is not."""
    span = math.ceil(HELD_SPAN_S / MEAN_GAP_S)   # readings in a span
    assert held_level(*timed([0] * 9 * span + [4 * MB] * span)) == 4 * MB
    assert held_level(*timed([MB] * 5 * span + [9 * MB] * 3 + [MB] * 5 * span)) == MB
    pool_starting = [MB] * 3 + [8 * MB] * (span // 3) + [MB] * 10 * span
    assert held_level(*timed(pool_starting)) == MB
    assert held_level(*timed([3 * MB, 5 * MB])) == 5 * MB   # half of a run shorter than a span

    start = time.monotonic()

    def history_after_an_idle_start() -> int:
        return 6 * MB if 1.8 <= time.monotonic() - start < 2.0 else 0

    _, run = measure_run(history_after_an_idle_start, lambda: time.sleep(2.05), 100,
                         random.Random(3))
    assert run.readings > 200 and run.held == 6 * MB, run


def test_the_two_runs_of_a_seed_read_held_over_one_span():
    """An honest loop's N run shorter than a span (150 steps: 0.15 s, the fork's first pages
    and the trim after the loop a third of it) and its 2N run (0.3 s) hold the same level once
    both are read over half the shorter run; read apart, the short run held 2 MB less."""
    def honest(seconds: float) -> Run:
        values = [0.0] * 5 + [8 * MB] * 5 + [16 * MB] * round(seconds / MEAN_GAP_S - 20) + [
            4 * MB] * 10
        trace, end = timed(values)
        return Run(150, 0.0, held_level(trace, end), len(values), end, 0, tuple(trace), end)

    short, long = honest(0.15), honest(0.3)
    assert short.held < long.held == 16 * MB   # the short one read as a whole
    assert [run.held for run in held_alike(short, long)] == [16 * MB, 16 * MB]


def test_a_pool_started_before_the_steps_is_not_held_in_one_run_only():
    """A Pool(4) that normalises the batches before the steps holds 30 MB for 41 ms of a 149 ms
    run of 156 steps, and for 26 ms of its 312-step twin (measured in the sandbox, s18). Over
    half the shorter run, the span until s18, the first held it and the second did not: 'held
    7.0 MB more after 156 steps than after 312'. Over SHORTER_RUN_SHARE of it, neither does."""
    def pool_first(seconds: float, pool_seconds: float) -> Run:
        ramp, pool = round(0.02 / MEAN_GAP_S), round(pool_seconds / MEAN_GAP_S)
        steps = round(seconds / MEAN_GAP_S) - ramp - pool - 2
        values = [4 * MB] * ramp + [30 * MB] * pool + [18 * MB] * steps + [9 * MB] * 2
        trace, end = timed(values)
        return Run(150, 0.0, held_level(trace, end), len(values), end, 0, tuple(trace), end)

    short, long = pool_first(0.148, 0.04), pool_first(0.2, 0.024)
    half_span = min(HELD_SPAN_S, 0.148 / 2)
    assert (short.held_over(half_span).held, long.held_over(half_span).held) == (30 * MB,
                                                                                 18 * MB)
    assert [run.held for run in held_alike(short, long)] == [18 * MB, 18 * MB]


def test_held_counts_time_not_readings():
    """A reader starved while the memory is high (one reading in 0.2 s where 50 were due)
    still sees the level it read held for that time: each reading counts until the next."""
    readings = [(k * MEAN_GAP_S, 0.0) for k in range(100)]
    readings.append((0.4, 5 * MB))
    readings += [(0.6 + k * MEAN_GAP_S, 0.0) for k in range(100)]
    assert held_level(readings, 1.0) == 5 * MB


def test_held_tries_windows_between_readings():
    """A reader starved while the memory rose (no reading from 40 to 110 ms) leaves no window
    that starts at a reading and fits the level the run ends at: the window that ends with the
    run holds it. Tried at readings only, an honest 227-step run held 2.2 MB less than its
    454-step twin, and lost the points (s18)."""
    readings = [(0.0, 0.0), (0.04, 16 * MB), (0.11, 18 * MB), (0.15, 18 * MB)]
    assert held_level(readings, 0.2, span=0.1) == 18 * MB
    assert held_level(readings, 0.2, span=0.19) == 16 * MB   # 18 MB for 90 ms of 190: not half


def test_a_thread_left_running_fails_whatever_the_memory():
    """A loop that leaves a thread behind leaks what the thread does after the test is over
    (a red-team cheat replays the loop two minutes later): no reading can see it, so the thread
    itself fails the loop, before any growth is judged."""
    flat = check(run(500, 2 * MB, 19 * MB), run(1000, 2 * MB, 19 * MB))
    assert flat.failure() is None
    one_left = LeakCheck(run(500, 2 * MB, 19 * MB), run(1000, 2 * MB, 19 * MB), "given",
                         repeated=Run(250, 2 * MB, 19 * MB, 50, 0.3, left=2),
                         seeds=(7, 8), other=run(500), other_long=run(1000), repeated_seed=7)
    message = one_left.failure()
    assert message.startswith("the loop left 2 threads or processes running after it returned "
                              "(in the run of 250 steps)"), message


def test_measure_run_counts_the_threads_a_run_leaves_running():
    """Counted by a real count (Python's threads here; the grader counts its control group's
    tasks): a joined thread is not left, one still waiting is, and the held fork's own
    thread (``held``) is not the loop's."""
    release = threading.Event()

    def joined() -> None:
        worker = threading.Thread(target=lambda: None)
        worker.start()
        worker.join()

    def left_waiting() -> None:
        threading.Thread(target=release.wait, daemon=True).start()

    count = TaskCount(threading.active_count)
    try:
        _, clean = measure_run(lambda: 0, joined, 10, random.Random(1), count)
        _, leaving = measure_run(lambda: 0, left_waiting, 10, random.Random(2), count)
        _, as_held = measure_run(lambda: 0, left_waiting, 10, random.Random(3),
                                 TaskCount(threading.active_count, held=1))
    finally:
        release.set()
    assert (clean.left, leaving.left, as_held.left) == (0, 1, 0)


def test_clean_losses_come_from_a_process_of_their_own_or_from_here(monkeypatch):
    """The grader's clean losses, computed while the student's loop runs, equal the clean loop's
    own, every step, on each seed; and when no process can start they are computed here."""
    from tinyprof.leaks.loop import train

    started = CleanLosses(12, (7, 123456))
    assert started._process is not None
    try:
        assert started.of(123456) == train(12, 123456)
        assert started.of(7) == train(12, 7)
    finally:
        started.close()
    monkeypatch.setattr("sys.executable", "/nonexistent/python")
    here = CleanLosses(5, (3,))
    assert here._process is None and here.of(3) == train(5, 3)
