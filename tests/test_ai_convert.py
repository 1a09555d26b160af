"""Request building without the network: history transforms and per-API message conversion."""

from __future__ import annotations

import msgspec
import pytest

from pi_actors import ai
from pi_actors.ai.providers import anthropic_messages as anth
from pi_actors.ai.providers import openai_completions as oai
from pi_actors.ai.providers import openai_messages as oam
from pi_actors.ai.providers.openai_compat import detect_compat, get_compat


def user(text="hi") -> ai.UserMessage:
    return ai.UserMessage(content=text, timestamp=1)


def assistant(*blocks, provider="anthropic", api="anthropic-messages", model="claude-x",
              stop="toolUse") -> ai.AssistantMessage:
    return ai.AssistantMessage(content=list(blocks), api=api, provider=provider, model=model, usage=ai.Usage(),
                               stop_reason=stop, timestamp=1)


def result(call_id, text="ok", images=()) -> ai.ToolResultMessage:
    content = [ai.TextContent(text=text)] if text else []
    content += [ai.ImageContent(data=d, mime_type="image/png") for d in images]
    return ai.ToolResultMessage(tool_call_id=call_id, tool_name="t", content=content, is_error=False, timestamp=1)


def call(call_id, name="t", **args) -> ai.ToolCall:
    return ai.ToolCall(id=call_id, name=name, arguments=args)


CLAUDE = ai.Model(id="claude-x", api="anthropic-messages", provider="anthropic",
                  base_url="http://127.0.0.1:9", reasoning=True, input=["text", "image"], max_tokens=64000)
GPT = ai.Model(id="gpt-x", api="openai-completions", provider="openai", base_url="http://127.0.0.1:9/v1",
               reasoning=True, input=["text", "image"])


# --- transform_messages ------------------------------------------------------------------------


def test_foreign_thinking_becomes_text_and_signatures_are_dropped():
    msg = assistant(ai.ThinkingContent(thinking="deep", thinking_signature="sig"),
                    ai.ThinkingContent(thinking="   "),
                    ai.ThinkingContent(thinking="[Reasoning redacted]", thinking_signature="enc", redacted=True),
                    ai.TextContent(text="t", text_signature="ts"),
                    ai.ToolCall(id="c1", name="t", arguments={}, thought_signature="x"),
                    provider="openai", api="openai-completions", model="gpt-x")
    out = ai.transform_messages([user(), msg, result("c1")], CLAUDE)
    assert out[1].content == [ai.TextContent(text="deep"), ai.TextContent(text="t"),
                              ai.ToolCall(id="c1", name="t", arguments={})]
    assert msg.content[0].thinking_signature == "sig"  # input untouched


def test_same_model_signed_thinking_is_kept_even_when_blank():
    block = ai.ThinkingContent(thinking="", thinking_signature="encrypted")
    out = ai.transform_messages([user(), assistant(block, stop="stop")], CLAUDE)
    assert out[1].content == [block]


def test_orphaned_tool_calls_get_synthetic_results_and_failed_turns_are_dropped():
    history = [user(), assistant(call("a"), call("b")), result("a"), user("interrupt"),
               assistant(ai.TextContent(text="oops"), stop="error"), user("again"),
               assistant(call("z"))]
    out = ai.transform_messages(history, CLAUDE)
    kinds = [(type(m).__name__, getattr(m, "tool_call_id", None)) for m in out]
    assert kinds == [("UserMessage", None), ("AssistantMessage", None), ("ToolResultMessage", "a"),
                     ("ToolResultMessage", "b"), ("UserMessage", None), ("UserMessage", None),
                     ("AssistantMessage", None)]
    synthetic = out[3]
    assert synthetic.is_error and synthetic.content[0].text == "No result provided"


def test_foreign_tool_call_ids_are_normalized_and_results_follow():
    history = [user(), assistant(call("call|abc+/="), provider="github-copilot", api="openai-responses",
                                 model="gpt-5"), result("call|abc+/=")]
    body = anth.convert_messages(CLAUDE, ai.Context(messages=history))
    assert body[1]["content"][0]["id"] == "call_abc___"
    assert body[2]["content"][0]["tool_use_id"] == "call_abc___"
    out = oai.convert_messages(GPT, ai.Context(messages=history), get_compat(GPT))
    assert out[1]["tool_calls"][0]["id"] == "call" and out[2]["tool_call_id"] == "call"


# --- anthropic-messages --------------------------------------------------------------------------


