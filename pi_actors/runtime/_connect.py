"""Connect links: an actor link that the actor dials over TCP instead of inheriting.

Beside inherited socketpairs (an fd number in the boot document, ``_spawn``), a link in the
boot document may be a *connect* link: ``{"connect": "HOST:PORT", "link": ID, "secret":
HEX}``. The actor process dials ``HOST:PORT`` before its entry runs, sends one
authentication frame and waits for the answer; from then on the connection is an ordinary
link (our hello and frames), to whoever offered it. This is how a session's actors on another
node reach what stays on the head (its session store, its UI) — Ray only places processes;
our own links carry their traffic.

Authentication (the first frame each way, length-prefixed like every frame, JSON, at most
``MAX_AUTH_FRAME`` bytes): the dialer sends ``{"link": ID, "secret": HEX}``; the listener
answers ``{"ok": true}`` or ``{"error": TEXT}`` and closes. The secret is per link (32 random
bytes), compared in constant time (``hmac.compare_digest``); every refusal is logged
(``pi_actors.links``: peer address and why); an offer is taken by its first authenticated
connection and refuses every later one. A dialer that sends nothing within the listener's
``auth_timeout`` is dropped.

Head side: ``async with open_link_listener(host) as listener``, then ``offer =
listener.offer(name)``; put ``offer.spec`` in the actor's boot document and ``await
offer.accept()`` for the authenticated ``trio.SocketStream``. Actor side:
``await dial_link(spec)`` (``runtime.child`` does it for every connect link).
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from ._framing import HEADER_SIZE, FrameDecoder, encode_frame

__all__ = ["LinkListener", "LinkOffer", "LinkRefused", "dial_link", "is_connect_link", "open_link_listener"]

log = logging.getLogger("pi_actors.links")

#: The largest authentication frame either side accepts, in bytes.
MAX_AUTH_FRAME = 1024
#: How long a dialer has to send its authentication frame (and a listener to answer it).
AUTH_TIMEOUT = 10.0


class LinkRefused(Exception):
    """A connect link could not be made: the listener refused it (the message says why) or
    could not be reached."""


def is_connect_link(value: object) -> bool:
    """Whether a boot document's link value is a connect link (else: an inherited fd)."""
    return isinstance(value, dict) and "connect" in value


async def _read_frame(stream: trio.abc.ReceiveStream) -> Any:
    """One JSON frame of at most ``MAX_AUTH_FRAME`` bytes, read exactly (the bytes after it
    are the link's: the other side may send its hello right behind it); raises ValueError
    for anything else (too long, not JSON, end of stream first)."""
    decoder = FrameDecoder(MAX_AUTH_FRAME)
    header = await _read_exactly(stream, HEADER_SIZE)
    decoder.feed(header)
    length = int.from_bytes(header, "big")
    if length > MAX_AUTH_FRAME:
        raise ValueError(f"an authentication frame of {length} bytes (at most {MAX_AUTH_FRAME})")
    decoder.feed(await _read_exactly(stream, length))
    payload = decoder.next_frame()
    if payload is None:
        raise ValueError("an incomplete authentication frame")
    return json.loads(payload)


