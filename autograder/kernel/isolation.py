"""Each student's kernel in a bubblewrap sandbox (Debian/Ubuntu package ``bubblewrap``).

bubblewrap (``bwrap``, what Flatpak runs its applications in) builds the sandbox from Linux
namespaces, with no daemon and no image. The kernel it starts sees:

- the Python environment and the tinyprof package, read-only, at their usual paths, plus the
  system's ``/usr`` and the few files of ``/etc`` that libraries read; nothing else of the host:
  not the repository, the submissions, the output folder, home or the host's ``/tmp``;
- as its working folder, an empty private ``tmpfs`` of ``scratch_mb`` (the notebook's folder
  path, so relative file names work) and a private ``/tmp``; both vanish with the kernel;
- a private ``/dev/shm`` of ``shm_mb`` (a ``tmpfs``, mode 1777), so that the course's own code
  runs as on a student's machine: multiprocessing's locks and queues (POSIX semaphores are
  files there), chapter 09's process workers and PyTorch's ``DataLoader`` workers. Its pages,
  like those of every tmpfs file, are charged to the memory control group of the process that
  writes them (resources.py): what a kernel keeps there is its memory, within ``--memory``;
  a write past ``shm_mb`` fails with ``ENOSPC`` in the cell;
- no pseudo-terminals (``/dev/ptmx``, through ``/dev/pts/ptmx``, is ``/dev/null``'s, which
  cannot be opened there): a kernel needs none, and the bytes queued in a terminal's buffers
  are charged to no control group, so a loop could keep what it likes there unread, out of
  the leak check's sight (tests/redteam_leak_free.py's pty_buffers);
- one folder shared with its grader: the ZeroMQ ``ipc`` sockets of this one kernel, since it has
  no network at all (``--unshare-net``: not even the host's 127.0.0.1); a neighbouring kernel's
  sockets are in another folder it cannot see;
- as little as can be spared that tells a graded run from the student's own, since a loop
  that knows it is graded can behave differently then: the machine's own host name in a UTS
  namespace of its own (``--unshare-uts``, no ``--hostname``); only the environment variables
  it needs, none naming the grader's folders for IPython, Jupyter or matplotlib (their
  defaults under ``HOME``, the private /tmp, serve); as root, an account for the kernel's uid
  (KERNEL_USER, Binder's name) and a ``/proc`` that hides bwrap's command line (launcher.py
  ``--hide-pids``); under a control group, no rlimit the group makes redundant
  (:func:`rlimit_options`). What still tells a sandbox apart (no network, the mount table, the
  grader's paths, the seccomp filter, a core-file limit of 0, glibc's one malloc arena below)
  is its isolation or its measurement: no check's
  verdict may rest on the kernel not knowing it is graded, and the static review flags code
  that reads such things (intake/tells.py);
- its own process tree (``--unshare-pid``): it cannot see or signal other processes, and when
  the sandbox's first process ends or the grader dies (``--die-with-parent``, and a lifeline
  pipe for the moments before bwrap's own tie is in place: launcher.py), every process in it
  is killed, detached or not;
- one malloc arena for every thread (``MALLOC_ARENA_MAX=1``, read by glibc as the kernel
  starts): the leak check forks the kernel and measures what the fork keeps
  (tinyprof/testing/forked.py). A thread takes a spare arena of the process's, and glibc
  fixes the number of arenas the first time a second thread allocates, so a fork cannot change
  it: the kernel's own threads (ZeroMQ's, ipykernel's) have made theirs long before. The
  threads a loop then starts in the fork (a pool's) allocate in those arenas, whose top
  ``malloc_trim`` does not give back: a ``multiprocessing.Pool(4)`` made in each call kept
  2.8 MB more over two calls than over one, in a fork of a kernel with four threads, and
  0.1 MB with the one arena (measured). Reading the variable is flagged by the static review,
  like any environment variable of the machine's.

Limits are set by ``launcher.py`` inside the sandbox before the kernel starts: address space
(shared mappings included), data segment, processes, file size, no core files; where a control
group holds the kernel's memory and processes (resources.py), only those the group does not
hold (:func:`rlimit_options`), so that the sandbox's limits do not tell it apart. When the grader
runs as root, the launcher also gives up root for an unprivileged uid of its own (see
:func:`kernel_uid`), so that the process limit applies (Linux exempts root from it). Without
root, bwrap runs in a user namespace, which some systems switch off; :func:`check` then says
how to enable it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import resources
from .caches import SANDBOX_MPLCONFIGDIR
from .resources import running

#: When the grader is root, each kernel runs as its own unprivileged uid from this range (no
#: account needed), so that one kernel's processes never count against another's limit.
FIRST_UID, UIDS = 61000, 4000
#: Files of /etc that Python, numpy and matplotlib may read.
ETC_FILES = ("ld.so.cache", "localtime", "nsswitch.conf", "passwd", "group", "hosts")
#: Each kernel's sockets live in ``<tmp>/tinyprof-kernel-<pid of its grading worker>-<random>``.
SOCKETS_PREFIX = "tinyprof-kernel-"
#: What grades.csv and the summary say of kernels run with --no-sandbox.
NO_SANDBOX = "NONE (--no-sandbox): student code ran with the grader's own permissions"
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`; Fedora: "
                "`sudo dnf install bubblewrap`)")


class IsolationUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create a sandbox on this machine."""


