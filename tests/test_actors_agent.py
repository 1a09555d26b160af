"""The agent loop's behaviours, end to end through the actor processes.

The loop itself is tested in-process (tests/test_agent_*.py); these tests show that each group
of behaviours survives the real placement: coordinator, provider, tool pool and workers in
their own processes, the model behind the scripted server's real SSE wire.
"""

from __future__ import annotations

import os
import signal

import pytest
import trio
from _procs import cmdline, live_pids, parent_pid
from conftest import actor_config

from pi_actors.actors import open_local_runtime
from pi_actors.protocol.events import AgentEventRebuilder
from pi_actors.runtime import Peer, RemoteError
from pi_actors.testing.scripted_server import Reply, ScriptedLLM
from pi_actors.testing.wire_formats import ScriptToolCall


async def _run(coordinator: Peer, method: str, args: dict, on_event=None) -> list[dict]:
    """Run a prompt/continue call to its end; returns the events (pi's shapes)."""
    events: list[dict] = []
    rebuild = AgentEventRebuilder()
    async with coordinator.open_call(method, args) as call:
        async for data in call:
            event = rebuild.apply(data)
            events.append(event)
            if on_event is not None:
                await on_event(event)
        await call.result()
    return events


def _types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events if e["type"] != "message_update"]


def _tool_texts(events: list[dict]) -> list[str]:
    return [e["result"]["content"][0]["text"] for e in events if e["type"] == "tool_execution_end"]


def _request_roles(server: ScriptedLLM, index: int) -> list[tuple[str, str]]:
    out = []
    for m in server.requests[index]["body"]["messages"]:
        content = m.get("content")
        if isinstance(content, list):  # user content as pi sends it: an array of parts
            content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
        out.append((m["role"], content if isinstance(content, str) else ""))
    return out


async def test_invalid_tool_arguments_get_pis_validation_error_and_the_loop_goes_on(scripted, tmp_path):
    scripted.script += [Reply(tool_calls=[ScriptToolCall(name="read", arguments={"offset": 3})]), Reply(text="ok")]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        events = await _run(coordinator, "prompt", {"text": "read something"})
    (text,) = _tool_texts(events)
    assert text.startswith('Validation failed for tool "read":\n  - path: must have required property \'path\'')
    assert "Received arguments:" in text
    assert len(scripted.requests) == 2


async def test_tool_calls_of_a_length_truncated_reply_are_not_run_and_the_loop_continues(scripted, tmp_path):
    marker = tmp_path / "ran"
    scripted.script += [
        Reply(text="cut", tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"touch {marker}"})], stop_reason="length"),
        Reply(text="retrying properly"),
    ]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        events = await _run(coordinator, "prompt", {"text": "go"})
    assert not marker.exists()
    (text,) = _tool_texts(events)
    assert "was not executed" in text and "truncated" in text
    assert len(scripted.requests) == 2
    assert [e for e in events if e["type"] == "message_end"][-1]["message"]["content"][0]["text"] == "retrying properly"


async def test_a_failed_request_ends_the_run_and_continue_retries_from_the_transcript(scripted, tmp_path):
    scripted.script += [Reply(status=500, error_body={"error": {"message": "overloaded"}}), Reply(text="second try worked")]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        events = await _run(coordinator, "prompt", {"text": "hello"})
        assert _types(events)[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
        failed = [e for e in events if e["type"] == "message_end"][-1]["message"]
        assert failed["stopReason"] == "error" and "500" in failed["errorMessage"]
        state = await coordinator.call("get_state")
        assert state["isStreaming"] is False and state["messageCount"] == 2
        events = await _run(coordinator, "continue", {})
        final = [e for e in events if e["type"] == "message_end"][-1]["message"]
        assert final["content"][0]["text"] == "second try worked"
        # The errored reply is not sent back to the model.
        assert [r for r, _ in _request_roles(scripted, 1)] == ["system", "user"]
        # As pi retries: the failed reply leaves the transcript when the run continues.
        messages = (await coordinator.call("get_messages"))["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert messages[-1]["stopReason"] == "stop"


async def test_steering_during_tool_execution_is_injected_before_the_next_model_call(scripted, tmp_path):
    gate = tmp_path / "gate"
    scripted.script += [
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"echo waiting; while [ ! -f {gate} ]; do sleep 0.01; done; echo released"})]),
        Reply(text="noted your steering"),
    ]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        steered = False

        async def on_event(event: dict) -> None:
            nonlocal steered
            if event["type"] == "tool_execution_update" and not steered:
                steered = True
                await coordinator.call("steer", {"text": "also check the tests"})
                gate.touch()

        events = await _run(coordinator, "prompt", {"text": "start"}, on_event)
    assert steered
    # Parallel mode skips nothing: the tool ran to the end.
    assert _tool_texts(events)[0].strip().endswith("released")
    # Second request: ..., the tool result, then the steering message.
    roles = _request_roles(scripted, 1)
    assert roles[-2][0] == "tool" and roles[-1] == ("user", "also check the tests")
    user_starts = [e for e in events if e["type"] == "message_start" and e["message"]["role"] == "user"]
    assert [m["message"]["content"][0]["text"] for m in user_starts] == ["start", "also check the tests"]


