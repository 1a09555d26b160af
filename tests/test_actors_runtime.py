"""The actors in their real placement (one process each), driven from the UI side in-process.

These tests hold the UI end of the coordinator link, so they can act in the middle of a run:
abort while a tool runs, abort while the model streams, and check what is left on the machine.
"""

from __future__ import annotations

import os
import uuid

import pytest
from _procs import cmdline, live_pids, wait_exited
from conftest import actor_config

from pi_actors.actors import open_local_runtime
from pi_actors.protocol.events import AgentEventRebuilder
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


def _process_group_of_command(text: str) -> list[int]:
    """Every process in the group led by the shell running ``text`` (forked children too,
    whether or not they have exec'd yet)."""

    def pgid(pid: int) -> int | None:
        try:
            return os.getpgid(pid)
        except ProcessLookupError:
            return None

    # Forked children that have not exec'd yet still show the shell's command line, so the
    # shell is the one that leads its own process group.
    shells = live_pids(lambda pid: text in cmdline(pid))
    leaders = [pid for pid in shells if pgid(pid) == pid]
    assert len(leaders) == 1, f"the bash call should lead its own process group: {shells}"
    return live_pids(lambda pid: pgid(pid) == leaders[0])


async def test_abort_while_a_bash_call_runs_kills_its_process_group_and_ends_the_run(scripted, tmp_path):
    tag = uuid.uuid4().int % 100000 + 200000
    scripted.script.append(
        Reply(
            tool_calls=[
                ScriptToolCall(
                    name="bash", arguments={"command": f"sleep {tag} & sleep {tag + 1} & echo started; wait; echo never"}
                )
            ]
        )
    )
    # After the abort the loop's next request is made with an aborted signal and never sent.
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        events: list[dict] = []
        rebuild = AgentEventRebuilder()
        sleepers: list[int] = []
        async with coordinator.open_call("prompt", {"text": "run it"}) as call:
            async for event in call:
                events.append(rebuild.apply(event))
                if event["type"] == "tool_execution_update" and event["partialResult"]["content"] and not sleepers:
                    # "started" is printed after both sleeps were forked.
                    assert "started" in event["partialResult"]["content"][0]["text"]
                    sleepers = _process_group_of_command(f"sleep {tag} & sleep {tag + 1}")
                    assert len(sleepers) == 3  # the shell and its two background children
                    await coordinator.call("abort")
            await call.result()
        assert sleepers
        # The call's result came only after its process group was killed.
        await wait_exited(sleepers, timeout=5)
    kinds = [e["type"] for e in events if e["type"] != "message_update"]
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert end["isError"] is True and "aborted" in end["result"]["content"][0]["text"].lower()
    assert kinds[-1] == "agent_end"
    last = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert last["role"] == "assistant" and last["stopReason"] == "aborted"
    # Every tool call has exactly one result in the transcript.
    messages = events[-1]["messages"]
    calls = [b["id"] for m in messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "toolCall"]
    results = [m["toolCallId"] for m in messages if m["role"] == "toolResult"]
    assert calls == results


async def test_abort_while_the_model_streams_keeps_the_partial_text(scripted, tmp_path):
    scripted.script.append(Reply(text="partial answer that never finishes", hang_after_start=True, chunks=4))
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        events: list[dict] = []
        rebuild = AgentEventRebuilder()
        async with coordinator.open_call("prompt", {"text": "talk"}) as call:
            aborted = False
            async for event in call:
                event = rebuild.apply(event)
                events.append(event)
                if event["type"] != "message_update":
                    continue
                text = "".join(b.get("text", "") for b in event["message"]["content"] if b.get("type") == "text")
                if not aborted and text == "partial answer that never finishes":
                    aborted = True
                    await coordinator.call("abort")
            await call.result()
        await scripted.wait_hung_up(1)  # the provider closed the HTTP stream
    final = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert final["stopReason"] == "aborted"
    assert final["content"][0]["text"] == "partial answer that never finishes"
    assert [e["type"] for e in events][-2:] == ["turn_end", "agent_end"]


async def test_a_second_prompt_while_running_is_refused_as_busy(scripted, tmp_path):
    scripted.script.append(Reply(text="slow", hang_after_start=True))
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        async with coordinator.open_call("prompt", {"text": "first"}) as call:
            async for event in call:
                if event["type"] == "message_start" and event["message"]["role"] == "assistant":
                    from pi_actors.runtime import RemoteError

                    with pytest.raises(RemoteError) as info:
                        await coordinator.call("prompt", {"text": "second"})
                    assert info.value.code == "busy"
                    await coordinator.call("abort")
            await call.result()
