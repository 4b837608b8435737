"""Chapter 09's checks in the kernel (tinyprof.pipecheck): the probe of a prefetcher's contract
sees what each broken prefetcher skips; the graded task's expected values are the values of a
real run through the files; the model's schedule gives the model's wall time; the explorer
redraws."""

from __future__ import annotations

import queue
import threading

import pytest

from tinyprof.loading import Device, Prefetcher, predict
from tinyprof.loading.model import schedule
from tinyprof.loading.timeline import device_utilization, wall_seconds
from tinyprof.pipecheck import PipelineTask, drive_prefetcher, expected_values, prepare, remove
from tinyprof.widgets import pipeline_explorer


class Bounded:
    """A student's prefetcher: a queue of ``depth`` and a loader thread; ``variant`` breaks it."""

    def __init__(self, source, depth=2, variant=""):
        self.source, self.variant = iter(source), variant
        self.items = queue.Queue(maxsize=0 if variant == "unbounded" else depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._load, daemon=True)
        self.thread.start()

    def _put(self, item):
        while not self.stop.is_set():
            try:
                self.items.put(item, timeout=0.02)
                return True
            except queue.Full:
                pass
        return False

    def _load(self):
        try:
            for item in self.source:
                if not self._put(("item", item)):
                    return
        except ValueError as error:
            if self.variant != "swallows":
                self._put(("error", error))
                return
        self._put(("end", None))

    def __iter__(self):
        return self

    def __next__(self):
        kind, value = self.items.get()
        if kind == "item":
            return value
        if kind == "error":
            raise value
        raise StopIteration

    def close(self):
        if self.variant != "never stops":
            self.stop.set()
            self.thread.join()


class Synchronous:
    def __init__(self, source, depth=2):
        self.source = iter(source)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.source)

    def close(self):
        pass


def variant(name):
    return lambda source, depth: Bounded(source, depth, name)


@pytest.mark.parametrize("prefetcher", [Prefetcher, Bounded], ids=["tinyprof", "queue"])
def test_a_correct_prefetcher_keeps_every_term_of_the_contract(prefetcher):
    report = drive_prefetcher(prefetcher, depth=2, n=8, seed=3)
    assert report["got"] == report["expected"] and len(report["got"]) == 8
    assert report["ahead"] is True and report["most_held"] <= 3
    assert report["error"] == [True, "ValueError"]
    assert report["left_running"] == report["left_after_break"] == 0
    assert report["hung"] == [] and "raised" not in report


def test_the_probe_sees_what_each_broken_prefetcher_skips():
    assert drive_prefetcher(Synchronous)["ahead"] is False
    assert drive_prefetcher(variant("unbounded"), n=8)["most_held"] == 8
    assert drive_prefetcher(variant("swallows"))["error"] == [True, None]
    assert drive_prefetcher(variant("never stops"))["left_after_break"] == 1


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
