"""What a notebook can read to tell the graded run from its author's own: the review's list.

*Threat*: a submission that behaves only when graded (REDTEAM.md's seventh way to look). A loop
that keeps every step's arrays unless it sees the grader (a fork's process id, the grader's
request on its call stack, the sandbox's limits, no network, the grader's user, folders or
environment variables) is leak-free exactly where it is measured.

*Defence*, in two parts. What can be made the same is made the same where the run happens: the
sandbox keeps the machine's host name, an account for the kernel's uid, only the environment
variables a kernel needs (kernel/isolation.py), and under a control group no rlimit of memory
or processes of its own (the group holds those; ``rlimit_options``); the
leak check runs its loop on a seed people type and on a drawn one (tinyprof/memcheck.py). What
cannot be made the same is listed here, for the static review (review.py) to flag, as unsure
(honest code can do it too, so the summary lists it for review): a fork has another process
id, the grader's request is on the stack, a sandbox has no network but the loopback, and the
grader's machine is not the student's (its paths, user, host name and files).

The lists name *reads*: a name of ``os`` or ``socket`` read to learn who or where the process
is, a frame or stack inspected, an environment variable other than the thread and device
settings the chapters set, a path of ``/proc``, ``/sys`` or another machine's home. None can be
complete (a path can be computed, a module reached by another name); they catch the plain
ways, and the tests' own cheats (tests/redteam_leak_free.py) are among them.
"""

from __future__ import annotations

import re

#: Names whose only use is to learn the process's identity, its place in the process tree,
#: its limits or its machine, on whatever module they are reached (``os``, ``posix``,
#: ``socket`` reached as ``http.client.socket``, ``getpass``, ``threading``, ``platform``):
#: name → what it reads.
IDENTITY = {
    "getpid": "the process id (a fork of the kernel has another)",
    "getppid": "the parent's process id",
    "getpgrp": "the process group", "getpgid": "the process group", "getsid": "the session",
    "pidfd_open": "another process by its id",
    "get_native_id": "the thread's id in the system (a fork's main thread has another)",
    "getuid": "the user id", "geteuid": "the user id", "getgid": "the group id",
    "getegid": "the group id", "getresuid": "the user ids", "getgroups": "the groups",
    "getlogin": "the user name", "getuser": "the user name", "getpwuid": "the user's account",
    "gethostname": "the host name", "getfqdn": "the host name", "node": "the host name",
    "uname": "the machine's names", "if_nameindex": "the network interfaces",
    "if_nametoindex": "the network interfaces", "getrlimit": "the process's limits",
    "prlimit": "the process's limits", "getloadavg": "the machine's load",
    "getcwd": "the working folder's path", "getcwdb": "the working folder's path",
    "cwd": "the working folder's path", "home": "the home folder's path",
    "expanduser": "the home folder's path",
    "process_time": "the CPU time the process has used so far (a fork of the kernel starts "
                    "at 0)",
    "process_time_ns": "the CPU time the process has used so far (a fork starts at 0)",
    "thread_time": "the CPU time the thread has used so far (a fork's thread starts at 0)",
    "thread_time_ns": "the CPU time the thread has used so far (a fork's starts at 0)",
    "times": "the CPU time the process has used so far (a fork starts at 0)",
    "get_freeze_count": "the collector's frozen objects (the grader's fork freezes them)",
    "statvfs": "the size of a folder's file system (the sandbox's is a small tmpfs)",
    "fstatvfs": "the size of a file's file system (the sandbox's is a small tmpfs)",
    "disk_usage": "the size of a folder's file system (the sandbox's is a small tmpfs)",
    "AF_INET6": "whether an IPv6 socket can be made (the sandbox refuses them)",
}
#: Modules on which a name of IDENTITY is read (``platform.node``, not a tree's ``node``).
IDENTITY_MODULES = frozenset({"os", "posix", "socket", "getpass", "threading", "platform",
                              "pwd", "resource", "pathlib", "Path", "os.path", "path", "time",
                              "gc", "shutil"})
