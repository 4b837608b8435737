"""Leaks graded from outside the student's kernel (autograder/run/memory_check.py), against the
cheats of issue 41.

Chapter 10's last exercise, ``train_fixed(steps, seed)``, is checked by ``expect_leak_free``:
the grader has the kernel run the loop for a few hundred steps (one judge call, tinyprof
switched off) while a thread of the grader reads the kernel's control group's memory at random
times, and the losses the loop returns are checked at every step against a clean loop run in
the grader on a seed drawn at every grading. The solution passes; a fix that keeps one leak
(the hook's 32 kB a step, the smallest of the four) fails; so does every cheat: memory freed
just before the loop returns (where a check inside the kernel would read), the arrays kept by a
child process or in a file of the scratch folder (a tmpfs, counted in the group; 50 kB a step,
so that its 64 MB do not run out first), a loop that returns early or skips steps, and a call
into tinyprof's own loop.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_speed_grading import grade_cell as speed_cell

pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")

CHAPTER, NOTEBOOK = "10_leaks", "leaks.ipynb"
#: The chapter's helpers (its set-up cells' constants and functions), as the student has them.
HELPERS = """
import gc
import os
import numpy as np
import tinyprof as tp
from tinyprof.leaks import loop
BATCHES, BATCH, FEATURES, HIDDEN = loop.BATCHES, loop.BATCH, loop.FEATURES, loop.HIDDEN
LEARNING_RATE = loop.LEARNING_RATE

def setup(seed):
    rng = np.random.default_rng(seed)
    data = rng.random((BATCHES, BATCH, FEATURES))
    w1 = rng.normal(0.0, 0.05, (FEATURES, HIDDEN))
    w2 = rng.normal(0.0, 0.05, (HIDDEN, FEATURES))
    return data, w1, w2

def normalised(raw):
    return (raw - raw.mean(axis=0)) / (raw.std(axis=0) + 1e-3)

def sgd_step(x, w1, w2, hooks=()):
    hidden = np.tanh(x @ w1)
    for hook in hooks:
        hook(hidden)
    recon = hidden @ w2
    error = recon - x
    loss = float(np.mean(error * error))
    grad = error * (2.0 / error.size)
    grad_hidden = (grad @ w2.T) * (1.0 - hidden * hidden)
    w2 -= LEARNING_RATE * (hidden.T @ grad)
    w1 -= LEARNING_RATE * (x.T @ grad_hidden)
    return loss, recon, error
"""
#: A loop body shared by the variants: ``KEEP`` is where each keeps (or not) what a step made.
LOOP = """
def train_fixed(steps, seed=0):
    images, first, second = setup(seed)
    losses, by_index, seen = [], {}, []
    BEFORE
    for k in range(STEPS):
        index = k % BATCHES
        if index not in by_index:
            by_index[index] = normalised(images[index])
        loss, recon, error = sgd_step(by_index[index], first, second, HOOKS)
        losses.append(loss)
        KEEP
    AFTER
    return losses
"""


def loop_with(keep: str = "pass", before: str = "pass", after: str = "pass", hooks: str = "()",
              steps: str = "steps") -> str:
    return (LOOP.replace("KEEP", keep).replace("BEFORE", before).replace("AFTER", after)
            .replace("HOOKS", hooks).replace("STEPS", steps))


HONEST = loop_with()
#: The fix with one leak kept: the hook's list of activations (32 kB a step).
KEEPS_HOOK = loop_with(hooks="[seen.append]")
CHEATS = {
    "memory freed just before the loop returns": loop_with(
        keep="seen.append(recon)", after="seen.clear(); gc.collect()"),
    "the arrays kept by a child process": loop_with(
        before=("reader, writer = os.pipe()\n"
                "    if os.fork() == 0:\n"
                "        os.close(writer); kept = []\n"
                "        while chunk := os.read(reader, 1 << 20):\n"
                "            kept.append(chunk)\n"
                "        os._exit(0)\n"
                "    os.close(reader)"),
        keep="os.write(writer, recon.tobytes())", after="os.close(writer)"),
    "the arrays kept in a file of the scratch folder": loop_with(
        keep="open('kept.bin', 'ab').write(recon[:8].tobytes())", after="os.remove('kept.bin')"),
    "a loop that returns early": loop_with(
        steps="steps // 2", after="losses += losses[-1:] * (steps - len(losses))"),
    "a loop that skips steps": loop_with(
        keep="losses.append(loss)", steps="(steps + 1) // 2", after="del losses[steps:]"),
    "a call into tinyprof's own loop": "def train_fixed(steps, seed=0):\n"
                                       "    return tp.leaks.train(steps, seed)\n",
}
TEST = ("from tinyprof.memcheck import expect_leak_free\n"
        "expect_leak_free(train_fixed, steps=400)")


def grade_cell(student: str, folder: Path) -> dict:
    """The grader's record of an ``expect_leak_free`` test cell after ``student``'s code (the
    speed tests' one-cell notebook, test_speed_grading.grade_cell)."""
    return speed_cell(HELPERS + student, folder, TEST)


def test_the_fix_passes_with_memory_read_from_outside(tmp_path):
    record = grade_cell(HONEST, tmp_path)
    assert record["verdict"]["passed"], record
    printed = record["outputs"][0]["text"]
    assert "read by the grader" in printed and "noise" in printed, printed


def test_a_fix_that_keeps_the_smallest_leak_fails(tmp_path):
    record = grade_cell(KEEPS_HOOK, tmp_path)
    assert not record["verdict"]["passed"], record
    assert "memory grows" in record["verdict"]["message"], record


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_no_cheat_passes(cheat, tmp_path):
    record = grade_cell(CHEATS[cheat], tmp_path)
    assert not record["verdict"]["passed"], (cheat, record)
    message = record["verdict"]["message"]
    expected = {"a loop that returns early": "step ",
                "a loop that skips steps": "step ",
                "a call into tinyprof's own loop": "switched off"}.get(cheat, "memory grows")
    assert expected in message, (cheat, message)
