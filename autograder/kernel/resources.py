"""What one kernel may use, counted over all its processes together: a control group per kernel.

A sandboxed kernel's rlimits (launcher.py) hold each process on its own; a kernel that forks
twelve children of 100 MB, or runs 54 busy processes, escapes them. Linux control groups count
a whole group of processes. Each kernel gets a group of its own, which its first process joins
before it starts the sandbox (launcher.py ``--cgroup``), so that everything inside is counted:

- **memory**: resident memory, page cache and shared memory (``memfd``, tmpfs files: the
  scratch folder, /tmp, /dev/shm, the socket folder; a tmpfs page is charged to the group of
  the process that wrote it) together at most ``--memory``; past it the kernel's OOM
  killer stops a process of that group and no other. The bytes queued in the kernel's socket
  buffers are its memory too: Unix sockets and pipes are charged with the rest (measured in
  v1, benchmarks/bench_socket_memory.py); TCP (the one internet family the sandbox allows,
  launcher.py) is charged with the rest in v2 (``sock`` in memory.stat), and in v1 only to a
  counter of its own (``memory.kmem.tcp``) that Linux keeps only for a group with a TCP limit:
  each group gets one of TCP_MB, and :meth:`KernelGroup.memory_bytes` adds it;
- **processes**: at most ``Limits.processes`` tasks (threads included) in the group;
- **CPU**: every kernel the same weight, so a kernel of 54 busy processes gets the CPU share of
  a kernel of one; and the group's CPU time, which the per-cell CPU limit reads (sandbox.py).

Three ways, tried in order: cgroup v2 (the unified hierarchy with the memory, pids and cpu
controllers), cgroup v1 (the memory, pids, cpu and cpuacct hierarchies of hybrid systems, such
as Debian machines and many CI runners), both writable by root only; otherwise none, and the
grader falls back to per-process rlimits, with a WARNING in the summary and in grades.csv.
Without a group, CPU time is read from ``/proc`` over the kernel's process tree.

Groups are named ``tinyprof-<pid of the grading worker>-<n>`` under a ``tinyprof`` parent, so
:func:`sweep_orphans` can remove those of a worker that was killed outright.
"""

from __future__ import annotations

import itertools
import math
import os
import signal
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PARENT = "tinyprof"
PREFIX = "tinyprof-"
V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
V2_CONTROLLERS = ("memory", "pids", "cpu")
#: The TCP buffers a kernel may hold under cgroup v1 (memory.kmem.tcp.limit_in_bytes): setting
#: it makes Linux count them (else they are charged nowhere); a kernel's one TCP socket pair is
#: ipykernel's pipe for the output of forked processes. The limit is soft (measured: 138 MB
#: counted for 128 MB queued in 2027 connections), the count is what matters.
TCP_MB = 64
#: The kernel's memory in a v2 group's memory.stat before Linux 5.18 summed it as ``kernel``.
V2_KERNEL_PARTS = ("slab", "kernel_stack", "pagetables", "sec_pagetables", "percpu", "vmalloc",
                   "sock")
_numbers = itertools.count(1)


@dataclass(frozen=True)
class Backend:
    """Where kernel groups are made: ``version`` 1 or 2 and the parent folder of each
    hierarchy (one folder for v2; one per controller for v1, co-mounted ones once)."""

    version: int
    parents: tuple[Path, ...]

    def describe(self) -> str:
        if self.version == 2:
            return "cgroup v2 (memory, pids and cpu per kernel)"
        return "cgroup v1 (memory, pids, cpu and cpuacct per kernel)"


@lru_cache(maxsize=1)
def backend() -> Backend | None:
    """The control groups this process can create kernel groups in, or None."""
    if os.geteuid() != 0:
        return None
    mounts = _cgroup_mounts()
    for make in (_v2, _v1):
        try:
            found = make(mounts)
        except OSError:
            found = None
        if found is not None:
            return found
    return None


def describe() -> str:
    """A line for the summary: how kernels' resources are held."""
    found = backend()
    if found is not None:
        return found.describe()
    return ("WARNING: per-process rlimits only (no writable cgroup here: grade as root on a "
            "machine with cgroups); memory, processes and CPU are not held per kernel, so one "
            "kernel's children can exceed --memory and slow its neighbours")


def speed_timing() -> str:
    """A line for the summary: how speed tests are timed (speed.py)."""
    if backend() is not None:
        return "speed tests timed by the CPU time of each kernel's control group"
    return "speed tests timed by the CPU time of each kernel's process tree (no control groups)"


def _cgroup_mounts() -> list[tuple[str, Path, set[str]]]:
    """(file system type, mount point, options) of every cgroup mount."""
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            found.append((fields[2], Path(fields[1]), set(fields[3].split(","))))
    return found


