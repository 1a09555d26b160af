"""What is particular to each of the three APIs, through the real SDKs and the scripted server:
redacted thinking and images (anthropic-messages), reasoning items, refusals, failures and
replay ids (openai-responses), reasoning fields, tool-call fragments by index and usage chunks
(openai-completions); stream_simple's reasoning mapping; the lazy partial mode; model refs."""

from __future__ import annotations

import json

import msgspec
import pytest
from support.providers import Recorder, hello_context, model_for, run, tag

from pi_actors import ai
from pi_actors.ai.providers import openai_responses
from pi_actors.ai.transform import NON_VISION_USER_IMAGE_PLACEHOLDER as OMITTED
from pi_actors.testing import Reply, ScriptToolCall, ScriptUsage

IMAGE = ai.ImageContent(data="iVBORw0KGgo=", mime_type="image/png")


def sse(*events: dict, named: bool = False, done: bool = False) -> str:
    out = []
    for e in events:
        head = f"event: {e['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(e)}\n\n")
    return "".join(out) + ("data: [DONE]\n\n" if done else "")


def chunk(delta: dict | None = None, finish: str | None = None, **extra) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "c", "object": "chat.completion.chunk", "choices": choices, **extra}


# --- anthropic-messages -----------------------------------------------------------------------


async def test_anthropic_redacted_thinking_is_an_opaque_block_replayed_only_to_the_same_model(start_llm):
    api = "anthropic-messages"
    server = await start_llm([Reply(redacted_thinking="OPAQUE==", thinking="visible", text="hi"),
                              Reply(text="again"), Reply(text="other")])
    first, rec = await run(api, server)
    redacted, thinking, _text = first.content
    assert redacted == ai.ThinkingContent(thinking="[Reasoning redacted]", thinking_signature="OPAQUE==", redacted=True)
    assert thinking.thinking == "visible" and thinking.thinking_signature
    assert rec.types[1:3] == ["thinking_start", "thinking_end"]  # a redacted block has no deltas
    context = hello_context()
    context.messages += [first, ai.UserMessage(content="more", timestamp=2)]
    await run(api, server, context=context)
    sent = server.requests[1]["body"]["messages"][1]["content"]
    assert sent[0] == {"type": "redacted_thinking", "data": "OPAQUE=="}
    assert sent[1] == {"type": "thinking", "thinking": "visible", "signature": thinking.thinking_signature}
    await run(api, server, context=context, model=model_for(api, server, id="another-model"))
    sent = server.requests[2]["body"]["messages"][1]["content"]
    assert sent == [{"type": "text", "text": "visible"}, {"type": "text", "text": "hi"}]


async def test_anthropic_images_and_cache_control_on_the_wire(start_llm):
    api = "anthropic-messages"
    server = await start_llm([Reply(text="a red dot"), Reply(text="x")])
    context = ai.Context(system_prompt="sys", messages=[
        ai.UserMessage(content=[ai.TextContent(text="what is this?"), IMAGE], timestamp=1)])
    await run(api, server, context=context)
    body = server.requests[0]["body"]
    assert body["system"] == [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
    text, image = body["messages"][0]["content"]
    assert text == {"type": "text", "text": "what is this?"}
    assert image == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": IMAGE.data},
                     "cache_control": {"type": "ephemeral"}}
    await run(api, server, ai.StreamOptions(api_key="k", cache_retention="none"), context=context,
              model=model_for(api, server, input=["text"]))
    body = server.requests[1]["body"]
    assert "cache_control" not in json.dumps(body)
    # No vision: pi's placeholder text instead of the image.
    assert body["messages"][0]["content"] == [{"type": "text", "text": "what is this?"}, {"type": "text", "text": OMITTED}]


# --- openai-responses -------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["openai-completions", "openai-responses"])
async def test_openai_requests_say_they_come_from_the_stock_sdk_client(api, start_llm):
    """The User-Agent is the openai SDK's own (``AsyncOpenAI/Python <version>``), not the name
    of the subclass the provider makes its requests with."""
    import openai

    server = await start_llm([Reply(text="hi")])
    await run(api, server)
    assert server.requests[0]["headers"]["user-agent"] == f"AsyncOpenAI/Python {openai.__version__}"


