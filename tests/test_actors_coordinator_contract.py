"""The coordinator's contract (``pi_actors.protocol.coordinator``) against the coordinator:
every declared method has exactly one handler, every one is served by a running coordinator,
and what it answers matches the declaration."""

from __future__ import annotations

import msgspec
import pytest
import trio
from conftest import actor_config
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.actors.coordinator import Coordinator
from pi_actors.actors.local import open_local_runtime
from pi_actors.coding.retry import retry_end_event, retry_start_event
from pi_actors.protocol import coordinator as P
from pi_actors.protocol.events import AgentEnd, WireEvent, event_to_plain
from pi_actors.runtime import RemoteError, call_method, open_method
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


async def test_every_coordinator_method_has_one_handler(scripted, tmp_path):
    # Building the router raises if a declared method has no handler or a handler
    # implements an undeclared one; the two halves split the interface without overlap.
    # (No link is used: the coordinator is built only to build its router.)
    config = actor_config(scripted, tmp_path).coordinator
    coordinator = Coordinator(config, provider=None, tools=None, store=None)  # type: ignore[arg-type]
    router = coordinator.router()
    assert router.fallback is not None
    served_here = set(router.methods)
    served_by_commands = set(coordinator.commands.INTERFACE.methods)
    assert not served_here & served_by_commands
    assert served_here | served_by_commands == set(P.COORDINATOR.methods)


_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(max_size=8)
_trees = st.recursive(_leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4))
#: Argument objects that use the declared keys (camelCase) with values of any type.
_KEYS = sorted({f.encode_name for m in P.COORDINATOR for f in msgspec.structs.fields(m.args)})
_hostile_args = _trees | st.dictionaries(st.sampled_from(_KEYS), _trees, max_size=5)


@settings(max_examples=200, deadline=None)
@given(method=st.sampled_from(list(P.COORDINATOR)), args=_hostile_args)
def test_any_argument_tree_is_accepted_as_declared_or_refused_as_an_invalid_request(method, args):
    # What a client can send as arguments: either it converts to the declared Struct, or the
    # call is refused with one clear invalid_request naming the method — never another error.
    try:
        decoded = method.decode_args(args)
    except RemoteError as exc:
        assert exc.code == "invalid_request" and exc.message.startswith(f"{method.name}: ")
    else:
        assert isinstance(decoded, method.args)


async def test_a_running_coordinator_serves_every_declared_method(scripted, tmp_path):
    # Arguments of the wrong shape reach the router of every method and are refused there,
    # naming what was wrong; not one method is unknown to the coordinator.
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        for method in P.COORDINATOR:
            with pytest.raises(RemoteError) as info:
                await coordinator.call(method.name, ["not", "an", "object"])
            assert info.value.code == "invalid_request", (method.name, info.value)
            assert info.value.message.startswith(f"{method.name}: Expected `object`")
        state = await coordinator.call("get_state")
        assert state["isStreaming"] is False


async def test_answers_match_their_declarations_and_keep_pis_keys(scripted, tmp_path):
    scripted.script.append(Reply(text="Hi."))
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        await coordinator.call("prompt", {"text": "hello"})
        # The typed caller side decodes what the coordinator answers ...
        state = await call_method(coordinator, P.GET_STATE)  # type: ignore[arg-type]
        assert state.message_count == 2 and state.model is not None and state.model.id == "scripted-model"
        described = await call_method(coordinator, P.SESSION)  # type: ignore[arg-type]
        assert described.path is None and described.header is not None and described.warnings == []
        stats = await call_method(coordinator, P.GET_SESSION_STATS)  # type: ignore[arg-type]
        assert stats.user_messages == 1 and stats.session_file is None
        # ... and the wire keeps every key clients read, null ones included.
        raw = await coordinator.call("get_state")
        assert raw["sessionFile"] is None and set(raw) == {
            "model", "thinkingLevel", "isStreaming", "messageCount", "pendingMessageCount", "steeringMode",
            "followUpMode", "sessionFile", "sessionId", "autoCompactionEnabled", "autoRetryEnabled", "seq",
        }  # fmt: skip
        assert await coordinator.call("get_last_assistant_text") == {"text": "Hi."}


