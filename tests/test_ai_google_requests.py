"""The Gemini APIs on the google-genai SDK (``google-generative-ai``, ``google-vertex``) send a
session's history converted once: our contents continued turn by turn, and each content put in
the SDK's wire form once, spliced into the SDK's own request. What a user would notice if that
went wrong — a request that differs from the SDK's own, a continuation hop without the history,
a hook's edit leaking into the next turn — is what these tests look for; all against the real
SDK and the scripted server."""

from __future__ import annotations

import importlib
import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
from google import genai
from google.genai import _common as genai_common
from google.genai import models as genai_models
from google.genai import types as genai_types
from support.google_exchanges import PNG, SIGNATURE, model, session_steps, wire

from pi_actors import ai
from pi_actors.ai.providers import _genai
from pi_actors.ai.providers import _google_shared as gs
from pi_actors.ai.providers._common import reuse_clients
from pi_actors.testing.wire_formats import Reply

#: Each SDK API: its provider module and the scripted server's base URL for it.
APIS = {"google-generative-ai": ("google_generative_ai", "base_url_gemini"),
        "google-vertex": ("google_vertex", "base_url_vertex")}


async def _ignore(_event: Any) -> None:
    pass


def _sdk_handle(api: str, module: Any, m: ai.Model, options: ai.StreamOptions) -> Any:
    """A client made as the provider makes its own, for the SDK's public call."""
    if api == "google-vertex":
        return module._client_handle(m, options, options.api_key, None, None, None)
    return module._client_handle(m, options, options.api_key)


async def _sdk_request(api: str, module: Any, m: ai.Model, context: ai.Context, options: ai.StreamOptions) -> None:
    """The request the SDK's public ``generate_content_stream`` makes of ``build_params``."""
    handle = _sdk_handle(api, module, m, options)
    try:
        stream = await handle.client.aio.models.generate_content_stream(**gs.build_params(m, context, options))
        async for _chunk in stream:
            pass
    finally:
        await handle.close()


@pytest.mark.parametrize("api", sorted(APIS))
async def test_each_request_of_a_session_is_byte_for_byte_the_sdks_own(api, start_llm):
    """Turn after turn (system prompt, tools and tool choice, thinking by budget, by level and
    off, signed thinking and calls replayed, another model's thinking, images in user messages
    and tool results, consecutive results, call ids for ``claude-*``, failed turns dropped, a
    branch switch, a text-only model), the request sent — method, path and query, headers, body
    bytes — is the one the SDK's public ``generate_content_stream`` sends for the same params.
    An SDK upgrade that changes its wire shows here."""
    module_name, base_attr = APIS[api]
    module = importlib.import_module(f"pi_actors.ai.providers.{module_name}")
    server = await start_llm(lambda _body: Reply(text="ok"))
    vertex = api == "google-vertex"
    steps = session_steps(api, getattr(server, base_attr))
    async with reuse_clients():
        for i, (m, context, options) in enumerate(steps):
            msg = await module.stream(m, context, options, _ignore)
            assert msg.stop_reason == "stop", (i, msg.error_message)
            assert _genai._WIRE[vertex].source, "the request did not go through the converted-once path"
            await _sdk_request(api, module, m, context, options)
            ours, sdks = server.requests[-2:]
            assert wire(ours) == wire(sdks), i
    assert len(server.requests) == 2 * len(steps)


_CONTINUED = (
    'data: {"candidates": [{"content": {"parts": [{"text": "Hello, "}], "role": "model"}, "index": 0}]}\r\n\r\n'
    'data: {"candidates": [{"content": {"parts": [{"text": "wor"}], "role": "model"}, "index": 0, '
    '"finishReason": "CONTINUATION", "continuationToken": "dG9rZW4tMQ=="}], '
    '"usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3, "totalTokenCount": 13}}\r\n\r\n'
)
_FINISHED = (
    'data: {"candidates": [{"content": {"parts": [{"text": "ld."}], "role": "model"}, "index": 0, '
    '"finishReason": "STOP"}], '
    '"usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}}\r\n\r\n'
)


@pytest.mark.parametrize("api", sorted(APIS))
async def test_a_reply_cut_into_continuation_hops_arrives_whole(api, start_llm):
    """The SDK's automatic continuation: a stream that ends with ``CONTINUATION`` and a token
    is resumed by a second request carrying the token and the same history; the user gets one
    message with the text of both hops, stopped normally."""
    module_name, base_attr = APIS[api]
    module = importlib.import_module(f"pi_actors.ai.providers.{module_name}")
    server = await start_llm([Reply(raw_sse=_CONTINUED), Reply(raw_sse=_FINISHED)])
    m, context, options = session_steps(api, getattr(server, base_attr))[2]  # signed calls, images, results
    msg = await module.stream(m, context, options, _ignore)
    assert msg.stop_reason == "stop", msg.error_message
    assert [b.text for b in msg.content] == ["Hello, world."]
    first, second = (r["body"] for r in server.requests)
    assert "continuationToken" not in first
    assert second.pop("continuationToken") == "dG9rZW4tMQ=="
    assert second == first  # the whole history again, spliced into the second hop too
    assert len(first["contents"]) > 4


