"""nbgrader's Execute preprocessor, hardened for a cohort of untrusted notebooks.

``GraderExecute`` replaces ``Execute`` in the autograde pipeline. On top of nbgrader's per-cell
timeout it adds:

- a sandbox and limits for the kernel (``SandboxedKernelManager`` starts it in bubblewrap,
  isolation.py, through launcher.py);
- a dead kernel (``os._exit``, a segfault, the OOM killer) or one that ignores the interrupt
  after a timeout no longer fails the whole submission: the cell is given an error output
  saying what happened, and the notebook is run again from the top in a fresh kernel without
  that cell (up to ``max_kernel_restarts`` times; after that the rest is marked not run);
- at most ``max_output_chars`` printed characters (and ``max_display_chars`` of images and HTML)
  are kept per cell while it runs, so a cell printing megabytes bloats neither the grader's
  memory nor the feedback page (OutputBudget).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer

from . import isolation
from .cells import DIED_ENAME, DROPPED_MARK, NOT_RUN_ENAME, TIMEOUT_ENAME

LAUNCHER = Path(__file__).resolve().with_name("launcher.py")


class SandboxedKernelManager(AsyncKernelManager):
    """Starts the kernel through launcher.py (memory, process and file limits, one BLAS
    thread), inside a bubblewrap sandbox when ``isolate`` (isolation.py).

    A sandboxed kernel has no network, so it talks to the grader over ZeroMQ ``ipc`` sockets in
    a private folder of its own, and it is interrupted by a message on its control channel (a
    signal would reach bwrap, not the kernel). Its working folder is an empty private tmpfs at
    the path the grader asked for."""

    memory_mb = Integer(2048, help="Kernel data-segment limit in MB (0: none)").tag(config=True)
    isolate = Bool(True, help="Run the kernel in a bubblewrap sandbox").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._sockets: Path | None = None
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
        return await super()._async_pre_start_kernel(**kw)

    def write_connection_file(self, **kwargs) -> None:
        super().write_connection_file(**kwargs)
        if self.isolate and isolation.running_as_root():
            os.chown(self.connection_file, isolation.kernel_uid(), isolation.kernel_uid())

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        command = super().format_kernel_cmd(extra_arguments)
        if self.isolate:
            return isolation.sandbox_command(command, scratch=Path(self._cwd),
                                             sockets=self._sockets, limits=self.limits,
                                             parent_pid=os.getpid())
        limits = self.limits
        return [sys.executable, "-S", str(LAUNCHER), "--memory-mb", str(limits.memory_mb),
                "--address-space-mb", str(limits.address_space_mb),
                "--file-mb", str(limits.file_mb), "--parent-pid", str(os.getpid()), "--",
                *command]

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            self.remove_sockets()

    def remove_sockets(self) -> None:
        """Delete this kernel's socket folder (also when its shutdown failed half way)."""
        if self._sockets is not None:
            shutil.rmtree(self._sockets, ignore_errors=True)

    cleanup_resources = _async_cleanup_resources


class KernelLost(Exception):
    """The kernel died, or would not stop, while running cell ``index``."""

    def __init__(self, index: int, outputs: list) -> None:
        super().__init__(f"kernel lost at cell {index}")
        self.index, self.outputs = index, outputs


def error_output(ename: str, evalue: str) -> NotebookNode:
    """An error output as a kernel would send it; nbgrader scores it as a failure."""
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])


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


