"""The google-generative-ai API (Gemini) through the real google-genai SDK against the scripted
server's Gemini SSE wire: text, thinking with signatures, parallel tool calls, usage, errors,
cut streams, aborts, hand-off from another provider, hostile streams, the missing extra."""

from __future__ import annotations

import base64
import importlib.util
import sys

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.providers import Recorder, abort_at_first_text_delta, hello_context, run

from pi_actors import ai
from pi_actors.ai.providers import google_generative_ai as google
from pi_actors.testing import ScriptedLLM
from pi_actors.testing.wire_formats import Reply, ScriptToolCall, ScriptUsage

API = "google-generative-ai"


def gemini_model(server: ScriptedLLM | None, **kw) -> ai.Model:
    fields = dict(id="gemini-2.5-flash", api=API, provider="google",
                  base_url=server.base_url_gemini if server is not None else "http://127.0.0.1:9/v1beta",
                  reasoning=True, input=["text", "image"],
                  cost=ai.ModelCost(input=0.3, output=2.5, cache_read=0.03, cache_write=0), max_tokens=65536)
    fields.update(kw)
    return ai.Model(**fields)


async def one_call(replies, *, options=None, context=None, simple=False, model_kw=None):
    server = ScriptedLLM(replies)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        model = gemini_model(server, **(model_kw or {}))
        result, rec = await run(API, server, options or ai.StreamOptions(api_key="g-test"), context=context,
                                simple=simple, model=model)
        nursery.cancel_scope.cancel()
    return result, rec, server


