"""Start a student's kernel inside limits: ``python -S launcher.py --memory-mb N
--address-space-mb A --processes P --file-mb F [--uid U --hide-pids 1] [--no-userns 1]
[--cgroup FILE]... --parent-pid PID -- KERNEL COMMAND...``
(standard library only; run as a script, then exec'd away, so the kernel keeps this process id).
In the sandbox (isolation.py) this is the first thing that runs; without it, the same limits
apply to an unsandboxed kernel.

- Memory: ``RLIMIT_DATA`` of N MB counts the heap and every private writable mapping, where
  Python objects and numpy arrays live, so an allocation past it raises MemoryError in the
  student's cell and the kernel survives. ``RLIMIT_AS`` of A MB (N plus a reserve) also counts
  shared mappings, which the data limit misses (a 3 GB shared anonymous ``mmap``); it cannot be
  N itself, because an idle kernel reserves about 0.6 GB of address space it never touches.
- Processes: ``RLIMIT_NPROC`` of P (threads count too), so a fork bomb stops at P. Linux does
  not apply it to root, so under root the launcher first becomes uid U (``--uid``).
- Files: ``RLIMIT_FSIZE`` of F MB per file (Python ignores SIGXFSZ, so the write raises
  OSError), and no core dumps.
- Where the kernel has a memory control group of its own, isolation.py passes none of the
  memory and process limits (the group counts both, and a finite rlimit in /proc/self/limits
  would tell a graded run apart): an allocation past the group's limit then ends the kernel
  instead of raising MemoryError, and the grader's note says so.
- BLAS/OpenMP pools get one thread (unless the grader's environment already says otherwise):
  OpenBLAS maps a buffer of about 40 MB per thread it starts, one per core.
- The kernel is killed when the grading process that started it dies (``PR_SET_PDEATHSIG``);
  in the sandbox bwrap's ``--die-with-parent`` does this instead (``--parent-pid 0``).
- ``--lifeline FD`` (in the sandbox): the read end of a pipe whose only write end the grading
  process holds. A watcher process (the kernel's uid, outside the kernel) waits on it; at end of
  file (the grader died, or let the kernel go), or as soon as the kernel ends, it kills every
  process of the sandbox it may signal, so that the sandbox ends with its kernel. bwrap ties
  its inner process to its parent only once the sandbox is set up, so a grader killed in those
  milliseconds would otherwise leave the sandbox running. The watcher is no child of the
  kernel's (ipykernel's shutdown waits for the kernel's children to end).
- ``--cgroup FILE`` (repeatable): join a control group first (resources.py), by writing this
  process's id into the group's ``cgroup.procs``; everything started after, the sandbox
  included, is counted in it.
- ``--hide-pids 1`` (in the sandbox, as root, before ``--uid``): the sandbox's ``/proc`` shows
  a process only those of its own uid, so the kernel does not see bwrap's command line, which
  names every mount and limit (``ps`` shows the kernel and its children).
- ``--no-userns 1``: a seccomp filter (libseccomp, the library behind Docker's and systemd's
  filters) refuses new user namespaces (``unshare``, ``clone``), ``setns``, and the kernel
  interfaces a notebook never needs and sandbox escapes often use (keyrings, BPF, perf events,
  userfaultfd, io_uring, ptrace). Without a user namespace a process cannot mount a file system
  of its own, such as a private tmpfs outside the sandbox's limits.
- The same filter refuses the calls that move pages into a pipe instead of copying them
  (``splice``, ``vmsplice``, ``tee``, ``sendfile``), with EPERM. A page moved so is charged
  to no group (read from a file opened with ``O_DIRECT``), or stays charged after its file is
  truncated as a page of no kind the group's memory.stat names, and a fork that reads such
  pages out frees what the kernel made before the call: the leak check could not count it
  (tests/redteam_leak_free.py). No notebook needs them: ``shutil.copyfile`` and
  ``socket.sendfile`` fall back to reads and writes when ``sendfile`` is refused.
- The same filter refuses the ``madvise`` advice that keeps pages out of a fork
  (``MADV_DONTFORK``, ``MADV_WIPEONFORK``), with EPERM. The leak check runs a loop in a fork
  of the kernel, and what a thread of the kernel writes into its own pages while the fork runs
  is charged as new pages only because the fork shares them (the write copies them): pages
  kept out of the fork and touched in advance are written in place, and a history a kernel
  thread keeps there adds nothing the grader can read (tests/redteam_leak_free.py's
  dontfork_kernel_buffer). No notebook needs them; other advice is untouched.
- The same filter narrows ``socket`` and ``socketpair`` to what a kernel uses: Unix sockets
  (``AF_UNIX``: ZeroMQ's ipc sockets to the grader, multiprocessing's connections and
  descriptor passing, the ``DataLoader``'s workers, the pipeline check's storage socket); TCP
  over IPv4 (``AF_INET``, ``SOCK_STREAM``: ipykernel binds a ZeroMQ socket on 127.0.0.1 for the
  output of forked processes, and the kernel aborts without it); and routing netlink
  (``NETLINK_ROUTE``: ``getifaddrs``, which ZeroMQ calls to resolve that address, and a
  non-root process can only ask the kernel through it, never queue its own bytes). Every other
  family fails with ``EAFNOSUPPORT`` (what a machine without the family answers: libraries
  that probe for IPv6 fall back), another type or protocol of those two with
  ``EPROTONOSUPPORT``. The sandbox has no network to reach, so nothing is lost; what is closed
  is memory outside the kernel's control group. Measured here (Linux 6.18, cgroup v1, 64 MB
  queued unread per kind, bench_socket_memory.py): TCP, UDP (over IPv4 or IPv6) and netlink
  queues added +0.0 MB to the group's ``memory.usage_in_bytes``, Unix sockets (stream,
  datagram, seqpacket) +66 to +69 MB and pipes +65 MB. So IPv6, UDP, netlink's other protocols
  (``NETLINK_USERSOCK`` queues any bytes a process sends it), ``AF_PACKET``, ``AF_VSOCK``
  (which would reach the virtual machine's host: ``--unshare-net`` does not isolate it) and
  the rest are refused; TCP, which the kernel needs, is charged to the group's
  ``memory.kmem.tcp`` counter once the group has a TCP limit (resources.py sets one, and the
  grader adds that counter to the kernel's memory: +65.5 MB for 64 MB queued, UDP's too);
  Unix sockets and pipes count in the group's memory as they are.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import select
import signal
import sys

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
PR_SET_PDEATHSIG = 1
MB = 2**20


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent exits; exit now if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid and os.getppid() != parent_pid:
        os._exit(1)


def _cap(limit: int, value: int) -> None:
    if value > 0:
        resource.setrlimit(limit, (value, value))


def limit_memory(megabytes: int, address_space_mb: int = 0) -> None:
    """Cap the data segment at ``megabytes`` and the address space at ``address_space_mb``
    (0: no cap), and switch core dumps off."""
    _cap(resource.RLIMIT_DATA, megabytes * MB)
    _cap(resource.RLIMIT_AS, address_space_mb * MB)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def limit_processes_and_files(processes: int, file_mb: int) -> None:
    """At most ``processes`` processes and threads, and files of at most ``file_mb`` MB."""
    _cap(resource.RLIMIT_NPROC, processes)
    _cap(resource.RLIMIT_FSIZE, file_mb * MB)


def become(uid: int) -> None:
    """Give up root for ``uid`` (and the group of the same number), with no extra groups."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit(f"launcher: could not become uid {uid}")


