"""A tool result is saved while the next request is already on its way, and nobody hears of
it before it is on disk.

The coordinator appends a tool result's entry in the background: the agent loop builds and
sends the next LLM request while the store's fsync is in flight. What must not change: the
result's ``message_end`` (and every event after it) reaches the UI and subscribers only once
the store has acknowledged the entry, in the loop's order with contiguous ``seq``; the file
keeps the loop's order; a failed append stops the run with ``write_failed``. A reply that
calls tools is saved before they run (a reply that cannot be saved runs none), but its own
``message_end`` is told while they run: a UI slow to take it does not hold them up.

In-process parts over real socketpairs: the real provider actor against the scripted server,
a session store whose appends of tool results wait for the test, and a stand-in tool pool
(the tool's own run is not what is tested here).
"""

from __future__ import annotations

from typing import Any

import trio
from support.coordinator import open_wired_coordinator

from pi_actors.actors.session_store import SessionStore
from pi_actors.protocol import coordinator as P
from pi_actors.protocol.store import APPEND, APPEND_MESSAGES, AppendArgs, AppendMessagesArgs, EntryId, EntryIds
from pi_actors.runtime import RemoteError, TypedCall, implements, open_method
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


class HeldStore(SessionStore):
    """A session store whose appends of tool results wait for ``release`` (or fail, with
    ``fail``); it records the roles it saved, in order, and each call's number of messages."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__()
        self.release = trio.Event()
        self.fail = fail
        self.saved: list[str] = []
        self.calls: list[int] = []
        self.call_ids: list[str] = []

    @implements(APPEND_MESSAGES)
    async def append_messages(self, args: AppendMessagesArgs, call: TypedCall[AppendMessagesArgs, None]) -> EntryIds:
        await self.release.wait()
        entries = await super().append_messages(args, call)
        self.saved += [m["role"] for m in args.messages]
        self.calls.append(len(args.messages))
        self.call_ids += [m.get("toolCallId", "") for m in args.messages]
        return entries

    @implements(APPEND)
    async def append(self, args: AppendArgs, call: TypedCall[AppendArgs, None]) -> EntryId:
        role = args.message.get("role")
        if role == "toolResult":
            if self.fail:
                raise RemoteError("write_failed", "session write failed: No space left on device (ENOSPC)")
            await self.release.wait()
        entry = await super().append(args, call)
        self.saved.append(role)
        self.calls.append(1)
        self.call_ids.append(args.message.get("toolCallId", ""))
        return entry


async def _pool(call: Any) -> Any:
    """A stand-in tool pool: ``warm`` does nothing, every tool answers ``ok``."""
    if call.method == "run_tool":
        return {"content": [{"type": "text", "text": "ok"}]}
    return None


async def _subscribe(ui: Any, seen: list[dict[str, Any]], ended: trio.Event, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    async with ui.open_call("subscribe", {}) as call:
        async for chunk in call:
            if "snapshot" in chunk:
                task_status.started(chunk["snapshot"]["seq"])
                continue
            seen.append(chunk)
            if chunk["event"]["type"] == "agent_end":
                ended.set()


def _script(scripted: Any) -> None:
    scripted.script.extend([
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo 1"})]),
        Reply(text="all done"),
    ])  # fmt: skip


async def test_the_next_request_leaves_while_the_tool_result_is_saved_and_nobody_hears_of_it_before(scripted, tmp_path):
    _script(scripted)
    store = HeldStore()
    with trio.fail_after(60):
        async with open_wired_coordinator(scripted, tmp_path, _pool, store) as ui, trio.open_nursery() as nursery:
            seen: list[dict[str, Any]] = []
            ended = trio.Event()
            first_seq = await nursery.start(_subscribe, ui, seen, ended)
            told: list[dict[str, Any]] = []

            async def prompt() -> None:
                async with open_method(ui, P.PROMPT, P.PromptArgs(text="go")) as call:
                    async for event in call:
                        told.append(msgspec_plain(event))
                    await call.result()

            nursery.start_soon(prompt)
            # The second request goes out while the tool result's entry is not saved yet...
            await scripted.wait_requests(2)
            second = scripted.requests[1]["body"]["messages"]
            assert any(m.get("role") == "tool" for m in second), second
            assert store.saved == ["user", "assistant"]
            # ... and nobody has heard of the tool result's end.
            for events in ([u["event"] for u in seen], told):
                assert not [e for e in events if e["type"] == "message_end" and e["message"]["role"] == "toolResult"]
            store.release.set()
            await ended.wait()
            nursery.cancel_scope.cancel()
    # Every event in the loop's order, with contiguous seq after the snapshot's.
    assert [u["seq"] for u in seen] == list(range(first_seq + 1, first_seq + 1 + len(seen)))
    ends = [(u["event"]["type"], u["event"].get("message", {}).get("role")) for u in seen
            if u["event"]["type"] in ("message_end", "turn_end", "turn_start", "agent_end")]  # fmt: skip
    assert ends == [
        ("turn_start", None), ("message_end", "user"), ("message_end", "assistant"), ("message_end", "toolResult"),
        ("turn_end", "assistant"), ("turn_start", None), ("message_end", "assistant"), ("turn_end", "assistant"),
        ("agent_end", None),
    ]  # fmt: skip
    # The file's order is the loop's.
    assert store.saved == ["user", "assistant", "toolResult", "assistant"]


async def _prompt_that_fails_to_save(scripted: Any, tmp_path: Any, pool: Any, store: SessionStore) -> list[dict[str, Any]]:
    """Prompt "go" on a wired coordinator whose store runs out of space; the events told, once
    the prompt has failed ``write_failed`` (it must)."""
    told: list[dict[str, Any]] = []
    with trio.fail_after(60):
        async with open_wired_coordinator(scripted, tmp_path, pool, store) as ui:
            try:
                async with ui.open_call("prompt", {"text": "go"}) as call:
                    async for event in call:
                        told.append(event)
                    await call.result()
            except RemoteError as exc:
                assert exc.code == "write_failed" and "No space left on device" in exc.message
            else:
                raise AssertionError("the run went on without its messages saved")
    return told


async def test_a_tool_result_the_store_cannot_save_stops_the_run_and_is_never_shown(scripted, tmp_path):
    _script(scripted)
    store = HeldStore(fail=True)
    told = await _prompt_that_fails_to_save(scripted, tmp_path, _pool, store)
    ends = [(e["type"], e.get("message", {}).get("role")) for e in told if e["type"] in ("message_end", "agent_end")]
    assert ends[:2] == [("message_end", "user"), ("message_end", "assistant")]
    assert ends[-1] == ("agent_end", None)
    assert ("message_end", "toolResult") not in ends
    assert store.saved == ["user", "assistant"]


async def test_the_results_of_a_parallel_turn_that_wait_are_saved_together_in_call_order(scripted, tmp_path):
    calls = [ScriptToolCall(name="bash", arguments={"command": f"echo {i}"}, id=f"call_{i}") for i in range(6)]
    scripted.script.extend([Reply(tool_calls=calls), Reply(text="all done")])
    store = HeldStore()
    with trio.fail_after(60):
        async with open_wired_coordinator(scripted, tmp_path, _pool, store) as ui, trio.open_nursery() as nursery:
            seen: list[dict[str, Any]] = []
            ended = trio.Event()
            await nursery.start(_subscribe, ui, seen, ended)
            nursery.start_soon(_prompt, ui)
            # Every result has been handed to the store (the next request is out) while the
            # first append of results is held: the results that came after it wait, and go
            # together in one call.
            await scripted.wait_requests(2)
            store.release.set()
            await ended.wait()
            nursery.cancel_scope.cancel()
    # user, assistant, the six results in at most two calls (the first held), the reply
    assert store.calls[:2] == [1, 1] and store.calls[-1] == 1
    assert sum(store.calls[2:-1]) == 6 and len(store.calls[2:-1]) <= 2, store.calls
    assert store.saved == ["user", "assistant", *["toolResult"] * 6, "assistant"]
    told = [u["event"]["message"]["toolCallId"] for u in seen
            if u["event"]["type"] == "message_end" and u["event"]["message"]["role"] == "toolResult"]  # fmt: skip
    assert told == [i for i in store.call_ids if i] and sorted(told) == [f"call_{i}" for i in range(6)]


async def _prompt(ui: Any) -> None:
    async with ui.open_call("prompt", {"text": "go"}) as call:
        async for _ in call:
            pass
        await call.result()


def msgspec_plain(event: Any) -> dict[str, Any]:
    from pi_actors.protocol.events import event_to_plain

    return event_to_plain(event)  # type: ignore[no-any-return]


class HeldSend(trio.abc.Stream):
    """The coordinator's end of the UI link, whose sends wait while ``held`` (a UI that is
    slow to take what it is told: a remote client on a slow network)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.held = False
        self.released = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.held:
            await self.released.wait()
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.stream.aclose()


