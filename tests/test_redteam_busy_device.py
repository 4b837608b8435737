"""Red team of ``expect_busy_device`` (chapter 09's ``train_fast``), graded for real.

Each entry of tests/redteam_busy_device.py is put in the ``train_fast`` answer cell of a
notebook made of the chapter's set-up cells, that answer and the chapter's own test cell
(``test_train_fast``, hidden tests included, read from the solution notebook), and run by the
grader's Execute preprocessor: the kernel in the bubblewrap sandbox, the test cell decided by the
judge with the chapter's imports. A cheat must lose the cell's points; an honest fix must keep
them. Each cheat runs in a kernel of its own (a cheat that patches a class or leaves a thread
would otherwise decide its neighbour's grade), and so does each honest fix.

Against s6-device c836fb2 and 6f7fd24 (two steps of other idle allowed): 11 of the 13 cheats lose
the points; the two in ``GAPS`` keep them (idle time the grader does not charge, spent); the
solution and the 6 honest fixes keep theirs (about 3 minutes). Since then the idle time before
the first step is charged beyond a start-up allowance (``START_UP_SECONDS``, 250 ms), and the
2 s pause before it loses the points: 12 of 13. The red team then paused before the first
request and after the listing (free: the window opened at the first read) and after the last
step; the window now opens at the grader's call and ends at the return, so all three lose, and
what ``GAPS`` keeps is host work inside the allowance before each step and a pause inside a
worker's start-up allowance (a process the call started that reads late).

A second red team of that allowance (9 cheats, each idling 1.4 s before the first step, and 4
honest fixes with worker processes started in the call): 7 keep the points (graded 98-100 %
for a device busy 39-47 % of the call), because the allowance is granted by a flag (some
connection whose connecting process was not running at the call carried a read, of any size,
before the first step) and not by a worker's start-up: a pause after that read, in the
kernel or in the worker, a connection made by a child and used by the kernel (shared by fork,
passed by SCM_RIGHTS, or made before the call by a process gone at it), a reader forked by a
process that was running. The two controls (a pause with no new process, a read by a process
running at the call) lost at 47 %; the honest fixes kept theirs (100 %), but the three that
import multiprocessing were flagged by the static review. Since then the allowance is the time
from the call to the first read of a file by a process the call started, on a connection made
after the call, up to 1.5 s: all seven lose the points, 25 of the 27 cheats in all; the review
no longer flags multiprocessing (chapter 09 teaches worker processes).

:func:`grade_answers` is shared with tests/test_redteam_prefetcher.py.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import nbformat
import pytest
import redteam_busy_device as corpus
from chapters import SOLUTIONS
from traitlets.config import Config

from autograder.intake.review import review
from autograder.run.execute import GraderExecute

pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")

CHAPTER, NOTEBOOK = "09_pipeline", "pipeline"


def instructor() -> dict:
    return json.loads((SOLUTIONS / CHAPTER / f"{NOTEBOOK}.ipynb").read_text(encoding="utf-8"))


def _grade_id(cell: dict) -> str | None:
    return (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")


def setup_cells(source: dict) -> list[dict]:
    """The chapter's set-up: its code cells before the first section (imports, constants,
    ``drive_prefetcher``), as the student's notebook has them."""
    cells = []
    for cell in source["cells"]:
        if cell["cell_type"] == "markdown" and "".join(cell["source"]).startswith("## "):
            break
        if cell["cell_type"] == "code":
            cells.append(cell)
    return cells


def chapter_cell(source: dict, grade_id: str) -> dict:
    """The cell of the solution notebook with this grade id (a test cell keeps its hidden
    tests: the grader runs the instructor's version)."""
    for cell in source["cells"]:
        if _grade_id(cell) == grade_id:
            return cell
    raise LookupError(f"{CHAPTER}/{NOTEBOOK}.ipynb has no cell {grade_id!r}")


def solution(grade_id: str) -> str:
    """The instructor's answer, its solution markers dropped."""
    lines = "".join(chapter_cell(instructor(), grade_id)["source"]).splitlines()
    return "\n".join(line for line in lines if "### " not in line) + "\n"