def _v2(mounts) -> Backend | None:
    root = next((point for kind, point, _ in mounts if kind == "cgroup2"), None)
    if root is None:
        return None
    available = set((root / "cgroup.controllers").read_text().split())
    if not set(V2_CONTROLLERS) <= available:
        return None
    parent = root / PARENT
    parent.mkdir(exist_ok=True)
    enable = " ".join(f"+{c}" for c in V2_CONTROLLERS)
    (root / "cgroup.subtree_control").write_text(enable)
    (parent / "cgroup.subtree_control").write_text(enable)
    return Backend(2, (parent,))


def _v1(mounts) -> Backend | None:
    points: dict[str, Path] = {}
    for kind, point, options in mounts:
        if kind == "cgroup":
            for controller in V1_CONTROLLERS:
                if controller in options:
                    points[controller] = point
    if set(points) != set(V1_CONTROLLERS):
        return None
    parents = []
    for point in dict.fromkeys(points.values()):
        parent = point / PARENT
        parent.mkdir(exist_ok=True)
        parents.append(parent)
    if "memory" in points:   # children count toward the parent (the default on new kernels)
        hierarchy = points["memory"] / PARENT / "memory.use_hierarchy"
        if hierarchy.exists() and hierarchy.read_text().strip() != "1":
            hierarchy.write_text("1")
    return Backend(1, tuple(parents))