async def test_a_replys_tool_calls_start_while_a_slow_ui_is_still_being_told_of_the_reply(scripted, tmp_path):
    # The reply is saved before its tools start, but the loop does not wait for the UI to take
    # its message_end before it hands the calls to the pool.
    _script(scripted)
    held: list[HeldSend] = []
    called = trio.Event()

    async def pool(call: Any) -> Any:
        if call.method == "run_tool":
            called.set()
        return await _pool(call)

    def hold(stream: Any) -> HeldSend:
        held.append(HeldSend(stream))
        return held[0]

    told: list[tuple[str, str]] = []
    with trio.fail_after(60):
        async with open_wired_coordinator(scripted, tmp_path, pool, SessionStore(), ui_stream=hold) as ui:
            async with open_method(ui, P.PROMPT, P.PromptArgs(text="go", types=["message_end"])) as call:
                async for event in call:
                    plain = msgspec_plain(event)
                    told.append((plain["type"], plain["message"]["role"]))
                    if len(told) == 1:  # the user's message: from now on the UI takes nothing
                        held[0].held = True
                        await called.wait()  # (the old loop waited here for the UI, forever)
                        held[0].released.set()
                await call.result()
    assert told == [("message_end", "user"), ("message_end", "assistant"), ("message_end", "toolResult"),
                    ("message_end", "assistant")]  # fmt: skip


