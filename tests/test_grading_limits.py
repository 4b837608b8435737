"""The grader's own limits: the wall-clock limit of a whole submission, a clean stop on SIGTERM,
and one grader per output folder."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from chapters import REPO

from autograder import samples
from autograder.dispatch.pool import Pool
from autograder.grade import Settings, grade
from autograder.kernel import isolation
from autograder.records import DIED_TWICE, Task
from autograder.results.gradebook import merge, prepare


def _cohort(root: Path, students: list[str]) -> Path:
    for student in students:
        folder = root / student / samples.CHAPTER
        folder.mkdir(parents=True)
        (folder / samples.NOTEBOOK).write_bytes(samples.notebook(samples.solutions()))
    return root


def _leftovers(out: Path) -> list[str]:
    """Processes (workers, kernels) still working under ``out``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "cwd").startswith(str(out)):
                found.append(proc.name)
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def twice(tmp_path_factory):
    """Ada's solved notebook graded with a 1 s limit for the whole submission, then again."""
    tmp = tmp_path_factory.mktemp("limits")
    cohort, out = _cohort(tmp / "in", ["ada"]), tmp / "out"
    first = grade(cohort, out, progress=False,
                  settings=Settings(timeout=5, memory_mb=512, submission_limit_s=1))
    leftovers = _leftovers(out)
    page = (out / "feedback" / "ada" / samples.CHAPTER / "parameters.html").read_text()
    second = grade(cohort, out, progress=False, settings=Settings(5, 512))
    return out, first, leftovers, page, second


@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_submission_over_the_wall_clock_limit_is_stopped_then_retried(twice):
    _, (rows, problems), leftovers, page, (again, problems_again) = twice
    assert [(r.student, r.status, r.score) for r in rows] == [("ada", "timed out", 0)]
    assert problems == ["ada/01_parameters: grading took longer than 1 s in all and was stopped"]
    assert "grading took longer than 1 s in all" in page
    assert leftovers == []
    assert [(r.student, r.status, r.auto_score) for r in again] == [("ada", "graded", 10)]
    assert problems_again == []


