"""Bound a missed wake-up of the async Jupyter client to one second.

nbclient waits for each cell's reply with ``await shell_channel.get_msg(timeout=T)``, a single
asyncio poll of a zmq socket. zmq signals readiness edge-triggered, and now and then (about one
notebook in thirty here, mostly on cells that open widget comms) the edge is missed: the reply is
already waiting, but the poll only finds it when its timer fires, so the cell stalls for exactly
T seconds and then carries on without error. Polling in slices of at most one second makes each
slice end with a fresh non-blocking check, so a missed edge costs at most a second.
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
