"""Chapter 09's checks (tinyprof.pipecheck, tinyprof.prefetchcheck): the Prefetcher's probe
keeps every honest prefetcher whole and finds, in each cheat, the promise it breaks, decided on
the grader's side from plain values, in this process and through the real grader (issue 45);
the graded task's expected values are the values of a real run through the files; the model's
schedule gives the model's wall time; the explorer redraws."""

from __future__ import annotations

import copy
import json
import os
import pickle
import threading
import time
from pathlib import Path

import pytest
from chapters import NOTEBOOKS, SOLUTIONS
from nbformat.v4 import new_code_cell, new_notebook
from prefetchers import CHEATS, HIDDEN_ONLY, HONEST, solution
from traitlets.config import Config

from tinyprof import prefetchcheck
from tinyprof.loading import Device, Prefetcher, predict
from tinyprof.loading.model import schedule
from tinyprof.loading.timeline import device_utilization, wall_seconds
from tinyprof.pipecheck import PipelineTask, expected_values, prepare, remove
from tinyprof.prefetchcheck import (
    ERRORS,
    KEPT,
    MALFORMED,
    PROMISES,
    check_prefetcher,
    drive_prefetcher,
    plan,
)
from tinyprof.widgets import pipeline_explorer

#: The depths and seeds every prefetcher is driven with here (the hidden test draws its own).
PLANS = [(2, 0), (1, 3), (3, 11), (4, 12)]


def prefetcher_of(answer: str) -> type:
    """The ``Prefetcher`` class an answer cell defines."""
    namespace = {"__name__": "__main__"}
    exec(answer, namespace)  # noqa: S102 - the corpus's own code
    return namespace["Prefetcher"]


ANSWERS = {"the chapter's solution": solution(), **HONEST}


@pytest.mark.parametrize("name", sorted(ANSWERS) + ["tinyprof.loading.Prefetcher"])
def test_an_honest_prefetcher_keeps_every_promise(name):
    prefetcher = Prefetcher if name.startswith("tinyprof") else prefetcher_of(ANSWERS[name])
    for depth, seed in PLANS:
        verdict = check_prefetcher(drive_prefetcher(prefetcher, depth, seed), depth, seed)
        assert verdict.kept, f"{name}, depth {depth}, seed {seed}: {verdict}"


#: Drives a cheat in a fresh interpreter: several leave threads running (a monitor, a loader
#: that outlives close()), which in this process would allocate under other tests' tracemalloc.
CHILD = """
import json, sys
from tinyprof.prefetchcheck import check_prefetcher, drive_prefetcher
namespace = {"__name__": "__main__"}
exec(sys.stdin.read(), namespace)
found = []
for depth, seed in json.loads(sys.argv[1]):
    verdict = check_prefetcher(drive_prefetcher(namespace["Prefetcher"], depth, seed), depth, seed)
    found.append([depth, seed, verdict.kept, verdict.promise, str(verdict)])
print("VERDICTS" + json.dumps(found))
"""


def verdicts_in_a_child(answer: str, plans: list[tuple[int, int]]) -> list[list]:
    """``[depth, seed, kept, promise, text]`` for each plan, the answer driven in a child
    process (its leftover threads end with it)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(plans)], input=answer,
                          capture_output=True, text=True, timeout=300)
    assert "VERDICTS" in done.stdout, done.stderr[-2000:]
    return json.loads(done.stdout[done.stdout.index("VERDICTS") + len("VERDICTS"):])


@pytest.mark.parametrize("name", sorted(CHEATS))
@pytest.mark.slow
def test_a_cheat_breaks_the_promise_it_attacks(name):
    answer, promise = CHEATS[name]
    for depth, seed, _, found, text in verdicts_in_a_child(answer, PLANS):
        assert found == promise, (
            f"{name}, depth {depth}, seed {seed}: expected the grader to find {promise!r} "
            f"broken, got {text}")


@pytest.mark.parametrize("name", sorted(HIDDEN_ONLY))
def test_a_cheat_tailored_to_the_visible_depth_breaks_a_promise_at_another(name):
    answer, promise, depth = HIDDEN_ONLY[name]
    visible, *others = verdicts_in_a_child(answer, [(2, 0), (depth, 3), (depth, 4)])
    assert visible[2], f"the visible test: {visible[4]}"
    for depth_, seed, _, found, text in others:
        assert found == promise, (name, depth_, seed, text)


def test_the_probe_takes_a_fraction_of_a_second():
    """Today's drive: 13 scenarios in about 0.2 s (the old probe's 3 took 0.6 s with the
    chapter's solution and 2.6 s with tinyprof's own Prefetcher, which never pulled the item
    it waited for)."""
    for prefetcher in (prefetcher_of(solution()), Prefetcher):
        started = time.perf_counter()
        drive_prefetcher(prefetcher, 2, 0)
        took = time.perf_counter() - started
        assert took < 1.5, f"one drive took {took:.2f} s, expected about 0.2 s"


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_every_drive_covers_each_exception_each_position_and_each_close(depth):
    """Whatever the seed: every exception type once, at positions 0, depth and depth + 1
    among others, consumers of both speeds on them, a long fast run, and close() with the
    loader blocked, inside a read and just started; the plan is the seed's alone."""
    plans = [plan(depth, seed) for seed in range(40)]
    for scenarios in plans:
        errors = [s for s in scenarios if s.fails_at is not None]
        assert sorted(s.error for s in errors) == sorted(ERRORS)
        assert {0, depth, depth + 1} <= {s.fails_at for s in errors}
        assert {s.consumer for s in errors if s.fails_at > 0} == {"slow", "fast"}
        assert {s.close_while for s in scenarios if s.stop_after is not None} == \
            {"blocked", "pulling", "starting"}
        assert max(s.stop_after or 0 for s in scenarios) >= depth + 4
        assert any(s.consumer == "slow" and s.items and s.items > 2 * depth + 2
                   for s in scenarios)
    assert plan(depth, 7) == plan(depth, 7)
    assert len({tuple(p) for p in plans}) == len(plans), "seeds that draw the same plan"
    assert prefetchcheck.first_values(depth, 1, 0, 5) != prefetchcheck.first_values(depth, 2, 0, 5)