@dataclass(frozen=True)
class Limits:
    """What one sandboxed kernel may use: ``memory_mb`` of data segment (0: no limit) and that
    plus ``reserve_mb`` of address space, ``processes`` at once, files of ``file_mb``, a
    working folder and /tmp of ``scratch_mb`` each, and a ``/dev/shm`` of ``shm_mb`` (POSIX
    shared memory: multiprocessing's locks and queues, DataLoader workers' batches)."""

    memory_mb: int = 2048
    reserve_mb: int = 768
    processes: int = 64
    file_mb: int = 64
    scratch_mb: int = 64
    shm_mb: int = 64

    @property
    def address_space_mb(self) -> int:
        """memory + reserve: an idle kernel reserves ~0.6 GB of address space it never uses
        (thread stacks, allocator arenas), so the address-space limit sits above the data
        limit; a shared mapping (which the data limit does not count) still cannot pass it."""
        return self.memory_mb + self.reserve_mb if self.memory_mb else 0


def running_as_root() -> bool:
    return os.geteuid() == 0


def kernel_uid() -> int:
    """The uid the kernels started by this grading process run as, when it is root: one per
    grading process (FIRST_UID + pid mod UIDS), so parallel kernels never share a process
    count."""
    return FIRST_UID + os.getpid() % UIDS


def find_bwrap() -> str:
    """The path of ``bwrap``, or IsolationUnavailable saying how to install it."""
    path = shutil.which("bwrap")
    if path is None:
        raise IsolationUnavailable(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}, or "
                                   "grade with --no-sandbox on a machine you trust the code on")
    return path


def read_only_roots() -> list[Path]:
    """Folders the kernel must read: the Python environment, the interpreter it was made from,
    and the tinyprof package (an editable install points into the repository: only the
    package folder is exposed, never the repository)."""
    roots = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
             Path(sys.executable).resolve().parent}
    spec = importlib.util.find_spec("tinyprof")
    if spec is not None and spec.origin:
        roots.add(Path(spec.origin).resolve().parent)
    return sorted(roots)


