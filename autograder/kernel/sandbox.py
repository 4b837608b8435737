"""A student's kernel in its sandbox: the kernel manager the grader starts every kernel with.

``SandboxedKernelManager`` starts the kernel through launcher.py (per-process limits, the
seccomp filter), inside bubblewrap (isolation.py), in a control group of its own
(resources.py), with no descriptor of the grader's; it measures the kernel's CPU time and
memory, and removes the group and the socket folder when the kernel is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, List, Type, Unicode

from . import isolation, resources

LAUNCHER = Path(__file__).resolve().with_name("launcher.py")
#: How long a message to the kernel (any channel) may wait for the kernel to take it.
CONTROL_SEND_MS = 2000


class GuardedKernelClient(AsyncKernelClient):
    """The grader's client of a student's kernel: no send on any of its channels waits for
    ever. A kernel can break its end of a channel (write garbage into the socket's descriptor);
    a ZeroMQ send with no peer to take it then waits until the peer comes back, which a broken
    kernel never does, and jupyter_client's heartbeat thread, blocked in such a send, would
    hold the grader when it stops the channels. Sends give up after SEND_MS instead (the
    heartbeat then counts the kernel as dead)."""

    def _context_default(self) -> zmq.asyncio.Context:
        self._created_context = True
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.SNDTIMEO, CONTROL_SEND_MS)
        context.setsockopt(zmq.LINGER, 0)
        return context


class SandboxedKernelManager(AsyncKernelManager):
    """Starts the kernel through launcher.py (memory, process and file limits, one BLAS
    thread), inside a bubblewrap sandbox when ``isolate`` (isolation.py).

    A sandboxed kernel has no network, so it talks to the grader over ZeroMQ ``ipc`` sockets in
    a private folder of its own, and it is interrupted by a message on its control channel (a
    signal would reach bwrap, not the kernel). Its working folder is an empty private tmpfs at
    the path the grader asked for."""

    client_class = "autograder.kernel.sandbox.GuardedKernelClient"
    client_factory = Type(klass="autograder.kernel.sandbox.GuardedKernelClient")
    memory_mb = Integer(2048, help="Kernel data-segment limit in MB (0: none)").tag(config=True)
    isolate = Bool(True, help="Run the kernel in a bubblewrap sandbox").tag(config=True)
    font_cache = List(Unicode(), help="matplotlib font cache files (caches.py) each sandbox "
                                      "reads instead of building its own").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._sockets: Path | None = None
        self._group: resources.KernelGroup | None = None
        self._lifeline: tuple[int, int] | None = None   # (read end, write end), launcher.py
        self._cwd = os.getcwd()
        if self.isolate:
            self._sockets = isolation.new_sockets_folder()
            self.transport, self.ip = "ipc", str(self._sockets / "kernel")
            self.connection_file = str(self._sockets / "connection.json")

    @property
    def limits(self) -> isolation.Limits:
        return isolation.Limits(memory_mb=self.memory_mb)

    async def _async_pre_start_kernel(self, **kw):
        self._cwd = kw.get("cwd") or self._cwd
        if self.isolate:
            self.kernel_spec.interrupt_mode = "message"
            self.close_lifeline()
            self._lifeline = os.pipe()   # neither end inheritable but as passed below
        command, kw = await super()._async_pre_start_kernel(**kw)
        # The kernel inherits no descriptor of the grader's: not its log (stderr), not its pipe;
        # the sandbox's watcher gets the read end of its lifeline (launcher.py).
        kw.update(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self._lifeline is not None:
            kw["pass_fds"] = (self._lifeline[0],)
        return command, kw

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        try:
            await super()._async_launch_kernel(kernel_cmd, **kw)
        finally:
            if self._lifeline is not None:   # the sandbox has its copy of the read end
                os.close(self._lifeline[0])
                self._lifeline = (-1, self._lifeline[1])

    def close_lifeline(self) -> None:
        """Let the sandbox go: its watcher kills what is left in it (launcher.py)."""
        if self._lifeline is not None:
            for fd in self._lifeline:
                if fd >= 0:
                    os.close(fd)
            self._lifeline = None

    def write_connection_file(self, **kwargs) -> None:
        super().write_connection_file(**kwargs)
        if self.isolate and isolation.running_as_root():
            os.chown(self.connection_file, isolation.kernel_uid(), isolation.kernel_uid())

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        command = super().format_kernel_cmd(extra_arguments)
        limits = self.limits
        self.remove_group()
        self._group = resources.create(limits.memory_mb, limits.processes)
        procs = self._group.procs_files if self._group else []
        if self.isolate:
            return isolation.sandbox_command(
                command, scratch=Path(self._cwd), sockets=self._sockets, limits=limits,
                parent_pid=os.getpid(), cgroup_procs=procs,
                font_cache=[Path(f) for f in self.font_cache],
                lifeline_fd=self._lifeline[0] if self._lifeline else None)
        return [sys.executable, "-S", str(LAUNCHER), "--memory-mb", str(limits.memory_mb),
                "--address-space-mb", str(limits.address_space_mb),
                "--file-mb", str(limits.file_mb), "--parent-pid", str(os.getpid()),
                *(arg for path in procs for arg in ("--cgroup", str(path))), "--", *command]

    def cpu_seconds(self) -> float:
        """CPU time used so far by every process of the kernel (its control group, or its
        process tree where there is none)."""
        if self._group is not None:
            return self._group.cpu_seconds()
        process = getattr(getattr(self, "provisioner", None), "process", None)
        return resources.tree_cpu_seconds(process.pid) if process is not None else 0.0

    @property
    def in_control_group(self) -> bool:
        """Whether the running kernel has a control group of its own (its CPU time and
        memory are then the group's, all its processes together)."""
        return self._group is not None

    def memory_peak_bytes(self) -> int | None:
        return self._group.memory_peak_bytes() if self._group is not None else None

    def memory_bytes(self, sockets_age: float = 0.0) -> int:
        """Memory used now by the kernel: its control group's (all its processes, with the
        files of its tmpfs folders: scratch, /tmp, /dev/shm; the socket queues no group is
        charged for as read at most ``sockets_age`` seconds ago), or its process tree's
        resident set where there is none."""
        found = self._group.memory_bytes(sockets_age) if self._group is not None else None
        if found is not None:
            return found
        process = getattr(getattr(self, "provisioner", None), "process", None)
        return resources.tree_rss_bytes(process.pid) if process is not None else 0

    def begin_run(self) -> None:
        """Take the kernel's processes now as those a leak-check run found
        (``resources.KernelGroup.begin_run``); nothing without a control group."""
        if self._group is not None:
            self._group.begin_run()

    def shared_bytes(self) -> dict[str, int]:
        """The parts of :meth:`memory_bytes` a fork of the kernel does not own, by kind
        (``resources.KernelGroup.shared_bytes``: file pages, the kernel's objects, socket
        queues, the memory of the processes :meth:`begin_run` found); none without a control
        group."""
        return self._group.shared_bytes() if self._group is not None else {}

    def task_count(self) -> int:
        """Threads running now in the kernel's processes, all of them: its control group's
        tasks, or its process tree's threads from ``/proc`` where no group counts them."""
        found = self._group.task_count() if self._group is not None else None
        if found is not None:
            return found
        process = getattr(getattr(self, "provisioner", None), "process", None)
        return resources.tree_task_count(process.pid) if process is not None else 0

    def memory_method(self) -> str:
        """How :meth:`memory_bytes` reads: a sentence for the grader's messages."""
        if self._group is not None and self._group.memory_bytes() is not None:
            return ("the memory of the kernel's control group (all its processes, the files "
                    "of its scratch folder, /tmp and /dev/shm, and its socket queues), read by "
                    "the grader")
        return ("the resident memory of the kernel's processes, read by the grader from /proc "
                "(no control groups here: files in its scratch folder, /tmp and /dev/shm are "
                "not counted)")

    def exit_status(self, wait_s: float = 1.0) -> int | None:
        """How the kernel process ended (its own status, not bwrap's), or None if it runs."""
        import time

        process = getattr(getattr(self, "provisioner", None), "process", None)
        if process is None:
            return None
        deadline = time.monotonic() + wait_s
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if process.returncode is None:
            return None
        return _unwrapped(process.returncode) if self.isolate else process.returncode

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        self.close_lifeline()
        self.remove_group()
        if not restart:
            self.remove_sockets()

    def remove_group(self) -> None:
        """Kill whatever the kernel left running and delete its control group."""
        if self._group is not None:
            self._group.remove()
            self._group = None

    def remove_sockets(self) -> None:
        """Delete this kernel's socket folder (also when its shutdown failed half way)."""
        self.close_lifeline()
        self.remove_group()
        if self._sockets is not None:
            isolation.remove_sockets_folder(self._sockets)

    cleanup_resources = _async_cleanup_resources

    # A kernel can break its end of the control channel (write garbage into the socket's
    # descriptor, close it). A ZeroMQ send with no peer to take it then waits for ever, and
    # jupyter_client sends an interrupt even before killing a kernel: give up after a while.

    def _connect_control_socket(self) -> None:
        if self._control_socket is None:
            super()._connect_control_socket()
            self._control_socket.setsockopt(zmq.SNDTIMEO, CONTROL_SEND_MS)
            self._control_socket.linger = 0

    async def _async_interrupt_kernel(self) -> None:
        try:
            await super()._async_interrupt_kernel()
        except zmq.Again:
            self.log.warning("the kernel's control channel takes no message: not interrupted")

    async def _async_request_shutdown(self, restart: bool = False) -> None:
        try:
            await super()._async_request_shutdown(restart=restart)
        except zmq.Again:
            self.log.warning("the kernel's control channel takes no message: it will be killed")


def _unwrapped(status: int) -> int:
    """The kernel's own exit status behind bwrap's: bwrap exits with 128 + N when the process it
    ran was killed by signal N, which ``returncode`` reports as −N for a direct child."""
    if status > 128:
        try:
            return -signal.Signals(status - 128)
        except ValueError:
            pass
    return status


def describe_exit(status: int | None) -> str:
    """How a process ended, from its ``returncode`` (negative: killed by that signal)."""
    if status is None:
        return "it stopped responding"
    if status >= 0:
        return f"it exited with status {status}, as os._exit() or a crash in C code does"
    try:
        name = signal.Signals(-status).name
    except ValueError:
        name = f"signal {-status}"
    why = {"SIGSEGV": "a crash (segmentation fault)", "SIGABRT": "a crash (abort)",
           "SIGKILL": "killed, typically for using too much memory",
           "SIGBUS": "a crash (bus error)"}.get(name, "killed by a signal")
    return f"{name}: {why}"


__all__ = ["SandboxedKernelManager", "describe_exit"]