def test_the_source_offers_the_class_nothing_but_iteration():
    """What the class is handed: a source of each of the shapes students write (a generator,
    an iterator class with and without slots, a map, iter(function, end)), in every drive,
    named from a list and made in __main__, with no state of its own, no pickle and no method
    of its class beyond the iterator protocol; a copy reads the same stream (no second source
    to observe); the consumer's thread, run again by the class, does nothing; once its
    scenario is over, a source gives nothing more (a loader left running holds no more)."""
    handed, copies = [], []

    class Spy:
        def __init__(self, source, depth):
            handed.append(source)
            threading.current_thread()._target()   # the consumer, run again
            try:
                copies.append((next(copy.copy(source)), next(source)))
            except Exception:  # noqa: BLE001 - a source that fails at once, or a generator
                copies.append(None)

        def __iter__(self):
            return self

        def __next__(self):
            raise StopIteration

        def close(self):
            pass

    drive_prefetcher(Spy, 2, 0)
    scenarios = plan(2, 0)
    assert len(handed) == len(scenarios), "a scenario ran twice"
    assert {s.shape for s in scenarios} == set(prefetchcheck.SHAPES)
    assert {type(source).__name__ for source in handed} >= {"generator", "map",
                                                            "callable_iterator"}
    for source, scenario, pair in zip(handed, scenarios, copies):
        kind = type(source)
        if scenario.shape.endswith("class"):
            assert kind.__module__ == "__main__" and kind.__qualname__ == scenario.name
            assert {name for name in vars(kind) if not name.startswith("__")} == set()
            assert set(vars(kind)) - {"__module__", "__dict__", "__weakref__", "__doc__",
                                      "__slots__", "__qualname__"} == {"__iter__", "__next__"}
            assert all(getattr(kind, m).__module__ == "__main__"
                       for m in ("__iter__", "__next__"))
            assert getattr(source, "__dict__", {}) == {}
            assert (getattr(kind, "__slots__", None) == ()) == (scenario.shape == "slotted class")
        else:
            assert {name for name in dir(source) if not name.startswith("__")} <= \
                {"close", "gi_code", "gi_frame", "gi_running", "gi_suspended", "gi_yieldfrom",
                 "send", "throw"}
        with pytest.raises((pickle.PicklingError, TypeError, AttributeError)):
            pickle.dumps(source)
        if scenario.shape != "generator" and scenario.stop_after != 0 and \
                scenario.fails_at not in (0, 1):
            first, second = pair
            assert not (first is second or type(first) is int and first == second), \
                f"a copy of a {scenario.shape} started a stream of its own"
        with pytest.raises(StopIteration):
            next(source)