async def test_gemini_reply_streams_thinking_text_and_parallel_tool_calls_with_signatures_and_usage():
    signature = base64.b64encode(b"opaque thought state").decode()
    reply = Reply(thinking="Let me look.", text="Listing both.", thinking_signature=signature,
                  tool_calls=[ScriptToolCall(name="ls", arguments={"path": "."}),
                              ScriptToolCall(name="read", arguments={"path": "a.txt"}, id="call-given")],
                  usage=ScriptUsage(input=100, cache_read=40, output=30, reasoning=12))
    tools = [ai.Tool(name="ls", description="List", parameters={"type": "object"}),
             ai.Tool(name="read", description="Read", parameters={"type": "object"})]
    msg, rec, server = await one_call([reply], context=hello_context(tools=tools),
                                      options=ai.StreamOptions(api_key="g-test", reasoning="medium"), simple=True)

    assert rec.types[0] == "start" and rec.types[-1] == "done"
    assert [type(b).__name__ for b in msg.content] == ["ThinkingContent", "TextContent", "ToolCall", "ToolCall"]
    thinking, text, first, second = msg.content
    assert thinking.thinking == "Let me look." and text.text == "Listing both."
    assert msg.stop_reason == "toolUse"
    assert first.name == "ls" and first.arguments == {"path": "."} and first.id.startswith("ls_")
    assert first.thought_signature == signature  # base64 again, as pi keeps it
    assert second.id == "call-given" and second.arguments == {"path": "a.txt"}
    ends = [e.tool_call.name for e in rec.events if type(e).__name__ == "ToolCallEndEvent"]
    assert ends == ["ls", "read"]
    u = msg.usage
    assert (u.input, u.cache_read, u.output, u.total_tokens) == (100, 40, 30 + 12, 140 + 30 + 12)
    assert u.cost.total > 0 and msg.response_id == "gemini-scripted-response"

    request = server.requests[0]
    assert request["path"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert request["headers"]["x-goog-api-key"] == "g-test"
    body = request["body"]
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["systemInstruction"]["parts"] == [{"text": "You are terse."}]
    declared = body["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declared] == ["ls", "read"]
    assert declared[0].get("parametersJsonSchema", declared[0].get("parameters_json_schema")) == {"type": "object"}
    thinking_config = body["generationConfig"]["thinkingConfig"]
    assert thinking_config in ({"includeThoughts": True, "thinkingBudget": 8192},
                               {"include_thoughts": True, "thinking_budget": 8192})


async def test_gemini_thinking_signature_on_text_reply_and_finish_reasons():
    signature = base64.b64encode(b"sig").decode()
    msg, _, _ = await one_call([Reply(thinking="hm", text="done", thinking_signature=signature)])
    assert msg.stop_reason == "stop" and msg.content[0].thinking_signature == signature
    msg, _, _ = await one_call([Reply(thinking="only thought")])
    assert [type(b).__name__ for b in msg.content] == ["ThinkingContent"]  # the last chunk's empty part: no block
    msg, rec, _ = await one_call([Reply(text="cut at the limit", stop_reason="length")])
    assert msg.stop_reason == "length" and rec.types[-1] == "done"
    msg, rec, _ = await one_call([Reply(text="blocked", stop_reason="error")])
    assert rec.types[-1] == "error" and msg.error_message == "Gemini stopped: SAFETY"


async def test_gemini_http_error_is_an_error_event_without_start_naming_status_and_message():
    msg, rec, _ = await one_call([Reply(status=429, headers={"retry-after": "4"})])
    assert rec.types == ["error"]
    assert msg.error_message == "429 scripted error 429 (the server asked to retry in 4 s)"
    msg, rec, _ = await one_call([], options=ai.StreamOptions(api_key=None))
    assert rec.types == ["error"] and msg.error_message == "No API key for provider: google"


async def test_gemini_cut_or_failing_stream_ends_in_error_keeping_partial_text():
    msg, rec, _ = await one_call([Reply(text="one two three four", chunks=4, truncate=True)])
    assert rec.types[0] == "start" and msg.stop_reason == "error"
    assert msg.error_message.startswith("Connection error:") and msg.content[0].text
    msg, rec, _ = await one_call([Reply(text="one two three four", chunks=4, truncate=True, truncate_style="clean")])
    assert msg.stop_reason == "error"
    assert msg.error_message == "Stream ended without a finish reason (the response was cut short)"
    msg, rec, _ = await one_call([Reply(text="partial", stream_error="model overloaded")])
    assert msg.stop_reason == "error" and msg.error_message == "503 model overloaded"
    assert msg.content[0].text == "partial"
    msg, rec, _ = await one_call([Reply(text="abcdef", malformed=True)])
    assert msg.stop_reason == "error" and "\n" not in msg.error_message


async def test_gemini_abort_mid_stream_ends_aborted_and_hangs_up():
    msg, rec = await abort_at_first_text_delta(gemini_model, api_key="k")
    assert msg.stop_reason == "aborted" and msg.content[0].text


def _anthropic_turn() -> list:
    """A history made with Claude: signed thinking, tool-call ids Gemini never issued."""
    assistant = ai.AssistantMessage(
        content=[ai.ThinkingContent(thinking="Check the dir.", thinking_signature="EqQBCkYIAxgCKkDsig=="),
                 ai.TextContent(text="Looking."),
                 ai.ToolCall(id="toolu_01A|weird id", name="ls", arguments={"path": "."}),
                 ai.ToolCall(id="toolu_01B", name="read", arguments={"path": "a"})],
        api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5", stop_reason="toolUse", usage=ai.Usage(),
        timestamp=2)
    return [ai.UserMessage(content="list", timestamp=1), assistant,
            ai.ToolResultMessage(tool_call_id="toolu_01A|weird id", tool_name="ls",
                                 content=[ai.TextContent(text="a.txt")], is_error=False, timestamp=3),
            ai.ToolResultMessage(tool_call_id="toolu_01B", tool_name="read",
                                 content=[ai.TextContent(text="no such file")], is_error=True, timestamp=4)]


def test_claude_history_hands_off_to_gemini_as_plain_text_and_function_parts():
    contents = google.convert_messages(gemini_model(None), ai.Context(messages=_anthropic_turn()))
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    model_parts = contents[1]["parts"]
    assert model_parts[0] == {"text": "Check the dir."}  # other model's thinking: plain text, unsigned
    assert model_parts[1] == {"text": "Looking."}
    assert model_parts[2] == {"functionCall": {"name": "ls", "args": {"path": "."}}}  # Gemini takes no id
    assert all("thoughtSignature" not in p for p in model_parts)
    assert contents[2]["parts"] == [  # both results in one user turn
        {"functionResponse": {"name": "ls", "response": {"output": "a.txt"}}},
        {"functionResponse": {"name": "read", "response": {"error": "no such file"}}}]
    # A Claude model behind the Gemini API needs ids: normalized, and the results follow.
    claude = google.convert_messages(gemini_model(None, id="claude-sonnet-4-5"), ai.Context(messages=_anthropic_turn()))
    call_id = claude[1]["parts"][2]["functionCall"]["id"]
    assert call_id == "toolu_01A_weird_id"
    assert claude[2]["parts"][0]["functionResponse"]["id"] == call_id


async def test_gemini_replays_its_own_signed_thinking_to_the_same_model():
    signature = base64.b64encode(b"state").decode()
    first, _, _ = await one_call([Reply(thinking="plan", text="ok", thinking_signature=signature)])
    history = [ai.UserMessage(content="hi", timestamp=1), first, ai.UserMessage(content="again", timestamp=3)]
    _, _, server = await one_call([Reply(text="fine")], context=ai.Context(messages=history))
    parts = server.requests[0]["body"]["contents"][1]["parts"]
    assert parts[0]["thought"] is True and parts[0]["text"] == "plan"
    assert parts[0]["thoughtSignature"] == signature
    # Another Gemini model gets the thinking as text, without the signature.
    other = google.convert_messages(gemini_model(None, id="gemini-2.5-pro"), ai.Context(messages=history))
    assert other[1]["parts"][0] == {"text": "plan"}


def test_missing_sdk_fails_the_import_with_one_line_naming_the_extra(monkeypatch):
    for name in [n for n in sys.modules if n == "google" or n.startswith("google.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "google", None)
    spec = importlib.util.spec_from_file_location("_google_without_sdk", google.__file__,
                                                  submodule_search_locations=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "pi_actors.ai.providers"
    with pytest.raises(ImportError) as info:
        spec.loader.exec_module(module)
    text = str(info.value)
    assert "\n" not in text and "pip install 'pi-actors[google]'" in text


_hostile_events = st.lists(
    st.one_of(
        st.binary(max_size=40).map(lambda b: b"data: " + b.replace(b"\n", b" ") + b"\n\n"),
        st.sampled_from([
            b'data: {"candidates": [{"content": {"parts": [{"text": "x", "thought": "yes"}]}}]}\n\n',
            b'data: {"candidates": [{"content": {"parts": [{"functionCall": {"name": 5, "args": []}}]}}]}\n\n',
            b'data: {"candidates": [{"finishReason": "NOT_A_REASON"}]}\n\n',
            b'data: {"candidates": [{"finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": -3}}\n\n',
            b'data: {"candidates": "nope"}\n\n',
            b'data: {"error": {"code": "x", "message": null}}\n\n',
            b'data: []\n\n', b'data: null\n\n', b": comment\n\n", b"event: odd\n\n",
            b'data: {"candidates": [{"content": {"parts": [{"text": "\\ud800"}]}, "finishReason": "STOP"}]}\n\n',
        ]),
    ),
    max_size=6,
)


@pytest.mark.filterwarnings("ignore:.*is not a valid:UserWarning")  # the SDK's note on an unknown enum
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_hostile_events)
def test_hostile_gemini_streams_end_in_exactly_one_terminal_event(events):
    async def main():
        server = ScriptedLLM([Reply(raw_sse=b"".join(events).decode("latin-1"))])
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            rec = Recorder()
            with trio.fail_after(20):
                msg = await ai.stream(gemini_model(server), hello_context(), ai.StreamOptions(api_key="k"), rec)
            nursery.cancel_scope.cancel()
        rec.check()
        if msg.stop_reason == "error":
            assert msg.error_message and "\n" not in msg.error_message.strip()

    trio.run(main)