async def test_responses_summary_parts_are_separated_and_the_item_becomes_the_signature(start_llm):
    server = await start_llm([Reply(thinking="Think hard.", thinking_signature="ENC", text="ok", chunks=2)])
    result, rec = await run("openai-responses", server)
    deltas = [e.delta for e in rec.events if tag(e) == "thinking_delta"]
    assert deltas == ["Think ", "hard."]  # a separator goes only between parts (issue 21) ...
    end = next(e for e in rec.events if tag(e) == "thinking_end")
    assert end.content == "Think hard." == result.content[0].thinking == "".join(deltas)  # ... as in the final
    item = json.loads(result.content[0].thinking_signature)
    assert item == {"id": "rs_scripted_0", "type": "reasoning", "encrypted_content": "ENC",
                    "summary": [{"type": "summary_text", "text": "Think hard."}]}


async def test_responses_failed_is_an_error_with_the_provider_message_keeping_partial_text(start_llm):
    server = await start_llm([Reply(text="so far", stop_reason="failed", stream_error="model crashed"),
                              Reply(raw_sse=sse({"type": "response.created", "response": {}},
                                                {"type": "response.failed", "response": {"status": "failed"}},
                                                named=True))])
    result, rec = await run("openai-responses", server)
    assert result.stop_reason == "error" and result.error_message == "server_error: model crashed"
    assert result.content[0].text == "so far" and rec.types[-1] == "error"
    result, _ = await run("openai-responses", server)
    assert result.error_message == "Unknown error (no error details in response)"


