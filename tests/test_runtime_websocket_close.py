"""Closing a WebSocket connection while the other side is still sending (real sockets on
127.0.0.1, trio-websocket on both ends)."""

from __future__ import annotations

import trio
import trio.testing
from trio_websocket import WebSocketRequest, open_websocket_url, serve_websocket

from pi_actors.runtime._websocket import WebSocketStream


async def _flood(request: WebSocketRequest) -> None:
    """Accept, then send messages as fast as the client takes them, until it goes away."""
    ws = await request.accept()
    try:
        for n in range(100_000):
            await ws.send_message(n.to_bytes(4, "big"))
    except Exception:  # noqa: BLE001 - the client went away: that is the point
        pass


async def test_leaving_a_connection_that_still_receives_messages_does_not_hang(nursery):
    server = await nursery.start(serve_websocket, _flood, "127.0.0.1", 0, None)
    url = f"ws://127.0.0.1:{server.port}/"
    with trio.fail_after(20):
        async with open_websocket_url(url) as ws:
            stream = WebSocketStream(ws)
            assert len(await stream.receive_some()) == 4
            # Stop reading while messages keep coming: trio-websocket's queue fills (it holds
            # one), and its reader task waits to hand over the next. A Peer that ends closes
            # its stream forcefully, as here.
            await trio.testing.wait_all_tasks_blocked()
            await trio.aclose_forcefully(stream)
        # Leaving the block waited for that reader task: it must have been let go.
