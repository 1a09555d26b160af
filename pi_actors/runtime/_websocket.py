"""A ``trio.abc.Stream`` over a trio-websocket connection, so ``open_peer`` runs unchanged.

Each ``send_all`` becomes one binary WebSocket message (the Peer sends one frame per call);
``receive_some`` hands out the bytes of received messages in order, across message
boundaries (the frame decoder accepts any fragmentation). A text message is refused: the
connection is treated as broken. A closed WebSocket reads as end-of-stream.

``bearer_token_ok`` checks an ``Authorization: Bearer …`` header in constant time; the
server calls it on the upgrade request, before any frame.
"""

from __future__ import annotations

import hmac
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

__all__ = ["WebSocketStream", "bearer_token_ok", "MAX_WS_MESSAGE"]

#: Largest WebSocket message accepted: one maximal frame (16 MiB) plus its header.
MAX_WS_MESSAGE = 16 * 1024 * 1024 + 4


class WebSocketStream(trio.abc.Stream):
    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self._buffer = bytearray()
        self._eof = False

    async def send_all(self, data: Any) -> None:
        try:
            await self.ws.send_message(bytes(data))
        except ConnectionClosed as exc:
            raise trio.BrokenResourceError(f"websocket closed: {exc.reason}") from None

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if not self._buffer and not self._eof:
            try:
                message = await self.ws.get_message()
            except ConnectionClosed:
                self._eof = True
                return b""
            if isinstance(message, str):
                self._eof = True
                await trio.aclose_forcefully(self)
                raise trio.BrokenResourceError("text message on a binary protocol websocket")
            self._buffer += message
        if not self._buffer:
            return b""
        n = len(self._buffer) if max_bytes is None else min(max_bytes, len(self._buffer))
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out

    async def aclose(self) -> None:
        try:
            with trio.move_on_after(1):
                await self.ws.aclose()
        finally:
            # A peer that stopped reading cannot complete the close handshake: cut the TCP
            # connection underneath (also when this aclose is itself cancelled).
            raw = getattr(self.ws, "_stream", None)
            if raw is not None:
                await trio.aclose_forcefully(raw)


def bearer_token_ok(headers: list[tuple[bytes, bytes]], token: str) -> bool:
    """True if ``headers`` carry ``Authorization: Bearer <token>``."""
    expected = f"Bearer {token}".encode()
    for name, value in headers:
        if name.lower() == b"authorization" and hmac.compare_digest(value.strip(), expected):
            return True
    return False
