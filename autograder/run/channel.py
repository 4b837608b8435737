"""Talking to one kernel: the grader's requests, how they travel, and what can go wrong.

A :class:`KernelChannel` wraps a started kernel (its manager and client) and owns everything
about asking it something:

- **Two routes.** :meth:`KernelChannel.ask` sends a silent execute request with no code and
  the expression in its ``user_expressions``: the answer comes back in the shell reply, with
  nothing to wait for on IOPub, and what the kernel prints meanwhile is never read.
  :meth:`KernelChannel.ask_quick` sends a request of :data:`tinyprof.wire.QUICK_REQUESTS` as
  a message on the grader's comm (target :data:`tinyprof.wire.COMM_TARGET`, opened at the
  first quick request after the kernel agreed to listen), which costs the kernel no IPython
  execution and no stream flushes; the answer is a comm message on IOPub. A kernel that does
  not listen gets every request by :meth:`ask`.
- **A lost answer read back.** IOPub may drop a message: when the kernel goes idle without
  answering a comm request, the answer it kept is read back once by an execute request
  (:func:`tinyprof.wire.read_answered`); the request is never run again.
- **The CPU watchdog** (:meth:`KernelChannel.watched`): past a CPU budget (all the kernel's
  processes together) the kernel is interrupted, and shut down if it has not stopped
  ``interrupt_grace`` seconds later. Cells (nbclient's execution) and requests share it.
- **Its own errors**, which the caller turns into its policy: :class:`KernelGone` (the kernel
  died, or broke the protocol), :class:`RequestTimedOut` (the wall-clock limit passed: the
  kernel was interrupted), :class:`OverCpu` (the watchdog fired), :class:`ExpressionFailed`
  (the expression raised in the kernel).

The channel decides nothing about grades: re-runs, slow cells and the student's messages are
the executor's (execute.py); a clean kernel for baselines is a channel too (speed.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from queue import Empty
from typing import Any, Callable, NamedTuple

import zmq
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import DeadKernelError

from tinyprof.wire import COMM_TARGET, LISTEN, LISTENING, answer_request, read_answered

WATCH_INTERVAL_S = 0.1
#: What jupyter_client raises when a kernel's messages break the protocol: a bad signature or
#: an undecodable message (ValueError, UnicodeDecodeError), a send that no peer takes
#: (zmq.Again, zmq.ZMQError).
GARBLED = (ValueError, zmq.ZMQError)
#: The key of the one user expression of an execute request.
ANSWER_KEY = "answer"


class _Reply(NamedTuple):
    """A kernel's answer to one request: the ``text/plain`` of its value, or (``lost``) the
    message id of a comm request the kernel went idle without answering."""

    text: str | None
    lost: str | None = None


class ChannelError(Exception):
    """A request to the kernel ended without an answer."""


class KernelGone(ChannelError):
    """The kernel died (``garbled`` is None), or sent a message the grader could not read
    (``garbled``: what jupyter_client raised)."""

    def __init__(self, reason: str, garbled: BaseException | None = None):
        super().__init__(reason)
        self.reason, self.garbled = reason, garbled


class RequestTimedOut(ChannelError):
    """The wall-clock limit passed before the answer; the kernel was interrupted."""


class OverCpu(ChannelError):
    """The kernel used more than the request's CPU budget; the watchdog interrupted it."""


class ExpressionFailed(ChannelError):
    """The expression raised in the kernel: ``ename`` and ``evalue`` as the kernel reported
    them (text the kernel chose: never shown as the grader's own)."""

    def __init__(self, ename: str, evalue: str):
        super().__init__(f"{ename}: {evalue}")
        self.ename, self.evalue = ename, evalue


