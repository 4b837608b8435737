"""Chapter 10's leak check against its red team (tests/redteam_leak_free.py), graded for real.

Each answer is graded the way the grader grades the chapter: the chapter's own set-up cells, the
answer cell, then the chapter's own ``test_train_fixed`` cell with its hidden tests, read from
the instructor notebook (so the test follows the chapter), run by ``GraderExecute`` in the real
sandbox, the verdict decided in the grader (autograder/run/memory_check.py). Every cheat must
lose the test's points or be flagged by the static review (autograder/intake/review.py, run on
the chapter's notebook handed in with that answer); every honest answer must keep the points,
unflagged. The honest answers share one kernel
(each answer cell is followed by its own copy of the test cell); each cheat has a kernel of its
own, since some leave threads, ballasts or sockets behind.

A cheat the check does not stop yet, or an honest answer it punishes, is marked
``xfail(strict=True)`` with what the check misses, so that the gap stays visible and a fix turns
the mark into a failure to remove.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import numpy as np
import pytest
from chapters import NOTEBOOKS, SOLUTIONS
from nbformat.v4 import new_code_cell, new_notebook
from redteam_leak_free import CHEATS, HONEST, KEPT_SHAPE, SWITCHED
from traitlets.config import Config

from autograder import samples
from autograder.intake.review import review
from autograder.run.execute import GraderExecute

pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")

CHAPTER = SOLUTIONS / "10_leaks" / "leaks.ipynb"
TEST_ID = "test_train_fixed"
#: s18's cheats that keep the points within the allowance, and those that held a gap now and
#: then: tails of the steps that live under half a span in the 2N run (MISSED).
WITHIN_THE_ALLOWANCE = ("tail_sixth_of_the_steps", "tail_tenth_of_the_steps",
                        "slow_head_fast_tail", "idle_prelude_scaled_then_tail_third",
                        "tail_third_then_idle_to_the_end", "three_teeth_of_two_fifths",
                        "middle_sixth_hump", "head_sixth_then_freed", "thread_holds_the_tail",
                        "tail_018_capped_eighth_reconstructions",
                        "tail_tenth_quarter_reconstructions")
SHORT_TAILS = ("tail_018_capped_half_reconstructions", "tail_018_half_reconstructions_up_to_600",
               "tail_sixth_quarter_reconstructions", "tail_quarter_capped_quarter_reconstructions",
               "tail_018_capped_whole_reconstructions", "tail_sixth_whole_reconstructions",
               "child_process_holds_the_tail")
PADDED_TAIL = "idle_prelude_then_tail_014_half_reconstructions"
#: What the check misses, for each cheat that still keeps the points, with what the grader
#: printed against s6-leak c25672c, and for the second red team's against 3f2b52e (each one an
#: xfail(strict=True)). The cheats that told the
#: graded run apart (issue 45's s7-tells) lose the points (a seed people type is in every check)
#: or are flagged for review (intake/tells.py: a fork's process id or CPU time, the call stack,
#: /proc, the environment, the user, the network interfaces); one is left. The socket-buffer
#: cheats lose the points since s7-sockets (TCP counted, UDP, IPv6 and netlink refused);
#: file_ballast since s12 (tmpfs files count at their most over a run: "grows 6.6 KB a step").
MISSED: dict[str, str] = {
    "pretouched_file_history": "a file mapped shared (np.memmap) is written in place by the "
                               "fork, no page copied: a history written into pre-touched file "
                               "pages adds nothing (−641 B a step kept) and stays in the kernel",
    "late_start_in_time": "the runs are at most 4 times the printed steps, seconds: a leak "
                          "that starts after 60 s of running is never in them",
    "unless_the_folder_is_fresh": "the sandbox's working folder starts empty, the author's "
                                  "holds the notebook and its checkpoints: os.listdir('.') tells "
                                  "them apart, and listing a folder is honest code (not "
                                  "flagged); no sandbox can hold what an author's folder has",
    # s8-red (issue 45's second red team), measured against s8-red's base 3f2b52e (of its 13
    # cheats, 3 lost the points at the first try; since then the grader reads the socket queues
    # no group is charged for, memory that shrinks from N to 2N fails, and the review flags
    # five more reads of the sandbox: two are left):
    "unless_stdout_is_devnull": "the fork's sys.stdout is open(os.devnull) (forked.py's "
                                "child), a student's kernel's is ipykernel's stream; reading "
                                "sys.stdout is not a tell: kept −263 B a step (670 and 1340 "
                                "steps), passed, unflagged",
    "slack_sized_leak": "the tolerance is 1 kB a step plus 1.5 MB / N (2.5 to 4.8 kB a step at "
                        "N from 400 to 1000), and two runs differ by about 1 MB anyway: 1.1 kB "
                        "a step planted, kept measured at 635 B and 1.1 kB a step, held 1.5 kB "
                        "(516 and 1032, 523 and 1046 steps), passed",
    # s14's third and fourth red teams (against 22055a8) found six cheats that held: five
    # drained ballasts an earlier cell made in the kernel's objects (socket pairs, pipes, named
    # pipes, System V queues, empty files' inodes), which a fork shares instead of copying, and
    # an idle prelude ten times the steps' time that kept the steps' readings above held's 90th
    # percentile. All lose since s15: the kernel's objects count at their most over a run, as
    # its files did (FreedSharedUncredited; 13 to 19 kB a step kept), and held is the highest
    # level the memory stayed at for five readings in a row (memcheck.held_level; 12.9 kB a
    # step held; 15.3 kB since s16, a level kept for half of a quarter second). s15's fifth
    # red team: tests/redteam_leak_free.py, near its end; s16's sixth, at its end.
    "heap_holes_ballast": "the known limit of a ballast taken in each run (memcheck's "
                          "docstring): 18 MB of heap chunks allocated and freed at the start, "
                          "kept by a 1 GB trim threshold, filled by the history: held 29.1 and "
                          "29.0 MB (−38 B a step), kept 145 B a step, under the 40 MB budget "
                          "(s16, 581 and 1162 steps: kept 162 B a step), passed, unflagged; "
                          "lost once in CI (held 4.4 kB a step against 3.3), so not strict",
    # s18's seventh red team (tests/redteam_leak_free.py, at its end) aimed 19 cheats at held
    # read over any window and over SHORTER_RUN_SHARE (0.75) of the shorter run: leaks that
    # live for a part of the run tied to its step count. Eleven kept the points within the
    # allowance (their whole leak, seen in full, is under it); eight held in some runs and not
    # in others, tails of the steps shorter than half a span (below; 200 kB a step over the
    # last sixth of at most 120 steps passed the visible check and lost the hidden one on one
    # seed, 18.1 kB a step at 290 and 580; a tail held by a child process lost at 767 and 1534
    # steps, 10.4 kB a step against 3.1, and held -82 B a step at 451 and 902 in a CI run).
    **dict.fromkeys(WITHIN_THE_ALLOWANCE,
                    "within the allowance: a leak that lives for a part of the steps grows, seen "
                    "in full, by its rate times that part a step (12.5 kB over a sixth: 2.1 kB "
                    "a step), under 1 kB plus 1.5 MB / N at the step counts the test draws; the "
                    "class of slack_sized_leak"),
    **dict.fromkeys(SHORT_TAILS,
                    "a leak that lives only in the last steps, freed as the loop returns, and "
                    "lasts under half a span in the 2N run (three eighths of the shorter run, or "
                    "125 ms) is held in neither run: what a level needs to count, whatever the "
                    "share (at half the shorter run, a tail under a quarter of it). 50 kB a "
                    "step over the last sixth held -448 B a step at 676 and 1352 steps (3.4 kB "
                    "allowed) and lost at 401 and 802 (6.5 kB against 4.9); 100 kB a step over "
                    "the last 18 % of at most 100 steps held 1.4 kB a step at 190 and 380 (9.3 "
                    "kB allowed), in 1 run of 3 (s18): the faster the steps, the more it hides; "
                    "what a loop can grow in that time bounds it (4 to 8 MB here)"),
    PADDED_TAIL:
        "HELD_SPAN_S's cap: a run padded to 0.5 s or more reads held over 0.25 s, whatever its "
        "steps' time, so a tail of the steps that lives under 125 ms in the 2N run is not held: "
        "100 kB a step over the last 14 % of at most 600 steps after an idle prelude (14 kB a "
        "step in full) held 14 B a step at 294 and 588 steps (6.4 kB allowed), in 2 runs of 3 "
        "(s18)",
}
#: Honest answers the check punishes, and why (each one an xfail, strict unless NEAR_THE_LINE).
#: Until s16 a thread or process pool of 2 made in each call (malloc arenas of its threads, 2.4
#: to 3.1 MB more kept over two calls than over one) and a worker process at the loop's start
#: (its 6 to 9 MB caught in one run's held level and not in the other's) lost now and then; the
#: fork's allocator is now the same in every run (forked._steady_allocator) and held a level
#: kept for half of memcheck.HELD_SPAN_S (12 gradings of the three in a row, and two of the
#: red team's runs: all kept their points). Until s17 a pool of 4 made in each call kept about
#: 3 MB more over two calls than over one: its threads took arenas the kernel's own threads had
#: made (14 in a sandboxed kernel), which a fork cannot take away and whose top a trim keeps;
#: the sandbox now starts the kernel with one (MALLOC_ARENA_MAX=1, kernel/isolation.py), and two
#: calls keep what one does (Pool(4) 10.4 against 10.2 MB, ProcessPoolExecutor(4) 10.7 against
#: 10.6 to 10.8 MB, s17).
#: Until s18 the kernel memory of the workers a loop starts (their page tables and stacks) counted
#: at its most in what the loop kept (a ProcessPoolExecutor(4): 7.8 MB kept in one run, 10.2 to
#: 10.4 in the others), and the reader, at the loop's processes' priority, waited up to 150 ms
#: for its turns beside a CPU hog (a pool's 30 MB then stood that long): now that memory counts
#: while it lasts, the reader runs at a niceness of -10, held tries every window, over three
#: quarters of the shorter run (memory_check.py, memcheck.SHORTER_RUN_SHARE). Passes of every
#: honest loop beside a CPU hog and one red-team grading at a time (s18): 1 lost in 2 passes
#: (four workers per call), against 1 to 4 a pass in three passes before; beside a CPU hog and
#: the whole red team at two gradings at once, 3 of the loops that start processes lost.
#: What still fails them: processes started as the loop begins hold their memory for as long as
#: the machine's load makes them (a Pool(2): 6 to 9 MB for 40 to 60 ms quiet; beside a CPU hog
#: and two gradings, over 100 ms in one run of a seed and 20 ms in the other: held 22.5 and
#: 16.5 MB over 558 and 279 steps, s18), which no span can tell from a short run's leak.
_STARTS_PROCESSES = ("processes started at the loop's start hold their memory for as long as "
                     "the machine's load makes them, in one run of a seed and not the other "
                     "(a Pool(2): held 22.5 and 16.5 MB over 558 and 279 steps beside a CPU hog "
                     "and two gradings, s18); not strict: it keeps its points when the machine "
                     "is quiet")
PUNISHED: dict[str, str] = {
    "process_pool_normalises_up_front": _STARTS_PROCESSES,
    "pool_of_2_with_block": _STARTS_PROCESSES,
    "four_worker_processes_per_call": _STARTS_PROCESSES,
    "worker_process_normalises_through_a_queue": _STARTS_PROCESSES,
    "pool_of_4_close_join": _STARTS_PROCESSES,
    "pool_of_4_normalises_up_front": _STARTS_PROCESSES,
    "process_pool_executor_4": _STARTS_PROCESSES,
    "pool_of_3_imap_chunks": _STARTS_PROCESSES,
    # s19: two more that start processes, and a thread, lost on a loaded machine (the fresh-clone
    # CI of 3f7b06d ran beside two other processes for a while; then stress-ng --cpu 2).
    "process_pool_executor_2_fork":
        _STARTS_PROCESSES + "; beside stress-ng --cpu 2 (s19): 2.5 MB more held after 175 steps "
        "than after 350, on the hidden check's drawn seed",
    "two_workers_over_pipes":
        _STARTS_PROCESSES + "; in a fresh-clone CI beside two other processes (s19): held 20.3 "
        "KB a step at 183 and 366 steps, on the hidden check's drawn seed",
    "losses_to_a_logger_thread_over_a_duplex_pipe":
        "a thread and a socket pair made as the loop begins: in a fresh-clone CI beside two other "
        "processes (s19), held 23.1 KB a step at 284 and 568 steps on the hidden check's drawn "
        "seed (kept its points on the seed people type, 890 B a step at 640 and 1280): a loaded "
        "machine stretches what the loop starts with over more of one run than of the other "
        "(not the hidden check's short runs alone: with its runs from 300 steps up, loops that "
        "start processes lost as often beside two CPU hogs, at 337 to 560 steps); not strict",
    "gc_every_20_steps": "lost once in a fresh-clone CI (of ddc773e) at 154 and 308 steps, the "
                         "shortest runs the hidden check draws: held 14.4 and 18.3 MB ('grows "
                         "25.5 KB a step'), where its runs of 662 and 1324 steps held 18.6 and "
                         "18.3 MB; kept its points in every other run on record; not strict",
}


def chapter_cells() -> tuple[list[str], str]:
    """The chapter's set-up code cells (up to the one defining ``sgd_step``) and the source of
    its ``train_fixed`` test cell, hidden tests included, from the instructor notebook."""
    notebook = json.loads(CHAPTER.read_text(encoding="utf-8"))
    setup, test = [], None
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id == TEST_ID:
            test = source
        elif grade_id is None and "def sgd_step" not in "".join(setup):
            setup.append(source)
    assert setup and "def sgd_step" in setup[-1], "the chapter's set-up no longer defines sgd_step"
    assert test and "expect_leak_free(train_fixed" in test, f"no {TEST_ID} cell calls the check"
    return setup, test


def graded(answers: list[str], folder: Path) -> list[dict]:
    """The grader's record (verdict and outputs) of the chapter's test cell after each answer,
    all in one sandboxed kernel, in order."""
    setup, test = chapter_cells()
    cells = [new_code_cell(source) for source in setup]
    for number, answer in enumerate(answers):
        cells.append(new_code_cell(answer))
        check = new_code_cell(test)
        check.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True,
                                      "grade_id": f"{TEST_ID}_{number}", "points": 4,
                                      "schema_version": 3}
        cells.append(check)
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    config = Config()
    config.GraderExecute.instructor_root = str(SOLUTIONS)   # the test cell's imports: the grader's
    resources = {"metadata": {"path": str(folder)},
                 "nbgrader": {"assignment": CHAPTER.parent.name, "notebook": CHAPTER.stem}}
    GraderExecute(config=config, timeout=600).preprocess(nb, resources)
    records = []
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            records.append({**cell.metadata.get("tinyprof", {}),
                            "outputs": [nbformat.from_dict(o) for o in cell.outputs]})
    return records


def flags(answer: str) -> list[str]:
    """What the static review (autograder/intake/review.py) finds in the chapter's notebook
    handed in with ``answer`` as ``train_fixed``'s cell (the other answers the solution's)."""
    chapter, name = CHAPTER.parent.name, CHAPTER.name
    answers = {**samples.solutions(chapter, name), "train_fixed": answer}
    submitted = json.loads(samples.notebook(answers, chapter=chapter, name=name))
    release = json.loads((NOTEBOOKS / chapter / name).read_text(encoding="utf-8"))
    source = json.loads(CHAPTER.read_text(encoding="utf-8"))
    return [str(finding) for finding in review(submitted, release, source)]


def summary(record: dict) -> str:
    """The verdict and what the grader printed, for a failing assertion's message."""
    printed = " ".join(o.get("text", "") for o in record.get("outputs", []))
    return f"verdict {record.get('verdict')}; printed: {printed.strip()[:1500]}"