class KernelGroup:
    """The control group of one kernel: made with its limits, joined by the kernel's first
    process (``procs_files`` go to launcher.py), read while it runs, removed after."""

    def __init__(self, found: Backend, memory_mb: int, processes: int):
        self.backend = found
        self._netns_pid: int | None = None
        self._queued = (-math.inf, 0)   # (when, bytes): queued_socket_bytes's last reading
        self._earlier: frozenset[int] = frozenset()   # begin_run's processes
        self.name = f"{PREFIX}{os.getpid()}-{next(_numbers)}"
        self.folders = [parent / self.name for parent in found.parents]
        for folder in self.folders:
            folder.mkdir()
        try:
            self._limit(memory_mb, processes)
        except OSError:
            self.remove()
            raise

    def _limit(self, memory_mb: int, processes: int) -> None:
        if self.backend.version == 2:
            folder = self.folders[0]
            if memory_mb:
                (folder / "memory.max").write_text(str(memory_mb * 2**20))
                _write_if_present(folder / "memory.swap.max", "0")
            (folder / "pids.max").write_text(str(processes) if processes else "max")
            return
        for folder in self.folders:
            _write_if_present(folder / "memory.kmem.tcp.limit_in_bytes", str(TCP_MB * 2**20))
            if memory_mb and (folder / "memory.limit_in_bytes").exists():
                (folder / "memory.limit_in_bytes").write_text(str(memory_mb * 2**20))
                _write_if_present(folder / "memory.memsw.limit_in_bytes", str(memory_mb * 2**20))
            if processes and (folder / "pids.max").exists():
                (folder / "pids.max").write_text(str(processes))

    @property
    def procs_files(self) -> list[Path]:
        """The files a process writes its pid into to join this group (every hierarchy)."""
        return [folder / "cgroup.procs" for folder in self.folders]

    def cpu_seconds(self) -> float:
        """CPU time used by every process of the group so far, in seconds."""
        if self.backend.version == 2:
            return int(_stat_values(self.folders[0] / "cpu.stat").get("usage_usec", 0)) / 1e6
        usage = next((f / "cpuacct.usage" for f in self.folders
                      if (f / "cpuacct.usage").exists()), None)
        return int(_read(usage) or 0) / 1e9 if usage else 0.0

    def memory_peak_bytes(self) -> int | None:
        """The group's highest memory use so far (None where the kernel does not record it)."""
        return self._first_number(("memory.peak", "memory.max_usage_in_bytes"))

    def memory_bytes(self, sockets_age: float = 0.0) -> int | None:
        """The group's memory use now: resident memory, page cache, shared memory (tmpfs files)
        and socket buffers of all its processes (v2 ``memory.current``; v1
        ``memory.usage_in_bytes`` plus the TCP buffers, ``memory.kmem.tcp.usage_in_bytes``),
        and the bytes queued where no group is charged (:meth:`queued_socket_bytes`, read
        again when its last reading is older than ``sockets_age`` seconds: it costs about 9 ms
        of CPU, the rest 0.05 ms)."""
        found = self._first_number(("memory.current", "memory.usage_in_bytes"))
        if found is None:
            return found
        if self.backend.version == 1:
            found += self._first_number(("memory.kmem.tcp.usage_in_bytes",)) or 0
        return found + self.queued_socket_bytes(sockets_age)

    def file_bytes(self) -> int | None:
        """The group's file pages now: its tmpfs files (scratch folder, /tmp, /dev/shm) and the
        page cache of the files its processes read or wrote (v1 ``total_cache`` of memory.stat,
        v2 ``file``), part of :meth:`memory_bytes`; None where no memory controller counts
        them."""
        for folder in self.folders:
            stat = _stat_values(folder / "memory.stat")
            found = stat.get("total_cache", stat.get("file"))
            if found is not None:
                return found
        return None

    def kernel_object_bytes(self) -> int | None:
        """The kernel's objects charged to the group now (pipe and socket buffers, inodes,
        message queues, page tables, kernel stacks): v1 ``memory.kmem.usage_in_bytes`` with
        its TCP buffers, v2 ``kernel`` and ``sock`` of memory.stat (or their parts on a Linux
        older than 5.18); part of :meth:`memory_bytes`, None where no memory controller counts
        them."""
        if self.backend.version == 1:
            found = self._first_number(("memory.kmem.usage_in_bytes",))
            tcp = self._first_number(("memory.kmem.tcp.usage_in_bytes",)) or 0
            return None if found is None else found + tcp
        stat = _stat_values(self.folders[0] / "memory.stat")
        kinds = ("kernel", "sock") if "kernel" in stat else V2_KERNEL_PARTS
        return sum(stat.get(kind, 0) for kind in kinds) if "sock" in stat else None

    def begin_run(self) -> None:
        """Take the processes in the group now as those a run of the leak check found there
        (the kernel, and any it started in an earlier cell): :meth:`shared_bytes` reads their
        own memory apart until the next call."""
        self._earlier = frozenset(self.pids())

    def shared_bytes(self) -> dict[str, int]:
        """The parts of :meth:`memory_bytes` that a process forked for a run does not own, by
        kind: ``files`` (:meth:`file_bytes`), ``kernel objects`` (:meth:`kernel_object_bytes`)
        and ``unclaimed socket queues`` (as :meth:`memory_bytes` last read them), which a fork
        shares with its parent instead of copying, and ``earlier processes``, the anonymous
        memory of the processes :meth:`begin_run` found. What a run frees of them is not its
        own: the leak check counts each at no less than it was as the run began
        (memory_check.py). Only the kinds this group counts."""
        parts = {"files": self.file_bytes(), "kernel objects": self.kernel_object_bytes(),
                 "unclaimed socket queues": self._queued[1]}
        if self._earlier:
            parts["earlier processes"] = sum(map(anonymous_bytes, self._earlier))
        return {kind: found for kind, found in parts.items() if found is not None}

    def queued_socket_bytes(self, max_age: float = 0.0) -> int:
        """Bytes queued in the group's network namespace on sockets no group is charged for
        (:func:`uncharged_socket_bytes`), read through one of its processes in that namespace;
        0 when none of them has a namespace of its own. The last reading is given again while
        it is at most ``max_age`` seconds old (reading ``/proc/<pid>/net/tcp`` walks every bucket of
        the machine's connection hash table: 4.5 ms here, and tcp6 as much)."""
        read_at, found = self._queued
        if time.monotonic() - read_at <= max_age:
            return found
        pid = self._netns_pid
        if pid is None or not _own_netns(pid):   # also False once the process is gone
            pid = self._netns_pid = next((p for p in self.pids() if _own_netns(p)), None)
        found = uncharged_socket_bytes(pid) if pid is not None else 0
        self._queued = (time.monotonic(), found)
        return found

    def task_count(self) -> int | None:
        """Tasks in the group now: every thread of every process (``pids.current``; None where
        no pids controller counts them)."""
        return self._first_number(("pids.current",))

    def _first_number(self, names: tuple[str, ...]) -> int | None:
        for folder in self.folders:
            for name in names:
                text = _read(folder / name)
                if text.strip().isdigit():
                    return int(text)
        return None

    def pids(self) -> list[int]:
        found = set()
        for procs in self.procs_files:
            found |= {int(p) for p in _read(procs).split() if p.isdigit()}
        return sorted(found)

    def remove(self) -> None:
        """Kill whatever still runs in the group, then delete it."""
        _remove(self.folders)


def create(memory_mb: int, processes: int) -> KernelGroup | None:
    """A new group for one kernel, or None where no control groups can be used."""
    found = backend()
    if found is None:
        return None
    return KernelGroup(found, memory_mb, processes)


