"""``--mode rpc``: pi's JSON-lines protocol, driven the way pi's RpcClient drives it."""

from __future__ import annotations

import json

from support.rpc import open_rpc

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


async def test_a_prompt_is_answered_at_once_and_its_events_follow_in_pis_shapes(scripted, env):
    scripted.script.append(Reply(text="Hello over RPC.", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo hi"})]))
    scripted.script.append(Reply(text="Done."))
    rpc = await open_rpc(env, "--no-session")
    response = await rpc.request({"id": "req_1", "type": "prompt", "message": "hi"})
    assert response == {"id": "req_1", "type": "response", "command": "prompt", "success": True}
    await rpc.until(lambda o: o.get("type") == "agent_end")
    kinds = [o["type"] for o in rpc.lines if o["type"] not in ("response", "message_update")]
    assert kinds[:4] == ["agent_start", "turn_start", "message_start", "message_end"]
    assert "tool_execution_start" in kinds and "tool_execution_end" in kinds and kinds[-1] == "agent_end"
    assert all("id" not in o for o in rpc.lines if o["type"] != "response")
    text = await rpc.request({"id": "req_2", "type": "get_last_assistant_text"})
    assert text["data"] == {"text": "Done."}
    state = await rpc.request({"id": "req_3", "type": "get_state"})
    assert state["data"]["isStreaming"] is False and state["data"]["messageCount"] == 4
    assert state["data"]["model"]["id"] == "scripted-model" and state["data"]["thinkingLevel"] == "off"
    assert await rpc.close() == 0


async def test_errors_keep_the_request_id_but_unknown_commands_and_bad_lines_are_answered_as_pi_does(scripted, env):
    rpc = await open_rpc(env, "--no-session")
    await rpc.send({"id": "a", "type": "no_such_command"})  # pi answers an unknown command without its id
    unknown = await rpc.until(lambda o: o.get("type") == "response")
    assert unknown == {"type": "response", "command": "no_such_command", "success": False, "error": "Unknown command: no_such_command"}
    bad_model = await rpc.request({"id": "b", "type": "set_model", "provider": "scripted", "modelId": "missing"})
    assert bad_model["success"] is False and bad_model["error"] == "Model not found: scripted/missing" and bad_model["command"] == "set_model"
    empty_name = await rpc.request({"id": "c", "type": "set_session_name", "name": " "})
    assert empty_name["error"] == "Session name cannot be empty"
    await rpc.send("{this is not json")
    parse = await rpc.until(lambda o: o.get("command") == "parse")
    assert parse["success"] is False and parse["error"].startswith("Failed to parse command:") and "id" not in parse
    assert await rpc.close() == 0


async def test_a_prompt_while_streaming_needs_a_streaming_behavior_and_steer_queues(scripted, env):
    gate = env.work / "gate"
    wait = f"echo waiting; while [ ! -f {gate} ]; do sleep 0.01; done; echo released"
    scripted.script += [Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": wait})]), Reply(text="Saw the steer.")]
    rpc = await open_rpc(env, "--no-session")
    await rpc.request({"id": "p1", "type": "prompt", "message": "start"})
    await rpc.until(lambda o: o.get("type") == "tool_execution_update")
    refused = await rpc.request({"id": "p2", "type": "prompt", "message": "again"})
    assert refused["success"] is False and "streamingBehavior" in refused["error"]
    queued = await rpc.request({"id": "p3", "type": "prompt", "message": "please also lint", "streamingBehavior": "steer"})
    assert queued["success"] is True
    gate.touch()
    await rpc.until(lambda o: o.get("type") == "agent_end")
    assert scripted.requests[1]["body"]["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": "please also lint"}]}
    assert await rpc.close() == 0


async def test_with_sequential_tools_a_steer_lets_every_call_run_and_follows_the_tool_results(scripted, env):
    (env.home / "settings.json").write_text(json.dumps({"toolExecution": "sequential"}))
    gate = env.work / "gate"
    wait = f"echo waiting; while [ ! -f {gate} ]; do sleep 0.01; done; echo first done"
    calls = [ScriptToolCall(name="bash", arguments={"command": wait}), ScriptToolCall(name="bash", arguments={"command": "echo second ran"})]
    scripted.script += [Reply(tool_calls=calls), Reply(text="Saw the steer.")]
    rpc = await open_rpc(env, "--no-session")
    await rpc.request({"id": "p1", "type": "prompt", "message": "start"})
    await rpc.until(lambda o: o.get("type") == "tool_execution_update")
    queued = await rpc.request({"id": "s1", "type": "steer", "message": "also lint"})
    assert queued["success"] is True
    gate.touch()
    await rpc.until(lambda o: o.get("type") == "agent_end")
    ends = [o for o in rpc.lines if o["type"] == "tool_execution_end"]
    assert [e["isError"] for e in ends] == [False, False]
    assert "second ran" in ends[1]["result"]["content"][0]["text"]
    # One call after the other: the second starts only once the first has ended.
    order = [(o["type"], o["toolCallId"]) for o in rpc.lines if o["type"] in ("tool_execution_start", "tool_execution_end")]
    assert order == [("tool_execution_start", "call_1"), ("tool_execution_end", "call_1"),
                     ("tool_execution_start", "call_2"), ("tool_execution_end", "call_2")]  # fmt: skip
    # The next LLM request has both tool results, then the steer.
    sent = scripted.requests[1]["body"]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["tool", "tool", "user"]
    assert sent[-1] == {"role": "user", "content": [{"type": "text", "text": "also lint"}]}
    assert await rpc.close() == 0


async def test_bash_compact_and_session_commands(scripted, env):
    scripted.script += [Reply(text="first"), Reply(text="## Goal\nsummary")]
    rpc = await open_rpc(env, "--session-dir", str(env.sessions))
    bash = await rpc.request({"id": "b", "type": "bash", "command": "echo from-rpc"})
    assert bash["data"] == {"output": "from-rpc\n", "exitCode": 0, "cancelled": False, "truncated": False}
    await rpc.request({"id": "p", "type": "prompt", "message": "talk"})
    await rpc.until(lambda o: o.get("type") == "agent_end")
    compact = await rpc.request({"id": "c", "type": "compact"})
    assert compact["success"] is True and compact["data"]["summary"].startswith("## Goal")
    stats = await rpc.request({"id": "s", "type": "get_session_stats"})
    assert stats["data"]["sessionFile"].endswith(".jsonl")
    forks = await rpc.request({"id": "f", "type": "get_fork_messages"})
    assert [m["text"] for m in forks["data"]["messages"]] == ["talk"]
    exported = await rpc.request({"id": "e", "type": "export_html", "outputPath": str(env.work / "out.html")})
    assert exported["data"]["path"] == str(env.work / "out.html") and "talk" in (env.work / "out.html").read_text()
    messages = await rpc.request({"id": "m", "type": "get_messages"})
    assert messages["data"]["messages"][0]["role"] == "compactionSummary"
    assert await rpc.close() == 0


async def test_a_mistyped_argument_is_refused_naming_the_field_and_the_session_goes_on(scripted, env):
    scripted.script.append(Reply(text="Still here."))
    rpc = await open_rpc(env, "--session-dir", str(env.sessions))
    mistyped = {
        "fork": {"entryId": 5},
        "set_session_name": {"name": 5},
        "compact": {"customInstructions": 5},
        "export_html": {"outputPath": 5},
        "set_auto_compaction": {"enabled": "no"},
    }
    for n, (command, fields) in enumerate(mistyped.items()):
        response = await rpc.request({"id": f"m{n}", "type": command, **fields})
        field = next(iter(fields))
        assert response["success"] is False and response["command"] == command, response
        assert f"$.{field}" in response["error"], response
    # Nothing happened behind the errors: no export anywhere, auto-compaction still on ...
    assert not list(env.work.glob("*.html")) and not list(env.sessions.rglob("*.html"))
    state = await rpc.request({"id": "s", "type": "get_state"})
    assert state["data"]["autoCompactionEnabled"] is True
    # ... and the session goes on.
    await rpc.request({"id": "p", "type": "prompt", "message": "hello"})
    await rpc.until(lambda o: o.get("type") == "agent_end")
    text = await rpc.request({"id": "t", "type": "get_last_assistant_text"})
    assert text["data"] == {"text": "Still here."}
    assert await rpc.close() == 0
