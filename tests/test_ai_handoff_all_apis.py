"""Cross-provider hand-off across every API: one conversation — a user image, and per turn
thinking with a signature, text, a tool call with a hostile id and a tool result carrying an
image — runs through each API in turn (anthropic → openai-completions → openai-responses →
google → mistral → azure → codex → vertex → bedrock), each turn's request checked on the
scripted server for what that API must receive: earlier models' thinking as plain text (never
replayed as native thinking), tool-call ids normalised as the API needs and every result
paired with its call, and the images (or pi's placeholder for a text-only model)."""

from __future__ import annotations

import base64
import json
import re

import pytest
from support.providers import codex_token, model_for, run

from pi_actors import ai
from pi_actors.ai.transform import NON_VISION_TOOL_IMAGE_PLACEHOLDER, NON_VISION_USER_IMAGE_PLACEHOLDER
from pi_actors.testing import Reply, ScriptToolCall

CHAIN = ["anthropic-messages", "openai-completions", "openai-responses", "google-generative-ai",
         "mistral-conversations", "azure-openai-responses", "openai-codex-responses", "google-vertex",
         "bedrock-converse-stream"]
TEXT_ONLY = "mistral-conversations"  # this turn's model takes no images: pi's placeholders go instead
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PNG_URLSAFE = PNG.replace("+", "-").replace("/", "_")
TOOLS = [ai.Tool(name="look", description="Look at a picture", parameters={
    "type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]})]
_SAFE_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.fixture(autouse=True)
def _aws_keys(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSCRIPTED")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)


def _key(api: str) -> str:
    if api != "openai-codex-responses":
        return "k"
    return codex_token()


def _reply(step: int) -> Reply:
    return Reply(thinking=f"Thought of step {step}.", thinking_signature=base64.b64encode(b"sig%d" % step).decode(),
                 text=f"Answer of step {step}.",
                 tool_calls=[ScriptToolCall(name="look", arguments={"n": step},
                                            id=f"call_{step}|item/{step}+" + "x" * 70)])


def _native_thinking(api: str, body: dict) -> list:
    """Thinking sent in the API's own thinking shape (must be none: every earlier turn is foreign)."""
    if api == "anthropic-messages":
        return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
                if b["type"] in ("thinking", "redacted_thinking")]
    if api == "openai-completions":
        return [m for m in body["messages"] if m.get("reasoning_content") or m.get("reasoning")]
    if api in ("openai-responses", "azure-openai-responses", "openai-codex-responses"):
        return [i for i in body["input"] if i.get("type") == "reasoning"]
    if api in ("google-generative-ai", "google-vertex"):
        return [p for c in body["contents"] for p in c["parts"] if p.get("thought") or "thoughtSignature" in p]
    if api == "mistral-conversations":
        return [p for m in body["messages"] if isinstance(m.get("content"), list) for p in m["content"]
                if p.get("type") == "thinking"]
    return [b for m in body["messages"] for b in m["content"] if "reasoningContent" in b]


def _calls_and_results(api: str, body: dict) -> tuple[list[str], list[str]]:
    """The tool-call ids (names for Gemini, which sends none) and the result ids, in order."""
    if api == "anthropic-messages":
        blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        return ([b["id"] for b in blocks if b["type"] == "tool_use"],
                [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"])
    if api in ("openai-completions", "mistral-conversations"):
        messages = body["messages"]
        return ([c["id"] for m in messages for c in m.get("tool_calls") or []],
                [m["tool_call_id"] for m in messages if m["role"] == "tool"])
    if api in ("openai-responses", "azure-openai-responses", "openai-codex-responses"):
        items = body["input"]
        return ([i["call_id"] for i in items if i.get("type") == "function_call"],
                [i["call_id"] for i in items if i.get("type") == "function_call_output"])
    if api in ("google-generative-ai", "google-vertex"):
        parts = [p for c in body["contents"] for p in c["parts"]]
        return ([p["functionCall"]["name"] for p in parts if "functionCall" in p],
                [p["functionResponse"]["name"] for p in parts if "functionResponse" in p])
    blocks = [b for m in body["messages"] for b in m["content"]]
    return ([b["toolUse"]["toolUseId"] for b in blocks if "toolUse" in b],
            [b["toolResult"]["toolUseId"] for b in blocks if "toolResult" in b])


def _check_ids(api: str, calls: list[str]) -> None:
    if api in ("anthropic-messages", "bedrock-converse-stream"):
        assert all(_SAFE_ID.match(i) for i in calls), calls
    elif api == "mistral-conversations":
        assert all(len(i) == 9 and i.isalnum() for i in calls), calls
    elif api in ("openai-responses", "azure-openai-responses", "openai-codex-responses"):
        assert all(len(i) <= 64 and "|" not in i for i in calls), calls
    elif api == "openai-completions":
        assert all(len(i) <= 40 for i in calls), calls
    if api not in ("google-generative-ai", "google-vertex"):
        assert len(set(calls)) == len(calls)


async def test_a_conversation_with_thinking_tool_calls_and_images_hands_off_across_every_api(start_llm):
    server = await start_llm([_reply(step) for step in range(len(CHAIN))])
    context = ai.Context(system_prompt="sys", tools=TOOLS, messages=[ai.UserMessage(content=[
        ai.TextContent(text="What is in this picture?"), ai.ImageContent(data=PNG, mime_type="image/png")],
        timestamp=1)])
    for step, api in enumerate(CHAIN):
        model = model_for(api, server, id=f"model-{api}", input=["text"] if api == TEXT_ONLY else ["text", "image"])
        result, _ = await run(api, server, ai.StreamOptions(api_key=_key(api), reasoning="high"), context=context,
                              model=model, simple=True)
        assert result.stop_reason == "toolUse", (api, result.error_message)
        assert [type(b).__name__ for b in result.content] == ["ThinkingContent", "TextContent", "ToolCall"], api

        body = server.requests[-1]["body"]
        wire = json.dumps(body, ensure_ascii=False)
        assert not _native_thinking(api, body), api
        for earlier in range(step):  # every earlier turn's thinking and text, as text
            assert f"Thought of step {earlier}." in wire and f"Answer of step {earlier}." in wire, (api, earlier)
        calls, results = _calls_and_results(api, body)
        assert len(calls) == step and results == calls, (api, calls, results)
        _check_ids(api, calls)
        if api == TEXT_ONLY:
            assert PNG not in wire and NON_VISION_USER_IMAGE_PLACEHOLDER in wire
            assert wire.count(NON_VISION_TOOL_IMAGE_PLACEHOLDER) == step
        else:
            seen = wire.count(PNG) + wire.count(PNG_URLSAFE)  # google-genai sends bytes URL-safe base64
            assert seen == 1 + step, (api, seen)  # the user's image and each tool result's

        call = result.content[-1]
        context.messages += [result, ai.ToolResultMessage(
            tool_call_id=call.id, tool_name="look", is_error=False, timestamp=step + 2,
            content=[ai.TextContent(text=f"seen {step}"), ai.ImageContent(data=PNG, mime_type="image/png")])]
    assert len(server.requests) == len(CHAIN)
