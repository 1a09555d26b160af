"""The client side of the server: connect over WebSocket or a unix socket, then speak our
protocol through a ``Peer``; ``RemoteSession`` wraps the attachment fencing.

Addresses: ``ws://HOST:PORT[/path]``, ``wss://…`` (TLS, verified against ``tls_ca`` — a
PEM file of trusted CAs — or else the system's trust store), both with the bearer token sent
on the upgrade, or ``unix:PATH`` (also a bare path). A refused upgrade raises
``ConnectionRefused`` (``status`` 401 for a bad token; the server's one-line reason, if it
gave one, is in the message); a lost connection fails in-flight calls with
``ConnectionLost`` (outcome unknown). ``tls_context(ca_file)`` builds the client's SSL
context and raises ``ValueError`` saying what is wrong with ``ca_file``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio

from ..runtime import ConnectionLost, Handler, Peer, RemoteError, open_peer
from ..runtime.transports import MAX_WS_MESSAGE, WebSocketStream

__all__ = ["connect", "parse_address", "tls_context", "ConnectionRefused", "RemoteSession"]


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


def tls_context(ca_file: str | None) -> Any:
    """A client SSL context that verifies the server against ``ca_file`` (PEM), or the
    system's trust store when it is None."""
    import ssl

    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the CA file {ca_file}: {exc}") from None


def _rejection(exc: Any) -> str:
    detail = f"server refused the connection (HTTP {exc.status_code})"
    body = bytes(exc.body or b"").decode("utf-8", "replace").strip()
    if body and len(body) < 200 and body.isprintable():
        detail += f": {body}"
    return detail


async def _check_tls(where: str, context: Any) -> None:
    """Complete one TLS handshake with the server of ``where`` and hang up, so that a
    certificate the client does not trust (or a server without TLS) is reported at once
    and by name: inside trio-websocket such a failure only shows as a connect timeout."""
    from urllib.parse import urlsplit

    parts = urlsplit(where)
    try:
        with trio.fail_after(10):
            tls = await trio.open_ssl_over_tcp_stream(
                parts.hostname or "", parts.port or 443, ssl_context=context, https_compatible=True
            )
            try:
                await tls.do_handshake()
            finally:
                await trio.aclose_forcefully(tls)
    except trio.TooSlowError:
        raise ConnectionRefused(f"cannot connect to {where}: no TLS handshake within 10 s") from None
    except (OSError, trio.BrokenResourceError) as exc:
        raise ConnectionRefused(f"cannot connect to {where}: TLS handshake failed: {_reason(exc)}") from None


@asynccontextmanager
async def _open_stream(address: str, token: str | None, tls_ca: str | None = None) -> AsyncIterator[trio.abc.Stream]:
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
    context = tls_context(tls_ca) if where.startswith("wss://") else None
    if context is not None:
        await _check_tls(where, context)
    try:
        async with AsyncExitStack() as stack:
            try:
                ws = await stack.enter_async_context(
                    open_websocket_url(
                        where, ssl_context=context, extra_headers=headers, max_message_size=MAX_WS_MESSAGE,
                        connect_timeout=10, disconnect_timeout=2,
                    )
                )
            except trio.BrokenResourceError as exc:  # the TLS handshake failed
                raise ConnectionRefused(f"cannot connect to {where}: {_reason(exc)}") from None
            yield WebSocketStream(ws)
    except ConnectionRejected as exc:
        raise ConnectionRefused(_rejection(exc), exc.status_code) from None
    except (HandshakeError, OSError) as exc:
        raise ConnectionRefused(f"cannot connect to {where}: {_reason(exc)}") from None


@asynccontextmanager
async def connect(
    address: str, *, token: str | None = None, role: str = "client", name: str = "client", handler: Handler | None = None,
    tls_ca: str | None = None,
) -> AsyncIterator[Peer]:
    """An open connection to the server at ``address`` (hello done) for the duration of the
    block: a runtime ``Peer`` whose ``call`` / ``open_call`` reach the server's own methods
    (list, create, attach, ...) and, with ``target=session_id``, a session's.

    ``token``: the bearer token (WebSocket only; a unix socket authenticates by its file
    permissions). ``role`` / ``name``: what the hello announces. ``handler``: serves the
    server's calls to this client (a tool host's ``run_tool``); None refuses them.
    ``tls_ca``: PEM file of the CAs to trust for ``wss://`` (default: the system's).
    Raises :class:`ConnectionRefused` when no connection could be made (``status`` 401:
    the token was refused); leaving the block closes the connection."""
    async with _open_stream(address, token, tls_ca) as stream:
        async with open_peer(stream, side="client", role=role, name=name, handler=handler) as peer:
            yield peer


class RemoteSession:
    """One attachment to a session on a server: ``call`` / ``open_call`` go to the session
    (the coordinator's methods: prompt, subscribe, get_state, ...), each carrying this
    attachment's id, which the server checks (a detached or replaced attachment is refused).
    Make one with :meth:`attach`."""

    def __init__(self, peer: Peer, session_id: str, attachment_id: str) -> None:
        self.peer = peer
        self.session_id = session_id
        self.attachment_id = attachment_id

    @classmethod
    async def attach(cls, peer: Peer, session_id: str) -> RemoteSession:
        """Attach to the session ``session_id`` over ``peer`` (from :func:`connect`). Raises
        RemoteError ``session_not_found`` for an unknown session (and the server's other refusals)."""
        reply = await peer.call("attach", {"sessionId": session_id})
        return cls(peer, reply["sessionId"], reply["attachmentId"])

    def _args(self, args: dict | None) -> dict:
        return {**(args or {}), "attachmentId": self.attachment_id}

    async def call(self, method: str, args: dict | None = None) -> Any:
        """One call to the session; its result (RemoteError if refused or failed)."""
        return await self.peer.call(method, self._args(args), target=self.session_id)

    def open_call(self, method: str, args: dict | None = None) -> Any:
        """A streaming call to the session (``async with``; iterate its chunks, then
        ``await call.result()``)."""
        return self.peer.open_call(method, self._args(args), target=self.session_id)


__all__ += ["RemoteError"]
