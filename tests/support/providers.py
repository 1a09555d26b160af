"""The provider tests' common parts: the recorder that checks pi-core's event invariants (§1.7, §5), models pointed at the scripted server, and a one-call runner."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import trio
import trio.testing

from pi_actors import ai
from pi_actors.actors.provider import ProviderActor
from pi_actors.ai import types as T
from pi_actors.protocol.events import StreamRebuilder
from pi_actors.protocol.provider import PROVIDER as PROVIDER_INTERFACE
from pi_actors.runtime import Router, open_peer
from pi_actors.testing import ScriptedLLM
from pi_actors.testing.wire_formats import Reply

APIS = ["openai-completions", "openai-responses", "anthropic-messages"]
PROVIDER = {"openai-completions": "openai", "openai-responses": "openai", "anthropic-messages": "anthropic"}
KEY_VAR = {"openai-completions": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY",
           "anthropic-messages": "ANTHROPIC_API_KEY"}
OPENAI = ("openai-completions", "openai-responses")
BLOCK_TYPE = {"text": ai.TextContent, "thinking": ai.ThinkingContent, "toolcall": ai.ToolCall}


def tag(event: object) -> str:
    return type(event).__struct_config__.tag  # type: ignore[attr-defined]


class Recorder:
    """An emit callback that records events and checks the invariants as they arrive."""

    def __init__(self, on_event=None) -> None:
        self.events: list = []
        self.on_event = on_event
        self.live: ai.AssistantMessage | None = None

    async def __call__(self, event) -> None:
        assert not self.events or tag(self.events[-1]) not in ("done", "error"), "event after terminal"
        self.events.append(event)
        kind = tag(event)
        if kind not in ("done", "error"):
            if self.live is None:
                self.live = event.partial
            assert event.partial is self.live, "partial must be the one live message"
        if kind.endswith(("_start", "_delta", "_end")):
            block = event.partial.content[event.content_index]
            assert isinstance(block, BLOCK_TYPE[kind.split("_")[0]])
        if self.on_event is not None:
            await self.on_event(event)

    @property
    def types(self) -> list[str]:
        return [tag(e) for e in self.events]

    def check(self) -> None:
        types = self.types
        assert types[-1] in ("done", "error") and types.count("done") + types.count("error") == 1
        assert types.count("start") <= 1
        if "start" in types:
            assert types[0] == "start"
        open_blocks: dict[int, str] = {}
        for e in self.events:
            kind = tag(e)
            if kind.endswith("_start") and kind != "start":
                assert e.content_index not in open_blocks
                open_blocks[e.content_index] = kind.split("_")[0]
            elif kind.endswith("_delta"):
                assert open_blocks.get(e.content_index) == kind.split("_")[0]
            elif kind.endswith("_end"):
                assert open_blocks.pop(e.content_index) == kind.split("_")[0]
        final = self.events[-1]
        msg = final.message if tag(final) == "done" else final.error
        assert msg.stop_reason == final.reason
        if tag(final) == "error":
            assert msg.error_message
        if self.live is not None:
            assert msg is self.live


#: The APIs added for issue 17, with the provider each is tested under and its scripted base URL.
NEW_APIS = ["google-generative-ai", "mistral-conversations", "azure-openai-responses", "openai-codex-responses",
            "google-vertex", "bedrock-converse-stream"]
PROVIDER.update({"google-generative-ai": "google", "mistral-conversations": "mistral",
                 "azure-openai-responses": "azure-openai-responses", "openai-codex-responses": "openai-codex",
                 "google-vertex": "google-vertex", "bedrock-converse-stream": "amazon-bedrock"})
_NEW_BASE_URL = {"google-generative-ai": "base_url_gemini", "mistral-conversations": "base_url_mistral",
                 "azure-openai-responses": "base_url_openai", "openai-codex-responses": "base_url_codex",
                 "google-vertex": "base_url_vertex", "bedrock-converse-stream": "base_url_bedrock"}


def model_for(api: str, server: ScriptedLLM | None, *, port: int | None = None, **kw) -> ai.Model:
    if server is not None and api in _NEW_BASE_URL:
        url = getattr(server, _NEW_BASE_URL[api])
    elif server is not None:
        url = server.base_url_openai if api in OPENAI else server.base_url_anthropic
    else:
        url = f"http://127.0.0.1:{port}" + ("/v1" if api in OPENAI else "")
    fields = dict(id="test-model", api=api, provider=PROVIDER[api], base_url=url, reasoning=True,
                  input=["text", "image"], cost=ai.ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
                  max_tokens=32000)
    fields.update(kw)
    return ai.Model(**fields)


def hello_context(**kw) -> ai.Context:
    return ai.Context(system_prompt="You are terse.", messages=[ai.UserMessage(content="hi", timestamp=1)], **kw)


async def run(api, server, reply_options=None, *, context=None, simple=False, on_event=None, model=None):
    rec = Recorder(on_event)
    options = reply_options if reply_options is not None else ai.StreamOptions(api_key="sk-test")
    fn = ai.stream_simple if simple else ai.stream
    with trio.fail_after(20):
        result = await fn(model or model_for(api, server), context or hello_context(), options, rec)
    rec.check()
    return result, rec


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the provider actor over a connection (socketpair, in-process) ---------------------------


@asynccontextmanager
async def provider_peer(config: dict | None = None) -> AsyncIterator[Any]:
    ours, theirs = trio.socket.socketpair()
    actor = ProviderActor(config or {})
    actor.warmed.set()
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            async with open_peer(trio.SocketStream(theirs), side="server", role="provider", name="provider",
                                 handler=Router.serving(actor, PROVIDER_INTERFACE)) as peer:
                await peer.closed_event.wait()

        nursery.start_soon(serve)
        async with open_peer(trio.SocketStream(ours), side="client", role="coordinator", name="test") as peer:
            yield peer
        nursery.cancel_scope.cancel()


async def call_stream(peer: Any, args: dict, on_chunk: Any = None) -> tuple[list[dict], T.AssistantMessage, Any]:
    chunks: list[dict] = []
    rebuild = StreamRebuilder()
    async with peer.open_call("stream", args) as call:
        async for data in call:
            chunks.append(data)
            rebuild.apply(data)
            if on_chunk is not None:
                await on_chunk(data, call)
        final = msgspec.convert(await call.result(), T.AssistantMessage)
    return chunks, final, rebuild


def plain_model(server: Any, api: str = "openai-completions", **kw: Any) -> dict:
    return T.to_plain(model_for(api, server, **{"provider": "scripted", **kw}))


async def abort_at_first_text_delta(model_for, api_key: str | None = None):
    """Stream a reply that never finishes from a scripted server and abort the call at its
    first text delta: ``(message, recorder)`` once the server has seen the client hang up
    (the recorder's invariants checked). ``model_for(server)`` is the model to call."""
    server = ScriptedLLM([Reply(text="never finishes", hang_after_start=True)])
    signal = ai.AbortSignal()

    async def on_event(event):
        if type(event).__name__ == "TextDeltaEvent":
            signal.abort()

    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        rec = Recorder(on_event)
        with trio.fail_after(20):
            msg = await ai.stream(model_for(server), hello_context(), ai.StreamOptions(api_key=api_key, signal=signal),
                                  rec)
            await server.wait_hung_up(1)
        nursery.cancel_scope.cancel()
    rec.check()
    return msg, rec


def codex_token(account: str | None = "acct") -> str:
    """A ChatGPT-login access token as the Codex API reads it: an unsigned JWT whose account
    claim (the provider's ``JWT_CLAIM``) names ``account``; None: a token without that claim."""
    from pi_actors.ai.providers.openai_codex_responses import JWT_CLAIM

    claims = {JWT_CLAIM: {"chatgpt_account_id": account}} if account else {"sub": "x"}

    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}.sig"


def last_tool_output(body) -> str:
    """The last tool result a request body (OpenAI completions) sent the model: its text."""
    tools = [m for m in (body or {}).get("messages", []) if m.get("role") == "tool"]
    content = tools[-1]["content"] if tools else ""
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