async def test_a_follow_up_queued_during_a_run_starts_a_new_turn_when_the_agent_would_stop(scripted, tmp_path):
    gate = tmp_path / "gate"
    wait_for_gate = f"echo waiting; while [ ! -f {gate} ]; do sleep 0.01; done; echo released"
    scripted.script += [
        Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": wait_for_gate})]),
        Reply(text="first answer"),
        Reply(text="follow-up answered"),
    ]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        queued = False

        async def on_event(event: dict) -> None:
            nonlocal queued
            if event["type"] == "tool_execution_update" and not queued:
                queued = True
                await coordinator.call("follow_up", {"text": "and one more thing"})
                gate.touch()

        events = await _run(coordinator, "prompt", {"text": "first"}, on_event)
    # The follow-up waited for the run to be about to stop: after the answer to the tool
    # result, not before it.
    assert _request_roles(scripted, 1)[-1][0] == "tool"
    assert _request_roles(scripted, 2)[-2:] == [("assistant", "first answer"), ("user", "and one more thing")]
    assert _types(events).count("turn_start") == 3
    assert [e for e in events if e["type"] == "message_end"][-1]["message"]["content"][0]["text"] == "follow-up answered"


async def test_a_provider_process_dying_mid_stream_ends_the_run_with_an_error_not_a_hang(scripted, tmp_path):
    scripted.script.append(Reply(text="this stream will lose its provider", hang_after_start=True))
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        me = os.getpid()
        killed = False

        async def on_event(event: dict) -> None:
            nonlocal killed
            if event["type"] == "message_update" and not killed:
                killed = True
                (provider,) = live_pids(lambda pid: cmdline(pid).endswith("runtime.child provider") and parent_pid(pid) == me)
                os.kill(provider, signal.SIGKILL)

        with trio.fail_after(30):
            events = await _run(coordinator, "prompt", {"text": "talk"}, on_event)
        assert killed
        final = [e for e in events if e["type"] == "message_end"][-1]["message"]
        assert final["stopReason"] == "error" and "provider" in final["errorMessage"]
        assert _types(events)[-2:] == ["turn_end", "agent_end"]
        # The coordinator stays up and answers; a new prompt fails clearly, not by hanging.
        assert (await coordinator.call("get_state"))["isStreaming"] is False
        events = await _run(coordinator, "prompt", {"text": "again"})
        assert [e for e in events if e["type"] == "message_end"][-1]["message"]["stopReason"] == "error"


async def test_steer_follow_up_and_prompt_without_text_are_refused_naming_the_field(scripted, tmp_path):
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        for method, args in (("steer", {}), ("follow_up", {"text": 5}), ("prompt", {"text": None})):
            with pytest.raises(RemoteError) as info:
                await coordinator.call(method, args)
            assert info.value.code == "invalid_request"
            assert "$.text" in info.value.message or "field `text`" in info.value.message
        # Nothing was queued or started: the session answers as before.
        state = await coordinator.call("get_state")
        assert state["isStreaming"] is False and state["pendingMessageCount"] == 0
        with pytest.raises(RemoteError) as info:
            await coordinator.call("continue", {})
        assert info.value.code == "invalid_state"