#: What the chapter's cells before the exercises have done by then in a student's kernel (§9.1
#: wrote the PNGs with Pillow): Pillow imported, so its first import is not in a timed call.
WARM = "from PIL import Image  # noqa: F401 - imported by §9.1's cells in the chapter"


def grade_answers(answer_id: str, test_id: str, answers: list[str], folder: Path,
                  timeout: int = 300) -> list[dict]:
    """Grade each of ``answers`` in the ``answer_id`` cell, each followed by the chapter's
    ``test_id`` cell, in one kernel: the grader's record of each test cell, in order."""
    source = instructor()
    answer, test = chapter_cell(source, answer_id), chapter_cell(source, test_id)
    cells = [nbformat.from_dict(copy.deepcopy(c)) for c in setup_cells(source)]
    cells.append(nbformat.v4.new_code_cell(WARM))
    for code in answers:
        mine = nbformat.from_dict(copy.deepcopy(answer))
        mine.source = code
        mine.outputs = []
        cells += [mine, nbformat.from_dict(copy.deepcopy(test))]
    for cell in cells:
        cell.outputs, cell.execution_count = [], None
        if isinstance(cell.source, list):
            cell.source = "".join(cell.source)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    executor = GraderExecute(config=Config(), timeout=timeout,
                             instructor_root=str(SOLUTIONS))
    executor.preprocess(nb, {"metadata": {"path": str(folder)},
                             "nbgrader": {"assignment": CHAPTER, "notebook": NOTEBOOK}})
    return [{**cell.metadata.get("tinyprof", {}),
             "outputs": [nbformat.from_dict(o) for o in cell.get("outputs", [])]}
            for cell in nb.cells if _grade_id(cell) == test_id]


def flags(answer_id: str, code: str) -> list[str]:
    """What the grader's static review says of ``code`` in the ``answer_id`` cell of a
    submitted notebook (the rest as released)."""
    from autograder.samples import release

    released = release(CHAPTER, f"{NOTEBOOK}.ipynb")
    submitted = copy.deepcopy(released)
    for cell in submitted["cells"]:
        if _grade_id(cell) == answer_id:
            cell["source"] = code
    return [str(finding) for finding in review(submitted, released, instructor())]


def describe(record: dict) -> str:
    """The verdict and what the test printed, for a failure message."""
    verdict = record.get("verdict", {})
    printed = "".join(o.get("text", "") for o in record.get("outputs", []))
    return (f"passed={verdict.get('passed')} {verdict.get('ename', '')}: "
            f"{verdict.get('message', '')!s:.600} | printed: {printed[-600:]} | "
            f"review: {record.get('review', [])}")


#: A failure of these kinds is the cheat's own code failing, not the check stopping it.
BROKEN = frozenset({"SyntaxError", "IndentationError", "NameError", "ImportError",
                    "ModuleNotFoundError", "UnboundLocalError"})
#: Cheats the rebuilt check does not stop: name → what it misses (s6-device c836fb2, 6f7fd24).
GAPS: dict[str, str] = {
    "host_work_hidden_in_the_idle_allowance":
        "the device's idle time while no read is in flight is free up to OTHER_IDLE_STEPS "
        "steps' time before each step (1 × 40 ms at c836fb2, 2 × 40 ms since 6f7fd24), "
        "whatever the loop does with it: a serial "
        "loop with batched reads and 15 ms of host work a step was graded 95 % busy for a "
        "device busy 960 ms of a 1840 ms run (52 %; 20 ms: 96 % for 54 %). Honest serial "
        "loops with batched reads idle 4-13 ms before a step decoding (quiet, beside 4 and 10 "
        "CPU hogs), and the 80 % floor alone leaves 10 ms a step: only a measure of the "
        "kernel's own scheduling delay could tell host work from a loaded machine",
    # Since the window opens at the call (not the first read), pause_before_the_first_request
    # and pause_after_the_listing lose; what is left is a worker's start-up allowance.
    "pause_in_a_process_the_call_started":
        "the time from the call to the first read by a process the call started is free up to "
        "WORKER_START_SECONDS (1.5 s: spawned workers import numpy, Pillow and tinyprof first); "
        "a forked process that pauses 1 s before its one read gets the pause free (the grader "
        "sees when a new process first read, not why it was late): 32 steps in 2356 ms, graded "
        "98 %",
    # The second red team's seven cheats of the worker's allowance (above in the corpus: a
    # pause after a new process's read, in the kernel or in the worker; a connection made by a
    # child and used by the kernel, shared by fork, passed by SCM_RIGHTS or made before the call
    # by a process gone at it; an empty read; a reader forked by a process running at the call)
    # kept the points against a yes/no allowance (graded 98-100 % for a device busy 39-47 % of
    # the call). They lose since the allowance is the time from the call to a new process's
    # first read of a file, on a connection made after the call.
}
#: Honest fixes that lose the points: name → why (none against c836fb2: each in its own kernel
#: at a load of 5-7 on 2 cores, 89-99 % busy in three runs; against e54ffe9, wall-clock
#: utilization, they measured 52-97 % at a load of 7-9).
HONEST_LOSSES: dict[str, str] = {}


