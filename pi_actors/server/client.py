"""The client side of the server: connect over WebSocket or a unix socket, then speak our
protocol through a ``Peer``; ``RemoteSession`` wraps the attachment fencing.

Addresses: ``ws://HOST:PORT[/path]`` (bearer token sent on the upgrade) or ``unix:PATH``
(also a bare path). A refused upgrade raises ``ConnectionRefused`` (``status`` 401 for a bad
token); a lost connection fails in-flight calls with ``ConnectionLost`` (outcome unknown).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import trio

from ..runtime import ConnectionLost, Handler, Peer, RemoteError, open_peer
from ..runtime._websocket import MAX_WS_MESSAGE, WebSocketStream

__all__ = ["connect", "parse_address", "ConnectionRefused", "RemoteSession"]


class ConnectionRefused(ConnectionLost):
    """No connection was made (refused, unreachable, or the upgrade was rejected): nothing
    was sent, so unlike other ConnectionLost errors no outcome is in doubt."""

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.message = detail
        self.args = (f"{detail} ({self.code})",)
        self.status = status


def _reason(exc: BaseException) -> str:
    """A readable reason; trio-websocket's HandshakeError has none of its own (the OSError
    behind it has)."""
    inner = exc.__cause__ or exc.__context__
    return str(exc) or (str(inner) if inner is not None and str(inner) else type(exc).__name__)


def parse_address(address: str) -> tuple[str, str]:
    """("ws", url) or ("unix", path)."""
    if address.startswith(("ws://", "wss://")):
        return "ws", address
    if address.startswith("unix:"):
        return "unix", address[len("unix:") :]
    return "unix", address


@asynccontextmanager
async def _open_stream(address: str, token: str | None) -> AsyncIterator[trio.abc.Stream]:
    kind, where = parse_address(address)
    if kind == "unix":
        try:
            stream = await trio.open_unix_socket(where)
        except OSError as exc:
            raise ConnectionRefused(f"cannot connect to {where}: {_reason(exc)}") from None
        try:
            yield stream
        finally:
            await trio.aclose_forcefully(stream)
        return
    from trio_websocket import ConnectionRejected, HandshakeError, open_websocket_url

    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    try:
        async with open_websocket_url(
            where, extra_headers=headers, max_message_size=MAX_WS_MESSAGE, connect_timeout=10, disconnect_timeout=2
        ) as ws:
            yield WebSocketStream(ws)
    except ConnectionRejected as exc:
        raise ConnectionRefused(f"server refused the connection (HTTP {exc.status_code})", exc.status_code) from None
    except (HandshakeError, OSError) as exc:
        raise ConnectionRefused(f"cannot connect to {where}: {_reason(exc)}") from None


@asynccontextmanager
async def connect(
    address: str, *, token: str | None = None, role: str = "client", name: str = "client", handler: Handler | None = None
) -> AsyncIterator[Peer]:
    """An open connection to a server (hello done) for the duration of the block."""
    async with _open_stream(address, token) as stream:
        async with open_peer(stream, side="client", role=role, name=name, handler=handler) as peer:
            yield peer


class RemoteSession:
    """One attachment: session calls carry the attachment id."""

    def __init__(self, peer: Peer, session_id: str, attachment_id: str) -> None:
        self.peer = peer
        self.session_id = session_id
        self.attachment_id = attachment_id

    @classmethod
    async def attach(cls, peer: Peer, session_id: str) -> "RemoteSession":
        reply = await peer.call("attach", {"sessionId": session_id})
        return cls(peer, reply["sessionId"], reply["attachmentId"])

    def _args(self, args: dict | None) -> dict:
        return {**(args or {}), "attachmentId": self.attachment_id}

    async def call(self, method: str, args: dict | None = None) -> Any:
        return await self.peer.call(method, self._args(args), target=self.session_id)

    def open_call(self, method: str, args: dict | None = None) -> Any:
        return self.peer.open_call(method, self._args(args), target=self.session_id)


__all__ += ["RemoteError"]