async def test_responses_refusal_streams_as_text(start_llm):
    item = {"id": "msg_r", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "refusal", "refusal": "I can't help with that."}]}
    raw = sse({"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
              {"type": "response.content_part.added", "item_id": "msg_r", "part": {"type": "refusal", "refusal": ""}},
              {"type": "response.refusal.delta", "item_id": "msg_r", "delta": "I can't "},
              {"type": "response.refusal.delta", "item_id": "msg_r", "delta": "help with that."},
              {"type": "response.output_item.done", "output_index": 0, "item": item},
              {"type": "response.completed", "response": {"status": "completed", "usage": {
                  "input_tokens": 5, "output_tokens": 3, "total_tokens": 8}}}, named=True)
    server = await start_llm([Reply(raw_sse=raw)])
    result, rec = await run("openai-responses", server)
    deltas = [e.delta for e in rec.events if tag(e) == "text_delta"]  # one, or two if read apart
    assert "".join(deltas) == "I can't help with that." and 1 <= len(deltas) <= 2
    assert result.content[0].text == "I can't help with that." and result.stop_reason == "stop"
    assert (result.usage.input, result.usage.output, result.usage.total_tokens) == (5, 3, 8)


async def test_responses_replay_keeps_ids_for_the_same_model_and_drops_them_for_another(start_llm):
    server = await start_llm([Reply(thinking="plan", thinking_signature="ENC", text="calling",
                                    tool_calls=[ScriptToolCall(name="read", arguments={"p": 1})]),
                              Reply(text="same"), Reply(text="other")])
    first, _ = await run("openai-responses", server)
    call = first.content[2]
    assert call.id == "call_1|fc_scripted_1"
    context = hello_context()
    context.messages += [first, ai.ToolResultMessage(tool_call_id=call.id, tool_name="read", is_error=False,
                                                     content=[ai.TextContent(text="42")], timestamp=2)]
    await run("openai-responses", server, context=context)
    items = server.requests[1]["body"]["input"][2:]
    assert items[0] == json.loads(first.content[0].thinking_signature)  # the reasoning item itself
    assert items[1]["type"] == "message" and items[1]["id"] == "msg_scripted_1"
    assert items[2] == {"type": "function_call", "call_id": "call_1", "id": "fc_scripted_1", "name": "read",
                        "arguments": '{"p": 1}'}
    assert items[3] == {"type": "function_call_output", "call_id": "call_1", "output": "42"}
    await run("openai-responses", server, context=context, model=model_for("openai-responses", server, id="other"))
    items = server.requests[2]["body"]["input"][2:]
    # another model: thinking becomes text, text signatures and fc_ item ids are dropped
    assert [i["type"] for i in items] == ["message", "message", "function_call", "function_call_output"]
    assert items[0]["content"][0]["text"] == "plan" and items[0]["id"] == "msg_1"
    assert "id" not in items[2] and items[2]["call_id"] == "call_1"


async def test_responses_reasoning_options_juice_and_service_tier(start_llm):
    server = await start_llm([Reply(text="a", usage=ScriptUsage(input=1000, output=1000))] * 4)
    gpt5 = model_for("openai-responses", server, name="gpt-5-mini")
    await run("openai-responses", server, model=gpt5)  # reasoning model, no effort asked: Juice 0
    assert server.requests[0]["body"]["input"][-1] == {
        "role": "developer", "content": [{"type": "input_text", "text": "# Juice: 0 !important"}]}
    assert "reasoning" not in server.requests[0]["body"]
    plain = model_for("openai-responses", server, reasoning=False)
    normal, _ = await run("openai-responses", server, ai.StreamOptions(api_key="k", reasoning="high"),
                          simple=True, model=plain)
    assert "reasoning" not in server.requests[1]["body"] and "include" not in server.requests[1]["body"]
    assert server.requests[1]["body"]["input"][0]["role"] == "system"
    flex, _ = await run("openai-responses", server,
                        ai.StreamOptions(api_key="k", extra={"service_tier": "flex"}), model=plain)
    assert server.requests[2]["body"]["service_tier"] == "flex"
    assert flex.usage.cost.total == pytest.approx(normal.usage.cost.total / 2)
    await run("openai-responses", server, ai.StreamOptions(api_key="k", session_id="sess-1"), model=plain)
    assert server.requests[3]["body"]["prompt_cache_key"] == "sess-1"


def test_responses_cache_retention_and_prompt_cache_key():
    official = ai.Model(id="gpt-5", api="openai-responses", provider="openai", base_url=f"https://{openai_responses.OFFICIAL_HOST}/v1")
    local = msgspec.structs.replace(official, base_url="http://127.0.0.1:9/v1")
    ctx = hello_context()
    long = ai.StreamOptions(session_id="s", cache_retention="long")
    assert openai_responses.build_params(official, ctx, long)["prompt_cache_retention"] == "24h"
    assert "prompt_cache_retention" not in openai_responses.build_params(local, ctx, long)
    none = ai.StreamOptions(session_id="s", cache_retention="none")
    assert "prompt_cache_key" not in openai_responses.build_params(official, ctx, none)


def test_responses_tool_call_ids_are_normalized_for_openai():
    model = ai.Model(id="gpt-5", api="openai-responses", provider="openai")
    foreign = ai.AssistantMessage(content=[ai.ToolCall(id="call+a|" + "x/" * 40, name="t", arguments={})],
                                  api="openai-completions", provider="github-copilot", model="m", usage=ai.Usage(),
                                  stop_reason="toolUse", timestamp=1)
    result = ai.ToolResultMessage(tool_call_id=foreign.content[0].id, tool_name="t", content=[], is_error=False,
                                  timestamp=2)
    items = openai_responses.convert_messages(model, ai.Context(messages=[foreign, result]))
    call_id, item_id = items[0]["call_id"], items[0]["id"]
    assert call_id == "call_a" and item_id.startswith("fc_x_") and len(item_id) <= 64
    assert not item_id.endswith("_") and items[1]["call_id"] == "call_a"


# --- openai-completions -----------------------------------------------------------------------


async def test_completions_reasoning_field_names_the_thinking_block(start_llm):
    raw = sse(chunk({"role": "assistant", "content": ""}), chunk({"reasoning": "hmm "}),
              chunk({"reasoning": "ok", "reasoning_text": "ignored"}), chunk({"content": "done"}),
              chunk({}, "stop"), done=True)
    server = await start_llm([Reply(raw_sse=raw)])
    result, rec = await run("openai-completions", server)
    assert result.content == [ai.ThinkingContent(thinking="hmm ok", thinking_signature="reasoning"),
                              ai.TextContent(text="done")]
    # pi's order for chat completions: every block ends when the stream does, in content order.
    assert rec.types[1:] == ["thinking_start", "thinking_delta", "thinking_delta",
                             "text_start", "text_delta", "thinking_end", "text_end", "done"]


async def test_completions_tool_call_fragments_follow_their_index_even_without_ids(start_llm):
    raw = sse(chunk({"tool_calls": [{"index": 0, "id": "a1", "function": {"name": "read", "arguments": ""}}]}),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]}),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]}),
              chunk({"tool_calls": [{"index": 1, "function": {"name": "ls", "arguments": '{}'}}]}),
              chunk({}, "tool_calls"),
              chunk(None, usage={"prompt_tokens": 9, "completion_tokens": 4}), done=True)
    server = await start_llm([Reply(raw_sse=raw)])
    result, rec = await run("openai-completions", server)
    assert [(c.id, c.name, c.arguments) for c in result.content] == [("a1", "read", {"path": "x"}), ("", "ls", {})]
    assert result.stop_reason == "toolUse"
    assert (result.usage.input, result.usage.output, result.usage.total_tokens) == (9, 4, 13)  # usage-only chunk


