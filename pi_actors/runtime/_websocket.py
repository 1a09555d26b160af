"""A ``trio.abc.Stream`` over a trio-websocket connection, so ``open_peer`` runs unchanged.

Each ``send_all`` becomes one binary WebSocket message (the Peer sends one frame per call);
``receive_some`` hands out the bytes of received messages in order, across message
boundaries (the frame decoder accepts any fragmentation). A text message is refused: the
connection is treated as broken. A closed WebSocket reads as end-of-stream.

``WebSocketStream(ws, text=True)`` is the framing of the ``pi-actors.json`` subprotocol
(:data:`JSON_SUBPROTOCOL`, browsers): one JSON message per *text* WebSocket message, no
length header. ``send_all`` takes one frame (header and payload) and sends its payload as a
text message; a received text message is handed out as one frame (its length header added),
so the Connection above frames and limits it as usual. A binary message is refused there.

``bearer_token_ok`` checks an ``Authorization: Bearer …`` header in constant time; the
server calls it on the upgrade request, before any frame.

``serve_websocket_admitted(on_request, host, port, admission, ssl_context=…)`` serves
WebSocket upgrades like trio-websocket's ``serve_websocket`` (``on_request`` gets the
upgrade request and calls ``accept`` or ``reject``), but through our own accept loop
(``_accept.serve_admitted``): connection caps, quiet back-off on EMFILE, and one deadline
(``admission.limits.handshake_timeout``) from the TCP accept through the TLS handshake to
the accepted upgrade — the request's ``accept()`` admits the connection and lifts the
deadline, after which the protocol hello has its own limit. With ``ssl_context`` the port
speaks TLS only; a plain HTTP request reaching it gets ``400`` with a one-line body telling
the client to use ``wss://``.

With ``on_http`` the same port also answers plain HTTP (``_http``): the request head is read
first; an upgrade goes on to trio-websocket with the bytes already read, anything else is
``on_http(request)``'s to answer (an ``HttpResponse``), under the same admission (caps and
deadline; a plain request is never admitted). Without it, a plain request is refused as
trio-websocket refuses it (``400``).
"""

from __future__ import annotations

import hmac
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_server_stream

from ._accept import Admission, Ticket, serve_admitted
from ._http import HttpRequest, HttpResponse, read_request, send_response

__all__ = [
    "WebSocketStream", "bearer_token_ok", "serve_websocket_admitted", "MAX_WS_MESSAGE", "PLAIN_HTTP_ON_TLS",
    "JSON_SUBPROTOCOL",
]

#: The WebSocket subprotocol of the JSON codec: one JSON envelope per text message.
JSON_SUBPROTOCOL = "pi-actors.json"

#: Largest WebSocket message accepted: one maximal frame (16 MiB) plus its header.
MAX_WS_MESSAGE = 16 * 1024 * 1024 + 4


class WebSocketStream(trio.abc.Stream):
    def __init__(self, ws: WebSocketConnection, *, text: bool = False) -> None:
        self.ws = ws
        self.text = text
        self._buffer = bytearray()
        self._eof = False

    async def send_all(self, data: Any) -> None:
        message: str | bytes
        if self.text:
            # One frame: a 4-byte length, then a JSON text (valid UTF-8 by construction).
            message = bytes(data[4:]).decode("utf-8")
        else:
            message = bytes(data)
        try:
            await self.ws.send_message(message)
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
            if isinstance(message, str) != self.text:
                self._eof = True
                await trio.aclose_forcefully(self)
                if self.text:
                    raise trio.BrokenResourceError(f"binary message on a {JSON_SUBPROTOCOL} websocket (text messages only)")
                raise trio.BrokenResourceError("text message on a binary protocol websocket")
            if isinstance(message, str):
                payload = message.encode("utf-8")
                self._buffer += len(payload).to_bytes(4, "big")
                self._buffer += payload
            else:
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
            # trio-websocket's reader task may be blocked handing a message to its queue,
            # full because nobody reads it any more; its own aclose closes the queue, which
            # wakes it, but not when cancelled before it gets there (``aclose_forcefully``,
            # as a Peer closes its stream): the connection's context would then wait for the
            # reader forever. Close the queue here, whatever happened above.
            queue = getattr(self.ws, "_recv_channel", None)
            if queue is not None:
                queue.close()
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


#: The body of the answer to a plain HTTP request on a TLS port.
PLAIN_HTTP_ON_TLS = b"this server speaks TLS: use a wss:// URL\n"
_TLS_HANDSHAKE_RECORD = 0x16


