"""The openai-codex-responses API against the scripted server's Responses wire at
/backend-api/codex/responses: pi's headers and body, the stream mapped as openai-responses,
Codex's own events and errors, a token without an account, hand-off from Claude, hostile
streams through the decoder."""

from __future__ import annotations

import json
import time

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from support.providers import Recorder, codex_token, hello_context, run

from pi_actors import ai
from pi_actors.ai.providers import openai_codex_responses as codex
from pi_actors.ai.providers._common import run_stream
from pi_actors.ai.providers._sse import SSEDecoder
from pi_actors.ai.providers.openai_responses import _Mapper
from pi_actors.testing import ScriptedLLM
from pi_actors.testing.wire_formats import Reply, ScriptToolCall

API = "openai-codex-responses"


def token(account: str | None = "acct-42") -> str:
    return codex_token(account)


def codex_model(server: ScriptedLLM | None, **kw) -> ai.Model:
    fields = dict(id="gpt-5.1-codex", name="gpt-5.1-codex", api=API, provider="openai-codex",
                  base_url=server.base_url_codex if server is not None else "", reasoning=True,
                  cost=ai.ModelCost(input=1.25, output=10), max_tokens=128000)
    fields.update(kw)
    return ai.Model(**fields)


async def one_call(replies, *, options=None, context=None, simple=False):
    server = ScriptedLLM(replies)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        result, rec = await run(API, server, options or ai.StreamOptions(api_key=token()), context=context,
                                simple=simple, model=codex_model(server))
        nursery.cancel_scope.cancel()
    return result, rec, server


async def test_codex_request_carries_pis_headers_and_body_and_maps_the_stream():
    reply = Reply(thinking="think", thinking_signature="enc", text="Done.",
                  tool_calls=[ScriptToolCall(name="ls"), ScriptToolCall(name="read", arguments={"p": "a"})])
    tools = [ai.Tool(name="ls", description="List", parameters={"type": "object"})]
    msg, rec, server = await one_call([reply], simple=True, context=hello_context(tools=tools),
                                      options=ai.StreamOptions(api_key=token(), reasoning="medium", session_id="s-9"))
    assert [type(b).__name__ for b in msg.content] == ["ThinkingContent", "TextContent", "ToolCall", "ToolCall"]
    assert msg.stop_reason == "toolUse" and msg.content[3].arguments == {"p": "a"}
    assert msg.usage.total_tokens > 0 and msg.response_id == "resp_scripted"
    request = server.requests[0]
    assert request["path"] == "/backend-api/codex/responses"
    headers = request["headers"]
    assert headers["chatgpt-account-id"] == "acct-42" and headers["originator"] == "pi"
    assert headers["authorization"] == f"Bearer {token()}" and headers["openai-beta"] == "responses=experimental"
    assert headers["session_id"] == "s-9" == headers["x-client-request-id"]
    body = request["body"]
    assert body["instructions"] == "You are terse." and body["store"] is False
    assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    assert body["text"] == {"verbosity": "low"} and body["prompt_cache_key"] == "s-9"
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert body["tools"][0]["strict"] is None and body["parallel_tool_calls"] is True


def test_codex_url_and_account_follow_pi():
    assert codex.codex_url("") == codex.DEFAULT_BASE_URL + "/codex/responses"
    assert codex.codex_url("http://h/x/codex/") == "http://h/x/codex/responses"
    assert codex.codex_url("http://h/codex/responses") == "http://h/codex/responses"
    assert codex.account_id(token("abc")) == "abc"


async def test_codex_errors_speak_pis_texts():
    msg, rec, _ = await one_call([], options=ai.StreamOptions(api_key=token(None)))
    assert rec.types == ["error"] and msg.error_message == "Failed to extract accountId from token"
    resets = int(time.time()) + 30 * 60
    limit = {"error": {"code": "usage_limit_reached", "plan_type": "PLUS", "resets_at": resets, "message": "x"}}
    msg, rec, _ = await one_call([Reply(status=429, error_body=limit)])
    assert rec.types == ["error"]
    assert msg.error_message.startswith("You have hit your ChatGPT usage limit (plus plan). Try again in ~")
    msg, _, _ = await one_call([Reply(status=400, error_body={"error": {"message": "bad model"}})])
    assert msg.error_message == "400 bad model"
    msg, _, _ = await one_call([Reply(text="part", stream_error="backend busy")])
    assert msg.error_message == "Codex error: backend busy" and msg.content[0].text == "part"
    msg, _, _ = await one_call([Reply(text="x", stop_reason="failed", stream_error="model failed")])
    assert msg.error_message == "model failed"
    msg, _, _ = await one_call([Reply(text="one two", malformed=True)])
    assert msg.error_message.startswith("Invalid Codex SSE JSON:")
    msg, _, _ = await one_call([Reply(text="one two three", truncate=True, truncate_style="clean")])
    assert "cut short" in msg.error_message


