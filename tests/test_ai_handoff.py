"""Cross-provider hand-off (pi's packages/ai, docs/architecture.md §7): conversations produced by each API are
replayed to every other one through the real SDKs; what reaches each wire is checked."""

from __future__ import annotations

import re

import pytest
from support.providers import model_for, run

from pi_actors import ai
from pi_actors.testing import Reply, ScriptToolCall

APIS = ["anthropic-messages", "openai-completions", "openai-responses"]
TOOLS = [ai.Tool(name="double", description="Double a number", parameters={
    "type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]})]


def turn_replies(api: str) -> list[Reply]:
    # Pipe ids as Copilot's Responses models produce them, with characters other APIs refuse.
    call_id = {"openai-completions": "call+abc/=|weird" + "x" * 50}.get(api)
    return [Reply(thinking="I should double 21.", thinking_signature="SIG-" + api, text="Calling the tool.",
                  tool_calls=[ScriptToolCall(name="double", arguments={"n": 21}, id=call_id)]),
            Reply(text="It is 42.")]


async def produce(api: str, server) -> list[ai.Message]:
    """[user, assistant (thinking, text, tool call), tool result, assistant] from ``api``."""
    context = ai.Context(messages=[ai.UserMessage(content="double 21", timestamp=1)], tools=TOOLS)
    model = model_for(api, server, id=f"source-{api}")
    first, _ = await run(api, server, ai.StreamOptions(api_key="k", reasoning="high"), context=context,
                         model=model, simple=True)
    call = first.content[-1]
    context.messages += [first, ai.ToolResultMessage(tool_call_id=call.id, tool_name="double", is_error=False,
                                                     content=[ai.TextContent(text="42")], timestamp=2)]
    second, _ = await run(api, server, context=context, model=model)
    return [*context.messages, second]


@pytest.mark.parametrize("target", APIS)
async def test_every_other_providers_conversation_replays_on_the_target(target, start_llm):
    sources = [a for a in APIS if a != target]
    server = await start_llm([r for a in sources for r in turn_replies(a)] + [Reply(text="Hello, handoff successful!")])
    history: list[ai.Message] = []
    for api in sources:
        history += await produce(api, server)
    history.append(ai.UserMessage(content="say 'Hello, handoff successful!'", timestamp=9))
    context = ai.Context(system_prompt="sys", messages=history, tools=TOOLS)
    result, _ = await run(target, server, ai.StreamOptions(api_key="k", reasoning="high"), context=context,
                          simple=True)
    assert result.stop_reason == "stop" and result.error_message is None
    body = server.requests[-1]["body"]
    if target == "anthropic-messages":
        blocks = [b for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])]
        assert not [b for b in blocks if b["type"] in ("thinking", "redacted_thinking")]  # foreign: text now
        assert sum(b.get("text") == "I should double 21." for b in blocks) == 2
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert len(uses) == 2 and results == uses
        assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", i) for i in uses)
    elif target == "openai-completions":
        messages = body["messages"]
        calls = [c["id"] for m in messages for c in m.get("tool_calls", [])]
        results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
        assert len(calls) == 2 and results == calls
        assert all("|" not in i and len(i) <= 40 for i in calls)
        assert not any("reasoning_content" in m for m in messages)  # foreign thinking went to the text
    else:
        items = body["input"]
        assert not [i for i in items if i.get("type") == "reasoning"]  # only the same model's are replayed
        calls = [i for i in items if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        assert len(calls) == 2 and outputs == [c["call_id"] for c in calls]
        assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", c["call_id"]) for c in calls)
        assert all(len(c.get("id", "")) <= 64 for c in calls)


@pytest.mark.parametrize("target", APIS)
async def test_orphaned_calls_get_a_synthetic_result_and_failed_turns_are_dropped(target, start_llm):
    server = await start_llm([Reply(text="fine")])
    orphan = ai.AssistantMessage(content=[ai.ToolCall(id="orphan_1", name="double", arguments={"n": 1})],
                                 api="anthropic-messages", provider="anthropic", model="elsewhere",
                                 usage=ai.Usage(), stop_reason="toolUse", timestamp=2)
    failed = ai.AssistantMessage(content=[ai.TextContent(text="half an answ")], api=target, provider="x",
                                 model="y", usage=ai.Usage(), stop_reason="aborted", error_message="Request was aborted",
                                 timestamp=4)
    context = ai.Context(messages=[ai.UserMessage(content="one", timestamp=1), orphan,
                                   ai.UserMessage(content="never mind", timestamp=3), failed,
                                   ai.UserMessage(content="go on", timestamp=5)], tools=TOOLS)
    result, _ = await run(target, server, context=context)
    assert result.stop_reason == "stop"
    body = server.requests[0]["body"]
    text = repr(body)
    assert "No result provided" in text and "half an answ" not in text
    if target == "openai-completions":
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["user", "assistant", "tool", "user", "user"]
    elif target == "openai-responses":
        kinds = [i.get("type") or i["role"] for i in body["input"]]
        assert kinds == ["user", "function_call", "function_call_output", "user", "user"]
    else:
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "user", "user"]
        assert body["messages"][2]["content"][0]["is_error"] is True
