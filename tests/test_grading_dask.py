"""Grading on a real Dask cluster on 127.0.0.1: a ``dask scheduler`` and ``dask worker``
processes started here (bounded in time, stopped by the fixtures), the grader's
``--scheduler`` pointed at them.

1. A hostile cohort (demo samples, forged verdicts, a kernel reading the course) graded with
   ``--jobs 1`` on this machine, and through two workers, one of them killed (with its grading
   processes and kernels) while it grades a notebook, beside a third worker that cannot start
   the sandbox: the same grades, every submission merged exactly once, each row naming the
   worker that graded it, the refusal and its reason in the summary.
2. The instructor's command stopped (its graders on the worker stop with it), then the
   scheduler killed mid-run (a clear error), then the same command against a new scheduler:
   the cohort finished, nothing graded twice.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from attacks import attack_notebook, attack_reports
from chapters import REPO
from forgery import FORGERIES, forgery_notebook

from autograder import records, samples
from autograder.dispatch.cluster import Cluster, parse_scheduler
from autograder.dispatch.dask_worker import MAX_RETURN_BYTES
from autograder.kernel.isolation import find_bwrap

pytest.importorskip("distributed")
try:
    find_bwrap()
    HAVE_BWRAP = True
except RuntimeError:
    HAVE_BWRAP = False
pytestmark = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap is not installed")

LIMITS = ["--timeout", "5", "--memory", "512"]
#: Demo samples (autograder/samples): solved, untouched, an endless loop, os._exit, edited
#: tests, a corrupt file.
DEMO = ("lovelaceada", "hoppergrace", "babbagecharles", "ritchiedennis", "hamiltonmargaret",
        "bernerslee")
FORGED = ("isclose", "remote-forger")
START_S = 90   # for a scheduler or worker to come up on a busy machine


@dataclass
class Dask:
    """A scheduler and workers, each ``python -m dask ...`` from the repository (as
    book/instructors.md starts them), in a process group of its own."""

    folder: Path
    processes: list[subprocess.Popen] = field(default_factory=list)
    address: str = ""

    def start_scheduler(self) -> str:
        info = self.folder / f"scheduler-{uuid.uuid4().hex[:8]}.json"
        self._start([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1",
                     "--port", "0", "--no-dashboard", "--scheduler-file", str(info)], "scheduler")
        deadline = time.monotonic() + START_S
        while not info.exists() or not info.read_text().strip():
            assert time.monotonic() < deadline, "the Dask scheduler did not start"
            time.sleep(0.2)
        self.address = json.loads(info.read_text())["address"]
        return self.address

    def start_worker(self, name: str, env: dict | None = None) -> subprocess.Popen:
        return self._start([sys.executable, "-m", "dask", "worker", self.address, "--name", name,
                            "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"],
                           name, env)

    def wait_for(self, count: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=START_S) as client:
            client.wait_for_workers(count, timeout=START_S)

    def _start(self, command: list[str], name: str, env: dict | None = None) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "a")  # noqa: SIM115 - the process keeps it
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                   env=env, start_new_session=True)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.processes):
            kill(process)


def kill(process: subprocess.Popen, how: int = signal.SIGKILL) -> None:
    try:
        os.killpg(process.pid, how)
    except ProcessLookupError:
        pass
    process.wait(timeout=60)


def _tree() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, command line) of every process."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text().rpartition(")")[2].split()
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            found[int(proc.name)] = (int(stat[1]), command)
    return found


def _below(worker: subprocess.Popen) -> dict[int, str]:
    """pid → command line of every process under a ``dask worker`` (its worker process, its
    grading processes, their sandboxes and kernels)."""
    tree = _tree()
    return {pid: command for pid, (_, command) in tree.items() if _ancestor(worker.pid, pid, tree)}


def _busy_graders(worker: subprocess.Popen) -> list[list[str]]:
    """For each grading process (autograder.dispatch.worker) under ``worker`` that is running a
    notebook, the command lines below it."""
    tree = _tree()
    graders = [pid for pid, (_, command) in tree.items()
               if "-m autograder.dispatch.worker" in command and _ancestor(worker.pid, pid, tree)]
    below = [[command for child, (_, command) in tree.items() if _ancestor(pid, child, tree)]
             for pid in graders]
    return [commands for commands in below if any("ipykernel" in c for c in commands)]


def _ancestor(ancestor: int, pid: int, tree: dict) -> bool:
    while pid in tree and pid > 1:
        pid = tree[pid][0]
        if pid == ancestor:
            return True
    return False


def _cohort(path: Path, out_of_reach: Path) -> Path:
    """A Canvas zip: the DEMO samples, verdict forgeries, and a kernel that tries to read the
    course and the output folder."""
    with zipfile.ZipFile(path, "w") as archive:
        for sample in samples.SAMPLES:
            if sample.filename.split("_")[0] in DEMO and sample.filename.endswith(".ipynb"):
                archive.writestr(sample.filename, sample.build())
        for number, name in enumerate(FORGED):
            archive.writestr(f"mallory-{name}_{9100 + number}_{8100 + number}_parameters.ipynb",
                             forgery_notebook(name))
        targets = {"out": str(out_of_reach), "repo": str(REPO), "home": str(Path.home()),
                   "tmp": "/tmp", "package": str(REPO / "tinyprof"), "port": 9,
                   "marker": "dask-marker"}
        archive.writestr("mallory-read_9200_8200_parameters.ipynb",
                         attack_notebook("read", targets))
    return path


def _grades(out: Path) -> dict[str, dict]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


def _journal(out: Path) -> list[str]:
    path = out / "journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["key"] for line in path.read_text(encoding="utf-8").splitlines()
            if line.endswith("}")]


def _gradebook_count(out: Path) -> int:
    with sqlite3.connect(out / "gradebook.db") as db:
        return db.execute("select count(*) from submitted_assignment").fetchone()[0]


def _grade(submissions: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
            "--jobs", "1", *LIMITS, *extra]


@dataclass
class Killed:
    serial: Path
    dask: Path
    run: subprocess.CompletedProcess
    kernels_at_kill: list[str]
    journal_at_kill: list[str]
    leftovers: list[str]


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> Killed:
    root = tmp_path_factory.mktemp("dask")
    submissions = _cohort(root / "submissions.zip", root / "dask")
    serial = subprocess.run(_grade(submissions, root / "serial"), cwd=REPO,
                            capture_output=True, text=True, timeout=900)
    assert serial.returncode == 0, serial.stderr[-3000:]
    cluster = Dask(root)
    try:
        address = cluster.start_scheduler()
        cluster.start_worker("one")
        two = cluster.start_worker("two")
        # a worker on a machine without bubblewrap (no bwrap on its PATH)
        cluster.start_worker("nobwrap", env=dict(os.environ, PATH=str(root / "empty")))
        cluster.wait_for(3)
        grading = subprocess.Popen(_grade(submissions, root / "dask", "--scheduler", address),
                                   cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        deadline, kernels = time.monotonic() + 600, []
        while not kernels:   # a notebook is running under worker two, one at least is merged
            assert time.monotonic() < deadline and grading.poll() is None, \
                "worker two never graded a notebook"
            busy = _busy_graders(two)
            if busy and _journal(root / "dask"):
                kernels = busy[0]
            else:
                time.sleep(0.1)
        doomed = _below(two)
        at_kill = _journal(root / "dask")
        kill(two)
        stdout, stderr = grading.communicate(timeout=900)
        leftovers = [command for pid, (_, command) in _tree().items()
                     if doomed.get(pid) == command]
    finally:
        cluster.stop()
    run = subprocess.CompletedProcess(grading.args, grading.returncode, stdout, stderr)
    return Killed(root / "serial", root / "dask", run, kernels, at_kill, leftovers)


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_the_cluster_grades_like_one_machine(killed):
    assert killed.run.returncode == 0, killed.run.stdout[-2000:] + killed.run.stderr[-3000:]
    serial, dask = _grades(killed.serial), _grades(killed.dask)
    assert sorted(dask) == sorted(serial)
    assert len(serial) == len(DEMO) + len(FORGED) + 1
    for student, row in serial.items():
        other = dask[student]
        assert {k: v for k, v in other.items() if k != "worker"} == \
            {k: v for k, v in row.items() if k != "worker"}, student
        assert row["worker"] == ("local" if row["status"] == "graded" else "")
    # the forgeries gain nothing, the reader read nothing
    for name in FORGED:
        assert float(dask[f"mallory-{name}"]["auto_score"]) <= FORGERIES[name][2]
    executed = killed.dask / "autograded" / "mallory-read" / samples.CHAPTER / samples.NOTEBOOK
    read = attack_reports(json.loads(executed.read_text(encoding="utf-8")))["read"]["read"]
    assert [path for path in read if not path.startswith("/proc/")] == []


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_a_killed_worker_loses_nothing_and_nothing_is_counted_twice(killed):
    assert killed.kernels_at_kill, "worker two was killed while it ran a notebook"
    total = len(DEMO) + len(FORGED) + 1
    assert 1 <= len(killed.journal_at_kill) < total - 1, "the kill must land mid-run"
    keys = _journal(killed.dask)
    graded = [k for k, row in _grades(killed.dask).items() if row["status"] == "graded"]
    assert sorted(keys) == sorted(f"{s}/{samples.CHAPTER}" for s in graded), "each merged once"
    assert _gradebook_count(killed.dask) == len(graded)
    assert killed.leftovers == [], "its graders and kernels died with it"
    workers = {row["worker"].split(" ")[0] for row in _grades(killed.dask).values()
               if row["status"] == "graded"}
    assert workers <= {"one", "two"} and "one" in workers
    after = [k for k in keys if k not in killed.journal_at_kill]
    survivor = {k for k, row in _grades(killed.dask).items() if row["worker"].startswith("one")}
    assert any(k.split("/")[0] in survivor for k in after), "worker one took over"


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_the_summary_names_the_workers_and_the_one_that_refused(killed):
    summary = (killed.dask / "summary.txt").read_text(encoding="utf-8")
    assert "graded on " in summary and "one (tcp://127.0.0.1:" in summary
    assert "Dask worker nobwrap (tcp://127.0.0.1:" in summary
    assert "refused to grade: its sandbox cannot start: bubblewrap (bwrap) is not installed" \
        in summary
    assert not any(row["worker"].startswith("nobwrap") for row in _grades(killed.dask).values())


def _until_journal(out: Path, lines: int, grading: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while len(_journal(out)) < lines:
        assert time.monotonic() < deadline and grading.poll() is None, grading.communicate()
        time.sleep(0.1)


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_interrupted_then_the_scheduler_lost_then_resumed(tmp_path):
    """Three notebooks, one worker grading one at a time: SIGTERM to the command after the
    first (its graders on the worker stop), the scheduler killed after the second (a clear
    error), the third graded by the same command against a new scheduler."""
    submissions = tmp_path / "cohort"
    kinds = {"ada": samples.notebook(samples.solutions()), "bob": samples.notebook({}),
             "cy": samples.notebook(samples._partial())}
    for student, data in kinds.items():
        folder = submissions / student / samples.CHAPTER
        folder.mkdir(parents=True)
        (folder / samples.NOTEBOOK).write_bytes(data)
    out = tmp_path / "out"
    first, second = Dask(tmp_path), Dask(tmp_path)
    try:
        address = first.start_scheduler()
        worker = first.start_worker("first")
        first.wait_for(1)
        command = _grade(submissions, out, "--scheduler", address)
        grading = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        _until_journal(out, 1, grading)
        grading.send_signal(signal.SIGTERM)
        _, stopped = grading.communicate(timeout=120)
        assert grading.returncode == 130, stopped[-2000:]
        assert "interrupted: stopped by SIGTERM" in stopped
        deadline = time.monotonic() + 30
        while _busy_graders(worker):   # the run's graders on the worker are stopped
            assert time.monotonic() < deadline, "the worker went on grading a stopped run"
            time.sleep(0.2)
        after_stop = _journal(out)
        assert len(after_stop) == 1

        grading = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        _until_journal(out, 2, grading)
        kill(first.processes[0])   # the scheduler
        stdout, stderr = grading.communicate(timeout=300)
        assert grading.returncode == 2, stdout[-2000:] + stderr[-2000:]
        assert f"error: lost the Dask scheduler at {address}" in stderr
        assert "run the same command to grade the rest" in stderr
        kept = _journal(out)
        assert len(kept) == 2 and kept[0] == after_stop[0]
        first.stop()

        again = second.start_scheduler()
        second.start_worker("second")
        second.wait_for(1)
        rerun = subprocess.run(_grade(submissions, out, "--scheduler", again), cwd=REPO,
                               capture_output=True, text=True, timeout=600)
    finally:
        first.stop()
        second.stop()
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    keys = _journal(out)
    assert keys[:2] == kept and len(keys) == 3
    assert sorted(keys) == sorted(f"{s}/{samples.CHAPTER}" for s in kinds)
    assert _gradebook_count(out) == len(kinds)
    assert {row["student"]: row["auto_score"] for row in _grades(out).values()} == \
        {"ada": "10", "bob": "0", "cy": "6"}


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_local_workers_in_the_command_itself(tmp_path):
    """``--scheduler local:2``: a LocalCluster of two workers, each with its own graders."""
    from autograder.grade import Settings, grade

    for student, answers in {"ada": samples.solutions(), "bob": {}}.items():
        folder = tmp_path / "cohort" / student / samples.CHAPTER
        folder.mkdir(parents=True)
        (folder / samples.NOTEBOOK).write_bytes(samples.notebook(answers))
    rows, problems = grade(tmp_path / "cohort", tmp_path / "out", progress=False,
                           settings=Settings(timeout=5, memory_mb=512), scheduler="local:2")
    assert [(r.student, r.status, r.auto_score) for r in rows] == [
        ("ada", "graded", 10.0), ("bob", "graded", 0.0)]
    assert all(r.sandbox.startswith("bubblewrap") for r in rows)
    assert {r.worker.split(" ")[0] for r in rows} <= {"0", "1"}
    assert problems == []


# --- the parent's side, without a cluster ---------------------------------------------------


def _payload(tmp_path: Path) -> records.Task:
    return records.Task(key="ada/01_parameters", student="ada", assignment="01_parameters",
                        notebooks={}, work=str(tmp_path / "work" / "abc"), template="",
                        release="", timeout=5, wall_timeout=45, memory_mb=512)


def test_a_second_result_for_one_submission_is_ignored(tmp_path):
    merged = []
    cluster = Cluster(None, "tcp://127.0.0.1:1", 1, 60.0,
                      done=lambda *args: merged.append(args))
    payload = _payload(tmp_path)
    for status in ("graded", "not graded"):
        cluster._finish(payload, records.Result(payload.work, status), "one", "sandbox")
    assert [result.status for _, result, _, _ in merged] == ["graded"]


@pytest.mark.parametrize("name", ["../../escape.db", "/etc/passwd", "feedback/bob/01_parameters/x",
                                  "submitted/ada/01_parameters/../../../../x", "journal.jsonl"])
def test_files_sent_back_land_only_in_the_submissions_folder(tmp_path, name):
    cluster = Cluster(None, "tcp://127.0.0.1:1", 1, 60.0, done=lambda *args: None)
    with pytest.raises(ValueError, match="outside the submission's folders"):
        cluster._write(_payload(tmp_path), {name: b"x"})
    assert not (tmp_path / "escape.db").exists()


def test_files_sent_back_are_capped(tmp_path):
    cluster = Cluster(None, "tcp://127.0.0.1:1", 1, 60.0, done=lambda *args: None)
    files = {f"feedback/ada/01_parameters/{i}.html": bytes(2**20) for i in range(2)}
    assert cluster._write(_payload(tmp_path), files) == tmp_path / "work" / "abc"
    big = {"gradebook.db": b"\0" * (MAX_RETURN_BYTES + 1)}
    with pytest.raises(ValueError, match="MB of files"):
        cluster._write(_payload(tmp_path), big)


@pytest.mark.parametrize("given, expected", [("local:2", 2), ("tcp://10.0.0.5:8786", None),
                                             ("tls://head:8786", None)])
def test_scheduler_addresses(given, expected):
    assert parse_scheduler(given) == expected


@pytest.mark.parametrize("given", ["local:0", "local:x", "head:8786", "tcp://"])
def test_a_mistyped_scheduler_is_refused_by_name(given):
    with pytest.raises(ValueError, match="--scheduler"):
        parse_scheduler(given)
