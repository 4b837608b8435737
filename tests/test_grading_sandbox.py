"""A hostile cohort graded through the real command with the real sandbox (issue 10).

Eight students of chapter 01, graded once with ``--jobs 2``: two honest classmates, one who
handed in the blank notebook, and five
attackers (tests/attacks.py) who answer everything correctly but first try, from
their kernel, to change grades and the template, reach a neighbouring kernel, read solutions and
other submissions, get out (write outside their folder, leave a process behind, use the
network, write a huge file, fork without end, map 3 GB of shared memory) and run script in the
feedback pages. Every assertion is about the grader's side: what the command wrote, what is
left on the machine, what the pages contain.
"""

from __future__ import annotations

import csv
import html
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from attacks import (
    SCRIPT_MARK,
    SLEEPER,
    attack_notebook,
    attack_reports,
    honest_notebook,
)
from chapters import REPO, SOLUTIONS, grade_cli

from autograder.release.notebooks import solution_lines
from autograder.results.feedback import hidden_test_lines
from autograder.samples import CHAPTER, NOTEBOOK, notebook, solutions

MARKER = "tinyprof-escape-marker"
ATTACKERS = ("grades", "neighbour", "read", "escape", "html")
FULL = 10.0

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.cohort, pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")]


class Listener:
    """A TCP server on 127.0.0.1 that records every connection (none should come)."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.running = False
        self.thread.join(2)
        self.server.close()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    submissions, out, home = root / "submissions", root / "graded", root / "home"
    home.mkdir()
    listener = Listener()
    import tinyprof

    targets = {"out": str(out), "repo": str(REPO), "home": str(home), "tmp": "/tmp",
               "package": str(Path(tinyprof.__file__).parent), "port": listener.port,
               "marker": MARKER}
    students = {"alice": honest_notebook(), "bob": honest_notebook(), "carol": notebook({})}
    students |= {f"mallory-{name}": attack_notebook(name, targets) for name in ATTACKERS}
    for student, data in students.items():
        folder = submissions / student / CHAPTER
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_bytes(data)
    private_tmp = root / "tmp"   # the grader's socket folders go here, apart from any other's
    private_tmp.mkdir()
    env = dict(os.environ, HOME=str(home), TMPDIR=str(private_tmp))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions),
                           "--out", str(out), "--jobs", "2", "--timeout", "30"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=900)
    seconds = time.perf_counter() - start
    time.sleep(16)  # the "grades" attack's detached writer would strike 15 s after its start
    listener.close()
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        grades = {row["student"]: row for row in csv.DictReader(handle)}
    yield {"done": done, "out": out, "grades": grades, "listener": listener,
           "targets": targets, "seconds": seconds, "home": home,
           "sockets_left": set(private_tmp.glob("tinyprof-kernel-*"))}


def _report(hostile, student: str) -> dict:
    path = hostile["out"] / "autograded" / student / CHAPTER / NOTEBOOK
    return attack_reports(json.loads(path.read_text(encoding="utf-8")))


def _feedback(hostile, student: str) -> str:
    page = hostile["out"] / "feedback" / student / CHAPTER / NOTEBOOK.replace(".ipynb", ".html")
    return page.read_text(encoding="utf-8")


def test_the_command_grades_everyone_in_the_sandbox(hostile):
    assert hostile["done"].returncode == 0, hostile["done"].stderr[-3000:]
    grades = hostile["grades"]
    assert set(grades) == {"alice", "bob", "carol"} | {f"mallory-{a}" for a in ATTACKERS}
    for row in grades.values():
        assert row["status"] == "graded"
        assert row["sandbox"].startswith("bubblewrap"), row["sandbox"]
    assert "kernels ran in: bubblewrap" in hostile["done"].stdout


def test_classmates_keep_their_grades_and_attackers_gain_nothing(hostile):
    grades = hostile["grades"]
    assert float(grades["alice"]["auto_score"]) == float(grades["bob"]["auto_score"]) == FULL
    for attack in ATTACKERS:
        assert float(grades[f"mallory-{attack}"]["auto_score"]) <= FULL
    # the gradebook read back by the command agrees: no UPDATE or trigger reached it
    import sqlite3

    with sqlite3.connect(hostile["out"] / "gradebook.db") as db:
        triggers = db.execute("select name from sqlite_master where type='trigger'").fetchall()
    assert triggers == []
    text = (hostile["out"] / "grades.csv").read_text(encoding="utf-8")
    assert "1000" not in text and "pwned" not in text   # nor the detached writer, 15 s later


def test_no_grading_file_was_visible_from_a_kernel(hostile):
    report = _report(hostile, "mallory-grades")["grades"]
    assert report == {"found": [], "changed": []}
    for student in ("alice", "bob"):
        assert "0 points</h1>" not in _feedback(hostile, student)


def test_neighbouring_kernels_cannot_reach_each_other(hostile):
    report = _report(hostile, "mallory-neighbour")["neighbour"]
    assert report["connected"] == [] and report["other_kernels"] == []


def test_nothing_of_the_course_or_other_students_can_be_read(hostile):
    report = _report(hostile, "mallory-read")["read"]
    assert [p for p in report["read"] if not p.startswith("/proc/")] == []
    assert not any("cmdline" in p and "bob" in p for p in report["read"])
    source = SOLUTIONS / CHAPTER / NOTEBOOK
    hidden = hidden_test_lines(source)
    for student in hostile["grades"]:
        page = html.unescape(_feedback(hostile, student))
        shown = {line.strip() for line in page.splitlines()}
        assert not hidden & shown, (student, sorted(hidden & shown)[:3])
        assert "BEGIN HIDDEN" not in page and "BEGIN SOLUTION" not in page
    # a student who answered nothing sees no solution either (the others see their own answers)
    blank = {line.strip() for line in html.unescape(_feedback(hostile, "carol")).splitlines()}
    assert not solution_lines(source) & blank


def test_nothing_gets_out(hostile):
    report = _report(hostile, "mallory-escape")["escape"]
    targets = hostile["targets"]
    for folder in ("home", "tmp", "repo", "package", "out"):
        assert not (Path(targets[folder]) / MARKER).exists(), folder
    for folder in (REPO / "autograder", REPO / "solutions"):
        assert not (folder / MARKER).exists()
    assert hostile["listener"].connections == 0 and report["network"] is False
    assert report["big_file_mb"] <= 64            # file size and scratch space are capped
    assert report["mapped_3gb"] is False          # shared memory counts against the cap
    #                                               (the group's, or the address-space rlimit)
    assert 0 < report["forked"] < 100             # the process cap stopped the fork loop
    survivors = subprocess.run(["pgrep", "-f", SLEEPER], capture_output=True, text=True)
    assert survivors.stdout.strip() == "", "a detached process outlived its kernel"
    assert not hostile["sockets_left"], "socket folders left behind"


def test_student_html_and_script_are_inert_in_feedback(hostile):
    page = _feedback(hostile, "mallory-html")
    assert SCRIPT_MARK in page                       # the student's text is shown, inert
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.S)
    assert not [s for s in scripts if SCRIPT_MARK in s], "student script runs in the page"
    assert not re.search(r"<[a-zA-Z]+[^>]*\son[a-z]+\s*=", page), "an event handler survived"
    assert not re.search(r"href=[\"']?javascript:", page), "a javascript: link survived"


def test_attackers_are_flagged_for_review(hostile):
    grades = hostile["grades"]
    assert grades["alice"]["flagged"] == grades["bob"]["flagged"] == ""
    for attack in ("grades", "neighbour", "escape"):
        assert grades[f"mallory-{attack}"]["flagged"], attack


#: A cell that raises only where its file is missing (the student's machine has it), and one
#: that raises an exception of a class of its own, whose name the grader never repeats.
MISSING_FILE = 'measured = open("my_measurements.csv").read()'
OWN_CLASS = ("class Seen_4242_while_graded(Exception):\n    pass\n\n"
             "raise Seen_4242_while_graded()")


def _with_cells(*sources: str):
    """An edit of a notebook's cells (samples.notebook): ``sources`` as plain code cells
    after the first code cell that is neither an answer nor a test (the chapter's set-up)."""
    def edit(cells: list[dict]) -> None:
        at = next(i for i, cell in enumerate(cells) if cell["cell_type"] == "code"
                  and not cell["metadata"].get("nbgrader", {}).get("grade"))
        for offset, text in enumerate(sources, 1):
            cells.insert(at + offset, {"cell_type": "code", "execution_count": None,
                                       "metadata": {}, "outputs": [], "source": text})
    return edit


@pytest.fixture(scope="module")
def course_code(tmp_path_factory):
    """Chapter 09's solution (its process workers and DataLoader workers) and a chapter-01
    solution with two cells that raise, graded by the real command in the real sandbox."""
    root = tmp_path_factory.mktemp("course-code")
    pipeline = ("09_pipeline", "pipeline.ipynb")
    handed_in = {("ada", *pipeline): notebook(solutions(*pipeline), chapter=pipeline[0],
                                              name=pipeline[1]),
                 ("bo", CHAPTER, NOTEBOOK): notebook(solutions(), _with_cells(MISSING_FILE,
                                                                              OWN_CLASS))}
    for (student, chapter, name), data in handed_in.items():
        folder = root / "in" / student / chapter
        folder.mkdir(parents=True)
        (folder / name).write_bytes(data)
    start = time.perf_counter()
    rows, printed = grade_cli(root / "in", root / "out")
    return {"rows": {row["student"]: row for row in rows}, "printed": printed,
            "out": root / "out", "seconds": time.perf_counter() - start}


def _graded_errors(out: Path, student: str, chapter: str, name: str, tests: bool) -> list[str]:
    """The error outputs of the graded notebook's test cells (the grader's verdicts), or of
    its other cells (what the kernel raised)."""
    from autograder.cells import is_test

    graded = json.loads((out / "autograded" / student / chapter / name).read_text())
    return [f"cell {number}: {o['ename']}: {o['evalue']}"
            for number, cell in enumerate(graded["cells"], 1) if is_test(cell) == tests
            for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def test_chapter_09s_solution_raises_in_no_cell_in_the_sandbox(course_code):
    """§9.6's process workers and §9.8's DataLoader workers need /dev/shm (multiprocessing's
    locks): the solution graded in the sandbox raises nowhere, has full marks and no note."""
    ada = course_code["rows"]["ada"]
    graded = (course_code["out"], "ada", "09_pipeline", "pipeline.ipynb")
    errors = _graded_errors(*graded, tests=False)
    assert errors == [], f"cells of chapter 09's solution raised when graded: {errors}"
    assert (ada["status"], ada["auto_score"], ada["max_auto_score"]) == ("graded", "11", "11"), \
        f"the solution lost points: {_graded_errors(*graded, tests=True)}"
    assert ada["notes"] == "" and ada["flagged"] == "", (ada["notes"], ada["flagged"])
    assert "ada/09_pipeline" not in course_code["printed"], course_code["printed"]


def test_cells_that_raised_when_graded_are_said_never_a_silent_full_score(course_code):
    """The tests still give their points (a note, not a change of score), but the row, the
    summary and the student's page say which cells raised, naming Python's own exceptions and
    nothing the notebook chose."""
    bo = course_code["rows"]["bo"]
    assert (bo["status"], bo["auto_score"]) == ("graded", "10"), bo
    assert "cells 3 and 4: raised when the grader ran the notebook (FileNotFoundError, an " \
           "exception of the notebook's own)" in bo["notes"], bo["notes"]
    assert "Seen_4242" not in bo["notes"] and "my_measurements" not in bo["notes"]
    said = f"bo/{CHAPTER}: cells 3 and 4: raised when the grader ran the notebook"
    assert said in course_code["printed"], course_code["printed"]
    page = html.unescape((course_code["out"] / "feedback" / "bo" / CHAPTER /
                          NOTEBOOK.replace(".ipynb", ".html")).read_text(encoding="utf-8"))
    notes = page[page.index('id="grader-notes"'):page.index("</div>", page.index("grader-notes"))]
    assert "cells 3 and 4: raised when the grader ran the notebook" in notes, notes
    assert "Seen_4242" not in notes