def test_anthropic_groups_consecutive_tool_results_into_one_user_message():
    history = [user(), assistant(call("a"), call("b")), result("a", "one"), result("b", "two"), user("next")]
    body = anth.convert_messages(CLAUDE, ai.Context(messages=history))
    assert [m["role"] for m in body] == ["user", "assistant", "user", "user"]
    assert [(r["tool_use_id"], r["content"]) for r in body[2]["content"]] == [("a", "one"), ("b", "two")]


def test_anthropic_image_only_tool_result_gets_a_placeholder_text():
    body = anth.convert_messages(CLAUDE, ai.Context(messages=[user(), assistant(call("a")),
                                                              result("a", text="", images=["AAA"])]))
    content = body[2]["content"][0]["content"]
    assert content[0] == {"type": "text", "text": "(see attached image)"}
    assert content[1]["source"] == {"type": "base64", "media_type": "image/png", "data": "AAA"}


def test_anthropic_drops_blank_user_content_and_sends_pis_placeholder_for_images_to_text_only_models():
    text_only = ai.Model(id="t", api="anthropic-messages", provider="anthropic", input=["text"])
    history = [ai.UserMessage(content="  ", timestamp=1),
               ai.UserMessage(content=[ai.ImageContent(data="x", mime_type="image/png"),
                                       ai.TextContent(text=" ")], timestamp=1),
               ai.UserMessage(content=[ai.ImageContent(data="x", mime_type="image/png"),
                                       ai.TextContent(text="look")], timestamp=1)]
    body = anth.convert_messages(text_only, ai.Context(messages=history))
    omitted = {"type": "text", "text": "(image omitted: model does not support images)"}
    assert body == [{"role": "user", "content": [omitted]},
                    {"role": "user", "content": [omitted, {"type": "text", "text": "look"}]}]


def test_anthropic_unsigned_thinking_is_sent_as_text_and_redacted_as_redacted_thinking():
    msg = assistant(ai.ThinkingContent(thinking="plain", thinking_signature=""),
                    ai.ThinkingContent(thinking="[Reasoning redacted]", thinking_signature="blob", redacted=True),
                    ai.ThinkingContent(thinking="signed", thinking_signature="s1"), stop="stop")
    body = anth.convert_messages(CLAUDE, ai.Context(messages=[user(), msg]))
    assert body[1]["content"] == [{"type": "text", "text": "plain"},
                                  {"type": "redacted_thinking", "data": "blob"},
                                  {"type": "thinking", "thinking": "signed", "signature": "s1"}]


