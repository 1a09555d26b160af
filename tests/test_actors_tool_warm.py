"""The coordinator's count of a streaming reply's tool calls, told to the tool pool.

A real Peer pair stands for the coordinator's link to its pool; the pool's side records the
``expect_calls`` requests it gets (as the pool's declaration decodes them) and holds the first one,
so that the test sees what is sent while a request is in flight.
"""

from __future__ import annotations

import trio
import trio.testing

from pi_actors.actors._tool_warm import ToolCallCounter
from pi_actors.ai import types as T
from pi_actors.protocol.pool import EXPECT_CALLS, ExpectCallsArgs
from pi_actors.runtime import Interface, RemoteError, Router, TypedCall, implements, link_pair, open_peer

EXPECT_ONLY = Interface("tool-pool", [EXPECT_CALLS])


class Recorder:
    def __init__(self, refuse: bool = False) -> None:
        self.received: list[ExpectCallsArgs] = []
        self.release = trio.Event()
        self.changed = trio.Event()
        self.refuse = refuse

    @implements(EXPECT_CALLS)
    async def expect_calls(self, args: ExpectCallsArgs, call: TypedCall[ExpectCallsArgs, None]) -> None:
        self.received.append(args)
        self.changed.set()
        self.changed = trio.Event()
        if len(self.received) == 1:
            await self.release.wait()
        if self.refuse:
            raise RemoteError("method_not_found", "no such method here")

    async def wait_for(self, count: int) -> None:
        with trio.fail_after(10):
            while len(self.received) < count:
                await self.changed.wait()


async def _with_pool(recorder: Recorder, body) -> None:
    ours, theirs = link_pair()
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(theirs))
            handler = Router.serving(recorder, EXPECT_ONLY)
            async with open_peer(stream, side="server", role="tool-pool", name="c", handler=handler) as peer:
                await peer.closed_event.wait()

        nursery.start_soon(serve)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        async with open_peer(stream, side="client", role="coordinator", name="tool-pool") as peer:
            async with trio.open_nursery() as requests:
                await body(ToolCallCounter(peer, "/work", requests))
        nursery.cancel_scope.cancel()


def toolcall_start(index: int) -> T.ToolCallStartEvent:
    return T.ToolCallStartEvent(content_index=index)


async def test_the_pool_hears_of_a_replys_tool_calls_as_they_stream_one_request_at_a_time_with_the_latest_count():
    recorder = Recorder()

    async def body(counter: ToolCallCounter) -> None:
        counter.saw(T.TextStartEvent(content_index=0))  # not a tool call: nothing is sent
        counter.saw(toolcall_start(1))
        await recorder.wait_for(1)
        for index in range(2, 6):  # while the first request is held: no second one yet
            counter.saw(toolcall_start(index))
            counter.saw(T.TextDeltaEvent(content_index=0, delta="x"))
        await trio.testing.wait_all_tasks_blocked()
        assert len(recorder.received) == 1
        recorder.release.set()
        await recorder.wait_for(2)

    await _with_pool(recorder, body)
    assert [(args.calls, args.cwd) for args in recorder.received] == [(1, "/work"), (5, "/work")]


async def test_a_pool_that_refuses_the_count_is_not_asked_again_during_the_reply_and_nothing_fails():
    recorder = Recorder(refuse=True)

    async def body(counter: ToolCallCounter) -> None:
        counter.saw(toolcall_start(0))
        await recorder.wait_for(1)
        counter.saw(toolcall_start(1))
        recorder.release.set()
        await trio.testing.wait_all_tasks_blocked()
        counter.saw(toolcall_start(2))
        await trio.testing.wait_all_tasks_blocked()

    await _with_pool(recorder, body)  # nothing raised
    assert [args.calls for args in recorder.received] == [1]
