"""A client that subscribes late in a long session starts from the right transcript.

The coordinator no longer copies the transcript per run to build its subscription
snapshots (it holds the Agent's list, which is replaced, never changed in place): the
snapshot a late subscriber gets must still be exactly what an early subscriber has been
told, event by event, and what ``get_messages`` says.
"""

from __future__ import annotations

import trio
from conftest import actor_config
from support.prompts import send_prompt

from pi_actors.actors import open_local_runtime
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

PROMPTS = 15


class _Quiet:
    def event(self, event: dict) -> None:
        pass


async def test_a_late_subscriber_gets_the_transcript_an_early_one_was_told(scripted, tmp_path):
    for i in range(PROMPTS):
        scripted.script += [
            Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"echo {i}"}, id=f"c{i}")]),
            Reply(text=f"done {i}"),
        ]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        told: list[dict] = []
        early_ready, all_told, late_snapshot = trio.Event(), trio.Event(), {}

        async def early() -> None:
            async with coordinator.open_call("subscribe", {}) as call:
                async for chunk in call:
                    if "snapshot" in chunk:
                        assert chunk["snapshot"]["messages"] == []
                        early_ready.set()
                    elif chunk["event"]["type"] == "message_end":
                        told.append(chunk["event"]["message"])
                        if len(told) == PROMPTS * 4:
                            all_told.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(early)
            await early_ready.wait()
            for i in range(PROMPTS):
                await send_prompt(coordinator, f"prompt {i}", _Quiet())
            async with coordinator.open_call("subscribe", {}) as call:
                async for chunk in call:
                    late_snapshot.update(chunk["snapshot"])
                    break
            messages = (await coordinator.call("get_messages"))["messages"]
            with trio.fail_after(30):
                await all_told.wait()
            nursery.cancel_scope.cancel()
    assert len(messages) == PROMPTS * 4
    assert late_snapshot["messages"] == messages == told
    assert late_snapshot["isStreaming"] is False
