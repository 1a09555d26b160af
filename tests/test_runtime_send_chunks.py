"""``IncomingCall.send_chunks``: stream items that are ready together go out in one write.

A provider parses several events from one network read; sent one frame per write, each one
wakes the coordinator on its own. These tests hold the batch to ``send_chunk``'s contract:
order, contiguous numbering, flow control, and an item the wire cannot carry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import trio
import trio.testing
from support.wire import peer_pair

from pi_actors.runtime import IncomingCall, Peer, RemoteError
from pi_actors.runtime import protocol as P

WINDOW = P.CHUNK_WINDOW


class CountedStreams:
    """A memory stream pair whose server side counts its writes."""

    def __init__(self) -> None:
        self.client, self.server = trio.testing.memory_stream_pair()
        self.server_writes = 0
        pump = self.server.send_stream.send_all_hook

        async def counted() -> None:
            self.server_writes += 1
            if pump is not None:
                await pump()

        self.server.send_stream.send_all_hook = counted


def connected(streams: CountedStreams, handler: Callable[[IncomingCall], Awaitable[Any]]) -> AbstractAsyncContextManager[Peer]:
    return peer_pair(streams.client, streams.server, handler)


async def _batch_then(batch: list[Any], then: tuple[Any, ...] = ()) -> tuple[list[Any], list[int]]:
    """A handler sends ``batch`` with ``send_chunks``, then each of ``then`` alone, and returns
    "done"; returns what the caller read and the server's writes during the batch."""
    streams = CountedStreams()
    writes: list[int] = []

    async def handler(call: IncomingCall) -> object:
        before = streams.server_writes
        await call.send_chunks(batch)
        writes.append(streams.server_writes - before)
        for item in then:
            await call.send_chunk(item)
        return "done"

    async with connected(streams, handler) as peer:
        with trio.fail_after(10):
            async with peer.open_call("m") as call:
                items = [item async for item in call]
                assert await call.result() == "done"
    return items, writes


async def test_items_ready_together_reach_the_caller_in_order_from_one_write():
    items, writes = await _batch_then([{"type": "start"}, {"type": "toolcall_start"}, "delta", 4, None], ("alone",))
    assert items == [{"type": "start"}, {"type": "toolcall_start"}, "delta", 4, None, "alone"]
    assert writes == [1]


async def test_a_batch_longer_than_the_window_waits_for_credit_and_arrives_whole():
    streams = CountedStreams()
    sent = trio.Event()

    async def handler(call: IncomingCall) -> object:
        await call.send_chunks(list(range(3 * WINDOW + 5)))
        sent.set()
        return "done"

    async with connected(streams, handler) as peer:
        with trio.fail_after(10):
            async with peer.open_call("m") as call:
                first = await anext(call)
                await trio.testing.wait_all_tasks_blocked()
                assert not sent.is_set()  # a slow consumer holds the producer to its window
                items = [first] + [item async for item in call]
                assert await call.result() == "done"
    assert items == list(range(3 * WINDOW + 5))


async def test_an_item_the_wire_cannot_carry_sends_those_before_it_and_the_stream_goes_on():
    streams = CountedStreams()

    async def handler(call: IncomingCall) -> object:
        with pytest.raises(RemoteError) as info:
            await call.send_chunks([1, 2, object(), 4])
        assert info.value.code == "internal"
        await call.send_chunks(["after"])  # the numbering has no gap: the caller accepts it
        return "done"

    async with connected(streams, handler) as peer:
        with trio.fail_after(10):
            async with peer.open_call("m") as call:
                items = [item async for item in call]
                assert await call.result() == "done"
            await peer.ping()  # the connection is still usable
    assert items == [1, 2, "after"]


async def test_a_burst_of_large_items_is_written_a_megabyte_or_so_at_a_time_and_arrives_whole():
    # Twelve items of 256 KiB: framed all at once they would be one 3 MiB buffer.
    big = [bytes([i]) * (256 * 1024) for i in range(12)]
    items, writes = await _batch_then(big)
    assert items == big
    assert writes == [3]  # four items (just over 1 MiB) per write