@pytest.mark.parametrize("api", sorted(APIS))
async def test_a_google_hook_that_edits_the_contents_does_not_change_the_next_request(api, start_llm):
    """``on_payload`` may edit the contents in place or replace them with anything the SDK
    takes; the next request, without the hook, is built from the session, not from the edit."""
    module_name, base_attr = APIS[api]
    module = importlib.import_module(f"pi_actors.ai.providers.{module_name}")
    server = await start_llm(lambda _body: Reply(text="ok"))
    m = model(api, getattr(server, base_attr))
    history: list[ai.Message] = [ai.UserMessage(content="original", timestamp=1),
                                 ai.AssistantMessage(content=[ai.TextContent(text="zero")], api=m.api,
                                                     provider=m.provider, model=m.id, usage=ai.Usage(),
                                                     stop_reason="stop", timestamp=1),
                                 ai.UserMessage(content="then", timestamp=1)]

    def edit(params: dict[str, Any], _model: ai.Model) -> None:
        params["contents"][0]["parts"][0]["text"] = "edited by the hook"

    def replace(params: dict[str, Any], _model: ai.Model) -> dict[str, Any]:
        return {**params, "contents": "a plain string"}

    def options(hook: Any = None) -> ai.StreamOptions:
        return ai.StreamOptions(api_key="g-key", extra={"on_payload": hook} if hook else {})

    await module.stream(m, ai.Context(messages=history), options(), _ignore)
    await module.stream(m, ai.Context(messages=history), options(edit), _ignore)
    await module.stream(m, ai.Context(messages=history), options(), _ignore)
    await module.stream(m, ai.Context(messages=history), options(replace), _ignore)
    await module.stream(m, ai.Context(messages=history), options(), _ignore)
    texts = [[p["text"] for c in r["body"]["contents"] for p in c["parts"]] for r in server.requests]
    session = ["original", "zero", "then"]
    assert texts == [session, ["edited by the hook", "zero", "then"], session, ["a plain string"], session]
    assert server.requests[0]["raw"] == server.requests[2]["raw"] == server.requests[4]["raw"]


# --- the conversion turn by turn, without the network --------------------------------------

#: ``build_params`` of each request of ``session_steps``, as the whole-history conversion
#: before this one (main at 0103996) made them: the same for both APIs.
SESSION_PARAMS = Path(__file__).parent / "fixtures" / "google_session_params.json"


@pytest.mark.parametrize("api", sorted(APIS))
def test_the_scripted_session_converts_as_it_did_before_the_conversion_was_continued(api):
    """Each request of the scripted session (see ``support.google_exchanges``), built turn by
    turn, has the params the whole-history conversion gave: merged and image-split tool
    results, replay rules, thinking configs, call ids — the behaviour is the old one."""
    expected = json.loads(SESSION_PARAMS.read_text())
    built = [gs.build_params(m, c, o) for m, c, o in session_steps(api, "http://127.0.0.1:9/v1")]
    assert len(built) == len(expected)
    for i, (params, old) in enumerate(zip(built, expected, strict=True)):
        assert json.loads(json.dumps(params)) == old, i



def _random_google_message(rng: random.Random, i: int, m: ai.Model, open_calls: list[str]) -> ai.Message:
    """A message of a Gemini session: this model's signed turns and blank ones, another
    model's, user text and images, tool results (with images, errors, for gone calls)."""
    kind = rng.choice(["user", "user_image", "own", "own", "other", "result", "result", "result"])
    if kind == "user":
        return ai.UserMessage(content=rng.choice([f"u{i}", ""]), timestamp=1)
    if kind == "user_image":
        return ai.UserMessage(content=[ai.TextContent(text=f"p{i}"), ai.ImageContent(data=PNG, mime_type="image/png")],
                              timestamp=1)
    if kind in ("own", "other"):
        signature = rng.choice([SIGNATURE, None, "not base64!"])
        blocks: list[Any] = []
        if rng.random() < 0.4:
            blocks.append(ai.ThinkingContent(thinking=rng.choice([f"th{i}", " "]), thinking_signature=signature))
        if rng.random() < 0.6:
            blocks.append(ai.TextContent(text=rng.choice([f"t{i}", "  "]), text_signature=signature))
        for k in range(rng.randint(0, 3)):
            call_id = f"c{i}.{k}|x"
            blocks.append(ai.ToolCall(id=call_id, name="bash", arguments={"n": i}, thought_signature=signature))
            open_calls.append(call_id)
        source = dict(api=m.api, provider=m.provider, model=m.id) if kind == "own" else \
            dict(api="anthropic-messages", provider="anthropic", model="claude-x")
        return ai.AssistantMessage(content=blocks, usage=ai.Usage(), timestamp=1,
                                   stop_reason=rng.choice(["toolUse", "stop", "stop", "error", "aborted"]),
                                   **source)  # type: ignore[arg-type]
    call_id = open_calls.pop(rng.randrange(len(open_calls))) if open_calls and rng.random() < 0.8 else f"gone{i}"
    content: list[Any] = [ai.TextContent(text=f"r{i}")] if rng.random() < 0.8 else []
    if rng.random() < 0.3:
        content.append(ai.ImageContent(data=PNG, mime_type="image/png"))
    return ai.ToolResultMessage(tool_call_id=call_id, tool_name="bash", content=content,
                                is_error=rng.random() < 0.2, timestamp=1)


