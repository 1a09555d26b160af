"""Plain HTTP/1.1 on the WebSocket port: read one request, answer it, close (with h11).

The WebSocket listener (``_websocket``) calls :func:`read_request` when it serves plain
HTTP next to upgrades: it reads the request head, and

* for a WebSocket upgrade (``Upgrade: websocket``) returns an :class:`HttpRequest` with
  ``upgrade`` True and ``raw`` = every byte read so far, which the listener hands to
  trio-websocket as if unread;
* otherwise reads the body (at most ``max_body`` bytes; more is answered ``413``) and
  returns the request for the application to answer with :func:`send_response`.

One request per connection: every response says ``Connection: close``. Malformed HTTP is
answered ``400`` (a head larger than ``max_head``: ``431``) and ``read_request`` returns
None, as it does when the client hangs up first. Nothing here logs a request: a body (a
sign-in form) may hold a secret. Cancellation: the caller's deadline (the admission's
handshake timeout) bounds the whole exchange.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import h11
import trio

__all__ = ["HttpRequest", "HttpResponse", "read_request", "send_response"]

#: Largest request head (request line and headers), in bytes.
MAX_HEAD = 16 * 1024


@dataclass
class HttpRequest:
    """One request: ``method`` (``"GET"``), ``target`` (``"/static/app.js?x"``), ``headers``
    (names lower-cased, as h11 gives them), ``body``; ``upgrade`` for a WebSocket upgrade
    (then ``raw`` holds the bytes read, the body is not read)."""

    method: str
    target: str
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    upgrade: bool = False
    raw: bytes = b""

    def header(self, name: bytes) -> bytes | None:
        """The value of the first header ``name`` (lower-case), or None."""
        for key, value in self.headers:
            if key == name:
                return value
        return None


@dataclass
class HttpResponse:
    """What to answer: ``status``, ``headers`` (``Content-Length`` and ``Connection`` are
    added), ``body`` (left out for ``HEAD``)."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


def _is_upgrade(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(name == b"upgrade" and value.strip().lower() == b"websocket" for name, value in headers)


async def _plain(stream: trio.abc.Stream, status: int, text: bytes) -> None:
    reason = _REASONS.get(status, "Error").encode()
    head = b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n" % (status, reason)
    try:
        await stream.send_all(head + b"content-length: %d\r\n\r\n" % len(text) + text)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


_REASONS = {400: "Bad Request", 413: "Content Too Large", 431: "Request Header Fields Too Large"}


async def read_request(stream: trio.abc.Stream, *, max_body: int = 8192) -> tuple[HttpRequest | None, h11.Connection]:
    """Read one request from ``stream`` (see the module docstring). Returns the request (None:
    answered already, or the client left) and the h11 connection to answer it on."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    raw = bytearray()
    request: HttpRequest | None = None
    body = bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            status = exc.error_status_hint
            await _plain(stream, 431 if status == 431 else 400, b"malformed HTTP request\n")
            return None, conn
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None, conn
            if request is None:
                raw += data
            conn.receive_data(bytes(data))
            continue
        if isinstance(event, h11.Request):
            headers = [(bytes(k), bytes(v)) for k, v in event.headers]
            request = HttpRequest(event.method.decode("ascii"), event.target.decode("ascii", "replace"), headers)
            if _is_upgrade(headers):
                request.upgrade = True
                request.raw = bytes(raw)
                return request, conn
            continue
        if isinstance(event, h11.Data):
            body += event.data
            if len(body) > max_body:
                await _plain(stream, 413, b"request body too large\n")
                return None, conn
            continue
        if (isinstance(event, h11.EndOfMessage) or event is h11.PAUSED) and request is not None:
            # (PAUSED: an upgrade to something other than WebSocket, answered as plain HTTP.)
            request.body = bytes(body)
            return request, conn
        return None, conn  # ConnectionClosed or PAUSED before a whole request


async def send_response(stream: trio.abc.Stream, conn: h11.Connection, request: HttpRequest, response: HttpResponse) -> None:
    """Write ``response`` to ``request`` and end the exchange (``Connection: close``)."""
    body = b"" if request.method == "HEAD" else response.body
    headers = [(name, value) for name, value in response.headers if name.lower() not in ("content-length", "connection")]
    headers += [("content-length", str(len(response.body))), ("connection", "close")]
    try:
        data = conn.send(h11.Response(status_code=response.status, headers=headers))
        if body:
            data = (data or b"") + (conn.send(h11.Data(data=body)) or b"")
        data = (data or b"") + (conn.send(h11.EndOfMessage()) or b"")
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
