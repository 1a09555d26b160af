"""Backpressure reaches the provider actor: a coordinator that reads its stream slowly gets the
reply's deltas merged into few chunks (the provider's coalescing at work), with the same text."""

from __future__ import annotations

import msgspec
import trio
import trio.testing

from pi_actors.actors.provider import ProviderActor
from pi_actors.ai import types as T
from pi_actors.protocol.provider import PROVIDER
from pi_actors.runtime import Router, open_peer
from pi_actors.testing import Reply

WORDS = 1500


async def stream_reply(scripted, *, slow: bool) -> tuple[list[dict], T.AssistantMessage]:
    """One ``stream`` call to a real ProviderActor (real SDK, scripted server) over an
    unbounded in-memory stream: only flow control can make the provider wait."""
    text = "".join(f"w{n} " for n in range(WORDS))
    scripted.script.append(Reply(text=text, chunks=WORDS, delivery="event"))
    model = T.Model(id="scripted-model", api="openai-completions", provider="scripted", base_url=scripted.base_url_openai)
    context = T.Context(system_prompt="terse", messages=[T.UserMessage(content="hi", timestamp=1)])
    actor = ProviderActor({"runtime_api_keys": {"scripted": "k"}})
    actor.warmed.set()
    ours, theirs = trio.testing.memory_stream_pair()
    chunks: list[dict] = []
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            async with open_peer(theirs, side="server", role="provider", name="provider", handler=Router.serving(actor, PROVIDER)) as peer:
                await peer.closed_event.wait()

        nursery.start_soon(serve)
        async with open_peer(ours, side="client", role="coordinator", name="test") as peer:
            with trio.fail_after(60):
                async with peer.open_call("stream", {"model": T.to_plain(model), "context": T.to_plain(context)}) as call:
                    async for data in call:
                        chunks.append(data)
                        if slow:  # a busy consumer: everything else runs before it reads on
                            await trio.testing.wait_all_tasks_blocked()
                    final = msgspec.convert(await call.result(), T.AssistantMessage)
        nursery.cancel_scope.cancel()
    assert final.content[0].text == text
    assert "".join(c["delta"] for c in chunks if c["type"] == "text_delta") == text
    return chunks, final


async def test_a_slow_consumer_gets_the_reply_in_fewer_merged_chunks_with_the_same_text(scripted):
    chunks, _ = await stream_reply(scripted, slow=True)
    deltas = [c for c in chunks if c["type"] == "text_delta"]
    # Without backpressure the provider never waits, and each delta crosses on its own.
    assert len(deltas) < WORDS // 10

