"""``--mode rpc`` and ``--mode json`` next to pi 0.73.1: the replies, events and session
files pi's RpcClient and pi's JSON consumers read, in the shapes pi printed for the same
commands against the same scripted model (pi itself is not run here; see
tests/support/pi_side_by_side.py for the script that compares them)."""

from __future__ import annotations

import json
import os
import uuid

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rpc import open_rpc

from pi_actors.cli.rpc import RpcSession
from pi_actors.coding.session import SessionWriter
from pi_actors.coding.session.format import new_session_id
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


def _entries(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f]


async def test_odd_commands_get_pis_replies_and_session_commands_pis_shapes(scripted, env):
    scripted.script += [Reply(text="first answer"), Reply(text="second answer"), Reply(text="## Goal\nthe summary")]
    rpc = await open_rpc(env, "--session-dir", str(env.sessions))
    # pi: error(undefined, command.type, ...) — no id and no command member, "undefined" in the text.
    await rpc.send({"id": "t", "message": "no type"})
    missing = await rpc.until(lambda o: o.get("type") == "response")
    assert missing == {"type": "response", "success": False, "error": "Unknown command: undefined"}
    # set_thinking_level without a level succeeds; a model without reasoning cycles to null.
    assert await rpc.request({"id": "l", "type": "set_thinking_level"}) == {
        "id": "l", "type": "response", "command": "set_thinking_level", "success": True,
    }  # fmt: skip
    assert await rpc.request({"id": "c", "type": "cycle_thinking_level"}) == {
        "id": "c", "type": "response", "command": "cycle_thinking_level", "success": True, "data": None,
    }  # fmt: skip
    bad_fork = await rpc.request({"id": "f", "type": "fork", "entryId": "nope"})
    assert bad_fork["success"] is False and bad_fork["error"] == "Invalid entry ID for forking"

    # A new session that stays empty leaves no file; its id is a UUIDv7.
    state = (await rpc.request({"id": "s0", "type": "get_state"}))["data"]
    assert uuid.UUID(state["sessionId"]).version == 7 and "sessionName" not in state
    assert state["isCompacting"] is False
    assert not list(env.sessions.rglob("*.jsonl"))

    await rpc.request({"id": "p", "type": "prompt", "message": "talk"})
    await rpc.until(lambda o: o.get("type") == "agent_end")
    # A prompt sent as soon as agent_end is read is taken, not refused as busy (pi's clients do this).
    assert (await rpc.request({"id": "p2", "type": "prompt", "message": "again"}))["success"] is True
    await rpc.until(lambda o: o.get("type") == "agent_end")
    user_start = next(o for o in rpc.lines if o["type"] == "message_start" and o["message"]["role"] == "user")
    assert user_start["message"]["content"] == [{"type": "text", "text": "talk"}]
    reply_end = [o for o in rpc.lines if o["type"] == "message_end" and o["message"]["role"] == "assistant"][-1]
    assert reply_end["message"]["responseId"] == "chatcmpl-scripted"
    # The file starts with pi's initial entries, then the messages.
    path = state.get("sessionFile") or (await rpc.request({"id": "s1", "type": "get_state"}))["data"]["sessionFile"]
    entries = _entries(path)
    assert [e["type"] for e in entries[:3]] == ["session", "model_change", "thinking_level_change"]
    assert entries[1]["provider"] == "scripted" and entries[1]["modelId"] == "scripted-model"
    assert entries[2]["thinkingLevel"] == "off" and entries[3]["message"]["content"] == [{"type": "text", "text": "talk"}]

    # Naming the session: session_info_changed, and get_state has the name.
    await rpc.request({"id": "n", "type": "set_session_name", "name": "my work"})
    changed = next(o for o in rpc.lines if o["type"] == "session_info_changed")
    assert changed == {"type": "session_info_changed", "name": "my work"}
    assert (await rpc.request({"id": "s2", "type": "get_state"}))["data"]["sessionName"] == "my work"

    stats = (await rpc.request({"id": "st", "type": "get_session_stats"}))["data"]
    usage = stats["contextUsage"]
    assert set(usage) == {"tokens", "contextWindow", "percent"} and usage["tokens"] > 0
    assert usage["percent"] == usage["tokens"] / usage["contextWindow"] * 100

    # Manual compaction: 0.73's compaction_start/compaction_end with reason "manual".
    compacted = await rpc.request({"id": "k", "type": "compact"})
    assert compacted["success"] is True
    start = next(o for o in rpc.lines if o["type"] == "compaction_start")
    end = next(o for o in rpc.lines if o["type"] == "compaction_end")
    assert start == {"type": "compaction_start", "reason": "manual"}
    assert end["reason"] == "manual" and end["aborted"] is False and end["willRetry"] is False
    assert end["result"]["summary"].startswith("## Goal")
    after = (await rpc.request({"id": "st2", "type": "get_session_stats"}))["data"]["contextUsage"]
    assert after["tokens"] is None and after["percent"] is None  # unknown until the next reply

    # clone: the whole branch in a new file, which the session continues in.
    cloned = await rpc.request({"id": "cl", "type": "clone"})
    assert cloned == {"id": "cl", "type": "response", "command": "clone", "success": True, "data": {"cancelled": False}}
    new_path = (await rpc.request({"id": "s3", "type": "get_state"}))["data"]["sessionFile"]
    assert new_path != path
    copied = _entries(new_path)
    assert copied[0]["parentSession"] == path
    assert [e["id"] for e in copied[1:]] == [e["id"] for e in _entries(path)[1:]]
    assert await rpc.close() == 0