def test_a_consumer_in_the_callers_thread_that_hangs_is_stopped_and_reported():
    """A scenario whose consumer runs in the caller's (main) thread is stopped after
    HANG_SECONDS by the timer's signal, reported as blocked, and the drive ends there; the
    caller's own handler of that signal is back afterwards."""
    import signal

    first_here = next(s for s in plan(2, 0) if s.thread == "caller")
    stuck = threading.Event()

    class Stuck:
        def __init__(self, source, depth):
            self.here = threading.current_thread() is threading.main_thread()

        def __iter__(self):
            return self

        def __next__(self):
            if self.here:
                stuck.wait()   # forever, in the main thread
            raise StopIteration

        def close(self):
            pass

    mine = signal.signal(signal.SIGALRM, signal.default_int_handler)
    started = time.monotonic()
    try:
        report = drive_prefetcher(Stuck, 2, 0)
        assert signal.getsignal(signal.SIGALRM) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGALRM, mine)
    records = report["scenarios"]
    assert records[-1]["number"] == first_here.number and records[-1]["hung"], records[-1]
    assert not any(r["hung"] for r in records[:-1])
    assert time.monotonic() - started < prefetchcheck.HANG_SECONDS + 10
    verdict = check_prefetcher(report, 2, 0)
    assert verdict.promise == prefetchcheck.BLOCKED and "notebook's own thread" in verdict.what


def test_the_verdict_is_decided_from_plain_values():
    """The report is JSON through and through (what the kernel hands the grader); the grader
    recomputes the plan from the seed, refuses a report of another plan or of another shape,
    and never shows a name the kernel chose."""
    prefetcher = prefetcher_of(solution())
    report = drive_prefetcher(prefetcher, 2, 5)
    assert json.loads(json.dumps(report)) == report
    assert check_prefetcher(json.loads(json.dumps(report)), 2, 5).kept
    assert check_prefetcher(report, 2, 6).promise == MALFORMED
    assert check_prefetcher(report, 3, 5).promise == MALFORMED
    cut = dict(report, scenarios=report["scenarios"][:-1])
    assert check_prefetcher(cut, 2, 5).promise == MALFORMED, "scenarios dropped unnoticed"
    for field, value in [("got", "all of them"), ("left_running", 0.0), ("stage", ["x"]),
                         ("most_held", [1]), ("exception", {"where": "next"})]:
        forged = json.loads(json.dumps(report))
        forged["scenarios"][0][field] = value
        assert check_prefetcher(forged, 2, 5).promise == MALFORMED, field
    assert check_prefetcher("every promise kept", 2, 5).promise == MALFORMED
    (long,) = [s.number for s in plan(2, 5) if (s.stop_after or 0) > 100]
    last_wrong = json.loads(json.dumps(report))
    last_wrong["scenarios"][long]["got"][-1] += 1
    assert check_prefetcher(last_wrong, 2, 5).promise == "wrong items", "an item left unchecked"
    named = json.loads(json.dumps(report))
    (record,) = [r for r, s in zip(named["scenarios"], plan(2, 5)) if s.error == "KeyError"]
    record["exception"].update(type="hidden_seed_is_42", original=False, source_type=False)
    verdict = check_prefetcher(named, 2, 5)
    assert verdict.promise == "another exception" and "hidden_seed" not in verdict.what
    assert "an exception of your own class" in verdict.what


def test_the_static_review_flags_no_honest_prefetcher():
    """An honest alternative keeps its points and raises no flag for the instructor (none of
    the cheats is flagged either: the probe alone must catch them)."""
    from autograder.intake.review import review

    release = json.loads((NOTEBOOKS / "09_pipeline" / "pipeline.ipynb").read_text("utf-8"))
    source = json.loads((SOLUTIONS / "09_pipeline" / "pipeline.ipynb").read_text("utf-8"))
    for name, answer in ANSWERS.items():
        submitted = copy.deepcopy(release)
        (cell,) = [c for c in submitted["cells"]
                   if c["metadata"].get("nbgrader", {}).get("grade_id") == "Prefetcher"]
        cell["source"] = answer
        assert review(submitted, release, source) == [], name