@pytest.mark.kernel
@pytest.mark.sandbox
def test_the_merge_takes_only_what_autograding_writes(twice, tmp_path):
    """Student code could write a manual score into its own shard; it must not count."""
    out = twice[0]
    shard = tmp_path / "shard.db"
    shutil.copy(out / "gradebook.db", shard)
    with sqlite3.connect(shard) as db:
        db.execute("update grade set manual_score = 99, extra_credit = 5")
        db.execute("update comment set manual_comment = 'excellent'")
    merge(out / "gradebook.db", shard, "ada", samples.CHAPTER)
    with sqlite3.connect(out / "gradebook.db") as db:
        grades = db.execute("select manual_score, extra_credit, auto_score from grade").fetchall()
        comments = db.execute("select manual_comment from comment").fetchall()
    assert {g[:2] for g in grades} == {(None, None)}
    assert sorted(g[2] for g in grades if g[2] is not None) == [2.0] * 5
    assert set(comments) == {(None,)}


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_sigterm_stops_the_grader_and_its_workers(tmp_path):
    cohort, out = _cohort(tmp_path / "in", ["ada", "bob", "cy"]), tmp_path / "out"
    grader = subprocess.Popen(
        [sys.executable, "-m", "autograder", "grade", str(cohort), "--out", str(out),
         "--timeout", "5", "--memory", "512"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    journal = out / "journal.jsonl"
    while not (journal.exists() and journal.read_text().count("\n") >= 1):
        assert grader.poll() is None, grader.communicate()
        time.sleep(0.1)
    grader.send_signal(signal.SIGTERM)
    _, stderr = grader.communicate(timeout=60)
    assert grader.returncode == 130
    assert "interrupted: stopped by SIGTERM; finished submissions are kept" in stderr
    time.sleep(0.5)
    assert _leftovers(out) == []


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_a_worker_killed_mid_submission_is_replaced_and_the_submission_graded(tmp_path):
    cohort, out = _cohort(tmp_path / "in", ["ada"]), tmp_path / "out"
    result = {}
    thread = threading.Thread(target=lambda: result.update(rows=grade(
        cohort, out, progress=False, settings=Settings(5, 512))[0]))
    thread.start()
    mark = f"autograder.dispatch.worker {os.getpid()}".encode()
    killed = None
    while killed is None and thread.is_alive():
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and mark in (proc / "cmdline").read_bytes().replace(b"\0",
                                                                                         b" "):
                    os.kill(int(proc.name), signal.SIGKILL)
                    killed = proc.name
            except OSError:
                continue
        time.sleep(0.05)
    thread.join(timeout=300)
    assert killed, "the worker was never seen"
    assert [(r.status, r.auto_score) for r in result["rows"]] == [("graded", 10)]
    assert (out / "journal.jsonl").read_text().count("\n") == 1
    assert sorted(p.name for p in (out / "work").glob("worker-*.log")) == ["worker-1.log",
                                                                            "worker-2.log"]


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_one_grader_per_output_folder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".grading.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(RuntimeError, match="is being graded by another process"):
            grade(tmp_path, out, progress=False)


def test_socket_folders_of_dead_workers_are_swept_and_others_kept(tmp_path):
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()                                   # a worker that is gone
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        time.sleep(0.01)                              # dead, not yet reaped (as under some inits)
    orphan = tmp_path / f"{isolation.SOCKETS_PREFIX}{finished.pid}-k1"
    unreaped = tmp_path / f"{isolation.SOCKETS_PREFIX}{zombie.pid}-k4"
    live = tmp_path / f"{isolation.SOCKETS_PREFIX}{os.getpid()}-k2"   # a running grader's
    unnamed = tmp_path / f"{isolation.SOCKETS_PREFIX}k3"              # no owner in the name
    for folder in (orphan, unreaped, live, unnamed):
        folder.mkdir()
        (folder / "kernel-shell").write_bytes(b"")
    precious = tmp_path / "precious"                  # planted under an orphan's name
    precious.mkdir()
    (tmp_path / f"{isolation.SOCKETS_PREFIX}{finished.pid}-planted").symlink_to(precious)
    try:
        assert sorted(isolation.sweep_orphan_sockets(tmp_path)) == sorted([orphan, unreaped])
    finally:
        zombie.wait()
    assert not orphan.exists() and not unreaped.exists()
    assert live.exists() and unnamed.exists() and precious.exists()
    made = isolation.new_sockets_folder()
    try:
        assert made.name.startswith(f"{isolation.SOCKETS_PREFIX}{os.getpid()}-")
        assert made.stat().st_mode & 0o777 == 0o700
    finally:
        made.rmdir()


class _WorkersDie(Pool):
    """A pool whose first ``deaths`` workers are killed as soon as they start: before they take
    a task, as the kernel's out-of-memory killer or an operator might."""

    def __init__(self, deaths: int, **kwargs):
        super().__init__(**kwargs)
        self.deaths = deaths

    def _spawn(self, selector):
        worker = super()._spawn(selector)
        if self._spawned <= self.deaths:
            os.killpg(worker.process.pid, signal.SIGKILL)
            worker.process.wait()
        return worker


@pytest.fixture(scope="module")
def one_task(tmp_path_factory):
    """A solved chapter-01 notebook as the grading process hands it to a worker."""
    out = tmp_path_factory.mktemp("pool")
    template = prepare(out, [samples.CHAPTER])
    handed_in = out / "in" / samples.NOTEBOOK
    handed_in.parent.mkdir()
    handed_in.write_bytes(samples.notebook(samples.solutions()))
    settings = Settings(5, 512)
    return out, Task(key=f"ada/{samples.CHAPTER}", student="ada", assignment=samples.CHAPTER,
                     notebooks={samples.NOTEBOOK: str(handed_in)}, work=str(out / "task"),
                     template=str(template), release=str(out / "release"),
                     timeout=settings.timeout, wall_timeout=settings.wall_s,
                     memory_mb=settings.memory_mb)


@pytest.mark.parametrize("deaths, expected", [(1, ("graded", 10.0)), (2, ("not graded", 0.0))])
@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_a_worker_dead_before_it_takes_its_task_is_replaced(one_task, tmp_path, deaths,
                                                             expected):
    """The first worker dies before the task reaches it: a new one grades it. If that one dies
    too, the row says so (not the student's score) and the run ends: no endless respawning."""
    _, task = one_task
    task = replace(task, work=str(tmp_path / "task"))
    finished = []
    pool = _WorkersDie(deaths, jobs=1, logs=tmp_path, limit_s=300,
                       done=lambda t, result, *_: finished.append(result))
    pool.run([task])
    assert [(r.status, r.auto_score) for r in finished] == [expected]
    assert pool._spawned == 2
    if deaths == 2:
        assert finished[0].notes == [DIED_TWICE]


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_a_dask_workers_grader_that_died_while_idle_is_replaced(one_task, tmp_path):
    """On a Dask worker, graders wait idle between submissions; one that died meanwhile (killed,
    out of memory) is replaced, and the submission graded by the new one."""
    pytest.importorskip("distributed")
    from autograder.dispatch.dask_worker import _grade, _Run

    _, task = one_task
    state = _Run("test-run", jobs=1, root=tmp_path)
    try:
        idle = state.grader()
        state.release(idle, keep=True)
        os.killpg(idle.process.pid, signal.SIGKILL)
        idle.process.wait()
        result = _grade(state, replace(task, work=str(tmp_path / "task")), limit_s=300)
        assert (result.status, result.auto_score) == ("graded", 10.0), result.notes
        assert state.spawned == 2
    finally:
        state.stop()


NEEDS_BWRAP = pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")


def _sandbox_ends(folder: Path, code: str, end) -> tuple[int | None, float, list[int]]:
    """Start a sandboxed kernel in ``folder``, run ``code`` in it (it starts a process that
    would run for 10 minutes), then ``end(manager, client)``: how the sandbox (bwrap) ended
    within 30 s (None: it did not), after how many seconds, and what was left in the kernel's
    control group 5 s later."""
    import asyncio

    from autograder.kernel.sandbox import SandboxedKernelManager

    async def run() -> tuple[int | None, float, list[int]]:
        kernel = SandboxedKernelManager(kernel_name="python3", memory_mb=512)
        await kernel.start_kernel(cwd=str(folder))
        client = kernel.client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=60)
            reply = await client.execute_interactive(code, timeout=60)
            assert reply["content"]["status"] == "ok"
            group, process = kernel._group, kernel.provisioner.process
            end(kernel, client)
            start = time.monotonic()
            while process.poll() is None and time.monotonic() - start < 30:
                await asyncio.sleep(0.05)
            seconds = time.monotonic() - start
            while group is not None and group.pids() and time.monotonic() - start < 35:
                await asyncio.sleep(0.05)
            return process.returncode, seconds, group.pids() if group is not None else []
        finally:
            client.stop_channels()
            await kernel.shutdown_kernel(now=True)

    return asyncio.run(run())


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_sandbox_ends_when_the_graders_end_of_its_lifeline_closes(tmp_path):
    """If the grader dies while bwrap is still setting a sandbox up, bwrap's own tie to its
    parent is not in place yet: the sandbox's watcher (launcher.py) ends it instead, as soon as
    the grader's end of the lifeline closes, with whatever the student started in it."""

    def close_lifeline(kernel, client) -> None:
        os.close(kernel._lifeline[1])   # as the grader's death would
        kernel._lifeline = None

    status, seconds, left = _sandbox_ends(
        tmp_path, "import subprocess\nsubprocess.Popen(['sleep', '600'])", close_lifeline)
    assert status is not None, "the sandbox outlived its lifeline by 30 s"
    assert seconds < 10, f"the sandbox took {seconds:.1f} s to end"
    assert left == [], f"processes left in the kernel's control group: {left}"


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_sandbox_ends_with_its_kernel_and_the_kernel_has_no_child_of_ours(tmp_path):
    """The lifeline's watcher is no child of the kernel: ipykernel's shutdown waits for the
    kernel's children to go (2.6 s per kernel while the watcher was one). When the kernel
    ends, its sandbox ends with it, with what the student started, while the grader still
    holds the lifeline (bwrap's init waits for every process in the sandbox, the watcher
    too)."""
    code = ("import os, subprocess\n"
            "ours = sorted(os.listdir('/proc/self/task'))\n"
            "children = [open(f'/proc/self/task/{t}/children').read().split() for t in ours]\n"
            "assert children == [[]] * len(ours), children\n"
            "subprocess.Popen(['sleep', '600'])")

    def kernel_exits(kernel, client) -> None:
        assert kernel._lifeline is not None and kernel._lifeline[1] >= 0
        client.execute("import os; os._exit(0)")

    status, seconds, left = _sandbox_ends(tmp_path, code, kernel_exits)
    assert status == 0, "the sandbox outlived its kernel by 30 s"
    assert seconds < 5, f"the sandbox took {seconds:.1f} s to end after its kernel"
    assert left == [], f"processes left in the kernel's control group: {left}"


def _sandboxed_steps(folder: Path, steps: list[str]) -> list[dict]:
    """Run each of ``steps`` in one sandboxed kernel (as a grader starts it) started in
    ``folder``: for each, its reply's status, what it printed, and the kernel's memory
    (SandboxedKernelManager.memory_bytes, read by the grader) after it: ``memory`` read whole,
    ``sampled`` as the leak check's reader reads while a loop runs, just before, with the
    socket queues no group is charged for as last read (within 600 s)."""
    import asyncio

    from autograder.kernel.sandbox import SandboxedKernelManager

    async def run() -> list[dict]:
        kernel = SandboxedKernelManager(kernel_name="python3", memory_mb=1024)
        await kernel.start_kernel(cwd=str(folder))
        client = kernel.client()
        client.start_channels()
        seen = []
        try:
            await client.wait_for_ready(timeout=60)
            for code in steps:
                printed: list[dict] = []
                reply = await client.execute_interactive(code, timeout=120,
                                                         output_hook=printed.append)
                text = "".join(m["content"].get("text", "") for m in printed
                               if m["msg_type"] == "stream")
                errors = [f"{m['content']['ename']}: {m['content']['evalue']}" for m in printed
                          if m["msg_type"] == "error"]
                sampled = kernel.memory_bytes(sockets_age=600)   # before the fresh reading
                seen.append({"status": reply["content"]["status"], "printed": text,
                             "errors": errors, "memory": kernel.memory_bytes(),
                             "sampled": sampled, "counted": kernel.in_control_group})
        finally:
            client.stop_channels()
            await kernel.shutdown_kernel(now=True)
        return seen

    return asyncio.run(run())


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_sandboxed_kernel_runs_process_workers(tmp_path):
    """Chapter 09's process workers (tinyprof.loading.Workers, kind="process") and a spawn
    Pool need POSIX semaphores, which live in /dev/shm: the sandbox gives each kernel a
    private, writable one. The batches the processes load are the serial loader's."""
    code = (
        "import json, multiprocessing\nimport numpy as np\nimport tinyprof as tp\n"
        "from tinyprof.loading import LOCAL_DISK, ImageFolder\n"
        "with multiprocessing.get_context('spawn').Pool(2) as pool:\n"
        "    squares = pool.map(abs, [-1, -2, -3])\n"
        "tp.loading.write_image_folder('digits', 64)\n"
        "local = ImageFolder('digits', LOCAL_DISK)\n"
        "plan = tp.loading.batch_plan(len(local), 8, 3)\n"
        "with tp.loading.Workers(local, 2, kind='process') as workers:\n"
        "    loaded = list(workers.batches(plan))\n"
        "same = all(np.array_equal(b.x, local.batch(i, s).x) for s, (i, b) in\n"
        "           enumerate(zip(plan, loaded)))\n"
        "print(json.dumps({'squares': squares, 'batches': len(loaded), 'same': same}))")
    (done,) = _sandboxed_steps(tmp_path, [code])
    assert done["status"] == "ok", f"process workers failed in the sandbox: {done['errors']}"
    import json

    assert json.loads(done["printed"]) == {"squares": [1, 2, 3], "batches": 3, "same": True}


SHM_FILL = ("import errno, os\nwritten, failure = 0, None\n"
            "for n in range(16):\n"
            "    try:\n"
            "        with open(f'/dev/shm/fill-{n}', 'wb') as f:\n"
            "            for _ in range(16):\n"
            "                f.write(b'\\1' * 2**20)\n"
            "                written += 1\n"
            "    except OSError as error:\n"
            "        failure = errno.errorcode[error.errno]\n"
            "        break\n"
            "print(written, failure)")


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_dev_shm_is_private_limited_and_fails_cleanly_past_its_size(tmp_path):
    """/dev/shm holds Limits.shm_mb: writing past it raises ENOSPC in the cell, the kernel
    lives on, and the host's /dev/shm never sees the files."""
    limit = isolation.Limits().shm_mb
    steps = _sandboxed_steps(tmp_path, [SHM_FILL, "print(sorted(os.listdir('/dev/shm'))[:1])"])
    written, failure = steps[0]["printed"].split()
    assert failure == "ENOSPC", f"expected the {limit} MB /dev/shm to fill up, got {failure}"
    assert limit - 16 < int(written) <= limit, f"{written} MB written into a {limit} MB /dev/shm"
    assert steps[1]["status"] == "ok" and "fill-0" in steps[1]["printed"], steps[1]
    assert not list(Path("/dev/shm").glob("fill-*")), "the kernel wrote into the host's /dev/shm"


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_dev_shm_is_counted_in_the_kernels_memory(tmp_path):
    """tmpfs pages are charged to the memory control group of the process that writes them:
    what a kernel keeps in /dev/shm is its memory, read by the grader (a leak test reads this),
    and it goes when the file goes."""
    write = ("with open('/dev/shm/kept', 'wb') as f:\n"
             "    for _ in range(40):\n        f.write(b'\\1' * 2**20)")
    steps = _sandboxed_steps(tmp_path, ["pass", write, "import os; os.unlink('/dev/shm/kept')"])
    if not steps[0]["counted"]:
        pytest.skip("no writable control groups here (grade as root): memory is per process")
    assert steps[1]["status"] == "ok", f"writing 40 MB into /dev/shm failed: {steps[1]['errors']}"
    before, kept, after = (step["memory"] / 2**20 for step in steps)
    assert kept - before > 36, (f"40 MB written into /dev/shm added {kept - before:.1f} MB to "
                                "the kernel's memory: expected them counted")
    assert kept - after > 36, f"removing the file freed only {kept - after:.1f} MB"


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_the_sandbox_does_not_announce_itself(tmp_path):
    """A submission that behaves differently when graded looks for what tells the grading run
    apart: the host name is the machine's own (not "sandbox"), no variable names the grader's
    folders for IPython, Jupyter or matplotlib (their defaults under HOME serve), and, when the
    grader is root, the kernel's uid has an account (getpass.getuser() raised KeyError only
    when graded) and no process the kernel can see is bwrap, whose command line spells out the
    sandbox (launcher.py's --hide-pids)."""
    import socket

    code = ("import getpass, json, os, socket\n"
            "try:\n    user = getpass.getuser()\nexcept (KeyError, OSError) as error:\n"
            "    user = repr(error)\n"
            "seen = {}\n"
            "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n"
            "        seen[pid] = open(f'/proc/{pid}/cmdline').read().replace('\\0', ' ')\n"
            "    except OSError:\n"
            "        pass\n"
            "print(json.dumps({'host': socket.gethostname(), 'names': sorted(os.environ),\n"
            "                  'processes': seen, 'user': user}))")
    (done,) = _sandboxed_steps(tmp_path, [code])
    import json

    seen = json.loads(done["printed"])
    assert seen["host"] == socket.gethostname(), seen["host"]
    grader_only = {"MPLCONFIGDIR", "IPYTHONDIR", "JUPYTER_CONFIG_DIR", "XDG_CACHE_HOME",
                   "TMPDIR"}
    assert not grader_only & set(seen["names"]), sorted(grader_only & set(seen["names"]))
    assert any("ipykernel" in line for line in seen["processes"].values()), seen["processes"]
    if isolation.running_as_root():   # the kernel's uid has an account, as on Binder
        assert seen["user"] == isolation.KERNEL_USER, f"getpass.getuser(): {seen['user']}"
        shown = [line for line in seen["processes"].values() if "bwrap" in line]
        assert shown == [], f"the kernel sees the sandbox's command line: {shown[0][:200]}"


FAMILIES = ("import errno, json, multiprocessing, os, socket\n"
            "def attempt(family, kind, protocol=0):\n"
            "    try:\n"
            "        socket.socket(family, kind, protocol).close()\n"
            "        return 'opened'\n"
            "    except OSError as error:\n"
            "        return errno.errorcode.get(error.errno, str(error.errno))\n"
            "seen = {\n"
            "    'inet_stream': attempt(socket.AF_INET, socket.SOCK_STREAM),\n"
            "    'inet_dgram': attempt(socket.AF_INET, socket.SOCK_DGRAM),\n"
            "    'inet6_stream': attempt(socket.AF_INET6, socket.SOCK_STREAM),\n"
            "    'inet6_dgram': attempt(socket.AF_INET6, socket.SOCK_DGRAM),\n"
            "    'netlink_route': attempt(16, socket.SOCK_RAW, 0),\n"
            "    'netlink_usersock': attempt(16, socket.SOCK_RAW, 2),\n"
            "    'packet': attempt(17, socket.SOCK_RAW),\n"
            "    'alg': attempt(38, socket.SOCK_SEQPACKET),\n"
            "    'vsock': attempt(40, socket.SOCK_STREAM),\n"
            "    'unix_stream': attempt(socket.AF_UNIX, socket.SOCK_STREAM),\n"
            "    'unix_dgram': attempt(socket.AF_UNIX, socket.SOCK_DGRAM),\n"
            "    'unix_seqpacket': attempt(socket.AF_UNIX, socket.SOCK_SEQPACKET),\n"
            "}\n"
            "a, b = socket.socketpair()\na.sendall(b'ping')\n"
            "seen['socketpair'] = b.recv(4).decode()\n"
            "left, right = multiprocessing.Pipe()\nleft.send([1, 2])\n"
            "seen['pipe'] = right.recv()\n"
            "seen['host'] = socket.gethostname()\n"
            "try:\n"
            "    seen['localhost'] = socket.getaddrinfo('localhost', 80)[0][4][0]\n"
            "except OSError as error:\n"
            "    seen['localhost'] = type(error).__name__\n"
            "if os.uname().machine == 'x86_64':   # socket(2) itself, the family's upper bits set\n"
            "    import ctypes\n"
            "    libc = ctypes.CDLL(None, use_errno=True)\n"
            "    made = libc.syscall(41, ctypes.c_long((1 << 32) | socket.AF_INET), 1, 0)\n"
            "    seen['inet_upper_bits'] = ('opened' if made >= 0 else\n"
            "                               errno.errorcode[ctypes.get_errno()])\n"
            "print(json.dumps(seen))")
#: What a sandboxed kernel may open (launcher.py's seccomp filter): Unix sockets, TCP over IPv4
#: (ipykernel's pipe for forked processes' output), routing netlink (getifaddrs).
NEEDED_ONLY = {"inet_stream": "opened", "inet_dgram": "EPROTONOSUPPORT",
               "inet6_stream": "EAFNOSUPPORT", "inet6_dgram": "EAFNOSUPPORT",
               "netlink_route": "opened", "netlink_usersock": "EPROTONOSUPPORT",
               "packet": "EAFNOSUPPORT", "alg": "EAFNOSUPPORT", "vsock": "EAFNOSUPPORT",
               "unix_stream": "opened", "unix_dgram": "opened", "unix_seqpacket": "opened",
               "socketpair": "ping", "pipe": [1, 2]}


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_kernel_opens_only_the_sockets_it_needs(tmp_path):
    """The bytes queued in UDP buffers, IPv6 TCP buffers and netlink queues are charged to no
    memory control group: a leak kept there was invisible to the leak check. The sandbox's
    seccomp filter (launcher.py) refuses those families with EAFNOSUPPORT, as a machine
    without them would, and the types and protocols a kernel never uses of the two families it
    needs with EPROTONOSUPPORT; Unix sockets (ZeroMQ's, the course's process workers'), the
    host name and name lookups from /etc/hosts still work."""
    if not isolation.seccomp_available():
        pytest.skip("no libseccomp here: the sandbox runs without its system-call filter")
    (done,) = _sandboxed_steps(tmp_path, [FAMILIES])
    assert done["status"] == "ok", f"the probe failed in the sandbox: {done['errors']}"
    import json
    import socket

    seen = json.loads(done["printed"])
    assert {name: seen[name] for name in NEEDED_ONLY} == NEEDED_ONLY, (
        f"expected every family but AF_UNIX, AF_INET's TCP and NETLINK_ROUTE refused, Unix "
        f"sockets and multiprocessing's pipes working: {seen}")
    assert seen.get("inet_upper_bits", "EAFNOSUPPORT") == "EAFNOSUPPORT", seen
    assert seen["host"] == socket.gethostname() and seen["localhost"] in ("127.0.0.1", "::1"), (
        f"the host name and /etc/hosts lookups need no socket of another family: {seen}")


#: Moves pages into a pipe with each call that does so without copying them, and copies a file
#: with shutil (sendfile first, plain reads and writes when it is refused).
SPLICES = ("import ctypes, errno, json, os, shutil, tempfile\n"
           "def attempt(call):\n"
           "    try:\n"
           "        call()\n"
           "        return 'moved'\n"
           "    except OSError as error:\n"
           "        return errno.errorcode.get(error.errno, str(error.errno))\n"
           "libc = ctypes.CDLL(None, use_errno=True)\n"
           "def checked(result):\n"
           "    if result < 0:\n"
           "        raise OSError(ctypes.get_errno(), 'refused')\n"
           "source = os.path.join(tempfile.mkdtemp(), 'source')\n"
           "with open(source, 'wb') as out:\n"
           "    out.write(b'\\1' * 65536)\n"
           "file = os.open(source, os.O_RDONLY)\n"
           "read, write = os.pipe()\n"
           "other_read, other_write = os.pipe()\n"
           "page = ctypes.create_string_buffer(4096)\n"
           "vector = (ctypes.c_void_p * 2)(ctypes.addressof(page), 4096)\n"
           "seen = {'splice': attempt(lambda: os.splice(file, write, 4096)),\n"
           "        'sendfile': attempt(lambda: os.sendfile(write, file, 0, 4096)),\n"
           "        'vmsplice': attempt(lambda: checked(libc.vmsplice(write, vector, 1, 0))),\n"
           "        'tee': attempt(lambda: checked(libc.tee(read, other_write, 4096, 2)))}\n"
           "shutil.copyfile(source, source + '.copy')\n"
           "seen['copyfile'] = os.path.getsize(source + '.copy')\n"
           "print(json.dumps(seen))")


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_kernel_cannot_move_pages_into_a_pipe(tmp_path):
    """splice, sendfile, vmsplice and tee put pages into a pipe without copying them: from a
    file opened with O_DIRECT, pages charged to no control group; from a file truncated after,
    or from the kernel's own memory, pages of no kind the group's memory.stat names. A fork
    that reads them out frees memory the kernel made before the call, which the leak check
    cannot count (tests/redteam_leak_free.py). The sandbox's seccomp filter refuses the four
    with EPERM, and shutil.copyfile still copies (it falls back to reads and writes)."""
    if not isolation.seccomp_available():
        pytest.skip("no libseccomp here: the sandbox runs without its system-call filter")
    (done,) = _sandboxed_steps(tmp_path, [SPLICES])
    assert done["status"] == "ok", f"the probe failed in the sandbox: {done['errors']}"
    import json

    seen = json.loads(done["printed"])
    assert seen == {"splice": "EPERM", "sendfile": "EPERM", "vmsplice": "EPERM", "tee": "EPERM",
                    "copyfile": 65536}, seen


#: Keeps pages out of a fork with madvise, and gives pages back with it.
FORK_ADVICE = ("import errno, json, mmap\n"
               "pages = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
               "pages.write(b'\\1' * (1 << 20))\n"
               "seen = {}\n"
               "advice = {'MADV_DONTFORK': 10, 'MADV_WIPEONFORK': 18, 'MADV_DONTNEED': 4,\n"
               "          'MADV_DOFORK': 11}\n"
               "for name, number in advice.items():\n"
               "    try:\n"
               "        pages.madvise(number)\n"
               "        seen[name] = 'done'\n"
               "    except OSError as error:\n"
               "        seen[name] = errno.errorcode.get(error.errno, str(error.errno))\n"
               "print(json.dumps(seen))")


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_kernel_cannot_keep_pages_out_of_a_fork(tmp_path):
    """Pages a kernel keeps out of its forks (madvise MADV_DONTFORK or MADV_WIPEONFORK) and
    touched in advance are written in place by a thread of the kernel while the leak check's
    fork runs: nothing is copied, so a history kept there adds nothing (the sixth red team's
    dontfork_kernel_buffer, 177 B a step seen). The sandbox's filter refuses that advice with
    EPERM and leaves the rest alone."""
    if not isolation.seccomp_available():
        pytest.skip("no libseccomp here: the sandbox runs without its system-call filter")
    (done,) = _sandboxed_steps(tmp_path, [FORK_ADVICE])
    assert done["status"] == "ok", f"the probe failed in the sandbox: {done['errors']}"
    import json

    assert json.loads(done["printed"]) == {"MADV_DONTFORK": "EPERM", "MADV_WIPEONFORK": "EPERM",
                                           "MADV_DONTNEED": "done", "MADV_DOFORK": "done"}, (
        done["printed"])


#: Opens a pseudo-terminal, and /dev/null beside it.
TERMINALS = ("import errno, json, os\n"
             "try:\n"
             "    os.openpty()\n"
             "    seen = 'opened'\n"
             "except OSError as error:\n"
             "    seen = errno.errorcode.get(error.errno, str(error.errno))\n"
             "with open(os.devnull, 'wb') as null:\n"
             "    null.write(b'fine')\n"
             "print(json.dumps({'openpty': seen}))")


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_kernel_cannot_open_a_pseudo_terminal(tmp_path):
    """The bytes a pseudo-terminal queues are charged to no control group: a loop that writes
    its history into terminals it never reads keeps it out of the leak check's sight (the sixth
    red team's pty_buffers, 6.3 kB a step kept, 1.7 kB seen). The sandbox has none to open;
    /dev/null still works."""
    (done,) = _sandboxed_steps(tmp_path, [TERMINALS])
    assert done["status"] == "ok", f"the probe failed in the sandbox: {done['errors']}"
    import json

    assert json.loads(done["printed"]) == {"openpty": "EACCES"}, done["printed"]


#: Threads that allocate outside Python's own allocator, then glibc's count of its arenas.
ARENAS = ("import ctypes, json, re, threading\n"
          "def allocate():\n"
          "    kept = [bytearray(2000) for _ in range(5000)]\n"
          "threads = [threading.Thread(target=allocate) for _ in range(4)]\n"
          "for thread in threads:\n"
          "    thread.start()\n"
          "for thread in threads:\n"
          "    thread.join()\n"
          "libc = ctypes.CDLL(None)\n"
          "libc.fopen.restype = ctypes.c_void_p\n"
          "out = libc.fopen(b'/tmp/arenas.xml', b'w')\n"
          "libc.malloc_info(0, ctypes.c_void_p(out))\n"
          "libc.fclose(ctypes.c_void_p(out))\n"
          "with open('/tmp/arenas.xml') as info:\n"
          "    print(json.dumps({'arenas': len(re.findall('<heap nr=', info.read()))}))")


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_kernel_allocates_in_one_arena(tmp_path):
    """The leak check's fork cannot change how many arenas glibc's allocator has (it fixes the
    number once a second thread allocates, and the kernel's own threads have): in arenas of the
    kernel's, the threads a loop starts in the fork leave memory that trimming does not give
    back (a Pool(4) made in each call kept 2.8 MB more over two calls than over one). The
    sandbox starts the kernel with one arena, which the threads of a cell share too; outside
    it, the same cell makes more."""
    (done,) = _sandboxed_steps(tmp_path, [ARENAS])
    assert done["status"] == "ok", f"the probe failed in the sandbox: {done['errors']}"
    import json

    assert json.loads(done["printed"]) == {"arenas": 1}, done["printed"]
    plain = subprocess.run([sys.executable, "-c", ARENAS.replace("/tmp/arenas.xml",
                                                                 str(tmp_path / "plain.xml"))],
                           capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"})
    assert json.loads(plain.stdout)["arenas"] > 1, plain.stdout + plain.stderr


UNREAD = ("import fcntl, os, socket\nheld = []\n"
          "def fill(end, write, left):\n"
          "    while left > 0:\n"
          "        try:\n"
          "            left -= write(end, b'\\1' * min(left, 2**16))\n"
          "        except BlockingIOError:\n"
          "            return left\n"
          "    return 0\n"
          "def unix_pair():\n"
          "    pair = socket.socketpair()\n"
          "    pair[0].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 23)\n"
          "    pair[0].setblocking(False)\n"
          "    held.append(pair)\n"
          "    return pair[0]\n"
          "def pipe():\n"
          "    read, write = os.pipe()\n"
          "    fcntl.fcntl(write, 1031, 1 << 20)   # F_SETPIPE_SZ\n"
          "    os.set_blocking(write, False)\n"
          "    held.append((read, write))\n"
          "    return write\n"
          "def tcp_pair():\n"
          "    server = socket.create_server(('127.0.0.1', 0))\n"
          "    out = socket.create_connection(server.getsockname())\n"
          "    into, _ = server.accept()\n"
          "    out.setblocking(False)\n"
          "    held.append((server, out, into))\n"
          "    return out\n"
          "def keep(open_end, write, megabytes=40):\n"
          "    left = megabytes * 2**20\n"
          "    while left > 0:\n"
          "        part = min(left, 4 * 2**20)\n"
          "        left -= part - fill(open_end(), write, part)\n")
CLOSE = ("for ends in held:\n    for end in ends:\n"
         "        os.close(end) if isinstance(end, int) else end.close()\nheld.clear()")


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_bytes_queued_in_sockets_and_pipes_are_the_kernels_memory(tmp_path):
    """What the sandbox still allows, Unix sockets, pipes and TCP over its loopback, holds
    unread bytes in buffers the grader counts in the kernel's memory (measured: +66 MB for
    64 MB queued in socket pairs, +65 MB in pipes, charged to the group of the process that
    writes them; TCP +64.6 MB, in cgroup v1 on the group's own TCP counter, which exists
    because resources.py gives each group a TCP limit): a loop that keeps its steps there
    keeps memory the grader reads. On a kernel that stopped charging one of them this fails,
    and the leak check would need to count it itself."""
    send = "lambda end, data: end.send(data)"
    steps = _sandboxed_steps(tmp_path, [
        UNREAD, f"keep(unix_pair, {send})", CLOSE, "keep(pipe, os.write)", CLOSE,
        f"keep(tcp_pair, {send})", CLOSE])
    if not steps[0]["counted"]:
        pytest.skip("no writable control groups here (grade as root): memory is per process")
    assert all(step["status"] == "ok" for step in steps), [step["errors"] for step in steps]
    before, unix, unix_closed, pipes, pipes_closed, tcp, tcp_closed = (
        step["memory"] / 2**20 for step in steps)
    assert tcp - pipes_closed > 36 and tcp - tcp_closed > 36, (
        f"40 MB left unread in TCP connections over the sandbox's loopback added "
        f"{tcp - pipes_closed:.1f} MB to the kernel's memory (closing them freed "
        f"{tcp - tcp_closed:.1f} MB): expected them counted")
    assert unix - before > 36, (f"40 MB left unread in Unix socket pairs added "
                                f"{unix - before:.1f} MB to the kernel's memory: expected them "
                                "charged to its control group")
    assert pipes - unix_closed > 36, (f"40 MB left unread in pipes added "
                                      f"{pipes - unix_closed:.1f} MB to the kernel's memory")
    assert unix - unix_closed > 36 and pipes - pipes_closed > 36, (
        "closing the sockets and pipes should give their buffers back: "
        f"{unix - unix_closed:.1f} and {pipes - pipes_closed:.1f} MB freed")


BACKLOG = ("import socket\n"
           "server = socket.socket()\n"
           "server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)\n"
           "server.bind(('127.0.0.1', 0))\n"
           "server.listen(64)\n"
           "for _ in range(48):\n"
           "    out = socket.create_connection(server.getsockname(), timeout=10)\n"
           "    out.sendall(b'\\1' * (1 << 19))\n"
           "    out.close()\n")


@NEEDS_BWRAP
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_reading_while_a_loop_runs_reuses_the_socket_queues_last_reading(tmp_path):
    """Bytes queued where no control group is charged (24 MB in connections a listener never
    accepted) are read from /proc/<pid>/net/tcp, 9 ms a reading: the whole reading finds them
    at once, the leak check's reader while a loop runs (``memory_bytes(sockets_age=...)``)
    gives the last reading of them while it is young enough, and a whole reading renews it."""
    steps = _sandboxed_steps(tmp_path, ["pass", BACKLOG, "server.close()", "pass"])
    if not steps[0]["counted"]:
        pytest.skip("no writable control groups here (grade as root): memory is per process")
    assert all(step["status"] == "ok" for step in steps), [step["errors"] for step in steps]
    quiet, queued, closed, after = ({key: step[key] / 2**20 for key in ("memory", "sampled")}
                                    for step in steps)
    assert queued["memory"] - quiet["memory"] > 20, (queued, quiet)
    assert queued["sampled"] - quiet["memory"] < 4, (
        f"the reading within the age read the queues anew: {queued} after {quiet}")
    assert closed["sampled"] - closed["memory"] > 20, (
        f"the closed backlog's bytes should stay in the reading within its age: {closed}")
    assert abs(after["sampled"] - after["memory"]) < 4, after


@pytest.mark.kernel
def test_the_kernel_is_stopped_after_the_last_cell_and_its_exit_hooks_never_run(tmp_path):
    """Nothing a kernel would do on its way out counts: the grader stops it at once after the
    last cell (a graceful shutdown ran its atexit hooks, and waited 2.6 s for a kernel whose
    spawn worker pool left multiprocessing's resource tracker running). Out of the sandbox,
    whose working folder the grader cannot see: the shutdown is the executor's either way."""
    import nbformat
    from traitlets.config import Config

    from autograder.run.execute import GraderExecute

    code = ("import atexit, multiprocessing.resource_tracker, pathlib\n"
            "multiprocessing.resource_tracker.ensure_running()\n"
            "atexit.register(pathlib.Path('on_its_way_out.txt').write_text, 'ran')\n"
            "pathlib.Path('in_its_cell.txt').write_text('ran')\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    config = Config()
    config.GraderExecute.isolate = False
    GraderExecute(config=config, timeout=120).preprocess(
        nb, {"metadata": {"path": str(tmp_path)}})
    assert not nb.cells[0].outputs or nb.cells[0].outputs[0].get("output_type") != "error", \
        nb.cells[0].outputs
    assert (tmp_path / "in_its_cell.txt").read_text() == "ran"
    assert not (tmp_path / "on_its_way_out.txt").exists(), "the kernel's exit hooks ran"