class ReplyRefused(SessionStore):
    """A session store that cannot save an assistant message that calls tools."""

    @implements(APPEND)
    async def append(self, args: AppendArgs, call: TypedCall[AppendArgs, None]) -> EntryId:
        if args.message.get("role") == "assistant":
            raise RemoteError("write_failed", "session write failed: No space left on device (ENOSPC)")
        return await super().append(args, call)

    @implements(APPEND_MESSAGES)
    async def append_messages(self, args: AppendMessagesArgs, call: TypedCall[AppendMessagesArgs, None]) -> EntryIds:
        if any(m.get("role") == "assistant" for m in args.messages):
            raise RemoteError("write_failed", "session write failed: No space left on device (ENOSPC)")
        return await super().append_messages(args, call)


async def test_the_tools_of_a_reply_the_store_cannot_save_never_run(scripted, tmp_path):
    # Write-ahead: a tool's effects are never unrecorded, so no call of an unsaved reply runs.
    _script(scripted)
    ran: list[Any] = []

    async def pool(call: Any) -> Any:
        if call.method == "run_tool":
            ran.append(call.args)
        return await _pool(call)

    told = await _prompt_that_fails_to_save(scripted, tmp_path, pool, ReplyRefused())
    assert ran == []
    ends = [(e["type"], e.get("message", {}).get("role")) for e in told if e["type"] in ("message_end", "agent_end")]
    assert ("message_end", "assistant") not in ends
    assert ends[-1] == ("agent_end", None)