def with_gaps(names: dict, gaps: dict) -> list:
    """``names`` as pytest parameters, each known gap marked xfail (strict: it must keep
    failing until the check closes it)."""
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=gaps[name]))
            if name in gaps else name for name in sorted(names)]


@pytest.mark.parametrize("cheat", with_gaps(corpus.CHEATS, GAPS))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_cheat_loses_the_busy_device_points(cheat, tmp_path):
    [record] = grade_answers("train_fast", "test_train_fast", [corpus.CHEATS[cheat]], tmp_path)
    verdict = record.get("verdict", {})
    print(f"\n[red team] {cheat}: {describe(record)}")
    assert verdict.get("ename") not in BROKEN, f"{cheat} itself is broken: {describe(record)}"
    assert verdict.get("passed") is False, (
        f"{cheat} kept the points of test_train_fast: {describe(record)}; static review: "
        f"{flags('train_fast', corpus.CHEATS[cheat])}")


def honest(name: str) -> str:
    return solution("train_fast") if name == SOLUTION else corpus.HONEST[name]


#: The instructor's own answer, graded beside the honest alternatives.
SOLUTION = "the chapter's solution"


@pytest.mark.parametrize("name", with_gaps({SOLUTION: "", **corpus.HONEST}, HONEST_LOSSES))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_an_honest_fix_keeps_the_busy_device_points(name, tmp_path):
    """Each in a kernel of its own, as a student's notebook is graded (a pool of worker
    processes left by one fix would otherwise share the CPU with the next one's loop)."""
    [record] = grade_answers("train_fast", "test_train_fast", [honest(name)], tmp_path)
    print(f"\n[red team] honest {name}: {describe(record)}")
    assert record.get("verdict", {}).get("passed") is True, (
        f"the honest {name} lost the points of test_train_fast: {describe(record)}")


#: Honest fixes the static review flags: name → what it says (it does not cost the points, but
#: the instructor reads it as an attempt to reach outside the notebook). None since the review
#: stopped flagging multiprocessing (the second red team's three fixes that import it were).
HONEST_FLAGGED: dict[str, str] = {}


@pytest.mark.parametrize("name", with_gaps(corpus.HONEST, HONEST_FLAGGED))
def test_an_honest_fix_is_not_flagged(name):
    assert flags("train_fast", corpus.HONEST[name]) == [], name


def test_the_instructors_page_counts_the_known_gaps():
    """book/instructors.md says how many of the red team's cheats score 0 and how many honest
    fixes it holds: the corpus less GAPS, out of every cheat here."""
    page = " ".join((SOLUTIONS.parent / "book" / "instructors.md").read_text().split())
    cheats, caught = len(corpus.CHEATS), len(corpus.CHEATS) - len(GAPS)
    said = (f"holds the red team's {cheats} cheats and {len(corpus.HONEST)} honest fixes",
            f"{caught} of the {cheats} score 0")
    for sentence in said:
        assert sentence in page, f"book/instructors.md should say '{sentence}'"