async def test_a_run_reports_its_queue_lets_bash_run_and_answers_abort_after_agent_end(scripted, env):
    gate = env.work / "gate"
    wait = f"echo waiting; while [ ! -f {gate} ]; do sleep 0.01; done; echo released"
    scripted.script += [
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": wait})]),
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "sleep 60"})]),
    ]
    rpc = await open_rpc(env, "--no-session")
    await rpc.request({"id": "p", "type": "prompt", "message": "start"})
    # pi's bash tool reports an empty partial result first.
    first = await rpc.until(lambda o: o.get("type") == "tool_execution_update")
    assert first["partialResult"] == {"content": []} and first["args"] == {"command": wait}
    await rpc.until(lambda o: o.get("type") == "tool_execution_update" and o["partialResult"]["content"])

    # A user's bash runs while the agent streams (pi allows it).
    side = await rpc.request({"id": "b", "type": "bash", "command": "echo beside the run"})
    assert side["success"] is True and side["data"]["output"] == "beside the run\n" and side["data"]["exitCode"] == 0

    # Queueing is reported, and so is the queued message leaving the queue.
    await rpc.request({"id": "s", "type": "steer", "message": "also lint"})
    queued = next(o for o in rpc.lines if o["type"] == "queue_update")
    assert queued == {"type": "queue_update", "steering": ["also lint"], "followUp": []}
    gate.touch()
    steered = await rpc.until(lambda o: o.get("type") == "message_start" and o["message"]["role"] == "user" and len(rpc.lines) > 0
                              and o["message"]["content"] == [{"type": "text", "text": "also lint"}])  # fmt: skip
    emptied = rpc.lines[rpc.lines.index(steered) - 1]
    assert emptied == {"type": "queue_update", "steering": [], "followUp": []}

    # The second tool call hangs: abort is answered only after the run's agent_end.
    await rpc.until(lambda o: o.get("type") == "tool_execution_update" and o["args"] == {"command": "sleep 60"})
    aborted = await rpc.request({"id": "a", "type": "abort"})
    assert aborted == {"id": "a", "type": "response", "command": "abort", "success": True}
    kinds = [o["type"] for o in rpc.lines]
    assert "agent_end" in kinds and kinds.index("agent_end") < len(kinds) - 1
    # The bash message of the run is recorded after it, not between a call and its result.
    messages = (await rpc.request({"id": "m", "type": "get_messages"}))["data"]["messages"]
    assert messages[-1]["role"] == "bashExecution" and messages[-1]["command"] == "echo beside the run"
    assert await rpc.close() == 0