def test_anthropic_params_cache_control_tools_and_tool_choice(monkeypatch):
    monkeypatch.delenv("PI_CACHE_RETENTION", raising=False)
    tools = [ai.Tool(name="read", description="d", parameters={
        "type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"], "additionalProperties": False})]
    context = ai.Context(system_prompt="sys", messages=[user()], tools=tools)
    params = anth.build_params(CLAUDE, context, ai.StreamOptions(temperature=0.2, extra={"tool_choice": "any"}))
    assert params["system"] == [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
    assert params["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert params["tools"][0]["input_schema"] == {"type": "object", "properties": {"p": {"type": "string"}},
                                                  "required": ["p"]}
    assert params["tool_choice"] == {"type": "any"} and params["temperature"] == 0.2
    assert params["max_tokens"] == 64000 // 3

    monkeypatch.setenv("PI_CACHE_RETENTION", "long")
    # The 1-hour TTL is for the official API only, which the provider recognises by its host.
    official = msgspec.structs.replace(CLAUDE, base_url=f"https://{anth.OFFICIAL_HOST}")
    long = anth.build_params(official, context, ai.StreamOptions())
    assert long["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    none = anth.build_params(CLAUDE, context, ai.StreamOptions(cache_retention="none"))
    assert "cache_control" not in none["system"][0] and none["messages"][-1]["content"] == "hi"


def test_anthropic_adaptive_models_get_adaptive_thinking_and_effort():
    opus = ai.Model(id="claude-opus-4-6", api="anthropic-messages", provider="anthropic", reasoning=True)
    params = anth.build_params(opus, ai.Context(messages=[user()]),
                               ai.StreamOptions(temperature=1, extra={"thinking_enabled": True, "effort": "max"}))
    assert params["thinking"] == {"type": "adaptive"} and params["output_config"] == {"effort": "max"}
    assert "temperature" not in params
    assert "interleaved" not in anth._headers(opus, ai.StreamOptions(), oauth=False)["anthropic-beta"]


def test_anthropic_oauth_adds_the_claude_code_identity_and_tool_casing():
    context = ai.Context(system_prompt="mine", messages=[user()],
                         tools=[ai.Tool(name="read", description="d", parameters={})])
    params = anth.build_params(CLAUDE, context, ai.StreamOptions(), oauth=True)
    assert [b["text"] for b in params["system"]] == [
        "You are Claude Code, Anthropic's official CLI for Claude.", "mine"]
    assert params["tools"][0]["name"] == "Read"


# --- openai-completions --------------------------------------------------------------------------


def test_openai_batches_tool_result_images_after_the_run():
    history = [user(), assistant(call("a"), call("b"), provider="openai", api="openai-completions", model="gpt-x"),
               result("a", images=["I1"]), result("b", text="", images=["I2"])]
    out = oai.convert_messages(GPT, ai.Context(messages=history), get_compat(GPT))
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user"]
    assert out[3]["content"] == "(see attached image)"
    assert out[4]["content"][0] == {"type": "text", "text": "Attached image(s) from tool result:"}
    assert [p["image_url"]["url"] for p in out[4]["content"][1:]] == ["data:image/png;base64,I1",
                                                                       "data:image/png;base64,I2"]


def test_openai_assistant_text_is_joined_and_thinking_goes_to_its_field():
    msg = assistant(ai.ThinkingContent(thinking="why", thinking_signature="reasoning_content"),
                    ai.TextContent(text="a"), ai.TextContent(text="b"), call("c", x=1),
                    provider="openai", api="openai-completions", model="gpt-x")
    out = oai.convert_messages(GPT, ai.Context(messages=[user(), msg]), get_compat(GPT))
    sent = out[1]
    assert sent["content"] == "ab" and sent["reasoning_content"] == "why"
    assert sent["tool_calls"] == [{"id": "c", "type": "function", "function": {"name": "t", "arguments": '{"x": 1}'}}]


def test_openai_compat_flags_shape_the_conversation():
    model = ai.Model(id="m", api="openai-completions", provider="custom", base_url="http://x", reasoning=True,
                     compat={"requiresToolResultName": True, "requiresAssistantAfterToolResult": True,
                             "requiresThinkingAsText": True, "supportsDeveloperRole": False})
    msg = assistant(ai.ThinkingContent(thinking="why"), ai.TextContent(text="answer"), call("c"),
                    provider="custom", api="openai-completions", model="m")
    out = oai.convert_messages(model, ai.Context(system_prompt="s", messages=[user(), msg, result("c"), user("2")]),
                               get_compat(model))
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert out[2]["content"] == [{"type": "text", "text": "why"}, {"type": "text", "text": "answer"}]
    assert out[3]["name"] == "t"
    assert out[4]["content"] == "I have processed the tool results."


def test_openai_params_send_empty_tools_when_history_has_tool_calls():
    history = [user(), assistant(call("a"), provider="openai", api="openai-completions", model="gpt-x"), result("a")]
    params = oai.build_params(GPT, ai.Context(messages=history), ai.StreamOptions(), get_compat(GPT))
    assert params["tools"] == []


@pytest.mark.parametrize(("provider", "url", "expected"), [
    ("openai", "http://127.0.0.1:9/v1", (True, True, True, "openai", "max_completion_tokens")),
    ("zai", "https://api.z.ai/v1", (False, False, False, "zai", "max_completion_tokens")),
    ("xai", "https://api.x.ai/v1", (False, False, False, "openai", "max_completion_tokens")),
    ("x", "https://llm.chutes.ai/v1", (False, False, True, "openai", "max_tokens")),
])
def test_openai_compat_detection(provider, url, expected):
    c = detect_compat(ai.Model(id="m", api="openai-completions", provider=provider, base_url=url))
    assert (c.supports_store, c.supports_developer_role, c.supports_reasoning_effort, c.thinking_format,
            c.max_tokens_field) == expected


def test_openai_groq_qwen_maps_every_effort_to_default():
    groq = ai.Model(id="qwen/qwen3-32b", api="openai-completions", provider="groq", base_url="https://api.groq.com",
                    reasoning=True)
    params = oai.build_params(groq, ai.Context(messages=[user()]), ai.StreamOptions(extra={"reasoning_effort": "medium"}),
                              get_compat(groq))
    assert params["reasoning_effort"] == "default"


def test_openai_strict_is_omitted_when_compat_disables_it():
    model = ai.Model(id="m", api="openai-completions", provider="p", compat={"supportsStrictMode": False})
    tools = [ai.Tool(name="t", description="d", parameters={"type": "object"})]
    params = oai.build_params(model, ai.Context(messages=[user()], tools=tools),
                              ai.StreamOptions(extra={"toolChoice": "required"}), get_compat(model))
    assert "strict" not in params["tools"][0]["function"] and params["tool_choice"] == "required"


# --- openai-completions: a session's request built turn after turn ----------------------------


def _session(turns: int) -> list:
    messages: list = [user("go")]
    for i in range(turns):
        messages.append(assistant(call(f"c{i}", "bash", command=f"echo {i}"), provider="openai",
                                  api="openai-completions", model="gpt-x"))
        messages.append(result(f"c{i}", text=f"{i}\n"))
    return messages


def test_a_growing_session_sends_the_same_request_bytes_as_a_fresh_conversion():
    compat = get_compat(GPT)
    messages = _session(3)
    for turn in range(3, 8):  # the same objects, one more exchange each turn (the provider's cache)
        context = ai.Context(system_prompt="sys", messages=list(messages))
        built = msgspec.json.encode(oai.build_params(GPT, context, ai.StreamOptions(), compat))
        fresh = msgspec.convert(msgspec.to_builtins(context), ai.Context)  # new objects: nothing remembered
        assert built == msgspec.json.encode(oai.build_params(GPT, fresh, ai.StreamOptions(), compat))
        messages += _session(turn + 1)[-2:]


def test_an_edited_copy_of_a_tool_call_or_result_is_sent_as_edited():
    compat = get_compat(GPT)
    first = _session(1)
    oai.convert_messages(GPT, ai.Context(messages=first), compat)
    edited = [first[0], assistant(call("c0", "bash", command="echo changed"), provider="openai",
                                  api="openai-completions", model="gpt-x"), result("c0", text="changed\n")]
    out = oai.convert_messages(GPT, ai.Context(messages=edited), compat)
    assert out[1]["tool_calls"][0]["function"]["arguments"] == '{"command": "echo changed"}'
    assert out[2]["content"] == "changed\n"


def test_the_remembered_conversions_stay_within_their_bound_and_stay_right():
    memo = oam._IdentityMemo(max_chars=100)
    calls = [call(f"c{i}", "write", content="x" * 30) for i in range(10)]
    for c in calls:
        assert memo.get(c, oam._arguments_json) == oam._arguments_json(c)
    assert memo._chars <= 100 and len(memo._items) <= 2  # the oldest were dropped
    assert memo.get(calls[0], oam._arguments_json) == oam._arguments_json(calls[0])  # recomputed


def _random_message(rng, i: int, open_calls: list[str]):
    kind = rng.choice(["user", "user_parts", "assistant", "assistant", "result", "result", "foreign"])
    if kind == "user":
        return user(f"u{i}")
    if kind == "user_parts":
        return ai.UserMessage(content=[ai.TextContent(text=f"p{i}"), ai.ImageContent(data="aGk=", mime_type="image/png")],
                              timestamp=1)
    if kind in ("assistant", "foreign"):
        blocks: list = []
        if rng.random() < 0.5:
            blocks.append(ai.TextContent(text=rng.choice(["", "  ", f"t{i}"])))
        if rng.random() < 0.3:
            blocks.append(ai.ThinkingContent(thinking=f"th{i}", thinking_signature=rng.choice([None, "reasoning_content"])))
        for k in range(rng.randint(0, 2)):
            call_id = f"c{i}_{k}" + ("|item" if kind == "foreign" else "")
            blocks.append(call(call_id, "bash", command=f"echo {i}"))
            open_calls.append(call_id)
        foreign = {"provider": "other", "api": "openai-responses", "model": "o"} if kind == "foreign" else \
            {"provider": "openai", "api": "openai-completions", "model": "gpt-x"}
        return assistant(*blocks, stop=rng.choice(["toolUse", "stop", "stop", "error", "aborted"]), **foreign)
    call_id = open_calls.pop(rng.randrange(len(open_calls))) if open_calls and rng.random() < 0.8 else f"gone{i}"
    return result(call_id, text=rng.choice(["", f"r{i}"]), images=["aGk="] if rng.random() < 0.3 else ())


# --- every API that continues its conversion: built turn by turn == built whole ---------------
# Each case draws its model and options from the test's generator and gives, for a history,
# the messages a request was built with and those of a fresh conversion of the whole history.


def _completions_case(rng):
    model = msgspec.structs.replace(GPT, input=rng.choice([["text", "image"], ["text"]]), compat=rng.choice([
        None, {"requiresAssistantAfterToolResult": True, "requiresToolResultName": True}]))
    compat = get_compat(model)

    def build(history, step):
        built = oai.convert_messages(model, ai.Context(system_prompt="sys", messages=history), compat)
        whole = oam._Conversion(model, "sys", compat)
        whole.feed(list(history))
        return built, whole.result()
    return build


def _anthropic_case(rng):
    model = msgspec.structs.replace(CLAUDE, input=rng.choice([["text", "image"], ["text"]]))
    oauth = rng.random() < 0.3

    def build(history, step):
        options = ai.StreamOptions(cache_retention=rng.choice(["short", "none"]))
        built = anth.build_params(model, ai.Context(system_prompt="sys", messages=history), options, oauth)
        whole = anth._Conversion(model, oauth)
        whole.feed(list(history))
        expected = whole.result()
        if options.cache_retention != "none":
            anth._mark_last_user_block(expected, {"type": "ephemeral"})
        return built["messages"], expected
    return build


def _responses_case(rng):
    from pi_actors.ai.providers import openai_responses as resp

    model = ai.Model(id="gpt-5-x", name="gpt-5-x", api="openai-responses", provider="openai",
                     base_url="http://127.0.0.1:9/v1", reasoning=rng.random() < 0.5,
                     input=rng.choice([["text", "image"], ["text"]]))

    def build(history, step):
        context = ai.Context(system_prompt=rng.choice(["sys", "sys", None]) if step == 0 else "sys", messages=history)
        built = resp.build_params(model, context, ai.StreamOptions())
        whole = resp._Conversion(model, context.system_prompt)
        whole.feed(list(history))
        expected = list(whole.out)
        if model.reasoning:  # gpt-5 without an effort: pi's developer message at the end
            expected.append(built["input"][-1])
        return built["input"], expected
    return build


def _mistral_case(rng):
    from pi_actors.ai.providers import mistral_conversations as mistral

    model = ai.Model(id="mistral-x", api="mistral-conversations", provider="mistral",
                     base_url="http://127.0.0.1:9", input=rng.choice([["text", "image"], ["text"]]))

    def build(history, step):
        built = mistral.convert_messages(model, ai.Context(system_prompt="sys", messages=history))
        whole = mistral._Conversion(model, "sys")
        whole.feed(list(history))
        return built, whole.out
    return build


def _bedrock_case(rng):
    from pi_actors.ai.providers import bedrock_converse_stream as bedrock

    model = ai.Model(id="us.anthropic.claude-sonnet-4-20250514-v1:0", api="bedrock-converse-stream",
                     provider="amazon-bedrock", input=rng.choice([["text", "image"], ["text"]]))

    def build(history, step):
        retention = rng.choice(["short", "none"])
        built = bedrock.convert_messages(model, ai.Context(messages=history), retention)
        whole = bedrock._Conversion(model)
        whole.feed(list(history))
        expected = list(whole.out)
        if retention != "none" and expected and expected[-1]["role"] == "user":  # the cache point, last
            expected[-1] = {**expected[-1], "content": [*expected[-1]["content"], bedrock._cache_point(retention)]}
        return built, expected
    return build


_TURN_BY_TURN = {"openai-completions": (_completions_case, 12), "anthropic-messages": (_anthropic_case, 12),
                 "openai-responses": (_responses_case, 12), "mistral-conversations": (_mistral_case, 8),
                 "bedrock-converse-stream": (_bedrock_case, 8)}


@pytest.mark.parametrize(("api", "seed"), [(api, seed) for api, (_, n) in _TURN_BY_TURN.items() for seed in range(n)])
def test_a_request_built_turn_by_turn_is_the_one_built_from_the_whole_history(api, seed):
    """For every API that continues the last request's conversion: a session's request, built
    turn after turn (with branch switches and compaction: a shorter history), has the messages
    of a fresh conversion of the whole history; and a request's list is its own (a caller's
    addition — the Responses developer message, say — never shows in the next one)."""
    import random

    rng = random.Random(seed)
    build = _TURN_BY_TURN[api][0](rng)
    history: list = []
    open_calls: list[str] = []
    for step in range(40):
        if step and rng.random() < 0.1:  # a branch switch or compaction: a shorter history
            history = history[: rng.randrange(len(history))]
        history = history + [_random_message(rng, step, open_calls) for _ in range(rng.randint(1, 3))]
        built, expected = build(history, step)
        assert msgspec.json.encode(built) == msgspec.json.encode(expected), step
        built.append({"role": "user", "content": "a caller's own addition"})  # never seen again


def test_openrouter_cache_markers_never_leak_into_the_next_request():
    model = msgspec.structs.replace(GPT, id="anthropic/claude-x", base_url="https://openrouter.ai/api/v1", provider="openrouter")
    compat = get_compat(model)
    assert compat.cache_control_format == "anthropic"
    history = [user("first")]
    oai.build_params(model, ai.Context(messages=history), ai.StreamOptions(), compat)
    history = history + [assistant(ai.TextContent(text="reply"), provider="openrouter", api="openai-completions",
                                   model="anthropic/claude-x", stop="stop"), user("second")]
    params = oai.build_params(model, ai.Context(messages=history), ai.StreamOptions(), compat)
    assert params["messages"][0] == {"role": "user", "content": "first"}  # marked last time, plain now
    assert params["messages"][-1]["content"][0]["cache_control"] == {"type": "ephemeral"}


# --- anthropic-messages: a session's request built turn after turn ----------------------------


def test_anthropic_cache_markers_never_leak_into_the_next_request():
    history = [user("first")]
    anth.build_params(CLAUDE, ai.Context(messages=history), ai.StreamOptions())
    history = history + [assistant(call("c0", "bash", command="ls")), result("c0", text="a")]
    anth.build_params(CLAUDE, ai.Context(messages=history), ai.StreamOptions())
    history = history + [assistant(ai.TextContent(text="done"), stop="stop"), user("second")]
    params = anth.build_params(CLAUDE, ai.Context(messages=history), ai.StreamOptions())
    messages = params["messages"]
    assert messages[0] == {"role": "user", "content": "first"}  # marked two requests ago, plain now
    assert "cache_control" not in messages[2]["content"][0]  # the tool result, marked last time
    assert messages[-1]["content"][0]["cache_control"] == {"type": "ephemeral"}


async def test_an_anthropic_hook_that_edits_the_messages_does_not_change_the_next_request(start_llm):
    """``on_payload`` may edit the request in place; the conversion kept for the next request
    must not see the edit (the next request is built from the session, not from the edit)."""
    from pi_actors.testing.scripted_server import Reply

    server = await start_llm([Reply(text="one"), Reply(text="two")])
    model = msgspec.structs.replace(CLAUDE, base_url=server.base_url_anthropic)

    def hook(params, _model):
        params["messages"][0]["content"] = "edited by the hook"

    async def ignore(_event):
        pass

    # The edited message is not the last one (which the cache marker copies anyway).
    history = [user("original"), assistant(ai.TextContent(text="zero"), stop="stop"), user("then")]
    await anth.stream(model, ai.Context(messages=history), ai.StreamOptions(api_key="k", extra={"on_payload": hook}), ignore)
    history = history + [assistant(ai.TextContent(text="one"), stop="stop"), user("next")]
    await anth.stream(model, ai.Context(messages=history), ai.StreamOptions(api_key="k"), ignore)
    first, second = (r["body"] for r in server.requests)
    assert first["messages"][0]["content"] == "edited by the hook"
    assert second["messages"][0]["content"] == "original"


# --- bedrock-converse-stream: a conversion that fails halfway ----------------------------------


def test_a_conversion_that_fails_halfway_is_not_continued():
    """A message the API cannot carry (Bedrock refuses an unknown image type) fails that
    request; the next request, without it, is converted right, not from a half-fed state."""
    from pi_actors.ai.providers import bedrock_converse_stream as bedrock
    from pi_actors.ai.providers._common import ProviderError

    model = ai.Model(id="amazon.nova-pro-v1:0", api="bedrock-converse-stream", provider="amazon-bedrock",
                     input=["text", "image"])
    history = [user("first"), assistant(ai.TextContent(text="a"), stop="stop")]
    bedrock.convert_messages(model, ai.Context(messages=history))
    odd = ai.UserMessage(content=[ai.TextContent(text="look"), ai.ImageContent(data="aGk=", mime_type="image/x-odd")],
                         timestamp=1)
    with pytest.raises(ProviderError):
        bedrock.convert_messages(model, ai.Context(messages=history + [user("second"), odd]))
    out = bedrock.convert_messages(model, ai.Context(messages=history + [user("third")]))
    assert [m["content"][0].get("text") for m in out] == ["first", "a", "third"]
