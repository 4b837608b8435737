"""The sample cohort through real nbgrader: ``python -m autograder demo`` once with two jobs (every
hardening case, the LMS zip), then the same zip graded serially, killed with SIGKILL mid-run and
resumed. The serial grades must equal the parallel ones, nothing may be lost or graded twice,
and no worker or kernel may outlive the killed grader.

Short limits keep it fast and safe: 5 s per cell, 512 MB per kernel (the memory bomb asks for
3 GiB).
"""

from __future__ import annotations

import csv
import html
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from chapters import REPO

from autograder import samples
from autograder.kernel import resources

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.cohort]

LIMITS = ["--timeout", "5", "--memory", "512"]
#: What the notes say of the memory bomb: the kernel stopped by its control group, or (where
#: there is none) the data rlimit's MemoryError.
MEMORY_NOTE = ("test cell test_parameter_memory_bytes: the kernel died here (SIGKILL: killed, "
               "typically for using too much memory) (a notebook may use at most 512 MB"
               if resources.backend() is not None else
               "test cell test_parameter_memory_bytes: ran out of memory (")
TESTS = ["test_linear_params", "test_conv2d_params", "test_attention_params",
         "test_count_model_parameters", "test_parameter_memory_bytes"]

#: student → (tests that must score 0, fragments that must be among the grader's notes)
GRADED = {
    "lovelaceada": (set(), []),
    "hoppergrace": (set(TESTS), []),
    "turingalan": ({"test_linear_params", "test_parameter_memory_bytes"},
                   ["1 other file(s) for this notebook were handed in; graded the newest"]),
    "babbagecharles": ({"test_conv2d_params"}, [
        "test cell test_conv2d_params: used more than the 5 s of CPU time a cell may use (an "
        "endless loop?) and was interrupted"]),
    "knuthdonald": ({"test_attention_params"}, [
        # stopped by its CPU time, or on a loaded machine by the wall-clock backstop first
        "interrupt; the kernel was restarted and the notebook run again without this cell"]),
    "liskovbarbara": ({"test_parameter_memory_bytes"}, [
        # stopped by the kernel's memory group (no rlimit of memory under a group: the sandbox's
        # limits would tell it apart), or by the data rlimit where there is no group
        MEMORY_NOTE]),
    "ritchiedennis": ({"test_linear_params"}, [
        "answer cell linear_params: the kernel died here (it exited with status 3"]),
    "thompsonken": (set(), [
        "answer cell count_model_parameters: called sys.exit(); that stopped this cell only"]),
    "kernighanbrian": ({"test_conv2d_params"}, [
        "test cell test_conv2d_params: the kernel died here (SIGSEGV: a crash"]),
    "hamiltonmargaret": ({"test_linear_params"}, [
        "test cell test_linear_params had been edited: the original (with its hidden tests) was "
        "restored", "test cell test_conv2d_params had been deleted: it was restored from the "
        "gradebook and graded"]),
    "perlmanradia": ({"test_attention_params"}, [
        "answer cell attention_params had been deleted: its tests ran against whatever the rest "
        "of the notebook defines"]),
    "dijkstraedsger": (set(), [
        "answer cell count_model_parameters: this cell printed 5,000,001 characters; only the "
        "first 100,000 were kept"]),
    "allenfrances": (set(), []),
    "李雷": ({"test_linear_params", "test_parameter_memory_bytes"}, [
        "handed in as 'Untitled1.ipynb'; recognised as 01_parameters/parameters.ipynb by its "
        "graded cells"]),
    "Zoë Ñúñez": (set(), []),
    "wozniaksteve": ({"test_count_model_parameters"}, [
        "test cell test_count_model_parameters: the function under test called tinyprof's own "
        "implementation, which the hidden tests switch off: no points for this test"]),
}
UNREADABLE = {
    "bernerslee": "corrupt notebook: invalid JSON (",
    "goldbergadele": "the file is empty",
    "mccarthyjohn": "not a notebook: plain text starting 'def linear_params(",
}
UNMAPPED = [
    "submissions.zip:parameters.ipynb: cannot tell whose 01_parameters work this is",
    "submissions.zip:wozniaksteve_1021_5021_report.pdf: not a notebook: a .pdf file",
    "submissions.zip:turingalan_1002_5002_parameters.ipynb: superseded by "
    "submissions.zip:turingalan_LATE_1002_5102_parameters-1.ipynb",
]


@dataclass
class Graded:
    out: Path
    rows: dict[str, dict]
    problems: list[str]
    text: str

    def feedback(self, student: str) -> str:
        page = self.out / "feedback" / student / samples.CHAPTER / "parameters.html"
        return html.unescape(page.read_text(encoding="utf-8"))


