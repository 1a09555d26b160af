"""The tool pool, tool workers, session store, provider and tool host serve their declared
contracts (``pi_actors.protocol``): every declared method has a handler, a mistyped call is
refused as ``invalid_request`` naming the field while the actor keeps serving (real actor
processes), answers keep today's wire shape, and a caller behind a ``PeerSlot`` is told when
the actor answers something its contract does not allow."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.actors._relink import PeerSlot
from pi_actors.actors.provider import ProviderActor
from pi_actors.actors.session_store import SessionStore
from pi_actors.actors.tool_pool import ToolPool
from pi_actors.actors.tool_worker import _Worker as ToolWorker
from pi_actors.cli.tool_host import ToolHost
from pi_actors.protocol.pool import POOL, RUN_TOOL, TOOL_HOST, WORKER, RunToolArgs
from pi_actors.protocol.provider import PROVIDER
from pi_actors.protocol.store import STORE
from pi_actors.runtime import IncomingCall, RemoteError, Router, call_method, link_pair, open_peer, start_actor


@asynccontextmanager
async def actor_process(entry: str, config: dict[str, Any]) -> AsyncIterator[Any]:
    """The actor ``entry`` as a real process, and our (the coordinator's) peer of it."""
    ours, theirs = link_pair()
    async with trio.open_nursery() as nursery:
        await start_actor(nursery, name="contract-test", entry=entry, links={"coordinator": theirs}, config=config)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        async with open_peer(stream, side="client", role="coordinator", name="actor") as peer:
            yield peer
        nursery.cancel_scope.cancel()


async def refused(peer: Any, method: str, args: Any) -> RemoteError:
    with pytest.raises(RemoteError) as info:
        await peer.call(method, args)
    return info.value


async def test_every_declared_method_of_the_workers_store_provider_and_tool_host_has_a_handler():
    async with trio.open_nursery() as nursery:
        routers = [
            Router.serving(ToolPool(nursery, warm=0), POOL),
            Router.serving(ToolWorker(False, {}), WORKER),
            Router.serving(SessionStore(owner_pid=1), STORE),
            Router.serving(ProviderActor({}), PROVIDER),
            Router.serving(ToolHost(None, "/"), TOOL_HOST),  # type: ignore[arg-type]
        ]
        nursery.cancel_scope.cancel()
    for router, iface in zip(routers, (POOL, WORKER, STORE, PROVIDER, TOOL_HOST), strict=True):
        assert set(router.methods) == {m.name for m in iface}


async def test_a_mistyped_run_tool_call_is_refused_naming_the_field_and_the_pool_keeps_serving(tmp_path):
    config = {"max_workers": 2, "warm": 0, "warm_on_request": True, "sandbox": {"mode": "off"}}
    good = {"toolCallId": "t1", "name": "bash", "args": {"command": "echo still here"}, "cwd": str(tmp_path)}
    async with actor_process("pi_actors.actors.tool_pool:run_tool_pool", config) as pool:
        with trio.fail_after(60):
            for bad, field in (
                ({**good, "cwd": 3}, "$.cwd"),
                ({**good, "toolCallId": 7}, "$.toolCallId"),
                ({**good, "args": "echo hi"}, "$.args"),
                ({k: v for k, v in good.items() if k != "name"}, "`name`"),
            ):
                error = await refused(pool, "run_tool", bad)
                assert error.code == "invalid_request" and field in error.message, (bad, error)
                assert error.message.startswith("run_tool: ")
            # The tool's own arguments are the tool's to judge: a result the model sees.
            wrong_tool_args = await pool.call("run_tool", {**good, "args": {"command": 5}})
            assert wrong_tool_args["isError"] is True
            # Same wire shape as before the contract: camelCase, `details` present even when null.
            result = await pool.call("run_tool", good)
            assert set(result) == {"content", "details", "isError"}
            assert result["isError"] is False and result["content"] == [{"type": "text", "text": "still here\n"}]
            assert await call_method(pool, RUN_TOOL, RunToolArgs(tool_call_id="t2", name="bash", args={"command": "echo typed"}, cwd=str(tmp_path))) \
                == RUN_TOOL.decode_result({"content": [{"type": "text", "text": "typed\n"}], "details": result["details"], "isError": False})  # fmt: skip


async def test_a_mistyped_store_call_is_refused_naming_the_field_and_the_store_keeps_serving(tmp_path):
    async with actor_process("pi_actors.actors.session_store:run_session_store", {}) as store:
        with trio.fail_after(60):
            opened = await store.call("open", {"cwd": str(tmp_path), "sessionDir": str(tmp_path / "sessions")})
            # Today's shape, byte for byte: every key present, null included.
            assert set(opened) == {"header", "path", "context", "warnings"}
            assert opened["context"] == {"messages": [], "thinkingLevel": "off", "model": None}
            for method, bad, field in (
                ("append", {"message": "hello"}, "$.message"),
                ("append", {}, "`message`"),
                ("append_entry", {"entry": ["model_change"]}, "$.entry"),
                ("branch", {"entryId": 5}, "$.entryId"),
                ("label", {"targetId": None, "label": "x"}, "$.targetId"),
                ("open", {"cwd": str(tmp_path), "noSession": "yes"}, "$.noSession"),
            ):
                error = await refused(store, method, bad)
                assert error.code == "invalid_request" and field in error.message, (method, bad, error)
            message = {"role": "user", "content": "hi", "timestamp": 1}
            appended = await store.call("append", {"message": message})
            tree = await store.call("entries")
            assert set(tree) == {"entries", "leafId", "labels"} and tree["leafId"] == appended["id"]
            # A refusal of meaning (not of shape) keeps its own code.
            assert (await refused(store, "branch", {"entryId": "no-such-entry"})).code == "not_found"


class _LyingPool:
    """A "tool pool" that answers run_tool with a result of the wrong shape."""

    def __init__(self, result: Any, chunk: Any = None) -> None:
        self.result = result
        self.chunk = chunk

    async def __call__(self, call: IncomingCall) -> Any:
        if self.chunk is not None:
            await call.send_chunk(self.chunk)
        return self.result


@asynccontextmanager
async def slot_to(handler: Any) -> AsyncIterator[PeerSlot]:
    """A coordinator's tools slot linked to an actor served by ``handler`` (a socketpair)."""
    a, b = socket.socketpair()
    wrap = lambda s: trio.SocketStream(trio.socket.from_stdlib_socket(s))
    slot = PeerSlot("tools", "tool pool", "tool call", supervised=False)
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            async with open_peer(wrap(b), side="server", role="tool-pool", name="tools", handler=handler) as peer:
                await peer.closed_event.wait()

        nursery.start_soon(serve)
        await slot.hold(nursery, wrap(a))
        yield slot
        nursery.cancel_scope.cancel()


ARGS = {"toolCallId": "t", "name": "bash", "args": {"command": "true"}, "cwd": "/"}


@pytest.mark.parametrize(
    "lie, chunk, field",
    [
        ({"content": "trust me", "details": None, "isError": False}, None, "$.content"),
        ({"content": [], "details": None, "isError": "no"}, None, "$.isError"),
        ({"content": [], "details": None, "isError": False}, {"content": [{"type": "shell", "text": "x"}]}, "$.content[0]"),
    ],
)
async def test_a_tool_pool_answer_that_breaks_the_contract_is_invalid_response_for_the_coordinator(lie, chunk, field):
    async with slot_to(_LyingPool(lie, chunk)) as slot:
        with trio.fail_after(10):
            with pytest.raises(RemoteError) as info:
                await slot.call("run_tool", ARGS)
            assert info.value.code == "invalid_response" and field in info.value.message
            with pytest.raises(RemoteError) as info:
                await call_method(slot, RUN_TOOL, RUN_TOOL.decode_args(ARGS))  # type: ignore[arg-type]
            assert info.value.code == "invalid_response"


async def test_an_honest_answer_passes_the_slot_unchanged():
    honest = {"content": [{"type": "text", "text": "ok"}], "details": {"exitCode": 0}, "isError": False}
    async with slot_to(_LyingPool(honest, {"content": [{"type": "text", "text": "o"}]})) as slot:
        with trio.fail_after(10):
            async with slot.open_call("run_tool", ARGS) as call:
                chunks = [c async for c in call]
                assert await call.result() == honest
            assert chunks == [{"content": [{"type": "text", "text": "o"}]}]


# -- hostile trees: a refusal with one line, never a crash ----------------------------------------

_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(max_size=8)
_key = st.sampled_from(["toolCallId", "name", "args", "cwd", "callIndex", "message", "entry", "entryId",
                        "targetId", "label", "content", "details", "isError", "model", "context", "type",
                        "text", "role", "messages", "noSession"]) | st.text(max_size=6)  # fmt: skip
_tree = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_key, inner, max_size=6), max_leaves=20)
_METHODS = [m for iface in (POOL, WORKER, STORE, PROVIDER) for m in iface]