async def test_completions_choice_usage_and_encrypted_reasoning_details(start_llm):
    detail = {"type": "reasoning.encrypted", "id": "t1", "data": "SECRET"}
    raw = sse(chunk({"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "f", "arguments": "{}"}}]}),
              chunk({"reasoning_details": [detail]}),
              {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls",
                                       "usage": {"prompt_tokens": 3, "completion_tokens": 2}}]}, done=True)
    server = await start_llm([Reply(raw_sse=raw)])
    result, _ = await run("openai-completions", server)
    assert json.loads(result.content[0].thought_signature) == detail
    assert (result.usage.input, result.usage.output) == (3, 2)  # Moonshot: usage on the choice


@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "anthropic-messages"])
async def test_user_images_reach_each_wire_and_become_pis_placeholder_for_text_only_models(api, start_llm):
    server = await start_llm([Reply(text="x"), Reply(text="y")])
    context = ai.Context(messages=[ai.UserMessage(content=[ai.TextContent(text="see"), IMAGE], timestamp=1)])
    for model in (model_for(api, server), model_for(api, server, input=["text"])):
        await run(api, server, context=context, model=model)
    with_image, without = (r["body"] for r in server.requests)
    url = f"data:image/png;base64,{IMAGE.data}"
    if api == "openai-completions":
        assert with_image["messages"][-1]["content"][1] == {"type": "image_url", "image_url": {"url": url}}
        assert without["messages"][-1]["content"] == [{"type": "text", "text": "see"}, {"type": "text", "text": OMITTED}]
    elif api == "openai-responses":
        assert with_image["input"][-1]["content"][1] == {"type": "input_image", "detail": "auto", "image_url": url}
        assert without["input"][-1]["content"] == [{"type": "input_text", "text": "see"}, {"type": "input_text", "text": OMITTED}]
    else:
        assert with_image["messages"][-1]["content"][1]["source"]["data"] == IMAGE.data
        assert [part.get("text") for part in without["messages"][-1]["content"]] == ["see", OMITTED]


# --- stream_simple: reasoning levels ----------------------------------------------------------


def _reasoning_sent(api: str, body: dict) -> object:
    if api == "anthropic-messages":
        return body.get("thinking"), body.get("output_config"), body["max_tokens"]
    if api == "openai-responses":
        return body.get("reasoning")
    return body.get("reasoning_effort")


LEVEL_CASES = [
    # (api, model id, reasoning?, level, what reaches the wire)
    ("anthropic-messages", "test-budget-model", True, "minimal", ({"type": "enabled", "budget_tokens": 1024}, None, 33024)),
    ("anthropic-messages", "test-budget-model", True, "high", ({"type": "enabled", "budget_tokens": 16384}, None, 48384)),
    ("anthropic-messages", "test-budget-model", True, "xhigh", ({"type": "enabled", "budget_tokens": 16384}, None, 48384)),
    ("anthropic-messages", "claude-opus-4-6", True, "minimal", ({"type": "adaptive"}, {"effort": "low"}, 32000)),
    ("anthropic-messages", "claude-opus-4-6", True, "xhigh", ({"type": "adaptive"}, {"effort": "max"}, 32000)),
    ("anthropic-messages", "claude-sonnet-4-6", True, "xhigh", ({"type": "adaptive"}, {"effort": "high"}, 32000)),
    ("anthropic-messages", "test-plain-model", False, "high", (None, None, 32000)),
    ("openai-completions", "gpt-5.1", True, "low", "low"),
    ("openai-completions", "gpt-5.1", True, "xhigh", "high"),
    ("openai-completions", "gpt-5.2", True, "xhigh", "xhigh"),
    ("openai-completions", "gpt-4.1", False, "high", None),
    ("openai-responses", "gpt-5.1", True, "medium", {"effort": "medium", "summary": "auto"}),
    ("openai-responses", "gpt-5.1", True, "xhigh", {"effort": "high", "summary": "auto"}),
    ("openai-responses", "gpt-5.4", True, "xhigh", {"effort": "xhigh", "summary": "auto"}),
    ("openai-responses", "gpt-4.1", False, "high", None),
]


