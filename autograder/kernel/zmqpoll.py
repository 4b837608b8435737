"""Bound a missed wake-up of the async Jupyter client to one second, for student notebooks.

nbclient waits for each cell's reply with ``await shell_channel.get_msg(timeout=T)``, a single
asyncio poll of the shell socket. When a cell captures output into an Output widget (as
``ipywidgets.interactive`` does), nbclient sends a ``comm_msg`` on that same socket while it
waits, through a synchronous shadow socket; the send makes libzmq process the socket's pending
commands and can consume the wake-up of an ``execute_reply`` that has just arrived. The poll then
sleeps until its timer fires, and the cell stalls for exactly T seconds before carrying on
without an error (the root cause of issue 13, reproduced deterministically in
tests/test_execution_stall.py).

tinyprof's own explorers no longer capture output, so the chapters never trigger it. A student's
notebook may still use ``interact`` or an Output widget, and the grader runs whatever it is
given, so the grader keeps this guard: polling in slices of at most one second makes each slice
end with a fresh non-blocking check, so a missed wake-up costs at most a second.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

SLICE_MS = 1000


async def _get_msg_in_slices(self: Any, timeout: float | None = None) -> dict[str, Any]:
    """Like ``AsyncZMQSocketChannel.get_msg``: the next message, or Empty after ``timeout``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left_ms = SLICE_MS if deadline is None else int((deadline - time.monotonic()) * 1000)
        if await self.socket.poll(max(0, min(SLICE_MS, left_ms))):
            return await self._recv()
        if deadline is not None and time.monotonic() >= deadline:
            raise Empty


def install() -> None:
    """Patch jupyter_client's async channel in this process (idempotent)."""
    from jupyter_client.channels import AsyncZMQSocketChannel

    AsyncZMQSocketChannel.get_msg = _get_msg_in_slices  # type: ignore[method-assign]
