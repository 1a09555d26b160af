"""The provider actor across a real connection: options and model references over the wire, keys
kept in the actor, aborts, and deltas merged only when they pile up behind the link."""

from __future__ import annotations

import os
import random
from typing import Any

import msgspec
import pytest
import trio
from support.providers import call_stream, hello_context, plain_model, provider_peer

from pi_actors import ai
from pi_actors.actors.provider import ProviderActor
from pi_actors.ai import types as T
from pi_actors.protocol.events import CoalescingSender, StreamRebuilder, strip_stream_event
from pi_actors.protocol.provider import PROVIDER
from pi_actors.runtime import RemoteError, Router, link_pair, open_peer, start_actor
from pi_actors.testing import Reply, ScriptToolCall

# --- CoalescingSender on its own --------------------------------------------------------------


def text_delta(i: int, d: str) -> T.TextDeltaEvent:
    return T.TextDeltaEvent(content_index=i, delta=d)


def message(*blocks: Any) -> T.AssistantMessage:
    return T.AssistantMessage(content=list(blocks), api="a", provider="p", model="m", usage=T.Usage(),
                              stop_reason="stop", timestamp=1)


class Link:
    """A fake link whose sends can be held back, as a slow consumer would."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.open = trio.Event()
        self.open.set()

    async def send(self, data: dict) -> None:
        await self.open.wait()
        self.sent.append(data)
        await trio.lowlevel.checkpoint()


async def test_a_consumer_that_keeps_up_gets_every_delta_as_it_was(nursery):
    link = Link()
    sender = CoalescingSender(link.send)
    nursery.start_soon(sender.run)
    for piece in "abcdefghijklmnop":
        await sender.push(text_delta(0, piece))
        await trio.testing.wait_all_tasks_blocked()  # the producer waits for the network
    await sender.drain()
    assert [d["delta"] for d in link.sent] == list("abcdefghijklmnop")
    assert all(set(d) == {"type", "contentIndex", "delta"} for d in link.sent)


async def test_deltas_piling_up_behind_a_slow_link_merge_per_block_and_never_across_events(nursery):
    link = Link()
    link.open = trio.Event()  # the consumer is busy
    sender = CoalescingSender(link.send, max_queued=3)
    nursery.start_soon(sender.run)
    live = message(T.TextContent(text=""))
    events: list[Any] = [T.StartEvent(partial=live), T.TextStartEvent(content_index=0, partial=live)]
    events += [text_delta(0, f"{n} ") for n in range(10)]
    events.append(T.ThinkingStartEvent(content_index=1, partial=live))
    events += [T.ThinkingDeltaEvent(content_index=1, delta=c) for c in "xyz"]
    events += [text_delta(0, "late")]  # another block's delta in between: not merged with the first run
    await sender.push(events[0])
    await trio.testing.wait_all_tasks_blocked()  # the sender is stuck sending "start"
    for e in events[1:]:
        await sender.push(e)
    link.open.set()
    await sender.drain()
    kinds = [(d["type"], d.get("delta")) for d in link.sent]
    # three items wait as themselves, then each delta joins the last waiting one of its block
    assert kinds == [("start", None), ("text_start", None), ("text_delta", "0 "),
                     ("text_delta", "1 2 3 4 5 6 7 8 9 "), ("thinking_start", None),
                     ("thinking_delta", "xyz"), ("text_delta", "late")]
    assert sender.deltas_in == 14 and sender.chunks_sent == 7


async def test_events_ready_together_go_to_the_link_in_one_batch_in_order(nursery):
    batches: list[list[dict]] = []

    async def send_many(items: list[dict]) -> None:
        batches.append(items)
        await trio.lowlevel.checkpoint()

    link = Link()
    sender = CoalescingSender(link.send, send_many=send_many)
    nursery.start_soon(sender.run)
    live = message(T.TextContent(text=""))
    # one network read's events: pushed without the producer waiting in between
    for e in [T.StartEvent(partial=live), T.TextStartEvent(content_index=0, partial=live), text_delta(0, "a"), text_delta(0, "b")]:
        await sender.push(e)
    await trio.testing.wait_all_tasks_blocked()
    await sender.push(text_delta(0, "c"))  # the next read
    await sender.drain()
    assert [[(d["type"], d.get("delta")) for d in b] for b in batches] == [
        [("start", None), ("text_start", None), ("text_delta", "a"), ("text_delta", "b")], [("text_delta", "c")]]
    assert link.sent == [] and sender.chunks_sent == 5


async def test_finish_hands_back_the_events_the_sender_has_not_sent_in_order(nursery):
    batches: list[list[dict]] = []
    gate = trio.Event()

    async def send_many(items: list[dict]) -> None:
        await gate.wait()  # the first batch is still being written when the stream ends
        batches.append(items)

    sender = CoalescingSender(Link().send, send_many=send_many)
    nursery.start_soon(sender.run)
    live = message(T.TextContent(text=""))
    await sender.push(T.StartEvent(partial=live))
    await trio.testing.wait_all_tasks_blocked()  # the sender is inside its send of "start"
    await sender.push(T.TextStartEvent(content_index=0, partial=live))
    await sender.push(text_delta(0, "a"))
    async with trio.open_nursery() as inner:
        inner.start_soon(trio.lowlevel.checkpoint)
        gate.set()
        rest = await sender.finish()  # waited for that send, which took the queued events along
    assert [[d["type"] for d in b] for b in batches] == [["start"], ["text_start", "text_delta"]] and rest == []

    await sender.push(text_delta(0, "b"))
    await sender.push(text_delta(0, "c"))
    rest = await sender.finish()  # the sender has not run since: both are handed back, unsent
    assert [d["delta"] for d in rest] == ["b", "c"] and len(batches) == 2
    assert sender.chunks_sent == 5


async def test_merged_or_not_the_receiver_rebuilds_the_same_message(nursery):
    rng = random.Random(7)
    live = message()
    events: list[Any] = [T.StartEvent(partial=live)]
    for index in range(4):
        kind = rng.choice(["text", "thinking", "toolcall"])
        block = {"text": T.TextContent(text=""), "thinking": T.ThinkingContent(thinking=""),
                 "toolcall": T.ToolCall(id=f"c{index}", name="t", arguments={})}[kind]
        live.content.append(block)
        start = {"text": T.TextStartEvent, "thinking": T.ThinkingStartEvent, "toolcall": T.ToolCallStartEvent}[kind]
        events.append(start(content_index=index, partial=msgspec.convert(T.to_plain(live), T.AssistantMessage)))
        pieces = [f"{rng.randint(0, 99)}," for _ in range(rng.randint(1, 30))]
        if kind == "toolcall":
            pieces = ['{"v": ['] + pieces + ["0]}"]
        delta = {"text": T.TextDeltaEvent, "thinking": T.ThinkingDeltaEvent, "toolcall": T.ToolCallDeltaEvent}[kind]
        events += [delta(content_index=index, delta=p) for p in pieces]
    expected = StreamRebuilder()
    for e in events:
        expected.apply(strip_stream_event(e))

    link = Link()
    sender = CoalescingSender(link.send, max_queued=2)
    nursery.start_soon(sender.run)
    for e in events:
        if rng.random() < 0.1:
            link.open = trio.Event()
            nursery.start_soon(_reopen_later, link)
        await sender.push(e)
        if rng.random() < 0.3:
            await trio.testing.wait_all_tasks_blocked()
    await sender.drain()
    got = StreamRebuilder()
    for data in link.sent:
        got.apply(data)
    assert len(link.sent) < len(events)
    assert T.to_plain(got.partial) == T.to_plain(expected.partial)


async def _reopen_later(link: Link) -> None:
    await trio.testing.wait_all_tasks_blocked()
    link.open.set()


async def test_a_failed_send_stops_the_producer_too(nursery):
    async def broken(_data: dict) -> None:
        raise RemoteError("connection_lost", "gone")

    sender = CoalescingSender(broken)
    nursery.start_soon(sender.run)
    await sender.push(text_delta(0, "a"))
    with pytest.raises(RemoteError):
        await sender.drain()
    with pytest.raises(RemoteError):
        await sender.push(text_delta(0, "b"))


# --- the actor over a connection --------------------------------------------------------------


async def test_options_travel_to_the_wire_and_the_callers_key_is_ignored(start_llm):
    server = await start_llm([Reply(text="one"), Reply(text="two")])
    options = {"maxTokens": 777, "temperature": 0.5, "reasoning": "high", "headers": {"x-extra": "1"},
               "apiKey": "sk-from-caller", "extra": {"toolChoice": "none"}}
    async with provider_peer({"runtime_api_keys": {"scripted": "sk-actor"}}) as peer:
        chunks, final, _ = await call_stream(peer, {"model": plain_model(server), "context": T.to_plain(
            hello_context()), "options": options})
        assert final.stop_reason == "stop" and chunks[-1]["type"] == "done"
        raw = {**options, "reasoning": None, "extra": {"reasoning_effort": "low"}}
        await call_stream(peer, {"model": plain_model(server), "context": T.to_plain(hello_context()),
                                 "options": {k: v for k, v in raw.items() if v is not None}, "simple": False})
    first, second = server.requests
    assert first["headers"]["authorization"] == "Bearer sk-actor" and first["headers"]["x-extra"] == "1"
    body = first["body"]
    assert (body["max_completion_tokens"], body["temperature"], body["reasoning_effort"], body["tool_choice"]) == (
        777, 0.5, "high", "none")
    assert second["body"]["reasoning_effort"] == "low"  # stream, not stream_simple: native options


async def test_an_unknown_model_reference_is_an_error_event_not_a_failed_call():
    async with provider_peer() as peer:
        chunks, final, _ = await call_stream(peer, {"model": "openai/gpt-9", "context": T.to_plain(hello_context())})
    assert [c["type"] for c in chunks] == ["error"]
    assert final.stop_reason == "error" and 'model id "gpt-9" is not in the model catalog' in final.error_message


async def test_bad_arguments_are_refused():
    async with provider_peer() as peer:
        with pytest.raises(RemoteError) as info:
            await call_stream(peer, {"model": {"id": 3}, "context": {}})
    assert info.value.code == "invalid_request" and "$.model" in info.value.message


@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "anthropic-messages"])
async def test_a_long_reply_crosses_in_fewer_chunks_and_rebuilds_exactly(api, start_llm):
    text = "".join(f"w{n} " for n in range(3000))
    reply = Reply(thinking="quick thought", text=text, chunks=3000,
                  tool_calls=[ScriptToolCall(name="read", arguments={"path": "x" * 300}, chunks=100)])
    server = await start_llm([reply])
    async with provider_peer({"runtime_api_keys": {"scripted": "k"}}) as peer:
        chunks, final, rebuild = await call_stream(peer, {"model": plain_model(server, api),
                                                          "context": T.to_plain(hello_context())})
    assert final.stop_reason == "toolUse" and final.content[1].text == text
    assert final.content[2].arguments == {"path": "x" * 300}
    deltas = [c for c in chunks if c["type"] == "text_delta"]
    assert 1 <= len(deltas) < 3000 and "".join(c["delta"] for c in deltas) == text
    assert T.to_plain(rebuild.partial).get("content") == T.to_plain(final)["content"]
    kinds = [c["type"] for c in chunks if not c["type"].endswith("_delta")]
    if api == "openai-completions":  # pi's order for this API: every block ends when the stream does
        assert kinds == ["start", "thinking_start", "text_start", "toolcall_start", "thinking_end", "text_end",
                         "toolcall_end", "done"]
    else:
        assert kinds == ["start", "thinking_start", "thinking_end", "text_start", "text_end", "toolcall_start",
                         "toolcall_end", "done"]


async def test_cancelling_the_call_aborts_keeping_the_partial_and_closes_the_http_connection(start_llm):
    server = await start_llm([Reply(text="Hello there, world", chunks=3, hang_after_start=True)])

    async def cancel_on_text(data: dict, call: Any) -> None:
        if data["type"] == "text_delta":
            await call.cancel()

    async with provider_peer({"runtime_api_keys": {"scripted": "k"}}) as peer:
        with trio.fail_after(10):
            chunks, final, _ = await call_stream(peer, {"model": plain_model(server),
                                                        "context": T.to_plain(hello_context())}, cancel_on_text)
            await server.wait_hung_up(1)
    assert chunks[-1]["type"] == "error" and chunks[-1]["reason"] == "aborted"
    assert final.stop_reason == "aborted" and final.content[0].text.startswith("Hello")


async def test_in_its_own_process_the_actor_resolves_models_json_keys(start_llm, tmp_path):
    server = await start_llm([Reply(text="from a command"), Reply(text="from a variable")])
    env = {**os.environ, "PROVIDER_TEST_KEY": "sk-from-env-var"}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN"):
        env.pop(name, None)
    config = {"api_key_sources": {"scripted": "!printf sk-from-command", "other": "PROVIDER_TEST_KEY"},
              "warm_api": "openai-completions"}
    ours, theirs = link_pair()
    async with trio.open_nursery() as nursery:
        await start_actor(nursery, name="provider", entry="pi_actors.actors.provider:run_provider",
                          links={"coordinator": theirs}, config=config, env=env)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        with trio.fail_after(20):
            async with open_peer(stream, side="client", role="coordinator", name="test") as peer:
                for provider in ("scripted", "other"):
                    _, final, _ = await call_stream(peer, {"model": plain_model(server, provider=provider),
                                                           "context": T.to_plain(hello_context())})
                    assert final.stop_reason == "stop"
        nursery.cancel_scope.cancel()
    keys = [r["headers"]["authorization"] for r in server.requests]
    assert keys == ["Bearer sk-from-command", "Bearer sk-from-env-var"]


async def test_a_link_that_breaks_mid_stream_ends_the_call(start_llm):
    from pi_actors.runtime import ConnectionLost, Trigger

    # Thinking deltas, each its own event (a run of text deltas read at once would be one): the
    # fourth send fails however the frames were read.
    server = await start_llm([Reply(thinking="many thoughts " * 50, text="many words " * 50, chunks=50,
                                    hang_after_start=True)])

    class BrokenCall:
        method = "stream"
        args = {"model": plain_model(server), "context": T.to_plain(hello_context())}
        cooperative = False
        cancel_requested = Trigger()  # an IncomingCall's
        sent = 0
        size = 0  # the payload size the provider logs

        async def send_chunk(self, data: dict) -> None:
            self.sent += 1
            if self.sent > 3:
                raise ConnectionLost("coordinator went away")

        async def send_chunks(self, items: list[dict]) -> None:
            for data in items:
                await self.send_chunk(data)

    actor = ProviderActor({"runtime_api_keys": {"scripted": "k"}})
    actor.warmed.set()
    with trio.fail_after(10):
        with pytest.raises(ConnectionLost):
            await Router.serving(actor, PROVIDER)(BrokenCall())  # type: ignore[arg-type]
        await server.wait_hung_up(1)  # and the HTTP response was closed


# --- start-up warm-up ------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "anthropic-messages"])
async def test_warm_up_imports_the_sdk_without_a_request_and_streams_follow(api, start_llm):
    import sys

    server = await start_llm([Reply(text="warm")])
    actor = ProviderActor({"runtime_api_keys": {"scripted": "k"}})
    await actor.warm_up(api)
    assert actor.warmed.is_set() and server.requests == []
    assert ai.registry.BUILTIN_PROVIDER_MODULES[api] in sys.modules
    async with provider_peer({"runtime_api_keys": {"scripted": "k"}}) as peer:
        _, final, _ = await call_stream(peer, {"model": plain_model(server, api), "context": T.to_plain(hello_context())})
    assert final.stop_reason == "stop" and final.content[0].text == "warm"


async def test_a_warm_up_that_fails_still_lets_streams_proceed_and_report_the_failure(monkeypatch, tmp_path):
    import json

    from pi_actors.ai import registry

    monkeypatch.setitem(registry.BUILTIN_PROVIDER_MODULES, "broken-api", "pi_actors.ai.providers.no_such_module")
    log = tmp_path / "log.jsonl"
    actor = ProviderActor({"logFile": str(log)})
    await actor.warm_up("broken-api")
    assert actor.warmed.is_set()
    [line] = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["event"] == "warm_up_failed" and "no_such_module" in line["error"]


async def test_no_expected_api_means_no_warm_up():
    actor = ProviderActor({})
    await actor.warm_up(None)
    assert actor.warmed.is_set()