def _read(out: Path, text: str = "") -> Graded:
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    problems = (out / "problems.txt").read_text(encoding="utf-8").splitlines()
    return Graded(out, rows, problems, text)


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "autograder", *args, *LIMITS]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Graded:
    out = tmp_path_factory.mktemp("demo")
    run = subprocess.run(_command("demo", "--out", str(out), "--jobs", "2"), cwd=REPO,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return _read(out / "graded", run.stdout)


def test_demo_grades_the_sample_cohort_and_prints_the_summary(demo):
    assert "19 submission(s) of 19 student(s)" in demo.text
    assert "01_parameters: 16 graded, mean autograded score" in demo.text
    assert "3 unreadable" in demo.text
    assert sorted(demo.rows) == sorted([*GRADED, *UNREADABLE])
    every_file = {s.filename for s in samples.SAMPLES}
    accounted = {part.removeprefix("submissions.zip:") for row in demo.rows.values()
                 for part in row["submitted"].split(", ")}
    accounted |= {p.split(": ")[0].removeprefix("submissions.zip:") for p in demo.problems
                  if p.startswith("submissions.zip:")}
    assert accounted == every_file, "every file is graded or listed, none dropped"


@pytest.mark.parametrize("student", sorted(GRADED))
def test_each_case_is_graded_with_its_message(demo, student):
    zeroed, fragments = GRADED[student]
    row = demo.rows[student]
    assert row["status"] == "graded"
    assert {t: float(row[t]) for t in TESTS} == {t: 0.0 if t in zeroed else 2.0 for t in TESTS}
    assert float(row["auto_score"]) == 2 * (len(TESTS) - len(zeroed))
    notes = row["notes"]
    for fragment in fragments:
        assert fragment in notes, f"{student}: {fragment!r} not in {notes!r}"
    assert bool(notes) == bool(fragments), f"{student}: unexpected notes {notes!r}"
    page = demo.feedback(student)
    for note in filter(None, notes.split(" | ")):
        assert note in page, f"{student}: feedback page lacks {note!r}"
        assert f"{student}/01_parameters: {note}" in demo.problems


@pytest.mark.parametrize("student", sorted(UNREADABLE))
def test_unreadable_files_get_a_row_a_page_and_a_line(demo, student):
    row = demo.rows[student]
    assert (row["status"], row["score"], row["max_score"]) == ("unreadable", "0", "12")
    assert row["notes"].startswith(UNREADABLE[student])
    assert UNREADABLE[student] in demo.feedback(student)
    assert any(p.startswith(f"{student}/01_parameters: {UNREADABLE[student]}")
               for p in demo.problems)


def test_unmapped_and_superseded_files_are_listed(demo):
    for line in UNMAPPED:
        assert any(p.startswith(line) for p in demo.problems), line


def test_lms_details_and_a_small_feedback_page_despite_5_mb_of_output(demo):
    assert (demo.rows["turingalan"]["late"], demo.rows["turingalan"]["lms_id"]) == ("yes", "1002")
    assert demo.rows["Zoë Ñúñez"]["lms_id"] == "2001"
    assert demo.rows["lovelaceada"]["needs_manual_grade"] == "yes"
    spam = demo.out / "feedback" / "dijkstraedsger" / "01_parameters" / "parameters.html"
    plain = demo.out / "feedback" / "lovelaceada" / "01_parameters" / "parameters.html"
    assert spam.stat().st_size - plain.stat().st_size < 150_000


def test_the_gradebook_holds_each_graded_submission_once(demo):
    with sqlite3.connect(demo.out / "gradebook.db") as db:
        students = sorted(r[0] for r in db.execute("select student_id from submitted_assignment"))
        ids = dict(db.execute("select id, lms_user_id from student"))
    assert students == sorted(s for s, row in demo.rows.items() if row["status"] == "graded")
    assert ids["wozniaksteve"] == "1021"


def test_the_demo_ends_with_an_export_into_a_canvas_gradebook(demo):
    assert "Canvas gradebook canvas_gradebook.csv, column 'Parameters (48213)': " in demo.text
    assert "  ? Zoë Ñúñez (2001): score 10, a Moodle submission" in demo.text
    with open(demo.out.parent / "export" / "canvas_gradebook.csv", newline="",
              encoding="utf-8-sig") as handle:
        cells = {row["ID"]: row["Parameters (48213)"] for row in csv.DictReader(handle)}
    assert cells.pop("1099") == ""   # never submitted: the cell stays as it was
    rows = {row["lms_id"]: row for row in demo.rows.values() if row["lms_id"] != "2001"}
    assert set(cells) - {""} == set(rows)
    for uid, row in rows.items():
        clean = row["status"] == "graded" and not row["flagged"]
        assert cells[uid] == (row["score"] if clean else ""), (row["student"], cells[uid])
        if not clean:
            assert f"  ! {row['student']} ({uid}): " in demo.text


# --- the same cohort, serially, killed with SIGKILL and resumed --------------------------------

def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.endswith("}")]


