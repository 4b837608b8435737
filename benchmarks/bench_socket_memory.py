"""Which kernel buffers a kernel's memory control group charges: bytes left unread in sockets
of each family and in pipes, measured from outside, as the leak check reads a kernel's memory.

A loop that keeps each step's arrays where the kernel's memory group does not look keeps them
unseen by the leak check (autograder/run/memory_check.py). For each kind, a process in a fresh
kernel group (resources.py, with its TCP limit) queues ``--mb`` MB unread, and the grader's side
reads the group before and after: ``memory.usage_in_bytes`` (v1; ``memory.current`` in v2), the
group's TCP counter (``memory.kmem.tcp.usage_in_bytes``, v1), and what the grader counts as the
kernel's memory (``KernelGroup.memory_bytes``). Each kind runs twice: outside the sandbox (no
system-call filter: what Linux charges) and inside it (what launcher.py's filter lets a kernel
open). Needs root and control groups.

Run: ``python benchmarks/bench_socket_memory.py [--mb 64] [--quick]`` (``--quick``: 8 MB).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.kernel import isolation, resources  # noqa: E402

MB = 2**20
#: The process that queues the bytes: ``python -c FILLER KIND MEGABYTES``; prints ``ready``,
#: waits for a line, fills, prints ``queued BYTES`` (``refused ERRNO``; ``opened`` for a packet
#: socket, which only copies traffic), waits for a line.
FILLER = r'''
import errno, fcntl, os, socket, sys
kind, target = sys.argv[1], int(sys.argv[2]) * 2**20
held = []

def fill(writers, chunk):
    total = 0
    for end in writers:
        room = end[2] if isinstance(end, tuple) else target   # a datagram's receiver drops
        while total < target and room > 0:                    # what its buffer cannot take
            try:
                sent = send(end, b"\1" * chunk)
            except BlockingIOError:
                break
            total, room = total + sent, room - sent
    return total

def queue(make):
    """Pairs made by ``make`` (the ends written to, the ends only held) filled in turn."""
    total = 0
    while total < target:
        writers, others = make()
        held.append((writers, others))
        added = fill(writers, 60000)
        if added == 0:
            break
        total += added
    return total

def send(end, data):
    if isinstance(end, tuple):   # a datagram socket, its receiver's address and room
        return end[0].sendto(data, socket.MSG_DONTWAIT, end[1])
    return end.send(data) if hasattr(end, "send") else os.write(end, data)

def tcp(family, host):
    server = socket.socket(family)
    server.bind((host, 0)); server.listen(4096); held.append(server)
    def pair():
        out = socket.socket(family); out.connect(server.getsockname()[:2])
        into, _ = server.accept()
        for end in (out, into):
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 23)
            end.setblocking(False)
        return (out, into), ()
    return pair

def datagrams(family, kind_, protocol, address):
    sender = socket.socket(family, kind_, protocol)
    def pair():
        into = socket.socket(family, kind_, protocol)
        into.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 23)
        into.bind(address)
        room = into.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 2
        return [(sender, into.getsockname(), room)], [into]
    return pair

def unix(kind_):
    def pair():
        ends = socket.socketpair(socket.AF_UNIX, kind_)
        for end in ends:
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 23)
            end.setblocking(False)
        return ends, ()
    return pair

def pipe():
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, 1031, 1 << 20)   # F_SETPIPE_SZ: the system's largest, 1 MB
    except PermissionError:   # past the user's fs.pipe-user-pages-soft: the default size
        pass
    os.set_blocking(write, False)
    return [write], [read]

KINDS = {
    "pipe": lambda: pipe,
    "unix_stream": lambda: unix(socket.SOCK_STREAM),
    "unix_seqpacket": lambda: unix(socket.SOCK_SEQPACKET),
    "unix_dgram": lambda: unix(socket.SOCK_DGRAM),
    "tcp4": lambda: tcp(socket.AF_INET, "127.0.0.1"),
    "tcp6": lambda: tcp(socket.AF_INET6, "::1"),
    "udp4": lambda: datagrams(socket.AF_INET, socket.SOCK_DGRAM, 0, ("127.0.0.1", 0)),
    "udp6": lambda: datagrams(socket.AF_INET6, socket.SOCK_DGRAM, 0, ("::1", 0)),
    "netlink_usersock": lambda: datagrams(16, socket.SOCK_RAW, 2, (0, 0)),
    "packet": lambda: socket.socket(17, socket.SOCK_RAW),
}
print("ready", flush=True)
sys.stdin.readline()
try:
    made = KINDS[kind]()
    print("queued", queue(made), flush=True) if callable(made) else print("opened", flush=True)
except OSError as error:
    print("refused", errno.errorcode.get(error.errno, error.errno), flush=True)
sys.stdin.readline()
'''
KINDS = ("pipe", "unix_stream", "unix_seqpacket", "unix_dgram", "tcp4", "tcp6", "udp4", "udp6",
         "netlink_usersock", "packet")


def _read(group: resources.KernelGroup, name: str) -> int:
    for folder in group.folders:
        text = resources._read(folder / name).strip() if (folder / name).exists() else ""
        if text.isdigit():
            return int(text)
    return 0


def readings(group: resources.KernelGroup) -> tuple[int, int, int]:
    """The group's own memory counter, its TCP counter (v1), what the grader counts."""
    usage = _read(group, "memory.current") or _read(group, "memory.usage_in_bytes")
    return usage, _read(group, "memory.kmem.tcp.usage_in_bytes"), group.memory_bytes() or 0


