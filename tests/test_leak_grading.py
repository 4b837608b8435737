"""Leaks graded from outside the student's kernel (autograder/run/memory_check.py), against the
cheats of issues 41 and 45.

Chapter 10's last exercise, ``train_fixed(steps, seed)``, is checked by ``expect_leak_free``:
the grader has the kernel run the loop twice, N and 2N steps (N drawn around the printed step
count), each in a fork of the kernel held after the loop returns, and reads the kernel's
control group from outside: what the loop keeps after it returns and what it holds while it
runs (read at random times) may not grow with the steps by more than 1 kB a step. The losses
the loop returns are checked at every step against a clean loop run in the grader on a seed
drawn at every grading. The solution and the honest alternatives a good student writes pass
(a history of floats, a ring buffer, a memo bounded by ``lru_cache``, a collection every few
steps, the last batch's activations kept); a fix that keeps one leak (the hook's 32 kB a step)
fails; so does every cheat: issue 45's seven (a compressed history under the old 8 kB
tolerance, a ballast or a buffer from an earlier cell, all steps first then idle, a square
wave, a leak that starts after the printed step counts, a leak unless the host name says
graded: that one only once the sandbox stops naming itself), and more by the classes of
shared/REDTEAM.md. The chapter is graded as a cohort through ``python -m autograder grade``.
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

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")]

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
#: Kept across calls, as a leak is kept by a module-level list.
KEPT = "KEPT = []\n"


def kept_global(keep: str, before: str = "pass", after: str = "pass", steps: str = "steps",
                setup: str = "") -> str:
    """A loop that keeps ``keep`` in the module-level list KEPT (made by ``setup``, the cell
    before the loop's, with KEPT)."""
    return KEPT + setup + loop_with(keep=keep, before=before, after=after, steps=steps)


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
    "the arrays written to a file until the scratch folder is full": loop_with(
        keep="open('kept.bin', 'ab').write(recon.tobytes())", after="os.remove('kept.bin')"),
    "a loop that returns early": loop_with(
        steps="steps // 2", after="losses += losses[-1:] * (steps - len(losses))"),
    "a loop that skips steps": loop_with(
        keep="losses.append(loss)", steps="(steps + 1) // 2", after="del losses[steps:]"),
    "a call into tinyprof's own loop": "def train_fixed(steps, seed=0):\n"
                                       "    return tp.leaks.train(steps, seed)\n",
    # issue 45's seven, which kept 4/4 against a slope of memory over time
    "(a) a compressed history, 7 kB a step": kept_global(
        "KEPT.append(recon[:, :112].astype(np.float16))"),
    "(b) a ballast made in an earlier cell, freed as the leak grows": kept_global(
        "KEPT.append(error[:, :HIDDEN].copy()); BALLAST.pop()",
        setup="BALLAST = [np.ones(BATCH * HIDDEN) for _ in range(3000)]\n"),
    "(c) a buffer touched in an earlier cell, filled step by step": kept_global(
        "BUFFER[k % len(BUFFER)] = error[:, :HIDDEN]; KEPT[:] = [BUFFER]",
        setup="BUFFER = np.ones((3000, BATCH, HIDDEN))\n"),
    "(d) all steps first, then idle": kept_global(
        "KEPT.append(error[:, :HIDDEN].copy())", after="import time; time.sleep(0.002 * steps)"),
    "(e) a large square wave": kept_global(
        "KEPT.append(error[:, :HIDDEN].copy())\n"
        "        if k % 40 == 0:\n"
        "            WAVE[:] = [] if WAVE else [np.ones(5_000_000)]",
        setup="WAVE = []\n"),
    "(f) a leak that starts after the printed step counts": kept_global(
        "if k >= 500: KEPT.append(error[:, :HIDDEN].copy())"),
    "(g) a leak unless the host name says graded": kept_global(
        "if socket.gethostname() != 'sandbox': KEPT.append(error[:, :HIDDEN].copy())",
        setup="import socket\n"),
    # more, by the classes of shared/REDTEAM.md
    "a leak only at step counts other than the printed ones": kept_global(
        "if steps not in (400, 500): KEPT.append(error[:, :HIDDEN].copy())"),
    "a leak handed to a thread that frees it after the loop returns": loop_with(
        keep="seen.append(error[:, :HIDDEN].copy())",
        after=("import threading, time\n"
               "    threading.Thread(target=lambda: (time.sleep(1.0), seen.clear()),"
               " daemon=True).start()")),
    "a ballast made at the start, freed as the leak grows": loop_with(
        before="ballast = [np.ones(BATCH * HIDDEN) for _ in range(1800)]",
        keep="seen.append(error[:, :HIDDEN].copy()); ballast.pop()", after="seen.clear()"),
    "a front-loaded leak freed after idle time": loop_with(
        keep="seen.append(error[:, :HIDDEN].copy())",
        after="import time; time.sleep(0.002 * steps); seen.clear()"),
    "kept memory padded down as the steps grow": kept_global(
        "KEPT.append(error[:, :HIDDEN].copy())",
        after="PAD[:] = [bytearray(max(0, 48_000_000 - 33_000 * steps))]",
        setup="PAD = []\n"),
}
HONEST_ALTERNATIVES = {
    "the chapter's solution": HONEST,
    "a history kept as floats in a dict": loop_with(before="history = {}",
                                                    keep="history[k] = float(loss)"),
    "a ring buffer of the last 32 reconstructions": loop_with(
        before="ring = np.zeros((32, BATCH, FEATURES))", keep="ring[k % 32] = recon"),
    "a memo bounded with functools.lru_cache": """
import functools

def train_fixed(steps, seed=0):
    images, first, second = setup(seed)

    @functools.lru_cache(maxsize=BATCHES)
    def batch(index):
        return normalised(images[index])

    losses = []
    for k in range(steps):
        loss, _, _ = sgd_step(batch(k % BATCHES), first, second)
        losses.append(loss)
    return losses
""",
    "a collection every 50 steps": loop_with(keep="if k % 50 == 0: gc.collect()"),
    "the last batch's activations kept (a plateau)": KEPT + loop_with(
        keep="KEPT[:] = [recon.copy()]"),
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
    assert "read by the grader" in printed and "kept after it returned" in printed, printed


def test_a_fix_that_keeps_the_smallest_leak_fails(tmp_path):
    record = grade_cell(KEEPS_HOOK, tmp_path)
    assert not record["verdict"]["passed"], record
    assert "grows" in record["verdict"]["message"], record


#: The sandbox still names itself (autograder/kernel/isolation.py): cheat (g) behaves there.
@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_no_cheat_passes(cheat, tmp_path):
    record = grade_cell(CHEATS[cheat], tmp_path)
    assert not record["verdict"]["passed"], (cheat, record)
    message = record["verdict"]["message"]
    expected = {"a loop that returns early": ("step ",),
                "a loop that skips steps": ("step ",),
                "a call into tinyprof's own loop": ("switched off",),
                # Each run rewrites the one file: a shorter run after a longer one truncates a
                # file written before its call, which is not credited (FreedSharedUncredited), so
                # in that order the shorter run holds more and the reason is the shrink.
                "the arrays written to a file until the scratch folder is full": (
                    "grows", "more after")}.get(cheat, ("grows",))
    assert any(reason in message for reason in expected), (cheat, message)


@pytest.mark.parametrize("honest", sorted(HONEST_ALTERNATIVES))
def test_every_honest_alternative_passes(honest, tmp_path):
    record = grade_cell(HONEST_ALTERNATIVES[honest], tmp_path)
    assert record["verdict"]["passed"], (honest, record["verdict"], record["outputs"])


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