class GraderExecute(Execute):
    """nbgrader's Execute with a memory limit, kernel-death recovery and an output cap."""

    memory_mb = Integer(2048, help="Kernel memory limit in MB (0: none)").tag(config=True)
    isolate = Bool(True, help="Run each kernel in a bubblewrap sandbox").tag(config=True)
    max_output_chars = Integer(100_000, help="Printed characters kept per cell").tag(config=True)
    max_display_chars = Integer(5_000_000, help="Characters of images and HTML kept per cell").tag(
        config=True)
    max_kernel_restarts = Integer(3, help="Fresh kernels per notebook").tag(config=True)
    interrupt_grace = Integer(10, help="Seconds a kernel has to answer after an interrupt").tag(
        config=True)

    def create_kernel_manager(self) -> SandboxedKernelManager:
        if not self.kernel_name:
            self.kernel_name = self.nb.metadata.get("kernelspec", {}).get("name", "") or ""
        self.km = SandboxedKernelManager(kernel_name=self.kernel_name or "python3",
                                         config=self.config, memory_mb=self.memory_mb,
                                         isolate=self.isolate)
        self._managers.append(self.km)
        return self.km

    def preprocess(self, nb, resources=None, km=None):
        pristine = copy.deepcopy(nb.cells)
        self._replaced: dict[int, list] = {}
        self._stop_at: int | None = None
        self._managers: list[SandboxedKernelManager] = []
        try:
            while True:
                try:
                    return super().preprocess(nb, resources, km)
                except KernelLost as lost:
                    self.log.warning("kernel lost at cell %d; running the notebook again "
                                     "without it", lost.index)
                    self._replaced[lost.index] = lost.outputs
                    if len(self._replaced) > self.max_kernel_restarts:
                        self._stop_at = lost.index + 1
                    nb.cells = copy.deepcopy(pristine)
        finally:  # a kernel lost mid-cell may never have run its own clean-up
            for manager in self._managers:
                manager.remove_sockets()

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and self._skipped(index):
            cell.outputs = self._replaced.get(index) or [error_output(
                NOT_RUN_ENAME, f"not run: the kernel was lost {len(self._replaced)} times, so the "
                "grader stopped running this notebook")]
            return cell, self.resources
        ignore = self.config.IgnorePattern
        self._budget = OutputBudget(
            self.max_output_chars, self.max_display_chars,
            ignore.get("pattern", "") if ignore.get("enabled", False) else "")
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            died = error_output(DIED_ENAME, (
                f"The kernel died while running this cell ({describe_exit(self._exit_status())}). "
                "The grader ran the notebook again without this cell; whatever it defines is "
                "missing."))
            raise KernelLost(index, list(cell.get("outputs", [])) + [died]) from None
        except CellTimeoutError:  # interrupted, but no sign of life on IOPub
            raise KernelLost(index, self._stuck(cell)) from None
        if cell.cell_type == "code":
            cell.outputs.extend(self._budget.markers())
        if _timed_out(cell) and not self._answers():
            raise KernelLost(index, self._stuck(cell))
        return cell, resources

    def _stuck(self, cell) -> list:
        """Kill a kernel that ignored the interrupt after a timeout; the cell's outputs."""
        try:
            run_sync(self.km.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - already gone is fine
            pass
        return [o for o in cell.get("outputs", []) if o.get("output_type") != "error"] + [
            error_output(TIMEOUT_ENAME, (
                f"This cell ran past the {self.timeout} s limit and did not stop when "
                "interrupted. The grader restarted the kernel and ran the notebook again "
                "without this cell."))]

    def _skipped(self, index: int) -> bool:
        return index in self._replaced or (self._stop_at is not None and index >= self._stop_at)

    def _exit_status(self) -> int | None:
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        if process is None:
            return None
        for _ in range(20):
            if process.poll() is not None:
                return _unwrapped(process.returncode) if self.isolate else process.returncode
            time.sleep(0.05)
        return None

    def _answers(self) -> bool:
        """Whether the kernel answers a kernel_info request within ``interrupt_grace`` s."""
        try:
            msg_id = self.kc.kernel_info()
            deadline = time.monotonic() + self.interrupt_grace
            while (left := deadline - time.monotonic()) > 0:
                reply = run_sync(self.kc.shell_channel.get_msg)(timeout=left)
                if reply["parent_header"].get("msg_id") == msg_id:
                    return True
        except Exception:  # noqa: BLE001 - no reply in time, for whatever reason
            return False
        return False

    def output(self, outs, msg, display_id, cell_index):
        """Keep only what the cell's output budget admits."""
        admitted = self._budget.admit(msg)
        return None if admitted is None else super().output(outs, admitted, display_id,
                                                            cell_index)


@dataclass
class OutputBudget:
    """What one cell may keep: ``text`` characters printed (stdout and stderr together) and
    ``rich`` characters of displays (images, HTML). stderr text matching ``ignore`` is dropped at
    once, exactly as nbgrader's IgnorePattern would remove it after the run; when other stderr
    text is cut, a short stderr line stands in for it, so the cell is scored as it would be."""

    text: int
    rich: int
    ignore: str = ""
    printed: int = 0
    shown: int = 0
    cut_text: int = 0
    cut_rich: int = 0
    cut_stderr: bool = False

    def admit(self, msg: dict) -> dict | None:
        """The message to keep, possibly cut short, or None."""
        content = msg["content"]
        if msg["msg_type"] == "stream":
            text = content.get("text", "")
            stderr = content.get("name") == "stderr"
            if stderr and self.ignore and re.search(self.ignore, text):
                return None
            room = max(self.text - self.printed, 0)
            if len(text) > room:
                self.cut_text += len(text) - room
                self.cut_stderr |= stderr
                if room == 0:
                    return None
                msg = {**msg, "content": {**content, "text": text[:room]}}
            self.printed += min(len(text), room)
        elif msg["msg_type"] in ("display_data", "execute_result"):
            size = _size(content)
            if size > self.rich - self.shown:
                self.cut_rich += size
                return None
            self.shown += size
        return msg

    def markers(self) -> list[NotebookNode]:
        """Outputs saying what was cut (the stderr one keeps nbgrader's scoring unchanged)."""
        said = []
        if self.cut_text:
            said.append(f"this cell printed {self.printed + self.cut_text:,} characters; only "
                        f"the first {self.text:,} were kept")
        if self.cut_rich:
            said.append(f"this cell displayed {self.shown + self.cut_rich:,} characters of "
                        f"images and HTML; only the first {self.rich:,} were kept")
        outputs = [NotebookNode(output_type="stream", name="stdout",
                                text=f"\n{DROPPED_MARK}{line}]\n") for line in said]
        if self.cut_stderr:
            outputs.append(NotebookNode(output_type="stream", name="stderr",
                                        text="[stderr output cut short by the grader]\n"))
        return outputs


def _size(content: dict) -> int:
    return sum(len(v) if isinstance(v, str) else len(json.dumps(v))
               for v in content.get("data", {}).values())


def _timed_out(cell) -> bool:
    return any(o.get("output_type") == "error" and o.get("ename") == TIMEOUT_ENAME
               for o in cell.get("outputs", []))