async def test_a_subscription_update_matches_its_declaration(scripted, tmp_path):
    scripted.script.append(Reply(text="Streamed."))
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        async with coordinator.open_call("subscribe", {}) as sub:
            first = msgspec.convert(await sub.__anext__(), P.SubscriptionUpdate)
            assert first.snapshot is not None and first.snapshot.seq == 0 and first.snapshot.stream_message is None
            async with trio.open_nursery() as nursery:
                nursery.start_soon(coordinator.call, "prompt", {"text": "go", "events": False})
                seqs = []
                async for chunk in sub:
                    update = msgspec.convert(chunk, P.SubscriptionUpdate)
                    assert update.snapshot is None and update.event is not None
                    seqs.append(update.seq)
                    assert _same_tree(event_to_plain(update.event), chunk["event"])
                    if isinstance(update.event, AgentEnd):
                        break
            assert seqs == list(range(1, len(seqs) + 1))


def _same_tree(a, b) -> bool:
    """Equal, with every mapping's keys in the same order (what the encoder writes)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same_tree(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_tree(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


async def test_every_event_of_a_run_is_a_declared_event_byte_for_byte(scripted, tmp_path):
    # The typed events (protocol.events.WireEvent) describe exactly what is sent: each chunk
    # of a run with text, a tool call and its result converts to its Struct and back to the
    # same tree, keys in the same order.
    scripted.script.append(Reply(text="Running it.", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo hi"})]))
    scripted.script.append(Reply(text="Done."))
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        raw = []
        async with coordinator.open_call("prompt", {"text": "go"}) as call:
            async for chunk in call:
                raw.append(chunk)
            await call.result()
        kinds = {chunk["type"] for chunk in raw}
        assert {"message_update", "tool_execution_start", "tool_execution_end", "turn_end", "agent_end"} <= kinds
        for chunk in raw:
            assert _same_tree(event_to_plain(msgspec.convert(chunk, WireEvent)), chunk), chunk["type"]
        # A typed caller gets the Structs.
        scripted.script.append(Reply(text="Again."))
        async with open_method(coordinator, P.PROMPT, P.PromptArgs(text="again")) as typed:  # type: ignore[arg-type]
            events = [event async for event in typed]
            await typed.result()
        assert type(events[0]).__name__ == "AgentStart" and type(events[-1]).__name__ == "AgentEnd"


def test_the_session_events_are_declared_events_byte_for_byte():
    produced = [
        retry_start_event(1, 3, 2000, "overloaded"),
        retry_end_event(True, 2),
        retry_end_event(False, 3, "still overloaded"),
        {"type": "auto_compaction_start", "reason": "threshold"},
        {"type": "auto_compaction_end", "result": {"summary": "s"}, "aborted": False, "willRetry": True},
        {"type": "auto_compaction_end", "aborted": True, "willRetry": False},
        {"type": "auto_compaction_end", "aborted": False, "willRetry": False, "errorMessage": "failed"},
        {"type": "compaction_start", "reason": "manual"},
        {"type": "compaction_end", "reason": "threshold", "result": {"summary": "s"}, "aborted": False, "willRetry": True},
        {"type": "compaction_end", "reason": "manual", "aborted": False, "willRetry": False, "errorMessage": "Compaction failed: x"},
        {"type": "queue_update", "steering": ["a"], "followUp": []},
        {"type": "session_info_changed", "name": "n"},
    ]
    for event in produced:
        assert _same_tree(event_to_plain(msgspec.convert(event, WireEvent)), event), event


async def test_writes_and_edits_of_one_file_share_one_ordering_key_so_they_run_in_call_order(scripted, tmp_path):
    # The one same-file ordering: the agent loop runs calls with the same exclusive_key one
    # after another in call order (tests/test_agent_loop.py); the coordinator keys write and
    # edit by real path, so spellings of one file agree and other files or tools do not.
    config = actor_config(scripted, tmp_path, tools=("read", "bash", "write", "edit")).coordinator
    coordinator = Coordinator(config, provider=None, tools=None, store=None)  # type: ignore[arg-type]
    tools = {tool.name: tool for tool in coordinator.agent.state.tools}
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "sub")
    key_write = tools["write"].exclusive_key
    key_edit = tools["edit"].exclusive_key
    assert key_write is not None and key_edit is not None
    same = {key_write({"path": "sub/a.txt"}), key_write({"path": "./sub/../sub/a.txt"}), key_edit({"path": str(tmp_path / "link" / "a.txt")})}
    assert len(same) == 1
    assert key_write({"path": "sub/b.txt"}) not in same
    assert tools["read"].exclusive_key is None and tools["bash"].exclusive_key is None