async def _read_exactly(stream: trio.abc.ReceiveStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await stream.receive_some(size - len(data))
        if not chunk:
            raise ValueError("the connection closed before the authentication frame")
        data += chunk
    return data


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise LinkRefused(f"a connect link needs HOST:PORT, not {address!r}")
    return host.strip("[]"), int(port)


async def dial_link(spec: dict[str, Any], *, timeout: float = AUTH_TIMEOUT) -> trio.SocketStream:
    """Dial the connect link ``spec`` and authenticate; the stream, ready for our hello.

    Raises :class:`LinkRefused` if the listener cannot be reached, refuses the secret, or
    does not answer within ``timeout`` seconds."""
    host, port = _split_address(str(spec.get("connect", "")))
    try:
        with trio.fail_after(timeout):
            stream = await trio.open_tcp_stream(host, port)
            try:
                await stream.send_all(encode_frame(json.dumps({"link": spec.get("link"), "secret": spec.get("secret")}).encode()))
                answer = await _read_frame(stream)
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
    except trio.TooSlowError:
        raise LinkRefused(f"link {spec.get('link')!r} at {host}:{port}: no answer within {timeout:g} s") from None
    except (OSError, ValueError, trio.BrokenResourceError) as exc:
        raise LinkRefused(f"link {spec.get('link')!r} at {host}:{port}: {exc}") from None
    if not (isinstance(answer, dict) and answer.get("ok") is True):
        await trio.aclose_forcefully(stream)
        reason = answer.get("error") if isinstance(answer, dict) else None
        raise LinkRefused(f"link {spec.get('link')!r} at {host}:{port} refused: {reason or 'no reason given'}")
    return stream


class LinkOffer:
    """One link offered to one dialer: ``spec`` goes into the boot document; ``accept()``
    waits for the authenticated connection (once)."""

    def __init__(self, listener: LinkListener, link_id: str, secret: str) -> None:
        self.id = link_id
        self._secret = secret
        self.spec: dict[str, Any] = {"connect": listener.address, "link": link_id, "secret": secret}
        self._send, self._receive = trio.open_memory_channel[trio.SocketStream](1)

    async def accept(self) -> trio.SocketStream:
        """The authenticated connection of this offer (waits for it; once)."""
        return await self._receive.receive()


class LinkListener:
    """Accepts connect links on ``address`` for the offers made here (module docstring)."""

    def __init__(self, address: str, auth_timeout: float) -> None:
        self.address = address
        self.auth_timeout = auth_timeout
        self._offers: dict[str, LinkOffer] = {}
        #: Refusals so far (peer address, reason), newest last: what was logged.
        self.refused: list[tuple[str, str]] = []

    def offer(self, name: str) -> LinkOffer:
        """A new offer; ``name`` is a readable prefix of its id (no secret in it)."""
        offer = LinkOffer(self, f"{name}-{secrets.token_hex(8)}", secrets.token_hex(32))
        self._offers[offer.id] = offer
        return offer

    def withdraw(self, offer: LinkOffer) -> None:
        """Refuse ``offer``'s dialer from now on (it is not wanted any more)."""
        self._offers.pop(offer.id, None)
        offer._send.close()

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        try:
            with trio.fail_after(self.auth_timeout):
                hello = await _read_frame(stream)
        except (trio.TooSlowError, ValueError, trio.BrokenResourceError, OSError) as exc:
            await self._refuse(stream, peer, f"no valid authentication frame ({exc or 'timed out'})", answer=False)
            return
        link_id = hello.get("link") if isinstance(hello, dict) else None
        secret = hello.get("secret") if isinstance(hello, dict) else None
        if not (isinstance(link_id, str) and len(link_id) <= 64 and link_id.isprintable()):
            link_id = "(malformed)"  # never log what a stranger chose
        offer = self._offers.get(link_id)
        expected = offer._secret if offer is not None else secrets.token_hex(32)  # compare anyway: same time
        good = isinstance(secret, str) and hmac.compare_digest(secret.encode(), expected.encode())
        if offer is None or not good:
            await self._refuse(stream, peer, f"link {link_id!r}: " + ("unknown or already taken" if offer is None else "wrong secret"))
            return
        del self._offers[offer.id]
        try:
            await stream.send_all(encode_frame(b'{"ok": true}'))
            offer._send.send_nowait(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock, OSError):
            await trio.aclose_forcefully(stream)
        finally:
            offer._send.close()

    async def _refuse(self, stream: trio.SocketStream, peer: str, reason: str, *, answer: bool = True) -> None:
        log.warning("connect link refused from %s: %s", peer, reason)
        self.refused.append((peer, reason))
        if answer:
            with trio.move_on_after(1.0):
                try:
                    await stream.send_all(encode_frame(json.dumps({"error": "authentication failed"}).encode()))
                except (trio.BrokenResourceError, OSError):
                    pass
        await trio.aclose_forcefully(stream)


@asynccontextmanager
async def open_link_listener(host: str = "127.0.0.1", port: int = 0, *, auth_timeout: float = AUTH_TIMEOUT) -> AsyncIterator[LinkListener]:
    """Listen for connect links on ``host:port`` (port 0: a free one) for the block; the
    listener's ``address`` is what offers name. Raises OSError if it cannot listen."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    sockname = listeners[0].socket.getsockname()
    shown = f"[{sockname[0]}]" if ":" in sockname[0] else sockname[0]
    listener = LinkListener(f"{shown}:{sockname[1]}", auth_timeout)
    async with trio.open_nursery() as nursery:

        async def serve(socket_listener: trio.SocketListener) -> None:
            # Not trio.serve_listeners: it closes a stream when its handler returns, and an
            # accepted link lives on with its offer's owner.
            async with socket_listener:
                while True:
                    nursery.start_soon(listener._handle, await socket_listener.accept())

        for socket_listener in listeners:
            nursery.start_soon(serve, socket_listener)
        try:
            yield listener
        finally:
            for offer in list(listener._offers.values()):
                listener.withdraw(offer)
            nursery.cancel_scope.cancel()
