"""Cross-provider hand-off with the issue-17 APIs: conversations produced through Anthropic,
Gemini and Mistral (thinking with signatures, tool calls with each one's
ids) replay on each new API, and the new APIs' conversations replay on Anthropic; what
reaches each wire is checked."""

from __future__ import annotations

import base64

import pytest
from support.providers import NEW_APIS, codex_token, model_for, run

from pi_actors import ai
from pi_actors.testing import Reply, ScriptToolCall

SOURCES = ["anthropic-messages", "google-generative-ai", "mistral-conversations"]
TOOLS = [ai.Tool(name="double", description="Double a number", parameters={
    "type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]})]


@pytest.fixture(autouse=True)
def _aws_keys(monkeypatch, tmp_path):
    """Static AWS keys for bedrock (and no files or instance metadata for botocore to look at)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSCRIPTED")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)


def _jwt() -> str:
    return codex_token()


def key_for(api: str) -> str:
    return _jwt() if api == "openai-codex-responses" else "k"


def turn_replies() -> list[Reply]:
    signature = base64.b64encode(b"signed thought").decode()
    return [Reply(thinking="I should double 21.", thinking_signature=signature, text="Calling the tool.",
                  tool_calls=[ScriptToolCall(name="double", arguments={"n": 21})]),
            Reply(text="It is 42.")]


async def produce(api: str, server) -> list[ai.Message]:
    """[user, assistant (thinking, text, tool call), tool result, assistant] from ``api``."""
    context = ai.Context(messages=[ai.UserMessage(content="double 21", timestamp=1)], tools=TOOLS)
    model = model_for(api, server, id=f"source-{api}")
    first, _ = await run(api, server, ai.StreamOptions(api_key=key_for(api), reasoning="high"), context=context,
                         model=model, simple=True)
    assert first.stop_reason == "toolUse", first.error_message
    call = first.content[-1]
    context.messages += [first, ai.ToolResultMessage(tool_call_id=call.id, tool_name="double", is_error=False,
                                                     content=[ai.TextContent(text="42")], timestamp=2)]
    second, _ = await run(api, server, ai.StreamOptions(api_key=key_for(api)), context=context, model=model)
    return [*context.messages, second]


def calls_and_results(api: str, body: dict) -> tuple[list[str], list[str], list[str]]:
    """(tool-call ids, tool-result ids, texts) of a request body of ``api``."""
    if api in ("google-generative-ai", "google-vertex"):
        parts = [p for c in body["contents"] for p in c["parts"]]
        assert not [p for p in parts if p.get("thought") or "thoughtSignature" in p]  # foreign: plain text
        calls = [p["functionCall"]["name"] for p in parts if "functionCall" in p]
        results = [p["functionResponse"]["name"] for p in parts if "functionResponse" in p]
        return calls, results, [p["text"] for p in parts if "text" in p]
    if api == "mistral-conversations":
        messages = body["messages"]
        calls = [c["id"] for m in messages for c in m.get("tool_calls", [])]
        assert all(len(i) == 9 and i.isalnum() for i in calls)
        texts = [p["text"] for m in messages if isinstance(m.get("content"), list) for p in m["content"]
                 if p.get("type") == "text"]
        assert not [p for m in messages if isinstance(m.get("content"), list) for p in m["content"]
                    if p.get("type") == "thinking"]
        return calls, [m["tool_call_id"] for m in messages if m["role"] == "tool"], texts
    if api == "bedrock-converse-stream":
        blocks = [b for m in body["messages"] for b in m["content"]]
        assert not [b for b in blocks if "reasoningContent" in b]
        return ([b["toolUse"]["toolUseId"] for b in blocks if "toolUse" in b],
                [b["toolResult"]["toolUseId"] for b in blocks if "toolResult" in b],
                [b["text"] for b in blocks if "text" in b])
    if api == "anthropic-messages":
        blocks = [b for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])]
        assert not [b for b in blocks if b["type"] in ("thinking", "redacted_thinking")]
        return ([b["id"] for b in blocks if b["type"] == "tool_use"],
                [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"],
                [b["text"] for b in blocks if b["type"] == "text"])
    items = body["input"]  # the Responses APIs (Azure, Codex)
    assert not [i for i in items if i.get("type") == "reasoning"]
    texts = [c["text"] for i in items if i.get("type") == "message" for c in i["content"] if "text" in c]
    return ([i["call_id"] for i in items if i.get("type") == "function_call"],
            [i["call_id"] for i in items if i.get("type") == "function_call_output"], texts)


@pytest.mark.parametrize("target", NEW_APIS)
async def test_other_providers_conversations_replay_on_each_new_api(target, start_llm):
    sources = [a for a in SOURCES if a != target]
    server = await start_llm([r for _ in sources for r in turn_replies()] + [Reply(text="Hello, handoff!")])
    history: list[ai.Message] = []
    for api in sources:
        history += await produce(api, server)
    history.append(ai.UserMessage(content="say hello", timestamp=9))
    context = ai.Context(system_prompt="sys", messages=history, tools=TOOLS)
    result, _ = await run(target, server, ai.StreamOptions(api_key=key_for(target), reasoning="high"),
                          context=context, simple=True)
    assert result.stop_reason == "stop" and result.error_message is None
    calls, results, texts = calls_and_results(target, server.requests[-1]["body"])
    assert len(calls) == len(sources) and results == calls
    assert sum("I should double 21." in t for t in texts) == len(sources)  # foreign thinking as text


async def test_new_apis_conversations_replay_on_anthropic(start_llm):
    sources = ["google-generative-ai", "mistral-conversations"]
    server = await start_llm([r for _ in sources for r in turn_replies()] + [Reply(text="ok")])
    history: list[ai.Message] = []
    for api in sources:
        history += await produce(api, server)
    context = ai.Context(messages=[*history, ai.UserMessage(content="go on", timestamp=9)], tools=TOOLS)
    result, _ = await run("anthropic-messages", server, ai.StreamOptions(api_key="k"), context=context)
    assert result.stop_reason == "stop"
    calls, results, texts = calls_and_results("anthropic-messages", server.requests[-1]["body"])
    assert len(calls) == 2 and results == calls and sum("I should double 21." in t for t in texts) == 2
