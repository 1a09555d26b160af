"""One client connection's state and its bounded send queue (the server's fan-out).

``_Client.push`` queues a chunk for the connection's single writer task; a full queue marks
the client overflowed and cancels its connection at once (``overflow``), so a slow client
never slows the session or other clients. ``flushed`` waits until everything queued before
it has been sent, so that a call's result goes out after its chunks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ..runtime import ConnectionLost, IncomingCall, Peer, RemoteError
from ._auth import Identity

if TYPE_CHECKING:
    from ._server import Server

__all__ = ["_Client"]

_FLUSHED = object()


class _Client:
    def __init__(self, server: Server, queue_size: int, identity: Identity) -> None:
        self.server = server
        self.identity = identity
        self.peer: Peer | None = None
        self.scope = trio.CancelScope()
        self.attachment: tuple[str, str] | None = None
        self.send, self.recv = trio.open_memory_channel[Any](queue_size)
        self.overflowed = False

    def push(self, item: Any) -> None:
        """Queue a chunk (or flush marker); overflow disconnects this client."""
        if self.overflowed:
            raise RemoteError("overflow", "send queue overflowed")
        try:
            self.send.send_nowait(item)
        except (trio.WouldBlock, trio.ClosedResourceError):
            self.overflowed = True
            self.server.stats["overflow_disconnects"] += 1
            self.scope.cancel()
            raise RemoteError("overflow", "client fell behind its send queue; disconnected") from None

    async def chunk(self, call: IncomingCall, data: Any) -> None:
        self.push((call, data))
        await trio.lowlevel.checkpoint()

    async def flushed(self, call: IncomingCall) -> None:
        done = trio.Event()
        self.push((call, (_FLUSHED, done)))
        await done.wait()

    async def run_writer(self) -> None:
        async for call, data in self.recv:
            if isinstance(data, tuple) and len(data) == 2 and data[0] is _FLUSHED:
                data[1].set()
                continue
            try:
                await call.send_chunk(data)
            except ConnectionLost:
                return
