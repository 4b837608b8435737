"""Grades a student's code cannot forge (issue 19), through the real command and sandbox.

One cohort of chapter 01, graded once with ``--jobs 2``: two honest classmates and every
attack of tests/forgery.py. Hidden tests are decided by the grader (judge.py), so
an attacker who patches ``math.isclose``, returns an object equal to everything, replaces its
kernel's execution or answers the grader's requests itself gains no point; nothing the kernel
writes reaches a feedback page; each kernel is held to its memory, processes and CPU share as a
whole (resources.py); tampering is flagged. Every assertion is about the grader's side.
"""

from __future__ import annotations

import base64
import binascii
import csv
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from attacks import attack_reports
from chapters import REPO, SOLUTIONS
from forgery import (
    FD_MARK,
    FORGERIES,
    JS_LINK,
    deep_notebook,
    forgery_notebook,
)

from autograder.kernel import resources
from autograder.results.feedback import hidden_test_lines
from autograder.samples import CHAPTER, NOTEBOOK, notebook, solutions

MEMORY_MB = 512
HONEST = ("alice", "bob")
#: attacks whose own background processes can eat the CPU time of the chapter's cells: the
#: grader may then give up on the notebook ("not graded", blank score, flagged), never a point
MAY_STOP_GRADING = ("mallory-hog",)
#: attacks that also tamper, so that their row must be flagged
FLAGGED = ("isclose", "isclose-by-name", "liar-shell", "liar-module", "leaker",
           "remote-forger", "memory", "hog", "userns")
FORMULA_NAME = "=HYPERLINK(\"x.example\";\"full marks\")"   # a folder name: no slash

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.cohort, pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")]


@pytest.fixture(scope="module")
def cohort(tmp_path_factory):
    root = tmp_path_factory.mktemp("forgery")
    submissions, out = root / "submissions", root / "graded"
    students = {name: notebook(solutions()) for name in HONEST}
    students |= {f"mallory-{name}": forgery_notebook(name) for name in FORGERIES}
    students["deep"] = deep_notebook()
    for student, data in students.items():
        folder = submissions / student / CHAPTER
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_bytes(data)
    moodle = submissions / f"{FORMULA_NAME}_4242_assignsubmission_file_"   # an LMS folder name
    moodle.mkdir(parents=True)
    (moodle / NOTEBOOK).write_bytes(notebook(solutions()))
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(submissions),
                           "--out", str(out), "--jobs", "2", "--timeout", "10",
                           "--memory", str(MEMORY_MB)],
                          capture_output=True, text=True, cwd=REPO, timeout=1500)
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {"done": done, "out": out, "rows": rows,
            "grades": {row["student"]: row for row in rows}}


def _autograded(cohort, student: str) -> dict:
    path = cohort["out"] / "autograded" / student / CHAPTER / NOTEBOOK
    return json.loads(path.read_text(encoding="utf-8"))


def _page(cohort, student: str) -> str:
    return (cohort["out"] / "feedback" / student / CHAPTER / "parameters.html").read_text(
        encoding="utf-8")


def test_the_command_grades_everyone_and_a_poisoned_notebook_is_one_row(cohort):
    assert cohort["done"].returncode == 0, cohort["done"].stderr[-3000:]
    grades = cohort["grades"]
    assert grades["deep"]["status"] == "unreadable"
    assert "nested deeper than" in grades["deep"]["notes"]
    for student, row in grades.items():
        expected = {"unreadable"} if student == "deep" else \
            {"graded", "not graded"} if student in MAY_STOP_GRADING else {"graded"}
        assert row["status"] in expected, (student, row["status"], row["notes"])


@pytest.mark.parametrize("attack", sorted(FORGERIES))
def test_no_attack_gains_a_point(cohort, attack):
    row = cohort["grades"][f"mallory-{attack}"]
    fair = FORGERIES[attack][2]
    score = float(row["auto_score"] or 0)   # blank: not graded, no score at all
    assert score <= fair, (attack, row["auto_score"], row["notes"])
    if fair == 0:
        assert score == 0


def test_honest_classmates_keep_full_marks_unflagged(cohort):
    for student in HONEST:
        row = cohort["grades"][student]
        assert (row["status"], float(row["auto_score"]), row["flagged"]) == (
            "graded", 10.0, ""), row


@pytest.mark.parametrize("attack", FLAGGED)
def test_tampering_is_flagged(cohort, attack):
    assert cohort["grades"][f"mallory-{attack}"]["flagged"], attack


def test_a_kernel_that_fakes_its_execution_is_flagged_at_run_time(cohort):
    for attack in ("liar-shell", "liar-module"):
        flags = cohort["grades"][f"mallory-{attack}"]["flagged"]
        assert "the kernel broke the grader's protocol" in flags, (attack, flags)