@settings(max_examples=150, deadline=None)
@given(method=st.sampled_from(_METHODS), tree=_tree)
def test_any_argument_tree_is_typed_arguments_or_a_one_line_invalid_request(method, tree):
    try:
        args = method.decode_args(tree)
    except RemoteError as exc:
        assert exc.code == "invalid_request" and exc.message.startswith(f"{method.name}: ") and "\n" not in exc.message
    else:
        assert isinstance(args, method.args)


@settings(max_examples=150, deadline=None)
@given(method=st.sampled_from(_METHODS), tree=_tree)
def test_any_answer_tree_is_a_typed_answer_or_a_one_line_invalid_response(method, tree):
    for decode in (method.decode_result, method.decode_chunk):
        try:
            decode(tree)
        except RemoteError as exc:
            assert exc.code == "invalid_response" and "\n" not in exc.message


def test_a_stream_event_that_breaks_the_contract_names_its_field():
    from pi_actors.protocol.provider import STREAM

    assert STREAM.decode_chunk({"type": "text_delta", "contentIndex": 0, "delta": "hi"}).delta == "hi"
    with pytest.raises(RemoteError) as info:
        STREAM.decode_chunk({"type": "text_delta", "contentIndex": "0", "delta": "hi"})
    assert info.value.code == "invalid_response" and info.value.message.endswith("at `$.contentIndex`")
