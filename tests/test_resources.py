"""Resources per kernel (autograder/kernel/resources.py): a control group holds all of a kernel's
processes together, its CPU time is measured, and without groups the grader says so."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from autograder.kernel import resources
from autograder.results.report import GradeRow, summary

SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_cpu_time_of_a_process_tree_counts_its_children():
    """A parent that waited for a child spinning 0.6 s of CPU: the child's time is in the
    parent's (cutime), read from /proc while the parent still runs."""
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               f"subprocess.run([sys.executable, '-c', {SPIN.format(s=0.6)!r}])\n"
                               "time.sleep(5)"])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and resources.tree_cpu_seconds(parent.pid) < 0.6:
            time.sleep(0.1)
        assert 0.6 <= resources.tree_cpu_seconds(parent.pid) < 5
    finally:
        parent.kill()
        parent.wait()


THREADS_AND_A_CHILD = ("import os, threading, time\n"
                       "for _ in range(3): threading.Thread(target=time.sleep, args=(30,),"
                       " daemon=True).start()\n"
                       "if os.fork() == 0:\n"
                       "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                       "    time.sleep(30); os._exit(0)\n"
                       "print('ready', flush=True); time.sleep(30)\n")


def test_threads_of_a_process_tree_are_counted_from_proc():
    """A process with 3 threads beside its main one and a child with 1 beside its own: 6, the
    count the leak check reads where no control group counts the kernel's tasks."""
    parent = subprocess.Popen([sys.executable, "-c", THREADS_AND_A_CHILD],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and resources.tree_task_count(parent.pid) < 6:
            time.sleep(0.05)
        assert resources.tree_task_count(parent.pid) == 6
        assert len(resources.process_tree(parent.pid)) == 2
    finally:
        parent.kill()
        parent.wait()


def test_without_control_groups_the_summary_warns(monkeypatch, tmp_path):
    monkeypatch.setattr(resources, "backend", lambda: None)
    assert resources.describe().startswith("WARNING: per-process rlimits only")
    row = GradeRow("ada", "01_parameters", sandbox="bubblewrap; " + resources.describe())
    assert "WARNING: kernels' memory, processes and CPU were held per process only" in \
        summary([row], [], tmp_path)


@pytest.mark.skipif(resources.backend() is None, reason="no writable control groups (root)")
def test_a_group_holds_memory_of_all_its_processes_and_kills_them_when_removed():
    group = resources.create(memory_mb=200, processes=16)
    code = ("import os, time\n"
            "for _ in range(4):\n"
            "    if os.fork() == 0:\n"
            "        block = bytearray(80 * 2**20)\n"
            "        for i in range(0, len(block), 4096): block[i] = 1\n"
            "        time.sleep(30); os._exit(0)\n"
            "time.sleep(30)\n")
    launcher = os.path.join(os.path.dirname(resources.__file__), "launcher.py")
    process = subprocess.Popen([sys.executable, "-S", launcher,
                                *(a for f in group.procs_files for a in ("--cgroup", str(f))),
                                "--", sys.executable, "-c", code])
    try:
        time.sleep(4)
        peak = group.memory_peak_bytes()
        assert peak is not None and peak <= 200 * 2**20, peak      # 4 × 80 MB did not fit
        assert group.cpu_seconds() > 0
        members = group.pids()
        assert process.pid in members or process.poll() is not None
    finally:
        group.remove()
        process.wait(timeout=30)
    assert not any(folder.exists() for folder in group.folders)
    for pid in members:
        assert not resources.running(pid), f"process {pid} outlived its group"


@pytest.mark.skipif(resources.backend() is None, reason="no writable control groups (root)")
def test_a_group_counts_every_thread_of_its_processes():
    """The tasks the leak check reads under a control group: 6, as from /proc above (None
    where the group has no pids controller)."""
    group = resources.create(memory_mb=200, processes=16)
    launcher = os.path.join(os.path.dirname(resources.__file__), "launcher.py")
    process = subprocess.Popen([sys.executable, "-S", launcher,
                                *(a for f in group.procs_files for a in ("--cgroup", str(f))),
                                "--", sys.executable, "-c", THREADS_AND_A_CHILD],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (group.task_count() or 6) < 6:
            time.sleep(0.05)
        assert group.task_count() in (None, 6), group.task_count()
    finally:
        group.remove()
        process.wait(timeout=30)


#: A process that holds 8 MB a leak check's fork would not own, and frees it, a line of stdin
#: each: a tmpfs file written and truncated, eight pipes of 1 MB filled and read out (pipe
#: buffers are the kernel's objects, charged to the group), or memory of its own.
SHARED_MEMORY = ("import fcntl, os, sys\n"
                 "kind, path = sys.argv[1:]\n"
                 "pipes, own = [os.pipe() for _ in range(8)], []\n"
                 "for _, end in pipes:\n"
                 "    fcntl.fcntl(end, 1031, 1 << 20)   # F_SETPIPE_SZ\n"
                 "print('ready', flush=True)\n"
                 "for line in sys.stdin:\n"
                 "    if kind == 'files' and line.strip() == 'write':\n"
                 "        with open(path, 'wb') as out:\n"
                 "            out.write(b'\\1' * (8 << 20))\n"
                 "    elif kind == 'files':\n"
                 "        os.truncate(path, 0)\n"
                 "    if kind == 'earlier processes' and line.strip() == 'write':\n"
                 "        own.append(bytearray(b'\\1' * (8 << 20)))\n"
                 "    elif kind == 'earlier processes':\n"
                 "        own.clear()\n"
                 "    for start, end in pipes if kind == 'kernel objects' else ():\n"
                 "        if line.strip() == 'write':\n"
                 "            os.write(end, b'\\1' * (1 << 20))\n"
                 "        else:\n"
                 "            left = 1 << 20\n"
                 "            while left:\n"
                 "                left -= len(os.read(start, left))\n"
                 "    print('done', flush=True)\n")


@pytest.mark.skipif(resources.backend() is None, reason="no writable control groups (root)")
@pytest.mark.parametrize("kind", ["files", "kernel objects", "earlier processes"])
def test_shared_memory_freed_during_a_run_is_not_credited(kind):
    """The parts of a group's memory a leak check's fork does not own are read apart: 8 MB
    written to a tmpfs file (file pages), queued in pipes (the kernel's objects) or held by a
    process the run found in the group count, and freeing them during a run gives nothing back
    (a fork that truncates the kernel's file or reads out its pipes, or a process of the kernel
    that frees a ballast as the fork's leak grows, paid for a leak with the kernel's memory).
    What a run adds to them and frees again is its own, and not counted once freed."""
    from autograder.run.memory_check import FreedSharedUncredited

    path = f"/dev/shm/tinyprof-test-{os.getpid()}"
    group = resources.create(memory_mb=200, processes=16)
    launcher = os.path.join(os.path.dirname(resources.__file__), "launcher.py")
    process = subprocess.Popen([sys.executable, "-S", launcher,
                                *(a for f in group.procs_files for a in ("--cgroup", str(f))),
                                "--", sys.executable, "-c", SHARED_MEMORY, kind, path],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(what: str) -> None:
        process.stdin.write(what + "\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "done"

    try:
        assert process.stdout.readline().strip() == "ready"
        group.begin_run()
        if group.file_bytes() is None:
            pytest.skip("no memory controller counts this group's memory")
        assert kind in group.shared_bytes(), group.shared_bytes()
        before = group.shared_bytes()[kind]
        ask("write")
        # 7 MB, not 8: the controller charges and counts kernel memory a batch of pages per
        # CPU at a time (the CI of f5df7b4 read the pipes' 8 MB as 8 MB less 8 kB)
        assert group.shared_bytes()[kind] - before >= 7 << 20
        reading = FreedSharedUncredited(group.memory_bytes, group.shared_bytes, group.begin_run)
        reading.new_run()
        written, usage = reading(), group.memory_bytes()
        ask("free")
        assert usage - group.memory_bytes() >= 7 << 20, f"freeing the {kind} freed nothing"
        assert reading() >= written - (1 << 20), f"freed {kind} were credited"
        reading.new_run()
        assert abs(reading() - group.memory_bytes()) < 1 << 20
        # what a run adds and frees again is its own (a pool's workers' page tables and stacks)
        ask("write")
        assert reading() - group.memory_bytes() < 1 << 20   # read while it lasts
        ask("free")
        assert abs(reading() - group.memory_bytes()) < 1 << 20, f"{kind} made and freed in a run"
    finally:
        process.stdin.close()
        process.wait(timeout=30)
        group.remove()
        if os.path.exists(path):
            os.remove(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may raise a thread's priority")
def test_the_reader_of_a_running_loop_is_put_first():
    """The thread that reads the group's memory while a loop runs asks for a niceness of -10
    (memory_check.favour_thread): at 0, beside a CPU hog and a pool of 4 the loop started, it
    waited up to 150 ms for its turns. The grader's other threads keep their own."""
    from autograder.run.memory_check import READER_NICENESS, favour_thread

    seen = {}

    def reader() -> None:
        favour_thread()
        favour_thread()   # once per thread
        seen["reader"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    before = os.getpriority(os.PRIO_PROCESS, 0)
    thread = threading.Thread(target=reader)
    thread.start()
    thread.join()
    assert seen["reader"] == READER_NICENESS < before
    assert os.getpriority(os.PRIO_PROCESS, 0) == before