CLONE_NEWUSER = 0x10000000
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_NE, SCMP_CMP_EQ, SCMP_CMP_GT, SCMP_CMP_MASKED_EQ = 1, 4, 6, 7   # enum scmp_compare
#: System calls that put pages into a pipe without copying them (the module docstring): a file's
#: page cache (splice, sendfile), a process's own pages (vmsplice), another pipe's (tee).
PAGES_INTO_PIPES = ("splice", "vmsplice", "tee", "sendfile")
#: ``madvise`` advice that keeps pages out of a fork (MADV_DONTFORK, MADV_WIPEONFORK): refused.
FORK_UNSHARED_ADVICE = (10, 18)
#: System calls refused outright (errno EPERM): other namespaces, and kernel interfaces that
#: no chapter needs and that sandbox escapes often go through.
REFUSED_CALLS = ("setns", "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
                 "userfaultfd", "io_uring_setup", "ptrace", "process_vm_readv",
                 "process_vm_writev", "kexec_load", "init_module", "finit_module",
                 *PAGES_INTO_PIPES)


AF_UNIX, AF_INET, AF_NETLINK = 1, 2, 16
SOCK_STREAM, SOCK_TYPE_MASK, IPPROTO_TCP, NETLINK_ROUTE = 1, 0xF, 6, 0
#: Socket families below AF_NETLINK that a kernel never opens (AF_UNIX and AF_INET are not
#: among them); every family above AF_NETLINK is refused by one comparison.
REFUSED_FAMILIES = tuple(f for f in range(AF_NETLINK) if f not in (AF_UNIX, AF_INET))


