"""The mistral-conversations API against the scripted server's Mistral chat SSE: text,
thinking chunks, parallel tool calls, usage, errors, cut streams, aborts, hand-off from
Claude (ids rewritten to Mistral's 9 characters), hostile streams."""

from __future__ import annotations

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from support.providers import Recorder, abort_at_first_text_delta, hello_context, run

from pi_actors import ai
from pi_actors.ai.providers import mistral_conversations as mistral
from pi_actors.ai.providers._common import run_stream
from pi_actors.ai.providers._sse import SSEDecoder
from pi_actors.testing import ScriptedLLM
from pi_actors.testing.wire_formats import Reply, ScriptToolCall, ScriptUsage

API = "mistral-conversations"


def mistral_model(server: ScriptedLLM | None, **kw) -> ai.Model:
    fields = dict(id="magistral-medium-latest", api=API, provider="mistral",
                  base_url=server.base_url_mistral if server is not None else "http://127.0.0.1:9",
                  reasoning=True, input=["text"], cost=ai.ModelCost(input=2, output=5), max_tokens=40000)
    fields.update(kw)
    return ai.Model(**fields)


async def one_call(replies, *, options=None, context=None, simple=False, model_kw=None):
    server = ScriptedLLM(replies)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        result, rec = await run(API, server, options or ai.StreamOptions(api_key="m-test"), context=context,
                                simple=simple, model=mistral_model(server, **(model_kw or {})))
        nursery.cancel_scope.cancel()
    return result, rec, server


