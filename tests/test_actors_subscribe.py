"""Subscriptions: a snapshot with sequence N, then every event N+1, N+2, ... for every client."""

from __future__ import annotations

import trio
from conftest import actor_config
from support.prompts import send_prompt

from pi_actors.actors import open_local_runtime
from pi_actors.protocol.events import AgentEventRebuilder
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


class _Quiet:
    def event(self, event: dict) -> None:
        pass


async def _collect(coordinator, into: list, ready: trio.Event, until: str = "agent_end", **args) -> dict:
    """Subscribe; keep the snapshot; append every update until an event of type ``until``."""
    async with coordinator.open_call("subscribe", args) as call:
        snapshot = None
        async for chunk in call:
            if snapshot is None:
                snapshot = chunk["snapshot"]
                ready.set()
                continue
            into.append(chunk)
            if chunk["event"]["type"] == until:
                break
    return snapshot


async def test_two_subscribers_see_the_same_contiguous_sequence_after_their_snapshot(scripted, tmp_path):
    scripted.script += [Reply(text="before"), Reply(text="streamed to both", chunks=6, tool_calls=[ScriptToolCall(name="read", arguments={"path": "x"})]), Reply(text="done")]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        await send_prompt(coordinator, "warm up", _Quiet())
        a, b = [], []
        snapshots = {}
        async with trio.open_nursery() as nursery:
            ready_a, ready_b = trio.Event(), trio.Event()

            async def run(name, into, ready):
                snapshots[name] = await _collect(coordinator, into, ready)

            nursery.start_soon(run, "a", a, ready_a)
            nursery.start_soon(run, "b", b, ready_b)
            await ready_a.wait()
            await ready_b.wait()
            await send_prompt(coordinator, "go", _Quiet())
    for snap, updates in ((snapshots["a"], a), (snapshots["b"], b)):
        assert [m["role"] for m in snap["messages"]] == ["user", "assistant"]
        seqs = [u["seq"] for u in updates]
        assert seqs == list(range(snap["seq"] + 1, snap["seq"] + 1 + len(updates)))
    assert [u["event"] for u in a] == [u["event"] for u in b]
    assert a[0]["event"]["type"] == "agent_start" and a[-1]["event"]["type"] == "agent_end"


async def test_a_client_joining_mid_reply_gets_the_partial_message_then_the_rest(scripted, tmp_path):
    scripted.script.append(Reply(text="a long answer that arrives in pieces", chunks=12, hang_after_start=True))
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        late: list = []
        async with trio.open_nursery() as nursery:
            async with coordinator.open_call("prompt", {"text": "talk"}) as call:
                joined = False
                async for data in call:
                    if not joined and data["type"] == "message_update" and data["assistantMessageEvent"]["type"] == "text_delta":
                        joined = True
                        ready = trio.Event()
                        snapshot_box = {}

                        async def join(late=late, ready=ready, snapshot_box=snapshot_box):
                            snapshot_box["s"] = await _collect(coordinator, late, ready)

                        nursery.start_soon(join)
                        await ready.wait()
                        await coordinator.call("abort")
                await call.result()
        snap = snapshot_box["s"]
    assert snap["isStreaming"] is True
    partial = snap["streamMessage"]
    assert partial["role"] == "assistant" and partial["content"][0]["text"]
    # Rebuilding from the snapshot's partial message plus the updates gives the final text.
    rebuild = AgentEventRebuilder()
    rebuild.seed(partial)
    final = None
    for update in late:
        event = rebuild.apply(update["event"])
        if event["type"] == "message_end":
            final = event["message"]
    assert final["content"][0]["text"] == "a long answer that arrives in pieces"
    assert [u["seq"] for u in late] == list(range(snap["seq"] + 1, snap["seq"] + 1 + len(late)))


async def test_a_subscriber_that_names_event_types_gets_only_those_in_order(scripted, tmp_path):
    # A streamed reply publishes its events in bursts, which go to a subscriber several per
    # write: the filter must hold inside a burst as between them.
    scripted.script += [Reply(text="streamed", chunks=8, tool_calls=[ScriptToolCall(name="read", arguments={"path": "x"})]), Reply(text="done", chunks=4)]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        everything, ends = [], []
        async with trio.open_nursery() as nursery:
            ready_all, ready_ends = trio.Event(), trio.Event()

            async def run_all():
                await _collect(coordinator, everything, ready_all)

            async def run_ends():
                await _collect(coordinator, ends, ready_ends, types=["message_end", "agent_end"])

            nursery.start_soon(run_all)
            nursery.start_soon(run_ends)
            await ready_all.wait()
            await ready_ends.wait()
            await send_prompt(coordinator, "go", _Quiet())
    wanted = [u for u in everything if u["event"]["type"] in ("message_end", "agent_end")]
    assert [u["event"]["message"]["role"] for u in wanted[:-1]] == ["user", "assistant", "toolResult", "assistant"]
    assert ends == wanted
    assert any(u["event"]["type"] == "message_update" for u in everything)
