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
into tinyprof's own loop. The chapter is graded as a cohort through ``python -m autograder
grade``.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from chapters import REPO
from test_speed_grading import grade_cell as speed_cell

from autograder import samples

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


def _cohort() -> dict[str, dict[str, str]]:
    solution = samples.solutions(CHAPTER, NOTEBOOK)

    def fixed(code: str) -> dict[str, str]:
        return {**solution, "train_fixed": code}

    return {"ada": solution, "blank": {},
            "hook": fixed(KEEPS_HOOK),
            "child": fixed(CHEATS["the arrays kept by a child process"]),
            "scratch": fixed(CHEATS["the arrays kept in a file of the scratch folder"]),
            "early": fixed(CHEATS["a loop that returns early"])}


def grade_chapter(root: Path, cohort: dict[str, dict[str, str]]) -> dict[str, dict]:
    """``python -m autograder grade`` on the chapter's notebooks with these answers (the
    chapter's set-up cell imports ``gc`` and ``os``): the rows of grades.csv by student."""
    for student, answers in cohort.items():
        folder = root / "in" / student / CHAPTER
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_bytes(samples.notebook(answers, chapter=CHAPTER, name=NOTEBOOK))
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", str(root / "in"),
                          "--out", str(root / "out"), "--jobs", "2"], cwd=REPO,
                         capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with open(root / "out" / "grades.csv", newline="", encoding="utf-8") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def chapter(tmp_path_factory) -> dict[str, dict]:
    return grade_chapter(tmp_path_factory.mktemp("leaks10"), _cohort())


def test_chapter_10_full_marks_to_the_solution_and_none_to_the_blank(chapter):
    ada, blank = chapter["ada"], chapter["blank"]
    assert float(ada["auto_score"]) == float(ada["max_auto_score"]) == 10, ada
    assert float(blank["auto_score"] or 0) == 0, blank


def test_chapter_10_a_kept_leak_and_the_cheats_lose_the_leak_free_points(chapter):
    ada = chapter["ada"]
    for student in ("hook", "child", "scratch", "early"):
        row = chapter[student]
        assert float(row["test_train_fixed"] or 0) == 0, (student, row)
        for cell in ("test_growth_per_step", "test_top_growing_lines"):
            assert float(row[cell]) == float(ada[cell]) > 0, (student, cell, row)
        assert float(row["auto_score"]) == float(ada["auto_score"]) - 4, (student, row)