def sweep_orphans() -> list[str]:
    """Remove the groups of grading workers that are gone (killed before they could)."""
    found = backend()
    if found is None:
        return []
    removed = []
    for name in sorted({child.name for parent in found.parents for child in parent.iterdir()
                        if child.is_dir() and child.name.startswith(PREFIX)}):
        owner = name[len(PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not running(int(owner)):
            _remove([parent / name for parent in found.parents])
            removed.append(name)
    return removed


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs. A zombie does not: a worker killed with its grader
    is re-parented, and until the new parent reaps it (a second or more under some inits)
    signals still reach it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:       # another user's
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")   # zombie, dead


def _remove(folders: list[Path]) -> None:
    for _ in range(50):
        alive = {int(p) for folder in folders for p in _read(folder / "cgroup.procs").split()
                 if p.isdigit()}
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for folder in folders:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:   # still busy: its processes are being reaped
                continue
        if not any(folder.exists() for folder in folders):
            return
        time.sleep(0.02)


def tree_cpu_seconds(root_pid: int) -> float:
    """CPU time of process ``root_pid`` and all its descendants (those still running, and the
    children they have reaped), from ``/proc``: the meter where no control group is."""
    ticks = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        stat = _read(Path(entry.path) / "stat")
        fields = stat.rpartition(")")[2].split()
        if len(fields) < 15:
            continue
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        times[pid] = sum(int(v) for v in fields[11:15])   # utime stime cutime cstime
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo += children.get(pid, [])
    return total / ticks


def tree_rss_bytes(root_pid: int) -> int:
    """Resident bytes of process ``root_pid`` and all its descendants, from ``/proc`` (each
    process's ``statm``; pages two processes share are counted in each): the meter where no
    control group is. Files in a tmpfs are not counted."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in process_tree(root_pid):
        statm = _read(Path(f"/proc/{pid}/statm")).split()
        total += int(statm[1]) * page if len(statm) > 1 else 0
    return total


def process_tree(root_pid: int) -> list[int]:
    """``root_pid`` and every descendant of it running now, from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _read(Path(entry.path) / "stat").rpartition(")")[2].split()
            if len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def tree_task_count(root_pid: int) -> int:
    """Threads of process ``root_pid`` and all its descendants, from ``/proc`` (each process's
    ``task`` folder): the count where no control group is."""
    total = 0
    for pid in process_tree(root_pid):
        try:
            total += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:   # it ended meanwhile
            pass
    return total


def anonymous_bytes(pid: int) -> int:
    """The anonymous memory a process maps now (``RssAnon`` of its /proc status: its heap,
    stacks and private mappings, not files or tmpfs); 0 once it is gone."""
    for line in _read(Path(f"/proc/{pid}/status")).splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def uncharged_socket_bytes(pid: int) -> int:
    """Bytes queued on the sockets of ``pid``'s network namespace that Linux charges to no
    control group: TCP connections not yet accepted (a socket joins its group at ``accept``;
    ``/proc/net/tcp`` lists them with inode 0, their queues in bytes) and netlink sockets'
    receive and send memory (``/proc/net/netlink``'s Rmem and Wmem; the sandbox allows routing
    netlink, whose error replies carry the whole request back). Without this, a kernel could
    keep what it likes in a backlog it never accepts (the red team's tcp_unaccepted_backlog)
    or in netlink error replies it never reads (netlink_route_error_echo)."""
    total = 0
    for name in ("tcp", "tcp6"):
        for line in _read(Path(f"/proc/{pid}/net/{name}")).splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[3] != "0A" and fields[9] == "0":   # 0A: listening
                tx, _, rx = fields[4].partition(":")
                total += int(tx, 16) + int(rx, 16)
    for line in _read(Path(f"/proc/{pid}/net/netlink")).splitlines()[1:]:
        fields = line.split()
        if len(fields) > 5:
            total += int(fields[4]) + int(fields[5])
    return total


def _own_netns(pid: int) -> bool:
    """Whether process ``pid`` has a network namespace other than this process's (False when
    it has ended: an ended process's namespace link cannot be read)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net") != _this_netns()
    except OSError:
        return False


@lru_cache(maxsize=1)
def _this_netns() -> str:
    return os.readlink("/proc/self/ns/net")


def _stat_values(path: Path) -> dict[str, int]:
    """A control group's ``key value`` file (cpu.stat, memory.stat) as numbers by key; empty
    when it cannot be read."""
    values = {}
    for line in _read(path).splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            values[key] = int(value)
    return values


def _read(path: Path | None) -> str:
    try:
        return path.read_text() if path is not None else ""
    except OSError:
        return ""


def _write_if_present(path: Path, value: str) -> None:
    if path.exists():
        try:
            path.write_text(value)
        except OSError:
            pass


__all__ = ["Backend", "KernelGroup", "backend", "create", "describe", "running",
           "sweep_orphans", "tree_cpu_seconds", "tree_rss_bytes"]