@pytest.mark.parametrize("api,model_id,reasoning,level,expected", LEVEL_CASES)
async def test_simple_reasoning_levels_map_to_budgets_or_effort(start_llm, api, model_id, reasoning, level, expected):
    server = await start_llm([Reply(text="ok")])
    model = model_for(api, server, id=model_id, reasoning=reasoning, max_tokens=64000)
    await run(api, server, ai.StreamOptions(api_key="k", reasoning=level), simple=True, model=model)
    assert _reasoning_sent(api, server.requests[0]["body"]) == expected


async def test_custom_thinking_budgets_override_the_defaults(start_llm):
    server = await start_llm([Reply(text="ok")])
    options = ai.StreamOptions(api_key="k", reasoning="low", max_tokens=1000, thinking_budgets={"low": 3000})
    await run("anthropic-messages", server, options, simple=True)
    assert server.requests[0]["body"]["thinking"]["budget_tokens"] == 3000
    assert server.requests[0]["body"]["max_tokens"] == 4000


# --- lazy partial (the provider actor's mode) -------------------------------------------------


@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "anthropic-messages"])
async def test_lazy_partial_gives_the_same_events_and_message_and_is_complete_at_block_ends(api, start_llm):
    reply = Reply(thinking="let me think about it", text="here you go, friend", chunks=4,
                  tool_calls=[ScriptToolCall(name="read", arguments={"path": "/x", "n": 3}, chunks=5)])
    server = await start_llm([reply, reply])
    results = {}
    for live in (True, False):
        checks = []

        async def at_ends(event, checks=checks):
            kind = tag(event)
            if kind in ("text_end", "thinking_end"):
                block = event.partial.content[event.content_index]
                checks.append(event.content == getattr(block, "text", getattr(block, "thinking", None)))
            elif kind == "toolcall_end":
                checks.append(event.partial.content[event.content_index].arguments == {"path": "/x", "n": 3})

        result, rec = await run(api, server, ai.StreamOptions(api_key="k", live_partial=live), on_event=at_ends)
        assert checks and all(checks)
        results[live] = (rec.types, [e.delta for e in rec.events if tag(e).endswith("_delta")],
                         msgspec.structs.replace(result, timestamp=0))
    assert results[True] == results[False]


# --- model references -------------------------------------------------------------------------


async def test_a_model_reference_missing_from_the_catalog_is_one_error_event_saying_which():
    for ref, expected in [("openai/gpt-9", 'model id "gpt-9" is not in the model catalog for provider "openai"'),
                          ("nowhere/gpt-5", 'provider "nowhere" is not in the model catalog'),
                          ("no-such-model", 'model id "no-such-model" is not in the model catalog for any provider')]:
        rec = Recorder()
        result = await ai.stream(ref, hello_context(), ai.StreamOptions(api_key="k"), rec)
        rec.check()
        assert rec.types == ["error"] and result.stop_reason == "error"
        assert expected in result.error_message and ref in result.error_message


async def test_a_catalog_reference_resolves_to_the_catalog_model():
    seen = []

    async def fake(model, context, options, emit):
        seen.append(model)
        msg = ai.new_assistant_message(model)
        await emit(ai.DoneEvent(reason="stop", message=msg))
        return msg

    ai.register_api_provider(ai.ApiProvider(api="openai-responses", stream=fake, stream_simple=fake), "test")
    try:
        result = await ai.complete_simple("openai/gpt-5-mini", hello_context())
    finally:
        ai.reset_api_providers()
    assert result.stop_reason == "stop" and seen[0] == ai.get_model("openai", "gpt-5-mini")
