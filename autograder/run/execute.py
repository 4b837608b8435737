"""nbgrader's Execute preprocessor, hardened for a cohort of untrusted notebooks on a busy machine.

``GraderExecute`` replaces ``Execute`` in the autograde pipeline:

- **Kernels** start through ``SandboxedKernelManager`` (sandbox.py): bubblewrap, limits, a
  control group per kernel.
- **Test cells are decided here, not in the kernel** (judge.py): the kernel only runs the
  student's functions on the test's inputs and hands back plain values.
- **Time limits measure the student's code, not the machine.** A cell may use ``cpu_limit``
  seconds of CPU time (all the kernel's processes together); the watchdog interrupts it past
  that. Wall-clock time (nbclient's ``timeout``) is only a generous backstop: a cell that hits
  it while it used less than half its CPU time was waiting for a busy machine, so the notebook
  is run again with every limit doubled, and a second such time-out is reported for review
  rather than charged to the student.
- **A lost kernel** (``os._exit``, a crash, the OOM killer, an interrupt ignored) costs the
  student only the cell it happened in: the notebook is run again from the top without that
  cell (up to ``max_kernel_restarts`` times; then the rest is marked not run).
- **The chapter's own cells are never dropped.** A read-only cell of the instructor's notebook
  that times out or loses its kernel is run again with doubled limits; if it fails again, the
  grader gives up on the submission with ``GraderTrouble`` (the row says why and the instructor
  grades that student alone later), instead of scoring the notebook without its set-up.
- **Output budget** (budget.py): at most ``max_output_chars`` printed characters and
  ``max_display_chars`` of images and HTML are kept per cell.
- **The kernel is stopped at once after the last cell** (nbclient's ``shutdown_kernel``
  "immediate"): nothing it would do on its way out counts, and its control group is removed
  anyway. A graceful shutdown waited 2.6 s for a kernel that had started a ``spawn`` worker
  pool (chapter 09's §9.6): multiprocessing's resource tracker keeps ipykernel from exiting
  until jupyter_client's SIGTERM, half of its 5 s wait later (0.3 s for the other chapters).

Every cell gets ``metadata.tinyprof``: the CPU seconds it used and, for test cells, the
verdict record; sentences for the instructor's review go into ``review`` (results/flags.py reads
them into the flags); a cell other than a test whose code raised gets ``raised``, the
exception's name (results/report.py says it in the notes: a cell that failed only when graded
is never a silent full score).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from pathlib import Path

from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Integer, List, Unicode, default

from ..cells import DIED_ENAME, NOT_RUN_ENAME, TIMEOUT_ENAME, is_answer, is_test, source
from ..kernel.sandbox import SandboxedKernelManager, describe_exit
from .budget import OutputBudget
from .channel import (
    GARBLED,
    ChannelError,
    ExpressionFailed,
    KernelChannel,
    KernelGone,
    OverCpu,
    RequestTimedOut,
)

#: A wall-clock time-out with less than this share of the CPU limit used was the machine's.
BUSY_SHARE = 0.5
#: How much every limit grows when a notebook is run again after a time-out that was not the
#: student's.
RETRY_SCALE = 2.0
#: CPU seconds for a judge's clean-up request (switching tinyprof back on), past any limit.
CLEANUP_S = 5.0


class KernelLost(Exception):
    """The kernel died, or would not stop, while running cell ``index``."""

    def __init__(self, index: int, outputs: list, reason: str) -> None:
        super().__init__(f"kernel lost at cell {index}: {reason}")
        self.index, self.outputs, self.reason = index, outputs, reason


class SlowCell(Exception):
    """Cell ``index`` hit the wall-clock backstop while using little CPU: the machine was busy
    (or the cell waited), so the notebook is run again with longer limits."""

    def __init__(self, index: int, cpu_s: float, wall_s: float) -> None:
        super().__init__(f"cell {index} waited {wall_s:.0f} s using {cpu_s:.1f} s of CPU")
        self.index, self.cpu_s, self.wall_s = index, cpu_s, wall_s


class GraderTrouble(Exception):
    """The chapter's own code could not run in this notebook, twice: not the student's fault
    as far as the grader can tell, so no grade is given (the message says what happened)."""


def error_output(ename: str, evalue: str) -> NotebookNode:
    """An error output as a kernel would send it; nbgrader scores it as a failure."""
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])


def course_cell_digests(instructor: dict) -> list[str]:
    """sha256 of the source of every read-only code cell of the instructor's notebook (the
    chapter's own code: set-up, demos), so that such a cell is recognised in a submission."""
    return sorted({_digest(source(cell)) for cell in instructor.get("cells", [])
                   if cell.get("cell_type") == "code" and not is_test(cell)
                   and not is_answer(cell)})