def _errno(number: int) -> int:
    return 0x00050000 | (number & 0xFFFF)   # SCMP_ACT_ERRNO(number)


def refuse_user_namespaces() -> None:
    """Install the seccomp filter of ``--no-userns`` (see the module docstring) in this process;
    it is inherited by everything it starts. clone3 answers ENOSYS, so that the C library falls
    back to clone, whose flags the filter can read; sockets are narrowed to the families a
    kernel uses (:func:`refuse_socket_families`)."""
    class Compare(ctypes.Structure):   # struct scmp_arg_cmp
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                    ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]

    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(Compare)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    context = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not context:
        raise OSError("seccomp_init failed")

    def rule(action: int, name: str, *compare: Compare) -> None:
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number < 0:   # not a system call on this architecture
            return
        array = (Compare * len(compare))(*compare) if compare else None
        if lib.seccomp_rule_add_array(context, action, number, len(compare), array) != 0:
            raise OSError(f"seccomp: cannot add a rule for {name}")

    new_user = Compare(0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    rule(_errno(errno.EPERM), "unshare", new_user)
    rule(_errno(errno.EPERM), "clone", new_user)
    rule(_errno(errno.ENOSYS), "clone3")
    for name in REFUSED_CALLS:
        rule(_errno(errno.EPERM), name)
    for advice in FORK_UNSHARED_ADVICE:
        rule(_errno(errno.EPERM), "madvise", Compare(2, SCMP_CMP_EQ, advice, 0))
    refuse_socket_families(rule, Compare)
    if lib.seccomp_load(context) != 0:
        raise OSError("seccomp_load failed")


def refuse_socket_families(rule, Compare) -> None:
    """The filter's rules for ``socket`` and ``socketpair`` (module docstring), added by
    ``rule(action, call, *comparisons)`` with ``Compare`` (struct scmp_arg_cmp): any family but
    AF_UNIX, AF_INET and AF_NETLINK answers EAFNOSUPPORT; AF_INET of a type but SOCK_STREAM or
    a protocol but TCP, and AF_NETLINK of a protocol but NETLINK_ROUTE, EPROTONOSUPPORT. The
    whole 64-bit arguments are compared (a family with bits set above the int that the kernel
    reads is above AF_NETLINK), the type through its low four bits (the kernel's
    SOCK_TYPE_MASK; the rest are flags)."""
    family, protocol = errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT
    rule(_errno(family), "socket", Compare(0, SCMP_CMP_GT, AF_NETLINK, 0))
    for number in REFUSED_FAMILIES:
        rule(_errno(family), "socket", Compare(0, SCMP_CMP_EQ, number, 0))
    rule(_errno(family), "socketpair", Compare(0, SCMP_CMP_NE, AF_UNIX, 0))
    inet = Compare(0, SCMP_CMP_EQ, AF_INET, 0)
    for kind in range(SOCK_TYPE_MASK + 1):
        if kind != SOCK_STREAM:
            rule(_errno(protocol), "socket", inet,
                 Compare(1, SCMP_CMP_MASKED_EQ, SOCK_TYPE_MASK, kind))
    rule(_errno(protocol), "socket", inet, Compare(2, SCMP_CMP_GT, IPPROTO_TCP, 0))
    for number in range(1, IPPROTO_TCP):
        rule(_errno(protocol), "socket", inet, Compare(2, SCMP_CMP_EQ, number, 0))
    rule(_errno(protocol), "socket", Compare(0, SCMP_CMP_EQ, AF_NETLINK, 0),
         Compare(2, SCMP_CMP_NE, NETLINK_ROUTE, 0))


def watch_lifeline(fd: int) -> None:
    """Start a watcher (``_watch``) of ``fd`` and of this process, the kernel to be; the caller
    keeps no copy of ``fd``.

    The watcher is a grandchild, handed to the sandbox's init at once: the kernel has no child
    of its own. ipykernel's shutdown terminates the kernel's children and waits, step by step,
    until none is left, and a child it killed stays a zombie no one reaps (the kernel waits for
    none): each shutdown waited 2.6 s for nothing."""
    kernel = os.getpid()
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:
            _watch(fd, kernel)
        os._exit(0)
    os.waitpid(middle, 0)
    os.close(fd)


def _watch(fd: int, kernel: int) -> None:
    """Wait for end of file on ``fd`` (the grader died, or let the kernel go) or for the end of
    the process ``kernel``, whichever comes first, then SIGKILL every process this one may
    signal (``kill(-1)``: in the sandbox's own process namespace, all but its init and
    itself). The second lets the sandbox end with its kernel: bwrap's init waits for every
    process in it, the watcher too."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    wait_ms = None
    try:
        poller.register(os.pidfd_open(kernel), select.POLLIN)   # readable once it has ended
    except ProcessLookupError:
        _end_sandbox()
    except (AttributeError, OSError):   # no pidfd (Linux before 5.3): look every 100 ms
        wait_ms = 100
    while _alive(kernel):
        ready = dict(poller.poll(wait_ms))
        if any(other != fd for other in ready):   # the kernel's pidfd: it has ended
            break
        if fd in ready and not _read(fd):   # end of file
            break
    _end_sandbox()


def _read(fd: int) -> bytes:
    """What the lifeline holds (nothing at end of file, or when it broke)."""
    try:
        return os.read(fd, 64)
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _end_sandbox() -> None:
    """The watcher's last act: kill what is left in the sandbox, then exit."""
    os.kill(-1, signal.SIGKILL)
    os._exit(0)


MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x2, 0x4, 0x8, 0x20


def hide_other_users_processes() -> bool:
    """Remount the sandbox's own ``/proc`` with ``hidepid=2``: a process sees only those of its
    own uid, so the kernel (about to become its uid) no longer sees bwrap, process 1, whose
    command line spells out the sandbox. Root only (bwrap's /proc is the sandbox's own
    instance, never the host's); False where it cannot be done."""
    libc = ctypes.CDLL(None, use_errno=True)
    flags = MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC
    return libc.mount(b"proc", b"/proc", b"proc", flags, b"hidepid=2") == 0


def join_groups(procs_files: list[str]) -> None:
    """Move this process into the control groups whose ``cgroup.procs`` files are given."""
    for path in procs_files:
        with open(path, "w") as handle:
            handle.write(str(os.getpid()))


def main(argv: list[str]) -> None:
    """Parse the options before ``--``, apply the limits, exec the command after it."""
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1:]
    pairs = list(zip(options[::2], options[1::2]))
    values = {key: int(value) for key, value in pairs if key != "--cgroup"}
    die_with_parent(values.get("--parent-pid", 0))
    join_groups([value for key, value in pairs if key == "--cgroup"])
    limit_memory(values.get("--memory-mb", 0), values.get("--address-space-mb", 0))
    limit_processes_and_files(values.get("--processes", 0), values.get("--file-mb", 0))
    if values.get("--no-userns"):
        refuse_user_namespaces()
    if values.get("--hide-pids"):
        hide_other_users_processes()
    if "--uid" in values:
        become(values["--uid"])
    if "--lifeline" in values:
        watch_lifeline(values["--lifeline"])
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