def _sdk_wire(api_client: Any, contents: list[dict[str, Any]]) -> list[Any]:
    """``contents`` as the SDK's own request conversion puts them in the body (the steps of
    ``AsyncModels._generate_content_stream``, on the whole list)."""
    params = genai_types._GenerateContentParameters(model="m", contents=contents)
    convert = genai_models._GenerateContentParameters_to_vertex if api_client.vertexai else \
        genai_models._GenerateContentParameters_to_mldev
    request = convert(api_client, params, None, params)
    return genai_common.encode_unserializable_types(genai_common.convert_to_dict(request))["contents"]


@pytest.mark.parametrize("seed", range(6))
def test_a_google_request_built_turn_by_turn_is_the_one_built_from_the_whole_history(seed):
    """A Gemini session's contents built turn after turn (with branch switches: a shorter
    history; a model switch now and then) are those of a fresh conversion of the whole history,
    and their wire form, continued from the last request's, is what the SDK makes of the whole
    list, for the Gemini API and for Vertex alike. A request's list is its own."""
    rng = random.Random(seed)
    base = "http://127.0.0.1:9/v1"
    models = [model("google-generative-ai", base), model("google-generative-ai", base, "gemini-3-pro-preview"),
              model("google-generative-ai", base, "claude-sonnet-4-5"),
              model("google-generative-ai", base, "gemini-2.5-pro", input=["text"])]
    clients = {vertex: genai.Client(vertexai=vertex, api_key="k").aio.models._api_client for vertex in (False, True)}
    m = models[0]
    history: list[ai.Message] = []
    open_calls: list[str] = []
    for step in range(40):
        if step and rng.random() < 0.1:  # a branch switch or compaction: a shorter history
            history = history[: rng.randrange(len(history))]
        if rng.random() < 0.05:
            m = rng.choice(models)
        history = history + [_random_google_message(rng, step, m, open_calls) for _ in range(rng.randint(1, 3))]
        built = gs.convert_messages(m, ai.Context(messages=history))
        whole = gs._Conversion(m)
        whole.feed(list(history))
        assert msgspec.json.encode(built) == msgspec.json.encode(whole.result()), step
        if built:
            for vertex, client in clients.items():
                assert json.dumps(_genai._WIRE[vertex].of(built)) == json.dumps(_sdk_wire(client, built)), step
        built.append({"role": "user", "parts": [{"text": "a caller's own addition"}]})  # never seen again


def test_the_open_tool_results_close_into_the_content_the_last_request_had():
    """Consecutive tool results are one user turn, even when they arrive over two requests;
    the turn the first request had is not grown (it was sent), and once closed it is the very
    dict that request had, so its wire form is not made again."""
    m = model("google-generative-ai", "http://127.0.0.1:9/v1beta")
    call = [ai.ToolCall(id=f"c{i}", name="bash", arguments={}) for i in range(2)]
    turn = ai.AssistantMessage(content=call, api=m.api, provider=m.provider, model=m.id, usage=ai.Usage(),
                               stop_reason="toolUse", timestamp=1)

    def result(i: int) -> ai.ToolResultMessage:
        return ai.ToolResultMessage(tool_call_id=f"c{i}", tool_name="bash", content=[ai.TextContent(text=f"r{i}")],
                                    is_error=False, timestamp=1)

    history: list[ai.Message] = [ai.UserMessage(content="go", timestamp=1), turn, result(0)]
    first = gs.convert_messages(m, ai.Context(messages=history))
    history = history + [result(1)]
    second = gs.convert_messages(m, ai.Context(messages=history))
    assert [p["functionResponse"]["response"] for p in first[-1]["parts"]] == [{"output": "r0"}]
    assert [p["functionResponse"]["response"] for p in second[-1]["parts"]] == [{"output": "r0"}, {"output": "r1"}]
    history = history + [ai.UserMessage(content="next", timestamp=1)]
    third = gs.convert_messages(m, ai.Context(messages=history))
    assert third[-2] is second[-1] and third[:2] == first[:2] and third[0] is first[0]
