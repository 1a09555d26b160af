"""Raw protocol exchanges and line readers, for the server and CLI tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import trio

from pi_actors.runtime import IncomingCall, Peer, open_peer
from pi_actors.runtime import protocol as P


@asynccontextmanager
async def peer_pair(client_stream: trio.abc.Stream, server_stream: trio.abc.Stream,
                    handler: Callable[[IncomingCall], Awaitable[object]], **server: str) -> AsyncIterator[Peer]:
    """A client Peer (role ``consumer``) on ``client_stream`` to a server Peer on
    ``server_stream`` that serves ``handler`` (role ``producer`` unless ``server`` names
    another ``role``/``name``); both end when the block does."""
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            options = {"role": "producer", "name": "p", **server}
            async with open_peer(server_stream, side="server", handler=handler, **options) as peer:
                await peer.closed_event.wait()

        nursery.start_soon(serve)
        async with open_peer(client_stream, side="client", role="consumer", name="c") as peer:
            yield peer
        nursery.cancel_scope.cancel()


async def raw_exchange(stream: trio.abc.Stream, data: bytes) -> list:
    """Send raw bytes, read until the server closes; the decoded frames it sent."""
    await stream.send_all(data)
    received = b""
    with trio.fail_after(15):
        while True:
            try:
                more = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                more = b""
            if not more:
                break
            received += more
    out = []
    while len(received) >= 4:
        n = int.from_bytes(received[:4], "big")
        out.append(P.decode_message(received[4 : 4 + n]))
        received = received[4 + n :]
    return out


class Lines:
    """The lines of a child's pipe, read as they come; ``until(pred)`` skips to the first line
    (parsed as JSON when it is JSON) that ``pred`` accepts."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.buf = b""

    async def next(self) -> str:
        while b"\n" not in self.buf:
            data = await self.stream.receive_some(65536)
            if not data:
                raise EOFError(self.buf.decode(errors="replace"))
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    async def until(self, pred) -> object:
        while True:
            line = await self.next()
            try:
                obj = json.loads(line)
            except ValueError:
                obj = line
            if pred(obj):
                return obj


def content_text(content: str | list | None) -> str:
    """A message's text as the model or a JSON reader sees it: a string content as is, user
    content as pi writes it (an array of parts) by its text parts."""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if part.get("type") == "text")


def ends_in_call_order(events: list[dict]) -> list[dict]:
    """The ``tool_execution_end`` events (JSON or RPC lines) in call order. Within a turn each
    comes as its call finishes (pi's order), so a fast call's end may come first; the model
    still gets the results in call order."""
    turn, position, ends = 0, {}, []
    for e in events:
        if e.get("type") == "turn_start":
            turn += 1
        elif e.get("type") == "tool_execution_start":
            position[(turn, e["toolCallId"])] = len(position)
        elif e.get("type") == "tool_execution_end":
            ends.append((position[(turn, e["toolCallId"])], e))
    return [e for _, e in sorted(ends, key=lambda pair: pair[0])]