def _digest(text: str) -> str:
    return hashlib.sha256("\n".join(line.rstrip() for line in text.strip().splitlines())
                          .encode()).hexdigest()


class GraderExecute(Execute):
    """nbgrader's Execute with the limits, recovery and judging of the module docstring.
    ``timeout`` (nbclient's) is the wall-clock backstop per cell; ``cpu_limit`` the CPU time."""

    memory_mb = Integer(2048, help="Kernel memory limit in MB (0: none)").tag(config=True)
    isolate = Bool(True, help="Run each kernel in a bubblewrap sandbox").tag(config=True)
    cpu_limit = Float(60.0, help="CPU seconds a cell may use (all its processes)").tag(
        config=True)
    max_output_chars = Integer(100_000, help="Printed characters kept per cell").tag(config=True)
    max_display_chars = Integer(5_000_000, help="Characters of images and HTML kept per cell").tag(
        config=True)
    max_kernel_restarts = Integer(3, help="Fresh kernels per notebook").tag(config=True)
    judge_tests = Bool(True, help="Decide test cells in the grader (judge.py), not the "
                                  "kernel").tag(config=True)
    instructor_root = Unicode("", help="Folder of the instructor notebooks (ASSIGNMENT/NAME."
                                       "ipynb): the judge's imports and the chapter's own cells "
                                       "come from there").tag(config=True)
    course_cells = List(Unicode(), help="Digests of the chapter's own code cells "
                                        "(course_cell_digests); read from instructor_root when "
                                        "empty").tag(config=True)
    interrupt_grace = Integer(10, help="Seconds a kernel has to answer after an interrupt").tag(
        config=True)

    @default("shutdown_kernel")
    def _stop_at_once(self) -> str:
        return "immediate"

    # -- the notebook ------------------------------------------------------------------------

    def create_kernel_manager(self) -> SandboxedKernelManager:
        if not self.kernel_name:
            self.kernel_name = self.nb.metadata.get("kernelspec", {}).get("name", "") or ""
        self.km = SandboxedKernelManager(kernel_name=self.kernel_name or "python3",
                                         config=self.config, memory_mb=self.memory_mb,
                                         isolate=self.isolate)
        self._managers.append(self.km)
        return self.km

    def preprocess(self, nb, resources=None, km=None):
        for cell in nb.cells:   # the grader's own records only, never a submitted one
            cell.get("metadata", {}).pop("tinyprof", None)
        pristine = copy.deepcopy(nb.cells)
        self._instructor = self._instructor_notebook(resources)
        self._prelude_text: str | None = None
        self._dropped: dict[int, list] = {}
        self._retried: set[int] = set()
        self._scale = 1.0
        self._stop_at: int | None = None
        self._managers: list[SandboxedKernelManager] = []
        self._kernel_channel: KernelChannel | None = None
        try:
            while True:
                self._speed = self._speed_bench()
                try:
                    return super().preprocess(nb, resources, km)
                except (KernelLost, SlowCell) as event:
                    self._recover(event)
                    nb.cells = copy.deepcopy(pristine)
                finally:
                    self._speed.reference.close()
        finally:  # a kernel lost mid-cell may never have run its own clean-up
            for manager in self._managers:
                manager.remove_sockets()

    @property
    def _channel(self) -> KernelChannel:
        """The channel to the kernel running now (a new one after each restart)."""
        if self._kernel_channel is None or self._kernel_channel.kc is not self.kc:
            self._kernel_channel = KernelChannel(self.km, self.kc, self.interrupt_grace)
        return self._kernel_channel

    def _speed_bench(self):
        """Speed tests' measurements for one run of the notebook (speed.py): the baseline's
        clean kernel is sandboxed, limited and started as the student's is."""
        from .speed import ReferenceKernel, SpeedBench

        def clean_manager() -> SandboxedKernelManager:
            manager = SandboxedKernelManager(kernel_name=self.kernel_name or "python3",
                                             config=self.config, memory_mb=self.memory_mb,
                                             isolate=self.isolate)
            self._managers.append(manager)
            return manager

        return SpeedBench(lambda: self.km.cpu_seconds(), ReferenceKernel(clean_manager),
                          lambda: self.km.in_control_group)

    def _recover(self, event: KernelLost | SlowCell) -> None:
        """Decide how the next run goes after ``event``: longer limits, or without the cell."""
        index = event.index
        ours = self._course_cell(index)
        if isinstance(event, SlowCell) or (ours and index not in self._retried):
            if index in self._retried and ours:
                raise GraderTrouble(self._trouble(index, str(event)))
            self._retried.add(index)
            self._scale = RETRY_SCALE
            self.log.warning("%s; running the notebook again with every limit x%g", event,
                             RETRY_SCALE)
            return
        if ours:
            raise GraderTrouble(self._trouble(index, event.reason))
        self.log.warning("kernel lost at cell %d; running the notebook again without it", index)
        self._dropped[index] = event.outputs
        if len(self._dropped) > self.max_kernel_restarts:
            self._stop_at = index + 1

    def _trouble(self, index: int, what: str) -> str:
        return (f"the chapter's own cell {index + 1} (not one the student writes) failed twice, "
                f"the second time with every limit doubled ({what}). No grade was given, since "
                "the notebook cannot be graded without that cell: the machine may have been "
                "overloaded, or the notebook's code changed what the cell uses (see the flags). "
                "Re-grade this student alone (python -m autograder grade ... --student NAME) "
                "when the machine is quieter, or review the submission")

    def _course_cell(self, index: int) -> bool:
        cell = self.nb.cells[index] if index < len(self.nb.cells) else None
        if cell is None or cell.cell_type != "code" or is_test(cell) or is_answer(cell):
            return False
        digests = self.course_cells or (course_cell_digests(self._instructor)
                                        if self._instructor else [])
        return _digest(source(cell)) in set(digests)

    # -- a cell -------------------------------------------------------------------------------

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and self._skipped(index):
            cell.outputs = self._dropped.get(index) or [error_output(
                NOT_RUN_ENAME, f"not run: the kernel was lost {len(self._dropped)} times, so the "
                "grader stopped running this notebook")]
            return cell, self.resources
        if self.judge_tests and cell.cell_type == "code" and is_test(cell):
            return self._judge(cell, resources, index)
        ignore = self.config.IgnorePattern
        self._budget = OutputBudget(
            self.max_output_chars, self.max_display_chars,
            ignore.get("pattern", "") if ignore.get("enabled", False) else "")
        self._cpu_budget = self.cpu_limit * self._scale
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            raise KernelLost(index, list(cell.get("outputs", [])) + [self._death()],
                             "the kernel died") from None
        except CellTimeoutError:  # interrupted, but no sign of life on IOPub
            raise KernelLost(index, self._stuck(cell), "the kernel stopped answering") from None
        except GARBLED as garbled:
            raise KernelLost(index, self._garbled(cell, garbled), "the kernel sent a message "
                             "the grader could not read") from None
        if cell.cell_type != "code":
            return cell, resources
        cell.outputs.extend(self._budget.markers())
        self._record(cell, cpu_s=round(self._channel.cpu_spent, 3), **self._memory())
        if self._channel.cpu_out:
            cell.outputs = [o for o in cell.outputs if o.get("ename") != "KeyboardInterrupt"]
            cell.outputs.append(error_output(TIMEOUT_ENAME, self._cpu_message()))
            if self._course_cell(index):
                raise KernelLost(index, cell.outputs, self._cpu_message())
        elif _timed_out(cell):
            self._wall_timeout(cell, index)
        elif not is_test(cell) and (raised := _raised(cell)):
            self._record(cell, raised=raised)
        return cell, resources

    def _wall_timeout(self, cell, index: int) -> None:
        """The wall-clock backstop interrupted the cell: whose fault was it?"""
        if not self._channel.answers():
            raise KernelLost(index, self._stuck(cell), "the kernel ignored the interrupt")
        wall, cpu = self._get_timeout(cell), self._channel.cpu_spent
        if cpu < BUSY_SHARE * self._cpu_budget:
            if index not in self._retried or self._course_cell(index):
                raise SlowCell(index, cpu, wall)
            message = (f"This cell waited more than {wall} s (wall-clock time, twice, the second "
                       f"time with longer limits) while using only {cpu:.1f} s of CPU "
                       "time: it sleeps or waits for something, or the grading machine was "
                       "overloaded. The grader interrupted it; the instructor will review it.")
            self._record(cell, review=[message])
        else:
            message = f"This cell ran past the {wall} s wall-clock limit and was interrupted."
        cell.outputs = [o for o in cell.outputs if o.get("ename") != TIMEOUT_ENAME]
        cell.outputs.append(error_output(TIMEOUT_ENAME, message))

    def _cpu_message(self) -> str:
        return (f"This cell used more than the {self._cpu_budget:g} s of CPU time a cell may "
                "use (an endless loop?) and was interrupted.")

    def _death(self) -> NotebookNode:
        if self._channel.ignored:
            return error_output(TIMEOUT_ENAME, (
                f"This cell used more than the {self._cpu_budget:g} s of CPU time a cell may use "
                "and did not stop when interrupted. The grader restarted the kernel and ran the "
                "notebook again without this cell."))
        return error_output(DIED_ENAME, (
            f"The kernel died while running this cell ({describe_exit(self.km.exit_status())}). "
            "The grader ran the notebook again without this cell; whatever it defines is "
            "missing."))

    # -- CPU time: the watchdog ----------------------------------------------------------------

    async def async_execute_cell(self, cell, cell_index, execution_count=None,
                                 store_history=True):
        """nbclient's cell execution, watched: past ``_cpu_budget`` seconds of CPU time the
        kernel is interrupted, and killed if it has not stopped ``interrupt_grace`` s later
        (the channel's watchdog)."""
        async with self._channel.watched(self._cpu_budget):
            return await super().async_execute_cell(cell, cell_index, execution_count,
                                                    store_history)

    execute_cell = run_sync(async_execute_cell)

    def _get_timeout(self, cell):
        return max(1, round(self.timeout * self._scale))

    # -- test cells, decided by the judge ------------------------------------------------------

    def _judge(self, cell, resources, index):
        """Run test cell ``index`` here; the kernel answers only the calls it makes. The
        verdict becomes the cell's outputs (nbgrader scores an error output as a failure) and
        its ``metadata.tinyprof`` record."""
        from .judge import Judge

        self._test = {"index": index, "cpu": 0.0, "cpu_budget": self.cpu_limit * self._scale,
                      "deadline": time.monotonic() + self.timeout * self._scale,
                      "clean_wall": self._speed.reference.wall_spent}
        from .memory_check import LeakBench
        from .pipeline_check import PipelineBench

        verdict = Judge(self._ask_kernel, fatal=(KernelLost, SlowCell), speed=self._speed,
                        quick=self._ask_quick,
                        memory=LeakBench(self.km.memory_bytes, self.km.memory_method,
                                         self.km.task_count, self.km.shared_bytes,
                                         self.km.begin_run),
                        pipeline=PipelineBench(Path(self.km.connection_file).parent)).run(
            source(cell), self._prelude(), label=cell.metadata.nbgrader.grade_id)
        cell.outputs = verdict_outputs(verdict)
        self._record(cell, cpu_s=round(self._test["cpu"], 3), verdict=verdict.record(),
                     review=verdict.review, **self._memory())
        return cell, resources

    def _prelude(self) -> str:
        from .judge import DEFAULT_PRELUDE, prelude

        if self._prelude_text is None:
            self._prelude_text = prelude(self._instructor) if self._instructor else \
                DEFAULT_PRELUDE
        return self._prelude_text

    def _instructor_notebook(self, resources) -> dict | None:
        found = (resources or {}).get("nbgrader", {})
        path = Path(self.instructor_root) / found.get("assignment", "") / (
            found.get("notebook", "") + ".ipynb")
        if not self.instructor_root or not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def _ask_kernel(self, expression: str, cleanup: bool = False) -> str | None:
        """Have the kernel evaluate one request of the judge's (an expression: the channel's
        execute route), within what is left of the test's CPU time (a ``cleanup`` request
        gets CLEANUP_S of its own); the ``text/plain`` of its value."""
        return self._asked(lambda channel, cpu, wall: channel.ask(expression, cpu, wall),
                           cleanup)

    def _ask_quick(self, request: str, cleanup: bool = False) -> str | None:
        """The judge's quick route (tinyprof.wire.QUICK_REQUESTS): ``request`` (base64 of its
        pickle) on the grader's comm where the kernel listens (channel.py); limits as for
        :meth:`_ask_kernel`."""
        return self._asked(lambda channel, cpu, wall: channel.ask_quick(request, cpu, wall),
                           cleanup)

    def _asked(self, request, cleanup: bool) -> str | None:
        """``request(channel, cpu_budget, wall_s)`` within the test's limits, with what went
        wrong in the channel turned into the judge's exceptions (module docstring)."""
        from .judge import TestTimedOut

        test, index = self._test, self._test["index"]
        left_cpu = CLEANUP_S if cleanup else test["cpu_budget"] - test["cpu"]
        # the time the grader waited for a speed test's clean kernel is not the student's
        waited = self._speed.reference.wall_spent - test["clean_wall"]
        left_wall = CLEANUP_S * 2 if cleanup else test["deadline"] + waited - time.monotonic()
        if left_cpu <= 0 or left_wall <= 0:
            raise TestTimedOut(self._test_limit_message(left_cpu <= 0))
        channel = self._channel
        try:
            try:
                return request(channel, left_cpu, left_wall)
            finally:
                test["cpu"] += channel.cpu_spent
        except ExpressionFailed:
            return None   # the judge says the kernel gave no answer
        except ChannelError as failed:
            raise self._request_failed(failed, index) from None

    def _request_failed(self, failed: ChannelError, index: int) -> Exception:
        """What a test's request that ended without an answer means for the test."""
        from .judge import TestTimedOut

        cell, test = self.nb.cells[index], self._test
        if isinstance(failed, OverCpu):
            return TestTimedOut(self._test_limit_message(True))
        if isinstance(failed, KernelGone):
            outputs = [self._death()] if failed.garbled is None else \
                self._garbled(cell, failed.garbled)
            return KernelLost(index, outputs, failed.reason)
        assert isinstance(failed, RequestTimedOut)
        if not self._channel.answers():
            return KernelLost(index, self._stuck(cell), "the kernel ignored the interrupt")
        if test["cpu"] < BUSY_SHARE * test["cpu_budget"] and index not in self._retried:
            return SlowCell(index, test["cpu"], self.timeout * self._scale)
        return TestTimedOut(self._test_limit_message(False))

    def _test_limit_message(self, cpu: bool) -> str:
        if cpu:
            return (f"your code used more than the {self.cpu_limit * self._scale:g} s of CPU "
                    "time a test may use (an endless loop?) and was interrupted")
        return (f"the test ran past its {self.timeout * self._scale:g} s wall-clock limit while "
                "your code waited; the grader interrupted it")

    # -- kernels that stop answering ----------------------------------------------------------

    def _stuck(self, cell) -> list:
        """Kill a kernel that ignored the interrupt after a timeout; the cell's outputs."""
        return self._killed(cell, error_output(TIMEOUT_ENAME, (
            f"This cell ran past the {self._get_timeout(cell)} s limit and did not stop when "
            "interrupted. The grader restarted the kernel and ran the notebook again without "
            "this cell.")))

    def _garbled(self, cell, error: BaseException) -> list:
        """Kill a kernel whose messages do not follow the protocol (a bad signature, a channel
        that takes nothing); the cell's outputs."""
        return self._killed(cell, error_output(DIED_ENAME, (
            f"The kernel broke its connection to the grader while running this cell "
            f"({type(error).__name__}): it was stopped, and the notebook run again without "
            "this cell.")))

    def _killed(self, cell, why: NotebookNode) -> list:
        """Kill the kernel now; the cell's outputs without its errors, then ``why``."""
        self._channel.kill()
        return [o for o in cell.get("outputs", []) if o.get("output_type") != "error"] + [why]

    def _skipped(self, index: int) -> bool:
        return index in self._dropped or (self._stop_at is not None and index >= self._stop_at)

    def output(self, outs, msg, display_id, cell_index):
        """Keep only what the cell's output budget admits."""
        admitted = self._budget.admit(msg)
        return None if admitted is None else super().output(outs, admitted, display_id,
                                                            cell_index)

    def _memory(self) -> dict:
        """The kernel's highest memory use so far, all its processes (where it is counted)."""
        peak = self.km.memory_peak_bytes() if self.km is not None else None
        return {} if peak is None else {"memory_peak_mb": round(peak / 2**20, 1)}

    @staticmethod
    def _record(cell, review: list[str] = (), **fields) -> None:
        record = cell.setdefault("metadata", {}).setdefault("tinyprof", {})
        record.update(fields)
        if review:
            record.setdefault("review", []).extend(review)