def test_the_promises_are_the_hints_of_the_test_cell():
    """Each promise the grader can find broken has its hint in the chapter's test cell."""
    notebook = json.loads((SOLUTIONS / "09_pipeline" / "pipeline.ipynb").read_text("utf-8"))
    (cell,) = [c for c in notebook["cells"]
               if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_Prefetcher"]
    namespace: dict = {}
    source = "".join(cell["source"])
    start = source.index("_PREFETCHER_HINTS = {")
    exec(source[start:source.index("}", start) + 1], namespace)  # noqa: S102 - a literal
    assert set(namespace["_PREFETCHER_HINTS"]) == set(PROMISES)
    assert KEPT in source


def test_the_expected_values_are_a_real_run_through_the_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    task = prepare(PipelineTask("files", seed=11, steps=3, batch_size=4, latency=0.0,
                                kernel_seconds=0.0))
    with Device() as device:
        got = [device.submit(lambda b=b: task.step(b)).result() for b in task.batches()]
    assert got == pytest.approx(expected_values(task), rel=1e-12)
    other = PipelineTask("files", seed=12, steps=3, batch_size=4)
    assert expected_values(other) != pytest.approx(got)
    remove(task)
    assert not (tmp_path / "files").exists()


@pytest.mark.parametrize("depth,workers", [(0, 1), (1, 1), (2, 1), (3, 2)])
def test_the_schedule_takes_the_models_wall_time(depth, workers):
    for load, compute in [(0.03, 0.02), (0.01, 0.02)]:
        events = schedule(load, compute, depth=depth, workers=workers, steps=12)
        model = predict(load, compute, depth=depth, workers=workers, steps=12)
        assert wall_seconds(events) == pytest.approx(model.total_seconds, rel=1e-9)
        assert device_utilization(events) == pytest.approx(model.utilization, rel=1e-9)


def test_the_explorer_redraws_the_timeline_and_the_utilization():
    explorer = pipeline_explorer(load_ms=30, compute_ms=20, depth=0)
    assert explorer.result["prediction"].utilization == pytest.approx(0.4)
    assert len(explorer.images) == 1 and "<img" in explorer.static_html()
    explorer.controls["depth"].value = 2
    explorer.controls["workers"].value = 2
    assert explorer.result["prediction"].step_seconds == pytest.approx(
        predict(0.03, 0.02, depth=2, workers=2, steps=8).step_seconds)
    assert "the pace is set by the device" in explorer.text


# --- through the grader: the test cell run by the judge, each class in a sandboxed kernel ------

needs_sandbox = pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")

#: What the chapter's set-up cells give the test cell in the kernel.
SETUP = """import queue
import threading
import time

import numpy as np

import tinyprof as tp
from tinyprof import pipecheck
from tinyprof.testing import expect, reference_unavailable

drive_prefetcher = pipecheck.drive_prefetcher
"""


def prefetcher_test_cell() -> str:
    """The chapter's test cell of the Prefetcher, hidden tests included."""
    notebook = json.loads((SOLUTIONS / "09_pipeline" / "pipeline.ipynb").read_text("utf-8"))
    for cell in notebook["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "test_Prefetcher":
            return "".join(cell["source"])
    raise LookupError("no test_Prefetcher cell")


def graded(answers: dict[str, str], folder: Path) -> dict[str, dict]:
    """Each answer, then the chapter's test cell, in one notebook graded by the grader's
    Execute (the instructor's notebook gives the judge its imports); the grader's record of
    each test cell, by answer."""
    from autograder.run.execute import GraderExecute

    cells = [new_code_cell(SETUP)]
    for number, answer in enumerate(answers.values()):
        test = new_code_cell(prefetcher_test_cell())
        test.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True,
                                     "grade_id": f"test_Prefetcher_{number}", "points": 4,
                                     "schema_version": 3}
        cells += [new_code_cell(answer), test]
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    GraderExecute(config=Config(), timeout=120, instructor_root=str(SOLUTIONS)).preprocess(
        notebook, {"metadata": {"path": str(folder)},
                   "nbgrader": {"assignment": "09_pipeline", "notebook": "pipeline"}})
    return {name: notebook.cells[2 + 2 * number].metadata["tinyprof"]
            for number, name in enumerate(answers)}


@pytest.fixture(scope="module")
def honest_grades(tmp_path_factory) -> dict[str, dict]:
    return graded(ANSWERS, tmp_path_factory.mktemp("honest"))


@pytest.fixture(scope="module")
def cheat_grades(tmp_path_factory) -> dict[str, dict]:
    answers = {name: answer for name, (answer, _) in CHEATS.items()}
    answers.update({name: answer for name, (answer, *_) in HIDDEN_ONLY.items()})
    return graded(answers, tmp_path_factory.mktemp("cheats"))


@needs_sandbox
@pytest.mark.parametrize("name", sorted(ANSWERS))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_the_grader_gives_an_honest_prefetcher_full_marks(name, honest_grades):
    record = honest_grades[name]
    assert record["verdict"]["passed"], (name, record)


@needs_sandbox
@pytest.mark.parametrize("name", sorted(CHEATS))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_the_grader_gives_a_cheat_nothing(name, cheat_grades):
    record = cheat_grades[name]
    verdict = record["verdict"]
    assert not verdict["passed"], (name, record)
    promise = CHEATS[name][1]
    assert f"got {promise!r}" in verdict["message"] or f'got "{promise}"' in verdict["message"], (
        f"{name}: expected the grader to name {promise!r}: {verdict['message']}")


@needs_sandbox
@pytest.mark.parametrize("name", sorted(HIDDEN_ONLY))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_the_grader_gives_a_cheat_that_passes_the_visible_test_nothing(name, cheat_grades):
    """The hidden test drives the class at depth 1 and at 3 or 4, with a seed of its own."""
    verdict = cheat_grades[name]["verdict"]
    assert not verdict["passed"], (name, verdict)
    assert "a plan drawn at grading" in verdict["message"], verdict["message"]
    assert HIDDEN_ONLY[name][1] in verdict["message"], verdict["message"]
