"""A prompt call that names event types gets only those; subscribers still get every event.

``-p`` shows only the final answer, so its prompt call asks for the ``message_end`` events
(and the extensions' notices) and is not sent every delta and tool event of the run.
"""

from __future__ import annotations

import trio
from conftest import actor_config

from pi_actors.actors import open_local_runtime
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


async def test_a_prompt_asking_for_message_ends_gets_only_those_while_a_subscriber_gets_all(scripted, tmp_path):
    scripted.script += [
        Reply(text="let me look", chunks=5, tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo hi"})]),
        Reply(text="the answer", chunks=4),
    ]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        everything: list[dict] = []
        ready = trio.Event()

        async def follow() -> None:
            async with coordinator.open_call("subscribe", {}) as sub:
                async for chunk in sub:
                    if "snapshot" in chunk:
                        ready.set()
                        continue
                    everything.append(chunk["event"])
                    if chunk["event"]["type"] == "agent_end":
                        return

        got: list[dict] = []
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(follow)
                await ready.wait()
                async with coordinator.open_call("prompt", {"text": "go", "types": ["message_end"]}) as call:
                    async for event in call:
                        got.append(event)
                    await call.result()
    assert [e["type"] for e in got] == ["message_end"] * 4
    assert [e["message"]["role"] for e in got] == ["user", "assistant", "toolResult", "assistant"]
    assert got[-1]["message"]["content"][0]["text"] == "the answer"
    assert "hi" in got[2]["message"]["content"][0]["text"]
    kinds = {e["type"] for e in everything}
    assert {"message_update", "tool_execution_start", "tool_execution_end", "turn_end", "agent_end"} <= kinds
    assert [e for e in everything if e["type"] == "message_end"] == got