class _Watched(trio.abc.Stream):
    """``stream`` with ``prefix`` (bytes already read from it) handed out first, and an
    ``ended`` event set when a read finds the end of the stream or a broken stream."""

    def __init__(self, stream: trio.abc.Stream, prefix: bytes = b"") -> None:
        self._stream = stream
        self._prefix = prefix
        self.ended = trio.Event()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            n = len(self._prefix) if max_bytes is None else max_bytes
            out, self._prefix = self._prefix[:n], self._prefix[n:]
            await trio.lowlevel.checkpoint()
            return out
        try:
            data = await self._stream.receive_some(max_bytes)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.ended.set()
            raise
        if not data:
            self.ended.set()
        return bytes(data)

    async def send_all(self, data: Any) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._stream.aclose()


async def _start_tls(stream: trio.abc.Stream, context: ssl.SSLContext) -> trio.SSLStream[Any] | None:
    """The server side of TLS over ``stream``; None (after answering 400) if the client
    spoke plain HTTP, or if the TLS handshake failed."""
    first = await stream.receive_some(4096)
    if not first:
        return None
    if first[0] != _TLS_HANDSHAKE_RECORD:
        if first[:1].isalpha():  # "GET /…": a ws:// client on a wss:// port
            body = PLAIN_HTTP_ON_TLS
            head = b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\nconnection: close\r\n"
            try:
                await stream.send_all(head + b"content-length: %d\r\n\r\n" % len(body) + body)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        return None
    tls = trio.SSLStream(_Watched(stream, bytes(first)), context, server_side=True, https_compatible=True)
    try:
        await tls.do_handshake()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return None  # a client that does not trust our certificate, or not TLS after all
    return tls


class _AdmittingRequest:
    """A trio-websocket upgrade request whose ``accept`` admits the connection; everything
    else (``headers``, ``path``, ``reject``, …) is the request's own. ``host`` is the
    request's ``Host`` header (trio-websocket's ``headers`` leave it out), when the listener
    read the head itself (``on_http``), else None."""

    def __init__(self, request: Any, ticket: Ticket, host: bytes | None = None) -> None:
        self._request = request
        self._ticket = ticket
        self.host = host

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request, name)

    async def accept(self, **kwargs: Any) -> WebSocketConnection:
        ws: WebSocketConnection = await self._request.accept(**kwargs)
        self._ticket.admit()
        return ws


async def serve_websocket_admitted(
    on_request: Callable[[Any], Awaitable[None]],
    host: str,
    port: int,
    admission: Admission,
    *,
    ssl_context: ssl.SSLContext | None = None,
    max_message_size: int = MAX_WS_MESSAGE,
    on_http: Callable[[HttpRequest], Awaitable[HttpResponse]] | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve WebSocket upgrades on ``host:port`` until cancelled (see the module docstring).

    ``port`` 0 picks a free port; ``task_status`` gets a ``WebSocketListening`` (``.port``).
    Raises OSError if the address cannot be bound.
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = WebSocketListening(listeners[0].socket.getsockname()[1])

    async def handle(stream: trio.abc.Stream, ticket: Ticket) -> None:
        if ssl_context is not None:
            tls = await _start_tls(stream, ssl_context)
            if tls is None:
                return
            stream = tls
        prefix = b""
        host = None
        if on_http is not None:
            request, conn = await read_request(stream)
            if request is None:
                return
            if not request.upgrade:
                await send_response(stream, conn, request, await on_http(request))
                return
            prefix = request.raw
            host = request.header(b"host")
        watched = _Watched(stream, prefix)
        async with trio.open_nursery() as nursery:

            async def hang_up_on_eof() -> None:
                # trio-websocket waits for a request even after the client hung up.
                await watched.ended.wait()
                if ticket.state == "pending":
                    nursery.cancel_scope.cancel()

            nursery.start_soon(hang_up_on_eof)
            upgrade = await wrap_server_stream(nursery, watched, max_message_size=max_message_size)
            await on_request(_AdmittingRequest(upgrade, ticket, host))
            nursery.cancel_scope.cancel()

    try:
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                await nursery.start(serve_admitted, listener, handle, admission)
            task_status.started(bound)
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)


class WebSocketListening:
    """What ``serve_websocket_admitted`` hands to ``task_status``: the bound ``port``."""

    def __init__(self, port: int) -> None:
        self.port = port