#: Names of IDENTITY distinctive enough to flag on any object (``http.client.socket.
#: gethostname``): the others (``node``, ``cwd``, ``home``) only on IDENTITY_MODULES.
DISTINCTIVE = frozenset(IDENTITY) - {"node", "cwd", "home", "uname", "getcwd", "times"}
#: What reads the call stack or the frames above a function (who called it): module → names.
STACK_READERS = {
    "traceback": frozenset({"extract_stack", "format_stack", "print_stack", "walk_stack",
                            "StackSummary"}),
    "inspect": frozenset({"stack", "currentframe", "getouterframes", "getframeinfo", "trace"}),
    "sys": frozenset({"_getframe", "_current_frames", "_getframemodulename"}),
}
#: What reads the call stack on any object (a logger's ``findCaller``).
STACK_READERS_ANYWHERE = frozenset({"findCaller"})
#: Environment variables a notebook may read: the thread and device settings the chapters
#: set themselves (their values are the chapters', not the machine's).
SETTINGS_VARIABLES = frozenset({"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                                "CUDA_VISIBLE_DEVICES", "PYTHONHASHSEED", "MPLBACKEND",
                                "TOKENIZERS_PARALLELISM", "KMP_DUPLICATE_LIB_OK"})
#: Paths that describe the process or the machine rather than hold the notebook's data: the
#: kernel's own view of itself (``/proc``, ``/sys``, the account and host files), another
#: machine's home, a container's marker. ``/proc/self/statm`` is chapter 10's own reading.
MACHINE_PATH = re.compile(r"^(/proc(/|$)|/sys(/|$)|/etc/(hostname|passwd|group|machine-id|"
                          r"os-release|hosts)$|/home/|/Users/|/root(/|$)|/run/|/\.dockerenv$|"
                          r"/var(/|$)|[A-Za-z]:[\\/]Users[\\/])")
#: The grader's own modules, imported in a graded kernel only: a notebook that names them
#: (``'tinyprof.remote' in sys.modules``) asks whether it is graded.
GRADER_MODULES = re.compile(r"^(tinyprof\.(remote|testing\.forked)|autograder)(\.|$)")
ALLOWED_PATHS = frozenset({"/proc/self/statm"})


def identity_read(module: str | None, name: str) -> str | None:
    """What reading ``name`` on ``module`` (None: an object of unknown kind) tells the code,
    when it is a read of the process's identity or machine; None otherwise."""
    if name in DISTINCTIVE or name in IDENTITY and module in IDENTITY_MODULES:
        return IDENTITY[name]
    return None


def stack_read(module: str | None, name: str) -> bool:
    """Whether ``module.name`` reads the call stack (who called this code)."""
    return name in STACK_READERS.get(module or "", ()) or name in STACK_READERS_ANYWHERE


def machine_path(text: str) -> bool:
    """Whether ``text`` is a path that describes the process or the machine (MACHINE_PATH)."""
    return text not in ALLOWED_PATHS and bool(MACHINE_PATH.match(text.strip()))


def grader_module(text: str) -> bool:
    """Whether ``text`` names one of the grader's modules (GRADER_MODULES)."""
    return bool(GRADER_MODULES.match(text.strip()))


def unsettled_variable(key: str | None) -> bool:
    """Whether reading the environment variable ``key`` (None: computed, or the whole
    environment) reads something of the machine's rather than a chapter's setting."""
    return key not in SETTINGS_VARIABLES


__all__ = ["ALLOWED_PATHS", "DISTINCTIVE", "GRADER_MODULES", "IDENTITY", "IDENTITY_MODULES",
           "MACHINE_PATH", "SETTINGS_VARIABLES", "STACK_READERS", "STACK_READERS_ANYWHERE",
           "grader_module", "identity_read", "machine_path", "stack_read", "unsettled_variable"]
