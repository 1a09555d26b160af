"""The coordinator's count of a streaming reply's tool calls, told to the tool pool.

A real Peer pair stands for the coordinator's link to its pool; the pool's side records the
``expect_calls`` requests it gets (as the pool's declaration decodes them) and holds the first one,
so that the test sees what is sent while a request is in flight.
"""

from __future__ import annotations

import trio
import trio.testing

from pi_actors.actors._tool_warm import ToolCallCounter
from pi_actors.actors.local import _Supervisor
from pi_actors.ai import types as T
from pi_actors.ai.types import Model
from pi_actors.protocol.config import CoordinatorConfig, RuntimeConfig, SandboxConfig, ToolPoolConfig
from pi_actors.protocol.pool import EXPECT_CALLS, ExpectCallsArgs
from pi_actors.runtime import Interface, RemoteError, RestartPolicy, Router, TypedCall, implements, link_pair, open_peer

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


async def _with_pool(recorder: Recorder, body, *, ready: int = 0) -> None:
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
                await body(ToolCallCounter(peer, "/work", requests, ready=ready))
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


async def test_a_reply_with_no_more_calls_than_the_pools_warm_workers_sends_the_pool_nothing():
    recorder = Recorder()
    recorder.release.set()

    async def body(counter: ToolCallCounter) -> None:
        counter.saw(toolcall_start(0))
        counter.saw(toolcall_start(1))
        await trio.testing.wait_all_tasks_blocked()

    await _with_pool(recorder, body, ready=2)
    assert recorder.received == []


async def test_a_call_beyond_the_warm_workers_tells_the_pool_every_call_of_the_reply():
    recorder = Recorder()
    recorder.release.set()

    async def body(counter: ToolCallCounter) -> None:
        for index in range(3):
            counter.saw(toolcall_start(index))
        await recorder.wait_for(1)

    await _with_pool(recorder, body, ready=2)
    assert [args.calls for args in recorder.received] == [3]  # the total: the pool counts its idle workers


def _supervisor(config: RuntimeConfig, tools_link=None) -> _Supervisor:
    return _Supervisor(
        config, None, policy=RestartPolicy(), tools_link=tools_link, processes=None,  # type: ignore[arg-type]
        handshake_timeout=None, store_with_coordinator=True, spares=False,
    )  # fmt: skip


def _config(cwd: str, sandbox: SandboxConfig | None) -> RuntimeConfig:
    model = Model(id="m", name="m", api="openai-completions", provider="p", base_url="http://127.0.0.1:9")
    return RuntimeConfig(
        coordinator=CoordinatorConfig(model=model, cwd=cwd), tools=ToolPoolConfig(warm=3, sandbox=sandbox)
    )


def test_the_local_placement_tells_the_coordinator_how_many_warm_workers_its_own_pool_keeps_in_its_cwd(tmp_path):
    here, elsewhere = str(tmp_path), str(tmp_path / "other")

    def warm_tools(config: RuntimeConfig, tools_link=None) -> int:
        return _supervisor(config, tools_link)._coordinator_config().get("warm_tools", 0)  # a default is not sent

    assert warm_tools(_config(here, SandboxConfig(mode="workspace-write", workspace=here))) == 3
    assert warm_tools(_config(here, SandboxConfig(mode="off"))) == 3
    # Workers of another workspace, the platform's default policy (no workspace: no warm
    # workers) or a pool that is not its own (a tool host): every call is announced.
    assert warm_tools(_config(here, SandboxConfig(mode="workspace-write", workspace=elsewhere))) == 0
    assert warm_tools(_config(here, None)) == 0
    assert warm_tools(_config(here, SandboxConfig(mode="off")), tools_link=object()) == 0
