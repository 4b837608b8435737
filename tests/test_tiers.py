"""The test tiers (tests/tiers.py): the fast tier's guard fires on tests written to slip past
it, the same tests pass without it, and the Makefile, pyproject.toml and tiers.py name the same
markers.

The guarded run is a real ``pytest`` in a folder of its own, loading the tiers' hooks with
``-p tiers`` under ``TINYPROF_TEST_TIER=fast``, as ``make test-fast`` runs them: what it
refuses is refused before the process starts, so it costs no kernel."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from chapters import REPO
from fast_tier.tier_guard import TIER_VARIABLE, TRIPWIRE_VARIABLE, markers_needed
from tiers import GUARD_FOLDER, HEAVY

TESTS = Path(__file__).resolve().parent

#: Tests a careless (or clever) author might leave unmarked: a kernel started here, one whose
#: refusal the test swallows, one started by a child whose exit status nobody reads, a
#: bubblewrap run; and a marked one, and one that starts nothing.
UNMARKED = '''
import subprocess
import sys

import pytest


def _kernel():
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(startup_timeout=60)
    client.stop_channels()
    manager.shutdown_kernel(now=True)


def test_starts_a_kernel():
    _kernel()


def test_swallows_the_refusal():
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("6 * 7")])
    try:
        NotebookClient(notebook, kernel_name="python3").execute()
    except Exception:
        pass


def test_a_child_starts_it():
    subprocess.run([sys.executable, "-c", "import test_unmarked; test_unmarked._kernel()"],
                   capture_output=True)


def test_runs_bwrap():
    subprocess.run(["bwrap", "--version"], capture_output=True)


@pytest.mark.kernel
def test_marked():
    _kernel()


def test_starts_nothing():
    assert sum(range(4)) == 6
'''

INI = "[pytest]\nmarkers =\n    kernel: starts a Jupyter kernel\n"


def _run_unmarked(folder: Path, *options: str, fast: bool) -> subprocess.CompletedProcess:
    (folder / "test_unmarked.py").write_text(UNMARKED, encoding="utf-8")
    (folder / "pytest.ini").write_text(INI, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in (TIER_VARIABLE, TRIPWIRE_VARIABLE)}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
             if p and Path(p).resolve() != GUARD_FOLDER]
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(TESTS), str(REPO), *paths])
    env["COLUMNS"] = "400"   # the short summary's reasons in full
    if fast:
        env[TIER_VARIABLE] = "fast"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tiers", "-p", "no:cacheprovider",
                           "-q", "-rfE", *options, "test_unmarked.py"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_the_fast_tier_fails_every_unmarked_start(tmp_path):
    run = _run_unmarked(tmp_path, "-m", "not kernel", fast=True)
    out = run.stdout + run.stderr
    assert "4 failed, 1 passed, 1 deselected" in out, out[-4000:]
    for name in ("test_starts_a_kernel", "test_swallows_the_refusal", "test_a_child_starts_it"):
        assert re.search(rf"FAILED test_unmarked.py::{name} - .*this test needs the `kernel` "
                         "marker", out), f"{name} was not failed for its kernel:\n{out[-4000:]}"
    assert re.search(r"FAILED test_unmarked.py::test_runs_bwrap - .*this test needs the "
                     "`sandbox` marker", out), out[-4000:]


@pytest.mark.kernel
def test_without_the_tier_the_same_tests_pass(tmp_path):
    """The control: unguarded, each of those tests starts what it starts and passes, so the
    failures above are the guard's (bubblewrap's test only where bwrap is installed)."""
    skip = [] if subprocess.run(["sh", "-c", "command -v bwrap"]).returncode == 0 else [
        "-k", "not bwrap"]
    run = _run_unmarked(tmp_path, *skip, fast=False)
    assert run.returncode == 0 and re.search(r"\b[56] passed", run.stdout), (
        run.stdout[-4000:] + run.stderr[-2000:])


@pytest.mark.parametrize("command, needed", [
    ("/venv/bin/python -m ipykernel_launcher -f /tmp/kernel-1.json", ["kernel"]),
    ("/usr/bin/bwrap --unshare-pid -- /venv/bin/python -S launcher.py -- /venv/bin/python -m "
     "ipykernel_launcher -f /s/connection.json", ["kernel", "sandbox"]),
    ("sh -c 'bwrap --version'", ["sandbox"]),
    ("/usr/bin/chromedriver --port=4444", ["browser"]),
    ("/usr/bin/chromium --headless=new", ["browser"]),
    ("/venv/bin/jupyter-book build . --builder html", ["book"]),
    ("jupyter book build .", ["book"]),
    ("/venv/bin/python -m autograder release", []),
    ("make --no-print-directory -n book", []),
    ("git ls-files", []),
    ("/venv/bin/python -c pass", []),
])
def test_what_the_guard_refuses(command, needed):
    assert markers_needed(command) == needed
    assert markers_needed(shlex.split(command)) == needed


def test_a_real_kernel_command_is_refused():
    """What jupyter_client itself would start for the course's kernel."""
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3", connection_file="/tmp/kernel-x.json")
    assert markers_needed(manager.format_kernel_cmd()) == ["kernel"]


def test_the_makefile_and_pyproject_name_the_tiers_markers(request):
    registered = sorted(line.split(":")[0].strip() for line in request.config.getini("markers")
                        if line.split(":")[0].strip() in HEAVY)
    assert registered == sorted(HEAVY), f"pyproject.toml registers {registered}, not {HEAVY}"
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    fast = re.search(r'^test-fast:.*?-m "not \(([^)]*)\)"', makefile, re.M | re.S)
    assert fast, "make test-fast selects no `-m \"not (...)\"`"
    assert sorted(fast.group(1).split(" or ")) == sorted(HEAVY), fast.group(1)
    test = re.search(r"^test: setup\n\t(.*)$", makefile, re.M)
    assert test and test.group(1) == "$(PYTHON) -m pytest", "make test must run everything"
    assert (REPO / ".ci" / "run").read_text(encoding="utf-8").rstrip().endswith("make test")
