"""Hostile and damaged LMS zips through the real ``python -m autograder grade``: the damaged or
unsafe members are reported, everyone else is graded, a Moodle folder owns its files, and the
unpacked copy is gone when grading ends, also when it is interrupted."""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import time
import zipfile

import pytest
from chapters import REPO
from test_grading_intake import HOSTILE_PROBLEMS, _blank, _hostile_zip

from autograder import samples

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.cohort]

BOB = "Bob Good_2002_assignsubmission_file_"
MALLORY = "Mallory Bad_3003_assignsubmission_file_"


def _grade(archive, out, *extra: str) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", str(archive), "--out", str(out),
            "--timeout", "30", *extra]


def test_a_hostile_zip_grades_everyone_else_and_leaves_nothing_unpacked(tmp_path):
    archive = _hostile_zip(tmp_path / "cohort.zip", {
        "ada_1_9_parameters.ipynb": _blank(),
        f"{BOB}/{samples.NOTEBOOK}": samples.notebook(samples.solutions()),
        f"{MALLORY}/{BOB}{samples.NOTEBOOK}": _blank()})
    out = tmp_path / "graded"
    run = subprocess.run(_grade(archive, out, "--jobs", "2"), cwd=REPO, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert {s: (r["status"], r["auto_score"]) for s, r in rows.items()} == {
        "ada": ("graded", "0"), "Bob Good": ("graded", "10"), "Mallory Bad": ("graded", "0")}
    assert rows["Bob Good"]["submitted"] == f"cohort.zip:{BOB}/{samples.NOTEBOOK}"
    assert "named like the submission of Bob Good (2002), but it lies in the Moodle folder of " \
           "Mallory Bad (3003), so it was graded as theirs" in rows["Mallory Bad"]["notes"]
    problems = (out / "problems.txt").read_text(encoding="utf-8").splitlines()
    for problem in HOSTILE_PROBLEMS:
        assert problem in problems
    assert not (out / "work" / "unzipped").exists()


def test_an_interrupted_run_removes_the_unpacked_copy(tmp_path):
    slow = samples.solutions()
    slow["linear_params"] = "import time\ntime.sleep(120)\n" + slow["linear_params"]
    archive = tmp_path / "cohort.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("slow_1_1_parameters.ipynb", samples.notebook(slow))
    out = tmp_path / "graded"
    grading = subprocess.Popen(_grade(archive, out, "--timeout", "300"), cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(p.is_dir() and p.name != "unzipped" for p in out.glob("work/*")):
            assert time.monotonic() < deadline and grading.poll() is None, "grading never began"
            time.sleep(0.2)
        assert (out / "work" / "unzipped").is_dir()
        time.sleep(2)  # the kernel is in the sleeping cell now
        grading.send_signal(signal.SIGTERM)
        _, err = grading.communicate(timeout=120)
    finally:
        grading.kill()
    assert grading.returncode == 130, err[-2000:]
    assert not (out / "work" / "unzipped").exists()
