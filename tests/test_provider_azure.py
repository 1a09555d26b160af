"""The azure-openai-responses API: the openai SDK's Azure client against the scripted server's
Responses wire — where the request goes (base URL, api-version, deployment, api-key header),
the stream mapped as openai-responses maps it, errors, cut streams, hand-off from Claude."""

from __future__ import annotations

import pytest
import trio
from support.providers import hello_context, run

from pi_actors import ai
from pi_actors.ai.providers import azure_openai_responses as azure
from pi_actors.testing import ScriptedLLM
from pi_actors.testing.wire_formats import Reply, ScriptToolCall

API = "azure-openai-responses"


@pytest.fixture(autouse=True)
def no_azure_environment(monkeypatch):
    for name in ("AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_RESOURCE_NAME", "AZURE_OPENAI_API_VERSION",
                 "AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def azure_model(base_url: str = "", **kw) -> ai.Model:
    fields = dict(id="gpt-5-mini", name="gpt-5-mini", api=API, provider="azure-openai-responses",
                  base_url=base_url, reasoning=True, cost=ai.ModelCost(input=0.25, output=2), max_tokens=128000)
    fields.update(kw)
    return ai.Model(**fields)


async def one_call(replies, *, options=None, context=None, simple=False, model=None, env_base=False,
                   monkeypatch=None):
    server = ScriptedLLM(replies)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        if env_base:
            monkeypatch.setenv("AZURE_OPENAI_BASE_URL", server.base_url_openai)
        model = model or azure_model("" if env_base else server.base_url_openai)
        result, rec = await run(API, server, options or ai.StreamOptions(api_key="az-key"), context=context,
                                simple=simple, model=model)
        nursery.cancel_scope.cancel()
    return result, rec, server


async def test_azure_request_names_deployment_version_and_key_and_maps_the_responses_stream(monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "other=x, gpt-5-mini = my-deployment")
    monkeypatch.setenv("AZURE_OPENAI_API_VERSION", "2025-04-01-preview")
    reply = Reply(thinking="consider", thinking_signature="enc", text="Both.",
                  tool_calls=[ScriptToolCall(name="ls"), ScriptToolCall(name="read", arguments={"p": 1})])
    msg, rec, server = await one_call([reply], env_base=True, monkeypatch=monkeypatch, simple=True,
                                      options=ai.StreamOptions(api_key="az-key", reasoning="low", session_id="s1"))
    assert [type(b).__name__ for b in msg.content] == ["ThinkingContent", "TextContent", "ToolCall", "ToolCall"]
    assert msg.stop_reason == "toolUse" and msg.content[3].arguments == {"p": 1}
    assert '"encrypted_content":"enc"' in msg.content[0].thinking_signature
    request = server.requests[0]
    assert request["path"] == "/v1/responses" and request["headers"]["api-key"] == "az-key"
    body = request["body"]
    assert body["model"] == "my-deployment" and body["prompt_cache_key"] == "s1"
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}


async def test_azure_reasoning_model_without_a_level_asks_for_no_reasoning():
    _, _, server = await one_call([Reply(text="ok")])
    body = server.requests[0]["body"]
    assert body["reasoning"] == {"effort": "none"} and body["model"] == "gpt-5-mini"
    assert all("Juice" not in str(item) for item in body["input"])


def test_azure_base_url_resolution_follows_pi(monkeypatch):
    model = azure_model("")
    with pytest.raises(azure.ProviderError, match="Azure OpenAI base URL is required"):
        azure.resolve_azure(model, None)
    monkeypatch.setenv("AZURE_OPENAI_RESOURCE_NAME", "res")
    assert azure.resolve_azure(model, None) == ("https://res.openai.azure.com/openai/v1", "v1")
    monkeypatch.setenv("AZURE_OPENAI_BASE_URL", "https://x.cognitiveservices.azure.com/openai/")
    assert azure.resolve_azure(model, None)[0] == "https://x.cognitiveservices.azure.com/openai/v1"
    options = ai.StreamOptions(extra={"azureBaseUrl": "http://proxy.local/custom/", "azure_api_version": "v2"})
    assert azure.resolve_azure(model, options) == ("http://proxy.local/custom", "v2")
    with pytest.raises(azure.ProviderError, match="Invalid Azure OpenAI base URL"):
        azure.resolve_azure(model, ai.StreamOptions(extra={"azure_base_url": "not a url"}))


async def test_azure_errors_missing_configuration_and_cut_streams(monkeypatch):
    msg, rec, _ = await one_call([Reply(status=404, error_body={"error": {"message": "DeploymentNotFound"}})])
    assert rec.types == ["error"] and msg.error_message == "404 DeploymentNotFound"
    msg, rec, _ = await one_call([], options=ai.StreamOptions(api_key=None))
    assert rec.types == ["error"] and msg.error_message.startswith("Azure OpenAI API key is required")
    msg, rec, _ = await one_call([], model=azure_model(""))
    assert rec.types == ["error"] and msg.error_message.startswith("Azure OpenAI base URL is required")
    msg, _, _ = await one_call([Reply(text="one two three", truncate=True, truncate_style="clean")])
    assert msg.stop_reason == "error" and "cut short" in msg.error_message


def test_claude_history_hands_off_to_azure_with_openai_shaped_items():
    assistant = ai.AssistantMessage(
        content=[ai.ThinkingContent(thinking="Plan.", thinking_signature="EqQBsig=="),
                 ai.ToolCall(id="toolu_01A", name="ls", arguments={})],
        api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5", stop_reason="toolUse",
        usage=ai.Usage(), timestamp=2)
    history = [ai.UserMessage(content="go", timestamp=1), assistant,
               ai.ToolResultMessage(tool_call_id="toolu_01A", tool_name="ls", content=[ai.TextContent(text="x")],
                                    is_error=False, timestamp=3)]
    params = azure.build_params(azure_model("http://h/v1"), ai.Context(messages=history), ai.StreamOptions())
    items = params["input"]
    assert items[1]["type"] == "message" and items[1]["content"][0]["text"] == "Plan."  # thinking as text
    assert items[2] == {"type": "function_call", "call_id": "toolu_01A", "name": "ls", "arguments": "{}"}
    assert items[3]["type"] == "function_call_output" and items[3]["call_id"] == "toolu_01A"


async def test_azure_call_through_hello_context_has_system_prompt_as_developer():
    _, _, server = await one_call([Reply(text="hi")], context=hello_context())
    assert server.requests[0]["body"]["input"][0] == {"role": "developer", "content": "You are terse."}