def verdict_outputs(verdict) -> list[NotebookNode]:
    """A judge's verdict as a test cell's outputs: what the test printed, then, if it failed,
    one error output with the grader's message (no traceback: it would quote the test)."""
    outputs = []
    if verdict.printed:
        outputs.append(NotebookNode(output_type="stream", name="stdout", text=verdict.printed))
    if not verdict.passed:
        outputs.append(error_output(verdict.ename, verdict.message))
    return outputs


def _raised(cell) -> str:
    """The name of the exception a cell's own code raised in this run ("" if none): the first
    error output that is not one of the grader's own (a time-out, a lost kernel, a cell not
    run) nor an interrupt of the grader's."""
    own = {TIMEOUT_ENAME, DIED_ENAME, NOT_RUN_ENAME, "KeyboardInterrupt"}
    return next((str(o.get("ename") or "an exception") for o in cell.get("outputs", [])
                 if o.get("output_type") == "error" and o.get("ename") not in own), "")


def _timed_out(cell) -> bool:
    return any(o.get("output_type") == "error" and o.get("ename") == TIMEOUT_ENAME
               for o in cell.get("outputs", []))


__all__ = ["GraderExecute", "GraderTrouble", "KernelLost", "SlowCell", "course_cell_digests",
           "error_output"]
