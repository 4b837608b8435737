"""Input pipelines graded from outside the student's kernel (autograder/run/pipeline_check.py),
against the cheats of issue 40.

Chapter 09's last exercise, ``train_fast(task)``, is checked by ``expect_busy_device``: the
grader has the kernel write a fresh data set for a seed drawn at every grading, times the
loop's call from outside (the request's round trip), checks every step's value against values
computed in the grader, and holds the wall to its physical floor (the device's steps one at a
time). Its waits are sleeps, so the grade does not move with the CPU load of the machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_speed_grading import grade_cell as speed_cell

pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")

HELPERS = "from tinyprof.loading import Device, Prefetcher\n"
#: The loop a fix starts from: ``LOADER`` gives the batches, ``EACH`` what a step does.
LOOP = """
def train_fast(task):
    values = []
    with Device() as device:
        batches = LOADER
        for batch in batches:
            EACH
    return values
"""
STEP = "values.append(device.submit(lambda b=batch: task.step(b)).result())"


def loop_with(loader: str = "task.batches()", each: str = STEP) -> str:
    return HELPERS + LOOP.replace("LOADER", loader).replace("EACH", each)


HONEST = loop_with("Prefetcher(task.batches(), 2)")
SERIAL = loop_with()
CHEATS = {
    "a consumer that drops every other batch": loop_with(
        "Prefetcher(task.batches(), 2)",
        "if batch.step % 2 == 0:\n                " + STEP + "\n"
        "            else:\n                values.append(values[-1])"),
    "a loader that skips the decoding (empty batches)": loop_with(
        "(b._replace(x=b.x * 0) for b in task.batches())"),
    "a loader that loads everything up front": loop_with("list(task.batches())"),
    "a device that runs steps side by side": HELPERS + """
from concurrent.futures import ThreadPoolExecutor
def train_fast(task):
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(task.step, list(task.batches(batched_reads=True))))
""",
    "the sleeps patched away": "import time\ntime.sleep = lambda seconds: None\n"
                               + loop_with("Prefetcher(task.batches(), 2)"),
}
TEST = "from tinyprof.pipecheck import expect_busy_device\nexpect_busy_device(train_fast)"


def grade_cell(student: str, folder: Path) -> dict:
    """The grader's record of an ``expect_busy_device`` test cell after ``student``'s code."""
    return speed_cell(student, folder, TEST)


def test_a_prefetching_loop_passes_timed_from_outside(tmp_path):
    record = grade_cell(HONEST, tmp_path)
    assert record["verdict"]["passed"], record
    printed = record["outputs"][0]["text"]
    assert "timed by the grader, from outside your kernel" in printed, printed


def test_the_serial_loop_fails_its_tier(tmp_path):
    record = grade_cell(SERIAL, tmp_path)
    assert not record["verdict"]["passed"], record
    assert "the device was busy" in record["verdict"]["message"], record


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_no_cheat_passes(cheat, tmp_path):
    record = grade_cell(CHEATS[cheat], tmp_path)
    assert not record["verdict"]["passed"], (cheat, record)
    message = record["verdict"]["message"]
    expected = {"a consumer that drops every other batch": "step 1",
                "a loader that skips the decoding (empty batches)": "step 0",
                "a loader that loads everything up front": "the device was busy",
                }.get(cheat, "less than the")
    assert expected in message, (cheat, message)
    if expected == "less than the":
        assert any("physical floor" in line for line in record.get("review", [])), record