def _leftovers(out: Path, parent: int) -> list[str]:
    """Processes working under ``out`` (kernels, workers) or started by the dead ``parent``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if cwd.startswith(str(out)) or f"autograder.dispatch.worker {parent}" in command:
            found.append(f"{proc.name}: {command[:120]}")
    return found


def _socket_folders(folder: Path) -> set[Path]:
    return set(folder.glob("tinyprof-kernel-*"))


def _owner(folder: Path) -> tuple[str, str]:
    """(/proc state or "gone", command) of the process a socket folder is named after."""
    pid = folder.name.removeprefix("tinyprof-kernel-").split("-", 1)[0]
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "gone", ""
    return stat.rpartition(")")[2].split()[0], command[:80]


@dataclass
class Resumed:
    graded: Graded
    before_kill: list[str]
    leftovers: list[str]
    journal: list[dict]
    sockets_left: set[Path]   # socket folders of the killed run still there after the resumed
    owners: dict[Path, tuple[str, str]]   # their owners when the resumed run started


@pytest.fixture(scope="module")
def resumed(demo, tmp_path_factory) -> Resumed:
    out = tmp_path_factory.mktemp("serial")
    private_tmp = tmp_path_factory.mktemp("tmp")   # socket folders of these runs alone
    env = dict(os.environ, TMPDIR=str(private_tmp))
    command = _command("grade", str(demo.out.parent / "submissions.zip"), "--out", str(out))
    first = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 600
    while len(_lines(out / "journal.jsonl")) < 4 and first.poll() is None:
        assert time.monotonic() < deadline, "the grader finished nothing in 10 minutes"
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = [entry["key"] for entry in _lines(out / "journal.jsonl")]
    for _ in range(150):  # PR_SET_PDEATHSIG acts at once; a loaded machine tears down slowly
        leftovers = _leftovers(out, first.pid)
        if not leftovers:
            break
        time.sleep(0.2)
    killed_runs_sockets = _socket_folders(private_tmp)
    owners = {folder: _owner(folder) for folder in killed_runs_sockets}
    second = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900,
                            env=env)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    return Resumed(_read(out, second.stdout), before, leftovers, _lines(out / "journal.jsonl"),
                   killed_runs_sockets & _socket_folders(private_tmp), owners)


def test_killing_the_grader_leaves_no_workers_or_kernels(resumed):
    assert 4 <= len(resumed.before_kill) < 16, "the kill must land mid-run"
    assert resumed.leftovers == []
    # The sweep's contract: a folder whose worker is gone (or a zombie) when the next grade
    # command starts is removed by it. A worker still running would be a leftover, above.
    orphans = {f for f, (state, _) in resumed.owners.items() if state in ("gone", "Z", "X")}
    assert orphans & resumed.sockets_left == set(), (
        "the next grade command sweeps a killed run's sockets; their owners when it started: "
        + "; ".join(f"{f.name}: {resumed.owners[f]}" for f in sorted(resumed.sockets_left)))


def test_the_resumed_run_grades_everything_once(resumed):
    keys = [entry["key"] for entry in resumed.journal]
    assert sorted(keys) == sorted(f"{s}/01_parameters" for s in GRADED), "each graded once"
    assert keys[:len(resumed.before_kill)] == resumed.before_kill
    with sqlite3.connect(resumed.graded.out / "gradebook.db") as db:
        count = db.execute("select count(*) from submitted_assignment").fetchone()[0]
    assert count == len(GRADED)


def test_serial_grades_equal_parallel_grades(demo, resumed):
    assert (resumed.graded.out / "grades.csv").read_text(encoding="utf-8") == \
        (demo.out / "grades.csv").read_text(encoding="utf-8")
    query = ("select sa.student_id, c.name, g.auto_score from grade g "
             "join base_cell c on g.cell_id = c.id join submitted_notebook sn on g.notebook_id = "
             "sn.id join submitted_assignment sa on sn.assignment_id = sa.id")
    scores = []
    for graded in (demo, resumed.graded):
        with sqlite3.connect(graded.out / "gradebook.db") as db:
            scores.append(sorted(db.execute(query).fetchall()))
    assert scores[0] == scores[1]
    assert len(scores[0]) == len(GRADED) * (len(TESTS) + 1)