async def test_codex_response_done_event_completes_the_reply():
    done = json.dumps({"type": "response.done", "response": {"id": "r1", "status": "weird",
                                                             "usage": {"input_tokens": 3, "output_tokens": 2,
                                                                       "total_tokens": 5}}})
    raw = ('data: {"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"m1"}}\n\n'
           'data: {"type":"response.output_text.delta","delta":"hey"}\n\n'
           'data: {"type":"response.output_item.done","output_index":0,'
           '"item":{"type":"message","id":"m1","content":[{"type":"output_text","text":"hey"}]}}\n\n'
           f"data: {done}\n\n")
    msg, rec, _ = await one_call([Reply(raw_sse=raw)])
    assert rec.types[-1] == "done" and msg.stop_reason == "stop" and msg.content[0].text == "hey"
    assert msg.usage.total_tokens == 5


def test_claude_history_hands_off_to_codex_without_the_system_prompt_in_input():
    assistant = ai.AssistantMessage(
        content=[ai.ThinkingContent(thinking="Plan.", thinking_signature="EqQBsig=="),
                 ai.ToolCall(id="toolu_01A", name="ls", arguments={})],
        api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5", stop_reason="toolUse",
        usage=ai.Usage(), timestamp=2)
    history = [ai.UserMessage(content="go", timestamp=1), assistant,
               ai.ToolResultMessage(tool_call_id="toolu_01A", tool_name="ls", content=[ai.TextContent(text="x")],
                                    is_error=False, timestamp=3)]
    body = codex.build_body(codex_model(None), ai.Context(system_prompt="S", messages=history), ai.StreamOptions())
    items = body["input"]
    assert body["instructions"] == "S" and items[0]["role"] == "user"
    assert items[1]["type"] == "message" and items[1]["content"][0]["text"] == "Plan."
    assert items[2]["type"] == "function_call" and items[2]["call_id"] == "toolu_01A"
    assert items[3] == {"type": "function_call_output", "call_id": "toolu_01A", "output": "x"}


_hostile = st.lists(st.one_of(
    st.binary(max_size=30).map(lambda b: b"data: " + b.replace(b"\n", b" ") + b"\n\n"),
    st.sampled_from([
        b'data: {"type": "response.done", "response": "nope"}\n\n',
        b'data: {"type": "response.done"}\n\n',
        b'data: {"type": "response.failed", "response": {"error": 5}}\n\n',
        b'data: {"type": "error", "code": null}\n\n',
        b'data: {"type": 7}\n\n', b"data: [DONE]\n\n", b"data: []\n\n",
        b'data: {"type": "response.output_item.added", "item": {"type": "function_call"}}\n\n',
        b'data: {"type": "response.output_text.delta", "delta": "x"}\n\n',
    ])), max_size=8)


@settings(max_examples=60, deadline=None)
@given(events=_hostile, cut=st.integers(min_value=1, max_value=9))
def test_hostile_codex_streams_end_in_exactly_one_terminal_event(events, cut):
    raw = b"".join(events)

    async def body(run):
        await run.start()
        mapper = _Mapper(run, None)
        events_in = codex._CodexEvents(mapper)
        decoder = SSEDecoder()
        for i in range(0, len(raw), cut):
            for name, data in decoder.feed(raw[i:i + cut]):
                await events_in.sse(name, data)
        for name, data in decoder.close():
            await events_in.sse(name, data)
        if not mapper.finished:
            raise codex.ProviderError("cut short")

    async def main():
        rec = Recorder()
        msg = await run_stream(codex_model(None), ai.StreamOptions(api_key="k"), rec, body, codex.describe_codex_error)
        rec.check()
        if msg.stop_reason == "error":
            assert msg.error_message and "\n" not in msg.error_message

    trio.run(main)