def _system_mounts() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr",
            *_parents([Path("/etc/fonts"), Path("/sys/devices/system/cpu")])]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args + ["--ro-bind-try", "/etc/fonts", "/etc/fonts",
                   "--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]


#: The account name of the kernel's uid in the sandbox (when the grader is root): Binder's, where
#: the course's launch links run the notebooks, so that code asking for its user
#: (``getpass.getuser()``, the cache folders of some libraries) runs as it does there; a uid
#: without an account makes that raise KeyError, only when graded.
KERNEL_USER = "jovyan"


def _accounts(sockets: Path) -> list[str]:
    """bwrap arguments that show the kernel /etc/passwd and /etc/group with an account for its
    uid (KERNEL_USER, home /tmp): the host's files plus that line, written into the kernel's
    sockets folder (which goes with the kernel) and bound read-only over the host's. None
    where they cannot be written there (a host's files larger than the folder's tmpfs): the
    host's files are shown as they are."""
    uid = kernel_uid()
    args = []
    for name, line in (("passwd", f"{KERNEL_USER}:x:{uid}:{uid}::/tmp:/bin/sh"),
                       ("group", f"{KERNEL_USER}:x:{uid}:")):
        try:
            host = Path(f"/etc/{name}").read_text(encoding="utf-8", errors="replace")
            kept = [entry for entry in host.splitlines() if entry.split(":")[2:3] != [str(uid)]]
            copy = sockets / name
            copy.write_text("\n".join([*kept, line]) + "\n", encoding="utf-8")
            copy.chmod(0o644)
        except OSError:
            return []
        args += ["--ro-bind", str(copy), f"/etc/{name}"]
    return args


def _environment(package_parent: Path) -> list[str]:
    """Only what the kernel needs, nothing that names the grader: IPython's, Jupyter's and
    matplotlib's folders are their defaults under HOME (the private /tmp), so no variable of
    the grader's own names them; glibc's one arena (module docstring) is what the leak check's
    forks need."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": "/tmp",
           "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1", "PYTHONPATH": str(package_parent),
           "PYDEVD_DISABLE_FILE_VALIDATION": "1", "MALLOC_ARENA_MAX": "1"}
    args = ["--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    return args


def _parents(paths: list[Path]) -> list[str]:
    """``--dir`` for every folder above a mount point, world-readable: bwrap would otherwise
    create them private to root, and a kernel that is not root could not reach what is
    mounted below them."""
    above = sorted({str(parent) for path in paths for parent in path.parents
                    if parent != Path("/")}, key=lambda p: (p.count("/"), p))
    return [arg for folder in above for arg in ("--perms", "0755", "--dir", folder)]


def sandbox_command(command: list[str], *, scratch: Path, sockets: Path, limits: Limits,
                    parent_pid: int, cgroup_procs: list[Path] = (),
                    font_cache: list[Path] = (), lifeline_fd: int | None = None) -> list[str]:
    """``command`` (a kernel's argv) wrapped: bwrap with the mounts and namespaces of the module
    docstring, then launcher.py with ``limits``, then the kernel. The first process joins the
    control group whose ``cgroup_procs`` files are given (resources.py) before bwrap starts;
    ``font_cache`` files (caches.py) appear read-only in the kernel's matplotlib cache; the sandbox
    ends when the grader's end of ``lifeline_fd`` closes (launcher.py's ``--lifeline``)."""
    spec = importlib.util.find_spec("tinyprof")
    package_parent = (Path(spec.origin).resolve().parent.parent if spec and spec.origin
                      else Path("/"))
    launcher_file = Path(__file__).resolve().with_name("launcher.py")
    roots = read_only_roots() + [launcher_file]  # of autograder/, only this one file
    args = [find_bwrap(), "--die-with-parent", "--new-session", "--unshare-pid",
            "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not running_as_root():
        args += ["--unshare-user"]
    args += _system_mounts()
    if running_as_root():
        args += _accounts(sockets)
    args += ["--perms", "1777", "--size", str(limits.scratch_mb * 2**20), "--tmpfs", "/tmp"]
    args += ["--perms", "1777", "--dir", str(Path(SANDBOX_MPLCONFIGDIR).parent),
             "--perms", "1777", "--dir", SANDBOX_MPLCONFIGDIR]
    for cached in font_cache:
        args += ["--ro-bind", str(cached), f"{SANDBOX_MPLCONFIGDIR}/{cached.name}"]
    args += _parents([*roots, scratch, sockets])
    for root in roots:
        args += ["--ro-bind", str(root), str(root)]
    args += ["--proc", "/proc", "--dev", "/dev", "--ro-bind", "/dev/null", "/dev/pts/ptmx",
             "--perms", "1777", "--size", str(limits.shm_mb * 2**20), "--tmpfs", "/dev/shm",
             "--perms", "1777", "--size", str(limits.scratch_mb * 2**20),
             "--tmpfs", str(scratch), "--bind", str(sockets), str(sockets),
             "--chdir", str(scratch)]
    args += _environment(package_parent)
    launcher = [sys.executable, "-S", str(launcher_file),
                *rlimit_options(limits, grouped=bool(cgroup_procs)), "--parent-pid", "0"]
    if running_as_root():
        launcher += ["--uid", str(kernel_uid()), "--hide-pids", "1"]
    if seccomp_available():
        launcher += ["--no-userns", "1"]
    if lifeline_fd is not None:
        launcher += ["--lifeline", str(lifeline_fd)]
    # bwrap ties itself to its parent only once its set-up is done; a grader killed in those
    # milliseconds would leave an orphan sandbox. launcher.py ties bwrap to the grader before
    # it starts (PR_SET_PDEATHSIG survives exec), and exits if the grader is already gone.
    guard = [sys.executable, "-S", str(launcher_file), "--parent-pid", str(parent_pid)]
    for procs in cgroup_procs:
        guard += ["--cgroup", str(procs)]
    guard.append("--")
    return guard + args + ["--", *launcher, "--", *command]


def rlimit_options(limits: Limits, grouped: bool) -> list[str]:
    """launcher.py's options for the kernel's rlimits. A kernel in a control group of its own
    (resources.py: memory and processes counted over all its processes) gets no rlimit of
    memory, address space or processes, and none of file size when every folder it can write
    is a size-limited tmpfs whose pages the group counts (:func:`private_mounts`): the group
    and the folders hold those, and ``/proc/self/limits`` then reads as on a student's machine
    or Binder (unlimited), so that a loop cannot key on the sandbox's limits. A kernel past its
    memory is then stopped by the group's OOM killer (the cell is lost, the notebook run again
    without it) instead of a MemoryError in the cell. Without a group, every limit applies."""
    memory, address_space, processes, file_mb = (limits.memory_mb, limits.address_space_mb,
                                                 limits.processes, limits.file_mb)
    if grouped:
        memory = address_space = processes = 0
        if _private_mounts:
            file_mb = 0
    return ["--memory-mb", str(memory), "--address-space-mb", str(address_space),
            "--processes", str(processes), "--file-mb", str(file_mb)]


@lru_cache(maxsize=1)
def seccomp_available() -> bool:
    """Whether libseccomp is on this machine (launcher.py's ``--no-userns`` filter needs it)."""
    return ctypes.util.find_library("seccomp") is not None


#: Set by :func:`private_mounts`: socket folders are then small tmpfs mounts of this process.
_private_mounts = False
CLONE_NEWNS, MS_REC, MS_PRIVATE, MNT_DETACH = 0x00020000, 0x4000, 0x40000, 2
#: The tmpfs of one kernel's socket folder: its sockets, its connection file, little else.
SOCKETS_TMPFS = "size=256k,nr_inodes=64,mode=0700"


def private_mounts() -> bool:
    """Give this process (a grading worker) a mount namespace of its own, so that each
    kernel's socket folder can be a small tmpfs (SOCKETS_TMPFS) that no other process sees and
    that vanishes with this process, however it ends. Root only; False where not possible."""
    global _private_mounts
    if not running_as_root() or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(None, b"/", None, MS_REC | MS_PRIVATE,
                                                    None) != 0:
        return False
    _private_mounts = True
    return True


def new_sockets_folder() -> Path:
    """A new folder for one kernel's sockets, named after this process (the grading worker
    that owns it): private to the grader and, when the kernel runs as its own uid, handed to
    that uid. Under :func:`private_mounts` it is a tmpfs of SOCKETS_TMPFS, so a kernel cannot
    fill the host's disk through it."""
    folder = Path(tempfile.mkdtemp(prefix=f"{SOCKETS_PREFIX}{os.getpid()}-"))
    if _private_mounts:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mount(b"tmpfs", str(folder).encode(), b"tmpfs", 0,
                      SOCKETS_TMPFS.encode()) != 0:
            raise OSError(ctypes.get_errno(), f"cannot mount a tmpfs on {folder}")
    if running_as_root():
        os.chown(folder, kernel_uid(), kernel_uid())
    return folder


def remove_sockets_folder(folder: Path) -> None:
    """Delete a kernel's socket folder (unmounting its tmpfs first)."""
    if _private_mounts:
        ctypes.CDLL(None, use_errno=True).umount2(str(folder).encode(), MNT_DETACH)
    shutil.rmtree(folder, ignore_errors=True)


def sweep_orphan_sockets(root: Path | None = None) -> list[Path]:
    """Remove the socket folders whose grading worker is gone, and return them.

    A worker removes its kernel's folder itself; one killed outright (SIGKILL, a lost machine)
    cannot. The folders hold only sockets, never grades. A folder of a worker that is still
    running (another grader's, on this machine) is left alone, and so is a symbolic link that
    someone else put in the shared temporary folder under such a name."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{SOCKETS_PREFIX}*-*"):
        owner = folder.name[len(SOCKETS_PREFIX):].split("-", 1)[0]
        if (not folder.is_symlink() and folder.is_dir() and owner.isdigit()
                and not running(int(owner))):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@lru_cache(maxsize=1)
def check() -> str:
    """A description of the sandbox if a trial one starts (``bwrap`` with the real namespaces
    runs ``true``); otherwise IsolationUnavailable naming the cause and the remedy."""
    bwrap = find_bwrap()
    trial = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc",
             *(["--unshare-user"] if not running_as_root() else []),
             "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true"]
    try:
        done = subprocess.run(trial, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise IsolationUnavailable(f"bubblewrap could not run: {error}") from error
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no reason given"
        raise IsolationUnavailable(
            f"bubblewrap cannot create a sandbox here ({reason}). Unprivileged user namespaces "
            "may be switched off: `sudo sysctl kernel.unprivileged_userns_clone=1` (Debian), or "
            "on Ubuntu 24.04+ `sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0` (or "
            "an AppArmor profile allowing bwrap); in a container, run it with user namespaces "
            "allowed. Or grade with --no-sandbox on a machine you trust the code on.")
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip()
    mode = ("as root, each kernel as an unprivileged uid of its own" if running_as_root()
            else "in a user namespace")
    return f"{version or 'bubblewrap'} ({mode})"


def in_use(sandbox: bool = True) -> str:
    """What grades.csv's ``sandbox`` column says of kernels started by this process: the
    sandbox (:func:`check`, which raises IsolationUnavailable where none can start), how their
    resources are held, and the system-call filter; or NO_SANDBOX. A cluster worker says it of
    itself, since each machine has its own bubblewrap, control groups and libseccomp."""
    parts = [check() if sandbox else NO_SANDBOX, resources.describe()]
    if sandbox and seccomp_available():
        parts.append("seccomp: no user namespaces, sockets of the kinds a kernel uses")
    parts.append(resources.speed_timing())
    return "; ".join(parts)


__all__ = ["IsolationUnavailable", "Limits", "NO_SANDBOX", "SOCKETS_PREFIX", "check", "find_bwrap",
           "in_use", "new_sockets_folder", "read_only_roots", "sandbox_command",
           "sweep_orphan_sockets"]