def measure(kind: str, megabytes: int, sandboxed: bool) -> tuple[str, list[float]]:
    """What filling ``kind`` with ``megabytes`` MB added to the group, in MB (own, TCP,
    counted), and what the filler said."""
    group = resources.create(2048, 64)
    command = [sys.executable, "-c", FILLER, kind, str(megabytes)]
    sockets = isolation.new_sockets_folder()
    scratch = Path(tempfile.mkdtemp(prefix="bench-sockets-"))
    try:
        if sandboxed:
            command = isolation.sandbox_command(
                command, scratch=scratch, sockets=sockets, limits=isolation.Limits(),
                parent_pid=os.getpid(), cgroup_procs=group.procs_files)
        else:
            launcher = Path(isolation.__file__).with_name("launcher.py")
            guard = [sys.executable, "-S", str(launcher)]
            for procs in group.procs_files:
                guard += ["--cgroup", str(procs)]
            command = guard + ["--", *command]
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True)
        process.stdout.readline()
        time.sleep(0.3)
        before = readings(group)
        process.stdin.write("\n")
        process.stdin.flush()
        said = process.stdout.readline().split()
        time.sleep(0.3)
        after = readings(group)
        process.stdin.write("\n")
        process.stdin.flush()
        process.wait(timeout=60)
    finally:
        group.remove()
        isolation.remove_sockets_folder(sockets)
        scratch.rmdir()
    outcome = (f"{int(said[1]) / MB:.1f} MB" if said and said[0] == "queued"
               else " ".join(said[1:]) or (said[0] if said else "?"))
    return outcome, [(a - b) / MB for a, b in zip(after, before)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64, help="MB to queue per kind")
    parser.add_argument("--quick", action="store_true", help="8 MB per kind")
    args = parser.parse_args()
    megabytes = 8 if args.quick else args.mb
    found = resources.backend()
    if found is None:
        print("no writable control groups here (run as root on a machine with cgroups): "
              "nothing to measure")
        return
    print(f"{os.uname().sysname} {os.uname().release}, {found.describe()}; {megabytes} MB "
          "queued unread per kind; MB added to the kernel's group")
    print(f"{'kind':17s} {'outside the sandbox: queued':>28s} {'group':>6s} {'tcp':>6s} "
          f"{'counted':>8s}   {'in the sandbox':>16s} {'counted':>8s}")
    for kind in KINDS:
        outside, (own, tcp, counted) = measure(kind, megabytes, sandboxed=False)
        inside, (_, _, inside_counted) = measure(kind, megabytes, sandboxed=True)
        print(f"{kind:17s} {outside:>28s} {own:6.1f} {tcp:6.1f} {counted:8.1f}   "
              f"{inside:>16s} {inside_counted:8.1f}", flush=True)


if __name__ == "__main__":
    main()
