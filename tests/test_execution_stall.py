"""The execution stall of issue 13: its root cause, reproduced deterministically, and the fix.

Root cause. nbclient waits for a cell's ``execute_reply`` with an asyncio poll on the shell
socket. When a cell captures output into an Output widget (``ipywidgets.interactive`` does),
nbclient mirrors each captured output back to the kernel as a ``comm_msg`` on that same shell
socket, and jupyter_client's ``Session.send`` writes it through a synchronous shadow of the
asyncio socket. A libzmq send first processes the socket's pending commands; if the
``execute_reply`` has just arrived, that consumes the wake-up the asyncio poll was waiting for,
and the poll sleeps until its timeout although the reply is there: the cell "stalls" for exactly
the client's timeout and then carries on without an error.

Fix. tinyprof's explorers never capture output (:mod:`tinyprof.widgets.explorer`): they set
the Output widget's state from the kernel, so the client sends nothing while it waits.
"""

from __future__ import annotations

import asyncio
import select
import time

import nbformat
import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session
from nbclient import NotebookClient

POLL_MS = 1500


def _wait_until_signalled(socket, limit: float = 5.0) -> None:
    """Block (the event loop does not run) until the socket's file descriptor says a command
    has arrived: reading it with select() leaves the signal in place, unlike zmq.EVENTS."""
    deadline = time.monotonic() + limit
    time.sleep(0.05)
    while not select.select([socket.getsockopt(zmq.FD)], [], [], 0)[0]:
        assert time.monotonic() < deadline, "the reply never reached the client"
        time.sleep(0.005)


def _poll_after_reply(send_while_waiting: bool) -> tuple[float, int]:
    """A client polls for a reply; the reply arrives while the client is busy; then, optionally,
    the client sends a comm_msg on the same socket the way nbclient's OutputWidget does.
    Returns (seconds the poll took once awaited, the events it returned)."""
    context = zmq.asyncio.Context()
    kernel, client = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
    port = kernel.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    session = Session()

    async def run() -> tuple[float, int]:
        session.send(client, "execute_request", {"code": "explorer"})
        identity, *_ = await kernel.recv_multipart()
        waiting = asyncio.ensure_future(client.poll(POLL_MS))   # nbclient: get_msg(timeout)
        await asyncio.sleep(0.05)
        session.send(kernel, "execute_reply", {"status": "ok"}, ident=identity)
        _wait_until_signalled(client)  # the reply lands while the client handles iopub messages
        if send_while_waiting:       # OutputWidget.sync_state() -> shell_channel.send(...)
            session.send(client, "comm_msg", {"comm_id": "output", "data": {}})
        start = time.monotonic()
        events = await waiting
        return time.monotonic() - start, events

    try:
        return asyncio.run(run())
    finally:
        kernel.close(0)
        client.close(0)
        context.term()


def test_a_send_on_the_shell_socket_while_waiting_hides_an_arrived_reply_until_the_timeout():
    seconds, events = _poll_after_reply(send_while_waiting=False)
    assert events == zmq.POLLIN and seconds < 0.5
    seconds, events = _poll_after_reply(send_while_waiting=True)
    assert events == zmq.POLLIN, "the reply was there all along"
    assert seconds > POLL_MS / 1000 - 0.3, "and the poll only found it when its timer fired"


def _shell_sends_while_executing(code: str, monkeypatch) -> tuple[list[str], dict]:
    """Message types the client sent on the shell channel while running ``code`` in a real
    kernel (besides its kernel-info and execute requests), and the executed cell."""
    sent: list[str] = []
    original = AsyncZMQSocketChannel.send

    def recording_send(self, msg):
        if msg["header"]["msg_type"] not in ("execute_request", "kernel_info_request"):
            sent.append(msg["header"]["msg_type"])
        return original(self, msg)

    monkeypatch.setattr(AsyncZMQSocketChannel, "send", recording_send)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    return sent, notebook.cells[0]


EXPLORER = """
import matplotlib
matplotlib.use("module://matplotlib_inline.backend_inline")
import tinyprof as tp
tp.widgets.amdahl_explorer(fraction=0.7, factor=4)
"""

INTERACTIVE = """
import ipywidgets
ipywidgets.interactive(lambda p: print(f"p = {p}"), p=ipywidgets.FloatSlider(value=0.5))
"""


@pytest.mark.kernel
def test_an_interactive_widget_makes_the_client_send_on_the_shell_channel(monkeypatch):
    sent, _ = _shell_sends_while_executing(INTERACTIVE, monkeypatch)
    assert "comm_msg" in sent, "the Output widget's captured output is mirrored to the kernel"


@pytest.mark.kernel
def test_a_tinyprof_explorer_makes_the_client_send_nothing_and_shows_its_state(monkeypatch):
    sent, cell = _shell_sends_while_executing(EXPLORER, monkeypatch)
    assert sent == []
    (output,) = [o for o in cell.outputs if "text/html" in o.get("data", {})]
    assert "application/vnd.jupyter.widget-view+json" in output.data
    static = output.data["text/html"]
    assert "70% of the time made 4× faster → 2.11× overall" in static
    assert '<img src="data:image/png;base64,' in static


@pytest.mark.parametrize("quantity", ["time", "memory"])
def test_the_explorer_output_area_holds_the_initial_state(quantity):
    import tinyprof as tp

    explorer = tp.widgets.amdahl_explorer(quantity=quantity)
    stream, figure = explorer.out.outputs
    assert stream["text"] == explorer.text and "1." in stream["text"]
    assert figure["data"]["image/png"] and len(explorer.images) == 1