async def test_abort_bash_stops_the_users_command(scripted, env):
    started = env.work / "started"
    os.mkfifo(started)
    rpc = await open_rpc(env, "--no-session")
    await rpc.send({"id": "b", "type": "bash", "command": f"echo before; echo up > {started}; sleep 60"})
    with trio.fail_after(60):  # the command is running once it has written to the fifo
        assert await trio.to_thread.run_sync(started.read_text) == "up\n"
    assert await rpc.request({"id": "x", "type": "abort_bash"}) == {"id": "x", "type": "response", "command": "abort_bash", "success": True}
    reply = await rpc.until(lambda o: o.get("id") == "b")
    assert reply["success"] is True and reply["data"]["cancelled"] is True and reply["data"]["exitCode"] is None
    assert reply["data"]["output"].startswith("before")
    messages = (await rpc.request({"id": "m", "type": "get_messages"}))["data"]["messages"]
    assert messages[-1]["role"] == "bashExecution" and messages[-1]["cancelled"] is True
    assert await rpc.close() == 0


async def test_json_mode_writes_user_content_as_parts_and_the_response_id(scripted, env):
    scripted.script.append(Reply(text="json answer", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo hi"})]))
    scripted.script.append(Reply(text="done"))
    result = await env.run("--model", "scripted/scripted-model", "--mode", "json", "--no-session", "-p", "hello")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]
    user = next(e for e in events if e["type"] == "message_end" and e["message"]["role"] == "user")
    assert user["message"]["content"] == [{"type": "text", "text": "hello"}]
    replies = [e["message"] for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"]
    assert [r["responseId"] for r in replies] == ["chatcmpl-scripted", "chatcmpl-scripted"]
    updates = [e for e in events if e["type"] == "tool_execution_update"]
    assert updates[0]["partialResult"] == {"content": []}


_no_type = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
).filter(lambda v: not (isinstance(v, dict) and isinstance(v.get("type"), str))) | st.fixed_dictionaries(
    {"type": st.text().filter(lambda t: t != "extension_ui_response" and not hasattr(RpcSession, f"cmd_{t}"))},
    optional={"id": st.text() | st.integers(), "message": st.text()},
)


class _Lines:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    def flush(self) -> None:
        pass


@settings(max_examples=200, deadline=None)
@given(_no_type)
def test_any_json_line_without_a_string_type_gets_one_unknown_command_reply(value):
    out = _Lines()
    session = RpcSession(None, out, None)  # type: ignore[arg-type]  # never reaches the coordinator

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await session.handle_line(json.dumps(value), nursery)

    trio.run(main)
    lines = out.data.splitlines()
    assert len(lines) == 1
    reply = json.loads(lines[0])
    assert reply["type"] == "response" and reply["success"] is False and "id" not in reply
    assert reply["error"].startswith("Unknown command: ")
    if not isinstance(value, dict) or "type" not in value:
        assert reply["error"] == "Unknown command: undefined" and "command" not in reply
    else:  # pi: the type as given is the command
        assert reply["command"] == value["type"]


def test_session_ids_are_uuid7_and_sort_by_creation_time():
    ids = [new_session_id(now_ms=ms) for ms in (1, 2**40, 2**47 + 5)]
    assert all(uuid.UUID(i).version == 7 and uuid.UUID(i).variant == uuid.RFC_4122 for i in ids)
    assert ids == sorted(ids) and int(ids[1].replace("-", "")[:12], 16) == 2**40
    assert new_session_id() != new_session_id()


def test_a_session_with_only_its_initial_entries_leaves_no_file_until_the_first_message(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/work", lazy=False)
    writer.append_entry({"type": "model_change", "provider": "p", "modelId": "m"})
    writer.append_entry({"type": "thinking_level_change", "thinkingLevel": "off"})
    assert not list(tmp_path.iterdir())
    writer.append_message({"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1})
    assert [json.loads(line)["type"] for line in open(writer.path)] == ["session", "model_change", "thinking_level_change", "message"]
    writer.close()