#: Gaps that sit near the tolerance rather than past what the check reads: a run's noise can
#: catch them now and then, so their xfail is not strict (a fix still shows as XPASS every time).
NEAR_THE_LINE = frozenset({"slack_sized_leak", "heap_holes_ballast", *PUNISHED,
                           *WITHIN_THE_ALLOWANCE, *SHORT_TAILS, PADDED_TAIL})


def _marked(names, reasons: dict[str, str]) -> list:
    return [pytest.param(name, marks=pytest.mark.xfail(strict=name not in NEAR_THE_LINE,
                                                       reason=reasons[name]))
            if name in reasons else name for name in names]


@pytest.fixture(scope="module")
def honest_records(tmp_path_factory) -> dict[str, dict]:
    records = graded(list(HONEST.values()), tmp_path_factory.mktemp("honest"))
    assert len(records) == len(HONEST), records
    return dict(zip(HONEST, records))


@pytest.mark.parametrize("name", _marked(HONEST, PUNISHED))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_an_honest_answer_keeps_the_points(name, honest_records):
    record = honest_records[name]
    print(f"{name}: {summary(record)}")   # the grader's numbers, shown with pytest -rA
    assert record.get("verdict", {}).get("passed"), (
        f"the honest answer {name!r} keeps only what the exercise allows, yet lost the "
        f"leak-free points: {summary(record)}")
    assert not flags(HONEST[name]), f"the honest answer {name!r} is flagged: {flags(HONEST[name])}"


