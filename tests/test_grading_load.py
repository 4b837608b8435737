"""An honest student never loses points because the grading machine is busy (issue 26).

Graded through the real sandbox: an honest notebook next to CPU hogs that keep every core busy,
with a tight CPU limit, keeps full marks; a cell that only waits is run again with longer limits
and then flagged, not charged; the chapter's own set-up cell is never dropped; and no kernel
rebuilds matplotlib's font cache.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from autograder import samples
from autograder.grade import Settings, grade
from autograder.kernel import caches, resources

pytestmark = [pytest.mark.kernel, pytest.mark.sandbox, pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")]


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _write(root: Path, student: str, data: bytes) -> None:
    folder = root / student / samples.CHAPTER
    folder.mkdir(parents=True)
    (folder / samples.NOTEBOOK).write_bytes(data)


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    """Two students graded with --timeout 3 (CPU seconds) while 2 × the cores spin."""
    root = tmp_path_factory.mktemp("busy")
    _write(root / "in", "ada", samples.notebook(samples.solutions()))
    waiting = samples.solutions()
    waiting["linear_params"] = "import time\ntime.sleep(25)\n" + waiting["linear_params"]
    _write(root / "in", "sleepy", samples.notebook(waiting))
    hogs = [multiprocessing.Process(target=_spin, args=(600,), daemon=True)
            for _ in range(2 * (os.cpu_count() or 1))]
    for hog in hogs:
        hog.start()
    try:
        start = time.monotonic()
        rows, _ = grade(root / "in", root / "out", jobs=2, progress=False,
                        settings=Settings(timeout=3, wall_timeout=10, memory_mb=512))
        seconds = time.monotonic() - start
    finally:
        for hog in hogs:
            hog.kill()
    return {row.student: row for row in rows}, root / "out", seconds


def test_an_honest_notebook_next_to_cpu_hogs_keeps_full_marks(busy):
    rows, _, seconds = busy
    ada = rows["ada"]
    assert (ada.status, ada.auto_score, ada.flags, ada.notes) == ("graded", 10.0, [], []), (
        ada, f"{seconds:.0f} s")


def test_a_cell_that_only_waits_is_retried_then_flagged_not_charged_to_the_machine(busy):
    rows, out, _ = busy
    sleepy = rows["sleepy"]
    assert sleepy.status == "graded"
    assert any("waited past the wall-clock limit twice" in note for note in sleepy.notes), \
        sleepy.notes
    assert any("waited more than" in flag for flag in sleepy.flags), sleepy.flags
    graded = json.loads((out / "autograded" / "sleepy" / samples.CHAPTER / samples.NOTEBOOK)
                        .read_text(encoding="utf-8"))
    cpu = [c["metadata"]["tinyprof"]["cpu_s"] for c in graded["cells"]
           if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "linear_params"]
    assert cpu and cpu[0] < 1.5, cpu   # it slept: its CPU time is small, whatever the load


def test_the_chapters_own_cell_is_never_dropped_and_the_student_never_given_zero(tmp_path):
    """A read-only cell of the chapter that cannot finish within its limits (here because an
    answer made what the cell calls loop for ever) is run again with doubled limits, then the
    row says why and has no score, rather than the notebook being graded without that cell."""
    answers = samples.solutions()
    answers["linear_params"] = ("import tinyprof.nn as layers\n"
                                "class Endless(layers.Conv2d):\n"
                                "    def __init__(self, *args, **kwargs):\n"
                                "        while True:\n            pass\n"
                                "layers.Conv2d = Endless\n" + answers["linear_params"])
    _write(tmp_path / "in", "ada", samples.notebook(answers))
    rows, _ = grade(tmp_path / "in", tmp_path / "out", progress=False,
                    settings=Settings(timeout=3, wall_timeout=20, memory_mb=512))
    (ada,) = rows
    assert ada.status == "not graded", (ada.status, ada.auto_score, ada.notes)
    assert any("not the student's score" in note and "--student" in note for note in ada.notes)
    assert any("assigns layers.Conv2d" in flag for flag in ada.flags), ada.flags
    text = (tmp_path / "out" / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert text[1].split(",")[2:6] == ["", "12", "", "10"], text[1]   # blank, never 0


async def _in_sandbox(scratch: Path, code: str, **manager) -> tuple[dict, str, object]:
    """Run ``code`` in a fresh sandboxed kernel; its reply, what it printed, its manager."""
    from autograder.kernel.sandbox import SandboxedKernelManager

    kernel = SandboxedKernelManager(kernel_name="python3", **manager)
    await kernel.start_kernel(cwd=str(scratch))
    client = kernel.client()
    client.start_channels()
    printed: list[dict] = []
    try:
        await client.wait_for_ready(timeout=60)
        reply = await client.execute_interactive(code, timeout=60, store_history=False,
                                                 output_hook=printed.append)
        group = kernel._group
        seen = {"group": group, "cpu": kernel.cpu_seconds(),
                "members": group.pids() if group else [],
                "limit": _memory_limit(group) if group else None}
    finally:
        client.stop_channels()
        await kernel.shutdown_kernel(now=True)
    text = "".join(m["content"].get("text", "") for m in printed if m["msg_type"] == "stream")
    return reply, text, seen


def _memory_limit(group) -> int:
    name = "memory.max" if group.backend.version == 2 else "memory.limit_in_bytes"
    return int(next(f / name for f in group.folders if (f / name).exists()).read_text())


def test_no_kernel_rebuilds_the_font_cache(tmp_path):
    """The set-up cell of a sandboxed kernel reads the cache built once for the run."""
    cache = caches.matplotlib_cache(tmp_path / "cache")
    assert cache, "matplotlib built no font cache"
    code = ("import logging, io\nlog = io.StringIO()\n"
            "lg = logging.getLogger('matplotlib.font_manager')\n"
            "lg.addHandler(logging.StreamHandler(log)); lg.setLevel(logging.DEBUG)\n"
            "import matplotlib.font_manager\nprint(log.getvalue())")
    reply, text, _ = asyncio.run(_in_sandbox(tmp_path, code, memory_mb=1024,
                                             font_cache=[str(p) for p in cache]))
    assert reply["content"]["status"] == "ok"
    assert f"Using fontManager instance from {caches.SANDBOX_MPLCONFIGDIR}/" in text, text
    assert "generated new fontManager" not in text


@pytest.mark.skipif(resources.backend() is None, reason="no writable control groups (root)")
def test_each_kernel_has_a_control_group_of_its_own_that_goes_with_it(tmp_path):
    code = "import os\nprint(os.getpid())"
    reply, _, seen = asyncio.run(_in_sandbox(tmp_path, code, memory_mb=512))
    assert reply["content"]["status"] == "ok"
    group = seen["group"]
    assert group is not None and seen["members"], "the kernel's processes are not in its group"
    assert seen["limit"] == 512 * 2**20
    assert seen["cpu"] > 0
    assert not any(folder.exists() for folder in group.folders), "the group outlived its kernel"
