"""The model catalog, and OpenAICompletionsCompat detected and overridden from models.json, all
the way to what the SDK sends to the scripted server."""

from __future__ import annotations

import json

import msgspec
import pytest
from support.providers import run

from pi_actors import ai
from pi_actors.ai.providers.openai_compat import OpenAICompletionsCompat, detect_compat, get_compat
from pi_actors.testing import Reply, ScriptToolCall


def test_catalog_has_anthropic_and_openai_models_with_everything_a_call_needs():
    assert {"anthropic", "openai"} <= set(ai.get_providers())
    for provider, api in (("anthropic", "anthropic-messages"), ("openai", "openai-responses")):
        models = ai.get_models(provider)
        assert models
        for m in models:
            assert m.api == api and m.provider == provider and m.base_url.startswith("https://")
            assert m.context_window >= m.max_tokens > 0 and "text" in m.input
            assert m.cost.input > 0 and m.cost.output >= m.cost.input and m.cost.cache_read < m.cost.input
            assert m.name
    assert ai.get_model("anthropic", "claude-sonnet-4-5").reasoning
    assert not ai.get_model("openai", "gpt-4.1").reasoning
    assert ai.get_models("nobody") == [] and ai.get_model("openai", "gpt-9") is None


def test_find_model_by_reference():
    assert ai.find_model("openai/gpt-5") == ai.get_model("openai", "gpt-5")
    assert ai.find_model("claude-haiku-4-5") == ai.get_model("anthropic", "claude-haiku-4-5")
    assert ai.find_model("openai/claude-haiku-4-5") is None and ai.find_model("x/y") is None


def test_compat_has_every_field_of_the_spec():
    names = {f.encode_name for f in msgspec.structs.fields(OpenAICompletionsCompat)}
    assert names == {"supportsStore", "supportsDeveloperRole", "supportsReasoningEffort", "reasoningEffortMap",
                     "supportsUsageInStreaming", "maxTokensField", "requiresToolResultName",
                     "requiresAssistantAfterToolResult", "requiresThinkingAsText", "thinkingFormat",
                     "openRouterRouting", "vercelGatewayRouting", "supportsStrictMode",
                     "requiresReasoningContentOnAssistantMessages", "cacheControlFormat",
                     "supportsLongCacheRetention", "sendSessionAffinityHeaders", "zaiToolStream"}


@pytest.mark.parametrize(("provider", "url", "store", "developer", "effort"), [
    ("cerebras", "http://h", False, False, True), ("x", "https://api.cerebras.ai/v1", False, False, True),
    ("x", "https://api.deepseek.com", False, False, True), ("opencode", "http://h", False, False, True),
    ("x", "https://opencode.ai/zen/v1", False, False, True), ("groq", "http://h", True, True, True),
    ("x", "https://api.z.ai/api/paas/v4", False, False, False), ("xai", "http://h", False, False, False),
])
def test_detection_by_provider_or_host(provider, url, store, developer, effort):
    c = detect_compat(ai.Model(id="m", api="openai-completions", provider=provider, base_url=url))
    assert (c.supports_store, c.supports_developer_role, c.supports_reasoning_effort) == (store, developer, effort)
    assert c.supports_usage_in_streaming and c.supports_strict_mode and not c.requires_tool_result_name


def test_an_override_of_the_wrong_type_keeps_the_detected_value():
    model = ai.Model(id="m", api="openai-completions", provider="zai",
                     compat={"supportsStore": "yes", "thinkingFormat": "qwen", "unknownFlag": 1})
    c = get_compat(model)
    assert c.supports_store is False and c.thinking_format == "qwen"


async def test_models_json_compat_per_provider_and_per_model_reaches_the_wire(tmp_path, start_llm):
    server = await start_llm([Reply(text="a")] * 6)
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"providers": {
        "local": {"baseUrl": server.base_url_openai, "api": "openai-completions", "apiKey": "k",
                  "compat": {"maxTokensField": "max_tokens", "supportsStore": False},
                  "models": [{"id": "plain", "reasoning": True},
                             {"id": "quirky", "reasoning": True,
                              "compat": {"supportsUsageInStreaming": False, "requiresToolResultName": True,
                                         "thinkingFormat": "qwen-chat-template", "supportsDeveloperRole": False}}]},
        "zai": {"baseUrl": server.base_url_openai, "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "glm", "reasoning": True, "compat": {"maxTokensField": "max_tokens"}}]},
    }}))
    cfg = ai.read_models_json(str(path))
    assert cfg.errors == []
    models = {m.id: m for m in ai.merge_models(ai.builtin_models(), cfg)}
    history = ai.Context(system_prompt="sys", messages=[
        ai.UserMessage(content="go", timestamp=1),
        ai.AssistantMessage(content=[ai.ToolCall(id="c1", name="ls", arguments={})], api="openai-completions",
                            provider="local", model="other", usage=ai.Usage(), stop_reason="toolUse", timestamp=2),
        ai.ToolResultMessage(tool_call_id="c1", tool_name="ls", content=[ai.TextContent(text="a b")],
                             is_error=False, timestamp=3)])
    options = ai.StreamOptions(api_key="k", reasoning="low")
    for model_id in ("plain", "quirky", "glm"):
        result, _ = await run("openai-completions", server, options, model=models[model_id], context=history,
                              simple=True)
        assert result.stop_reason == "stop"
    plain, quirky, glm = (r["body"] for r in server.requests)
    # provider level: max_tokens field and no store, for both of its models
    assert plain["max_tokens"] == 16384 and "max_completion_tokens" not in plain and "store" not in plain
    assert plain["stream_options"] == {"include_usage": True} and plain["reasoning_effort"] == "low"
    assert plain["messages"][0]["role"] == "developer" and "name" not in plain["messages"][3]
    # model level, on top of the provider's
    assert quirky["max_tokens"] == 16384 and "stream_options" not in quirky
    assert quirky["chat_template_kwargs"] == {"enable_thinking": True} and "reasoning_effort" not in quirky
    assert quirky["messages"][0]["role"] == "system" and quirky["messages"][3]["name"] == "ls"
    # detected from the provider name (zai), with the model's own compat on top
    assert glm["enable_thinking"] is True and "reasoning_effort" not in glm and "store" not in glm
    assert glm["max_tokens"] == 16384 and glm["messages"][0]["role"] == "system"


async def test_tool_call_replies_parse_for_a_models_json_model(tmp_path, start_llm):
    server = await start_llm([Reply(tool_calls=[ScriptToolCall(name="ls", arguments={"dir": "."})])])
    model = ai.Model(id="m", api="openai-completions", provider="local", base_url=server.base_url_openai)
    result, _ = await run("openai-completions", server, model=model)
    assert result.content[0].arguments == {"dir": "."} and result.stop_reason == "toolUse"
