"""A request in one socket write: the HTTP/1.1 connections of an ``httpx2`` client made to hold
back their writes until they next read.

httpcore writes a request as two sends, its head and then its body, before it reads the
response; each send of a loopback or LAN connection costs a system call and delivers a
segment the server wakes up for. Node's HTTP client (pi's) sends a request whose body it
has whole in one. Held back until the connection next reads — by then the request is
complete — the head and the body leave in one ``send``: one segment, one wake-up of the
server. Measured in one process against the benchmark's scripted server, alternating
calls (``benchmarks/NOTES-r9-prov4.md``): ~0.5 ms less of the provider's CPU per request.

What a connection does is otherwise unchanged: the bytes, their order, the write timeout (the
held bytes are sent under the last write's), TLS (the wrapped stream of ``start_tls`` holds
its writes too; the handshake is the TLS layer's own), proxies (a ``CONNECT`` is a request
followed by a read). A write error surfaces from the read that sends the bytes, where the
response would have been read: the call fails as a connection error either way. Bytes held
by a connection closed before it reads again (a cancelled request) are dropped with it.

:func:`send_requests_whole` installs this on a client's connection pool; on an httpx2 whose
internals differ it leaves the client as it is (the requests are then sent as before).
"""

from __future__ import annotations

import ssl
from typing import Any

from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream, WriteError

from ..._ready import send_now

__all__ = ["send_requests_whole"]


class _HeldWrites(AsyncNetworkStream):
    """A connection's stream whose writes wait for its next read (or ``start_tls``)."""

    def __init__(self, stream: AsyncNetworkStream) -> None:
        self._stream = stream
        self._held: list[bytes] = []
        self._timeout: float | None = None
        # A plain (not TLS) trio socket under the stream: what the kernel takes at once is
        # written to it directly (_send_held).
        self._socket = _plain_trio_socket(stream)

    async def _send_held(self) -> None:
        if self._held:
            data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
            self._held.clear()
            sent = 0
            if self._socket is not None:
                try:
                    sent = send_now(self._socket, data)  # (no trip through the scheduler)
                except OSError as exc:
                    raise WriteError(str(exc)) from exc
            if sent < len(data):
                await self._stream.write(data[sent:] if sent else data, timeout=self._timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._held.append(buffer)
            self._timeout = timeout

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._send_held()
        return await self._stream.read(max_bytes, timeout=timeout)

    async def aclose(self) -> None:
        self._held.clear()
        await self._stream.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> AsyncNetworkStream:
        await self._send_held()
        return _HeldWrites(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def _plain_trio_socket(stream: AsyncNetworkStream) -> Any:
    """The trio socket of a plain TCP or unix stream of httpcore's trio backend, else None
    (TLS: its bytes must go through the TLS layer; other backends: left to their own write)."""
    try:
        if stream.get_extra_info("ssl_object") is not None:
            return None
        sock = stream.get_extra_info("socket")
    except Exception:  # noqa: BLE001 - a backend without these: no direct writes
        return None
    import trio

    return sock if isinstance(sock, trio.socket.SocketType) else None


class _Backend(AsyncNetworkBackend):
    """The pool's network backend, its connections' streams wrapped in :class:`_HeldWrites`."""

    def __init__(self, backend: AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> AsyncNetworkStream:
        return _HeldWrites(await self._backend.connect_tcp(host, port, timeout=timeout, local_address=local_address,
                                                           socket_options=socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> AsyncNetworkStream:
        return _HeldWrites(await self._backend.connect_unix_socket(path, timeout=timeout, socket_options=socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def send_requests_whole(http_client: Any) -> Any:
    """``http_client`` (an ``httpx2.AsyncClient`` on its default HTTP/1.1 transport), its
    connections from now on sending each request in one write. Returns the client."""
    pool = getattr(getattr(http_client, "_transport", None), "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, AsyncNetworkBackend) and not isinstance(backend, _Backend) \
            and not getattr(pool, "_http2", False):
        pool._network_backend = _Backend(backend)  # type: ignore[union-attr]
    return http_client
