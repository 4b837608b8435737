"""The grading worker's sliced poll: a reply whose wake-up was missed is found within a slice,
a silent socket still times out, and the patch lands on jupyter_client's async channel."""

from __future__ import annotations

import asyncio
import time
from queue import Empty

import pytest

from autograder.kernel import zmqpoll


class MissedWakeUpSocket:
    """A socket whose message is there from ``ready_at`` on, but whose long poll only notices
    at its timer's end (the missed edge), as pyzmq's does when the wake-up is lost."""

    def __init__(self, ready_at: float | None):
        self.ready_at, self.polls = ready_at, []

    async def poll(self, timeout_ms: int) -> int:
        self.polls.append(timeout_ms)
        await asyncio.sleep(timeout_ms / 1000)
        return int(self.ready_at is not None and time.monotonic() >= self.ready_at)


class Channel:
    def __init__(self, socket: MissedWakeUpSocket):
        self.socket = socket

    async def _recv(self) -> dict:
        return {"msg_type": "execute_reply"}


def test_a_missed_wake_up_costs_at_most_one_slice(monkeypatch):
    monkeypatch.setattr(zmqpoll, "SLICE_MS", 50)
    channel = Channel(MissedWakeUpSocket(ready_at=time.monotonic() + 0.01))
    start = time.monotonic()
    reply = asyncio.run(zmqpoll._get_msg_in_slices(channel, timeout=60))
    assert reply == {"msg_type": "execute_reply"}
    assert time.monotonic() - start < 5, "waited out the whole timeout"
    assert all(ms <= 50 for ms in channel.socket.polls)


def test_a_silent_socket_still_times_out(monkeypatch):
    monkeypatch.setattr(zmqpoll, "SLICE_MS", 50)
    channel = Channel(MissedWakeUpSocket(ready_at=None))
    with pytest.raises(Empty):
        asyncio.run(zmqpoll._get_msg_in_slices(channel, timeout=0.2))
    assert len(channel.socket.polls) >= 3


def test_install_patches_the_async_channel():
    from jupyter_client.channels import AsyncZMQSocketChannel

    original = AsyncZMQSocketChannel.get_msg
    try:
        zmqpoll.install()
        assert AsyncZMQSocketChannel.get_msg is zmqpoll._get_msg_in_slices
    finally:
        AsyncZMQSocketChannel.get_msg = original