async def test_mistral_reply_streams_thinking_text_and_parallel_tool_calls_with_usage():
    reply = Reply(thinking="Weigh it.", text="Two calls.", usage=ScriptUsage(input=50, output=20),
                  tool_calls=[ScriptToolCall(name="ls", arguments={"path": "."}),
                              ScriptToolCall(name="read", arguments={"path": "b"}, id="abcDEF123")])
    tools = [ai.Tool(name="ls", description="List", parameters={"type": "object"})]
    msg, rec, server = await one_call(
        [reply], context=hello_context(tools=tools), simple=True,
        options=ai.StreamOptions(api_key="m-test", reasoning="high", session_id="sess-1", temperature=0.2))
    assert [type(b).__name__ for b in msg.content] == ["ThinkingContent", "TextContent", "ToolCall", "ToolCall"]
    assert msg.content[0].thinking == "Weigh it." and msg.content[1].text == "Two calls."
    assert (msg.content[2].id, msg.content[2].arguments) == ("scrpt0001", {"path": "."})
    assert (msg.content[3].id, msg.content[3].name) == ("abcDEF123", "read")
    assert msg.stop_reason == "toolUse" and rec.types[-3:] == ["toolcall_end", "toolcall_end", "done"]
    assert (msg.usage.input, msg.usage.output, msg.usage.total_tokens) == (50, 20, 70)
    assert msg.usage.cost.total > 0 and msg.response_id == "cmpl-scripted"

    request = server.requests[0]
    assert request["path"] == "/mistral/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer m-test"
    assert request["headers"]["x-affinity"] == "sess-1"
    body = request["body"]
    assert body["stream"] is True and body["prompt_mode"] == "reasoning" and body["temperature"] == 0.2
    assert body["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}]
    assert body["tools"][0]["function"]["name"] == "ls"


async def test_mistral_small_takes_reasoning_effort_and_no_level_sends_neither():
    _, _, server = await one_call([Reply(text="ok")], simple=True, model_kw={"id": "mistral-small-latest"},
                                  options=ai.StreamOptions(api_key="k", reasoning="low"))
    body = server.requests[0]["body"]
    assert body["reasoning_effort"] == "high" and "prompt_mode" not in body
    _, _, server = await one_call([Reply(text="ok")], simple=True)
    assert "prompt_mode" not in server.requests[0]["body"]


async def test_mistral_errors_cut_streams_and_finish_reasons():
    msg, rec, _ = await one_call([Reply(status=401)])
    assert rec.types == ["error"] and msg.error_message.startswith("Mistral API error (401): {")
    msg, rec, _ = await one_call([Reply(status=429, headers={"retry-after": "2"})])
    assert "(the server asked to retry in 2 s)" in msg.error_message
    msg, _, _ = await one_call([Reply(text="one two three", truncate=True)])
    assert msg.stop_reason == "error" and msg.error_message.startswith("Connection error:")
    msg, _, _ = await one_call([Reply(text="one two three", truncate=True, truncate_style="clean")])
    assert msg.error_message == "Stream ended without a finish reason (the response was cut short)"
    assert msg.content[0].text
    msg, _, _ = await one_call([Reply(text="partial", stream_error="capacity exceeded")])
    assert msg.error_message == "Mistral stream error: capacity exceeded" and msg.content[0].text == "partial"
    msg, rec, _ = await one_call([Reply(text="long", stop_reason="length")])
    assert msg.stop_reason == "length" and rec.types[-1] == "done"
    msg, rec, _ = await one_call([Reply(text="bad", stop_reason="error")])
    assert rec.types[-1] == "error" and msg.error_message == "Mistral finished the response with an error"


async def test_mistral_abort_mid_stream_ends_aborted_and_hangs_up():
    msg, rec = await abort_at_first_text_delta(mistral_model, api_key="k")
    assert msg.stop_reason == "aborted"


def test_claude_history_hands_off_to_mistral_with_nine_character_ids():
    assistant = ai.AssistantMessage(
        content=[ai.ThinkingContent(thinking="Plan.", thinking_signature="EqQBsig=="),
                 ai.ToolCall(id="toolu_01XyZ|item", name="ls", arguments={}),
                 ai.ToolCall(id="toolu_01XyZ-item", name="ls", arguments={"a": 1})],
        api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5", stop_reason="toolUse",
        usage=ai.Usage(), timestamp=2)
    history = [ai.UserMessage(content="go", timestamp=1), assistant,
               ai.ToolResultMessage(tool_call_id="toolu_01XyZ|item", tool_name="ls",
                                    content=[ai.TextContent(text="x")], is_error=False, timestamp=3),
               ai.ToolResultMessage(tool_call_id="toolu_01XyZ-item", tool_name="ls",
                                    content=[ai.ImageContent(data="AAAA", mime_type="image/png")], is_error=True,
                                    timestamp=4)]
    messages = mistral.convert_messages(mistral_model(None), ai.Context(messages=history))
    turn = messages[1]
    assert turn["content"] == [{"type": "text", "text": "Plan."}]  # other model's thinking: plain text
    ids = [c["id"] for c in turn["tool_calls"]]
    assert all(len(i) == 9 and i.isalnum() for i in ids) and len(set(ids)) == 2  # the two would collide
    assert [m["tool_call_id"] for m in messages[2:]] == ids
    assert messages[3]["content"] == [{"type": "text",
                                       "text": "[tool error] (tool image omitted: model does not support images)"}]


_hostile = st.lists(st.one_of(
    st.binary(max_size=30).map(lambda b: b"data: " + b.replace(b"\n", b" ") + b"\n\n"),
    st.sampled_from([
        b'data: {"choices": [{"delta": {"content": [{"type": "thinking", "thinking": "flat"}]}}]}\n\n',
        b'data: {"choices": [{"delta": {"content": 7, "tool_calls": [{"function": null}, 3]}}]}\n\n',
        b'data: {"choices": [{"delta": {"tool_calls": [{"id": "null", "index": "1", '
        b'"function": {"name": 5, "arguments": {"k": 1}}}]}, "finish_reason": "weird"}]}\n\n',
        b'data: {"choices": [], "usage": {"prompt_tokens": "many"}}\n\n',
        b'data: {"choices": [{"delta": {"content": "\\ud800"}, "finish_reason": "stop"}]}\n\n',
        b'data: {"object": "error"}\n\n', b"data: [DONE]\n\n", b"data: null\n\n", b"event: x\n\n",
    ])), max_size=8)


@settings(max_examples=60, deadline=None)
@given(events=_hostile, cut=st.integers(min_value=1, max_value=7))
def test_hostile_mistral_streams_end_in_exactly_one_terminal_event(events, cut):
    """The decoder and mapper on hostile bytes fed in slices, without a server (fast)."""
    raw = b"".join(events)

    async def body(run):
        mapper = mistral._Mapper(run)
        await run.start()
        decoder = SSEDecoder()
        for i in range(0, len(raw), cut):
            for name, data in decoder.feed(raw[i:i + cut]):
                await mapper.sse(name, data)
        for name, data in decoder.close():
            await mapper.sse(name, data)
        await mapper.finish()
        if not mapper.finished:
            raise mistral.ProviderError("cut short")

    async def main():
        rec = Recorder()
        msg = await run_stream(mistral_model(None), ai.StreamOptions(api_key="k"), rec, body,
                               mistral.describe_mistral_error)
        rec.check()
        if msg.stop_reason == "error":
            assert msg.error_message and "\n" not in msg.error_message

    trio.run(main)