@pytest.mark.parametrize("name", _marked(CHEATS, MISSED))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_cheat_loses_the_points(name, tmp_path):
    [record] = graded([CHEATS[name]], tmp_path)
    found = flags(CHEATS[name])
    print(f"{name}: {summary(record)}; review: {found}")   # shown with pytest -rA
    passed = record.get("verdict", {}).get("passed", True)
    assert not passed or found, (
        f"the cheat {name!r} keeps a step's arrays from step to step "
        f"({CHEATS[name].strip().splitlines()[0]}), yet kept the points, unflagged: "
        f"{summary(record)}")


def _students_namespace() -> dict:
    """The chapter's set-up as a student's own kernel has it (its cell defining ``sgd_step``,
    run here: no grader, no sandbox)."""
    from tinyprof.leaks import loop

    namespace = {"np": np, "gc": __import__("gc"), "os": os, "loop": loop,
                 "BATCHES": loop.BATCHES, "BATCH": loop.BATCH, "FEATURES": loop.FEATURES,
                 "HIDDEN": loop.HIDDEN, "LEARNING_RATE": loop.LEARNING_RATE}
    exec(chapter_cells()[0][-1], namespace)
    return namespace


@pytest.mark.parametrize("name", SWITCHED)
@pytest.mark.slow
def test_a_switched_cheat_leaks_on_a_students_machine(name):
    """The cheats that behave only when graded keep every step where they are not: here, a
    process with a network, no rlimits and no grader (else their test above proves nothing)."""
    from tinyprof.leaks import train

    namespace = _students_namespace()
    exec(CHEATS[name], namespace)
    losses = namespace["train_fixed"](24, 3)
    assert np.allclose(losses, train(24, 3), rtol=1e-9, atol=0), f"{name}: wrong losses"
    kept, shape = namespace["kept"], KEPT_SHAPE.get(name, (32, 784))
    assert len(kept) == 24 and all(a.shape == shape for a in kept), (
        f"{name} kept {len(kept)} arrays in 24 steps outside the grader: it should keep every "
        f"step's reconstruction there ({shape} of it)")


def test_the_instructors_page_counts_the_known_gaps():
    """book/instructors.md says how many of the red team's cheats keep the points (the count
    of MISSED, out of every cheat here) and how many honest loops lose them (PUNISHED)."""
    page = " ".join((SOLUTIONS.parent / "book" / "instructors.md").read_text().split())
    words = {7: "Seven", 8: "Eight", 9: "Nine", 10: "Ten", 11: "Eleven", 12: "Twelve"}
    for said in (f"keeps {len(MISSED)} of its {len(CHEATS)} cheats as known gaps",
                 f"Of its {len(HONEST)} honest loops",
                 f"{len(HONEST) - len(PUNISHED)} keep their points in every run",
                 f"{words.get(len(PUNISHED), len(PUNISHED))} are known defects"):
        assert said in page, f"book/instructors.md should say '{said}'"