class KernelChannel:
    """Requests to the kernel of ``km`` through its client ``kc`` (module docstring). After
    each watched cell or request, ``cpu_spent`` is what it cost the kernel (CPU seconds),
    ``cpu_out`` whether the watchdog fired, and ``ignored`` whether the kernel then had to be
    shut down."""

    def __init__(self, km: Any, kc: Any, interrupt_grace: float = 10.0,
                 cpu_seconds: Callable[[], float] | None = None):
        self.km, self.kc, self.interrupt_grace = km, kc, interrupt_grace
        #: The kernel's CPU seconds so far (all its processes): the manager's reading.
        self.cpu_seconds = cpu_seconds or km.cpu_seconds
        self.cpu_spent = 0.0
        self.cpu_out = self.ignored = False
        self._comm_id: str | None = None
        self._asked_to_listen = False

    # -- the two routes ---------------------------------------------------------------------

    def ask(self, expression: str, cpu_budget: float | None = None,
            wall_s: float = 300.0) -> str | None:
        """The ``text/plain`` of ``expression``'s value in the kernel (None when it has
        none), within ``cpu_budget`` CPU seconds (None: unwatched) and ``wall_s`` seconds."""
        return self._run(self._execute_request(expression, cpu_budget, wall_s))

    def ask_quick(self, request: str, cpu_budget: float | None = None,
                  wall_s: float = 300.0) -> str | None:
        """The answer to a quick request (base64 of its pickle: tinyprof.remote) as the
        ``repr`` of the kernel's framed answer, as :meth:`ask` would give it; on the comm
        where the kernel listens, else as an execute request."""
        if not self.listening(cpu_budget, wall_s):
            return self.ask(answer_request(request), cpu_budget, wall_s)
        began = time.monotonic()
        reply = self._run(self._comm_request(request, cpu_budget, wall_s))
        if reply.lost is None:
            return reply.text
        spent = self.cpu_spent
        left = wall_s - (time.monotonic() - began)
        budget = None if cpu_budget is None else cpu_budget - spent
        if left <= 0 or (budget is not None and budget <= 0):
            raise RequestTimedOut("no time left to read back the kernel's lost answer")
        try:
            return self.ask(read_answered(reply.lost), budget, left)
        finally:
            self.cpu_spent += spent

    def listening(self, cpu_budget: float | None = None, wall_s: float = 300.0) -> bool:
        """Whether this kernel takes requests on the grader's comm: asked, and the comm
        opened, the first time only."""
        if not self._asked_to_listen:
            self._asked_to_listen = True
            try:
                agreed = self.ask(LISTEN, cpu_budget, wall_s) == repr(LISTENING)
            except ExpressionFailed:
                agreed = False
            if agreed:
                comm_id = uuid.uuid4().hex
                self.kc.shell_channel.send(self.kc.session.msg("comm_open", {
                    "comm_id": comm_id, "target_name": COMM_TARGET, "data": {}}))
                self._comm_id = comm_id
        return self._comm_id is not None

    @property
    def on_comm(self) -> bool:
        """Whether quick requests travel on the grader's comm (the kernel agreed to listen)."""
        return self._comm_id is not None

    def _run(self, coroutine) -> Any:
        """Run a request's coroutine; jupyter_client's failures become :class:`KernelGone`,
        and a request the watchdog stopped :class:`OverCpu`."""
        async def guarded():
            try:
                found = await coroutine
            except DeadKernelError:
                raise KernelGone("the kernel died") from None
            except GARBLED as garbled:
                raise KernelGone("the kernel sent a message the grader could not read",
                                 garbled) from None
            except (RequestTimedOut, ExpressionFailed):
                if self.cpu_out:
                    raise OverCpu("the kernel used more than its CPU time") from None
                raise
            if self.cpu_out:
                raise OverCpu("the kernel used more than its CPU time")
            return found

        return run_sync(guarded)()

    async def _execute_request(self, expression: str, cpu_budget: float | None,
                               wall_s: float) -> str | None:
        def value(reply: dict) -> _Reply:
            found = reply.get("content", {}).get("user_expressions", {}).get(ANSWER_KEY, {})
            if not isinstance(found, dict):
                return _Reply(None)
            if found.get("status") == "error":
                raise ExpressionFailed(str(found.get("ename", ""))[:200],
                                       str(found.get("evalue", ""))[:500])
            text = found.get("data", {}).get("text/plain")
            return _Reply(text if isinstance(text, str) else None)

        async with self.watched(cpu_budget):
            msg_id = self.kc.execute("", silent=True, store_history=False, allow_stdin=False,
                                     user_expressions={ANSWER_KEY: expression})
            return (await self._reply(self.kc.shell_channel, msg_id, wall_s, value)).text

    async def _comm_request(self, request: str, cpu_budget: float | None,
                            wall_s: float) -> _Reply:
        """The repr of the answer the kernel sends back on the comm, or (``lost``) the
        request's message id when the kernel went idle without one."""
        def value(reply: dict) -> _Reply | None:
            kind, content = reply.get("msg_type"), reply.get("content", {})
            if kind == "comm_msg" and content.get("comm_id") == self._comm_id:
                answer = content.get("data", {}).get(ANSWER_KEY)
                return _Reply(repr(answer) if isinstance(answer, str) else None)
            if kind == "status" and content.get("execution_state") == "idle":
                return _Reply(None, lost=msg_id)
            return None   # the kernel's busy status, or what the student's code printed

        async with self.watched(cpu_budget):
            message = self.kc.session.msg("comm_msg", {"comm_id": self._comm_id,
                                                       "data": {"request": request}})
            msg_id = message["header"]["msg_id"]
            self.kc.shell_channel.send(message)
            return await self._reply(self.kc.iopub_channel, msg_id, wall_s, value)

    async def _reply(self, channel: Any, msg_id: str, wall_s: float,
                     value: Callable[[dict], Any]) -> Any:
        """The first ``value(message)`` that is not None, over the messages on ``channel``
        whose parent is ``msg_id``; RequestTimedOut (the kernel interrupted) when ``wall_s``
        passed first, DeadKernelError when the kernel is gone."""
        deadline = time.monotonic() + wall_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = await ensure_async(channel.get_msg(timeout=min(left, 1.0)))
            except Empty:
                if not await ensure_async(self.kc.is_alive()):
                    raise DeadKernelError("the kernel died") from None
                continue
            if message.get("parent_header", {}).get("msg_id") == msg_id:
                found = value(message)
                if found is not None:
                    return found
        await ensure_async(self.km.interrupt_kernel())
        raise RequestTimedOut(f"no answer within {wall_s:g} s")

    # -- the CPU watchdog -------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def watched(self, cpu_budget: float | None):
        """Watch the kernel's CPU time while the block runs (module docstring); afterwards
        ``cpu_spent``, ``cpu_out`` and ``ignored`` describe it."""
        self.cpu_out = self.ignored = False
        start = self.cpu_seconds()
        watchdog = None if cpu_budget is None else \
            asyncio.ensure_future(self._watch(start, cpu_budget))
        try:
            yield
        finally:
            if watchdog is not None:
                watchdog.cancel()
            self.cpu_spent = max(0.0, self.cpu_seconds() - start)

    async def _watch(self, start: float, budget: float) -> None:
        while self.cpu_seconds() - start <= budget:
            await asyncio.sleep(WATCH_INTERVAL_S)
        self.cpu_out = True
        await ensure_async(self.km.interrupt_kernel())
        await asyncio.sleep(self.interrupt_grace)
        self.ignored = True   # still running: its client sees the kernel die within a second
        await ensure_async(self.km.shutdown_kernel(now=True))

    # -- a kernel that stops answering ------------------------------------------------------

    def answers(self) -> bool:
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

    def kill(self) -> None:
        """Shut the kernel down now (already gone is fine)."""
        try:
            run_sync(self.km.shutdown_kernel)(now=True)
        except Exception:  # noqa: BLE001 - already gone
            pass


__all__ = ["ChannelError", "ExpressionFailed", "KernelChannel", "KernelGone", "OverCpu",
           "RequestTimedOut"]