def _decodings(page: str) -> list[str]:
    """The page, plus every base64 run in it decoded, plus all of it reversed."""
    texts = [page]
    for run in re.findall(r"[A-Za-z0-9+/=]{40,}", page):
        try:
            texts.append(base64.b64decode(run + "=" * (-len(run) % 4)).decode("utf-8", "replace"))
        except (binascii.Error, ValueError):
            pass
    return texts + [text[::-1] for text in texts]


def test_no_hidden_test_reaches_any_feedback_page_in_any_encoding(cohort):
    hidden = hidden_test_lines(SOLUTIONS / CHAPTER / NOTEBOOK)
    assert len(hidden) > 10
    for student in cohort["grades"]:
        page = cohort["out"] / "feedback" / student / CHAPTER / "parameters.html"
        if not page.exists():
            continue
        for text in _decodings(html.unescape(page.read_text(encoding="utf-8"))):
            found = [line for line in hidden if line in text]
            assert not found, (student, found[:3])


def test_feedback_shows_the_submitted_notebook_not_what_the_kernel_printed(cohort):
    graded = _autograded(cohort, "mallory-leaker")
    printed = ["".join(o.get("text", "")) for c in graded["cells"] if c.get("id") == "student-extra"
               for o in c.get("outputs", [])]
    lines = [line for text in printed for line in text.splitlines() if len(line) > 20]
    assert lines, "the leaker's cell printed nothing while graded"
    page = html.unescape(_page(cohort, "mallory-leaker"))
    assert not [line for line in lines if line in page]
    assert "raised ValueError" in page              # the grader's sentence for each test
    shown = re.findall(r"output_stream[^>]*>\s*<pre>(.*?)</pre>",
                       _page(cohort, "mallory-liar-shell"), flags=re.S)
    assert not [text for text in shown if "all visible tests pass" in text]


def test_javascript_links_are_inert(cohort):
    page = _page(cohort, "mallory-js-link")
    assert not re.search(r"href\s*=\s*[\"']?\s*javascript:", page, flags=re.I), \
        "a javascript: link survived"
    assert not [href for href in re.findall(r"href=\"([^\"]*)\"", page) if "FORGED" in href]
    assert JS_LINK.split(":")[1][:10] in html.unescape(page) or "my notes" in page


def test_kernels_write_nothing_into_the_grader_logs(cohort):
    report = attack_reports(_autograded(cohort, "mallory-descriptors"))["descriptors"]
    assert report["written"], report   # it wrote: into its own /dev/null, nowhere else
    for log in (cohort["out"] / "work").glob("worker-*.log"):
        assert FD_MARK not in log.read_text(encoding="utf-8", errors="replace"), log.name


@pytest.mark.skipif(resources.backend() is None, reason="no writable control groups (root)")
def test_memory_is_held_per_kernel_all_processes_together(cohort):
    graded = _autograded(cohort, "mallory-memory")
    peaks = [c["metadata"]["tinyprof"]["memory_peak_mb"] for c in graded["cells"]
             if "memory_peak_mb" in c.get("metadata", {}).get("tinyprof", {})]
    assert peaks and max(peaks) <= MEMORY_MB, peaks
    report = attack_reports(graded).get("memory")
    if report:   # the kernel survived the cell: what it held never passed the limit together
        assert report["held"] * 100 + report["memfd_mb"] < MEMORY_MB + 256, report


def test_a_hog_neither_slows_its_neighbour_past_its_limits_nor_keeps_running(cohort):
    if cohort["grades"]["mallory-hog"]["status"] == "graded":
        assert attack_reports(_autograded(cohort, "mallory-hog"))["hog"]["started"] <= 64
    for student in HONEST:
        assert float(cohort["grades"][student]["auto_score"]) == 10.0
    left = []
    for proc in Path("/proc").iterdir():   # anything still running from this cohort's kernels
        try:
            if proc.name.isdigit() and os.readlink(proc / "cwd").startswith(str(cohort["out"])):
                left.append(proc.name)
        except OSError:
            continue
    assert left == [], left


def test_the_socket_folder_is_capped(cohort):
    report = attack_reports(_autograded(cohort, "mallory-sockets"))["sockets"]
    assert report["folder"], "the attack found its socket folder"
    limit = 1 if os.geteuid() == 0 else 64   # a 256 KiB tmpfs as root; file-size rlimit else
    assert report["written_mb"] < limit, report


def test_no_user_namespace_inside_the_sandbox(cohort):
    report = attack_reports(_autograded(cohort, "mallory-userns"))["userns"]
    assert report == {"unshared": False, "mounted": False}


def test_spreadsheet_formulas_from_students_are_inert(cohort):
    text = (cohort["out"] / "grades.csv").read_text(encoding="utf-8")
    for row in csv.reader(text.splitlines()):
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")) or cell.startswith("'"), cell
            if cell.startswith("-"):
                float(cell)   # only the grader's own numbers may start with a minus
    assert any(row["submitted"].startswith("'=HYPERLINK") for row in cohort["rows"])
