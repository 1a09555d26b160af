"""The google-gemini-cli API (Cloud Code Assist, the backend of Gemini CLI and Antigravity)
against the scripted server's Code Assist SSE wire (Gemini events wrapped in ``{"response"}``):
text, thinking with signatures, parallel tool calls, usage, errors with Google's retry delays,
cut streams, the Antigravity variant, the login's key, and hostile streams."""

from __future__ import annotations

import base64
import json

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.providers import Recorder, hello_context

from pi_actors import ai
from pi_actors.ai.providers import google_gemini_cli as cli
from pi_actors.testing import ScriptedLLM
from pi_actors.testing.wire_formats import Reply, ScriptToolCall, ScriptUsage

API = "google-gemini-cli"
KEY = json.dumps({"token": "ya29.scripted", "projectId": "proj-1"})


def code_assist_model(server: ScriptedLLM | None, **kw) -> ai.Model:
    fields = dict(id="gemini-2.5-flash", api=API, provider="google-gemini-cli",
                  base_url=server.base_url_code_assist if server is not None else "http://127.0.0.1:9",
                  reasoning=True, input=["text", "image"],
                  cost=ai.ModelCost(input=0.3, output=2.5, cache_read=0.03, cache_write=0), max_tokens=65535)
    fields.update(kw)
    return ai.Model(**fields)


async def one_call(replies, *, options=None, context=None, simple=False, model_kw=None):
    server = ScriptedLLM(replies)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        rec = Recorder()
        fn = ai.stream_simple if simple else ai.stream
        with trio.fail_after(20):
            msg = await fn(code_assist_model(server, **(model_kw or {})), context or hello_context(),
                           options or ai.StreamOptions(api_key=KEY), rec)
        nursery.cancel_scope.cancel()
    rec.check()
    return msg, rec, server


async def test_code_assist_streams_thinking_text_and_parallel_tool_calls_with_signatures_and_usage():
    signature = base64.b64encode(b"opaque thought state").decode()
    reply = Reply(thinking="Let me look.", text="Listing both.", thinking_signature=signature,
                  tool_calls=[ScriptToolCall(name="ls", arguments={"path": "."}),
                              ScriptToolCall(name="read", arguments={"path": "a.txt"}, id="call-given")],
                  usage=ScriptUsage(input=100, cache_read=40, output=30, reasoning=12))
    tools = [ai.Tool(name="ls", description="List", parameters={"type": "object"}),
             ai.Tool(name="read", description="Read", parameters={"type": "object"})]
    msg, rec, server = await one_call([reply], context=hello_context(tools=tools), simple=True,
                                      options=ai.StreamOptions(api_key=KEY, reasoning="medium", temperature=0.5))

    assert rec.types[0] == "start" and rec.types[-1] == "done" and msg.stop_reason == "toolUse"
    assert [type(b).__name__ for b in msg.content] == ["ThinkingContent", "TextContent", "ToolCall", "ToolCall"]
    thinking, text, first, second = msg.content
    assert thinking.thinking == "Let me look." and text.text == "Listing both."
    assert first.name == "ls" and first.id.startswith("ls_") and first.thought_signature == signature
    assert second.id == "call-given" and second.arguments == {"path": "a.txt"}
    u = msg.usage
    assert (u.input, u.cache_read, u.output, u.total_tokens) == (100, 40, 42, 182)
    assert u.cost.total > 0 and msg.response_id == "gemini-scripted-response"

    request = server.requests[0]
    assert request["path"] == "/v1internal:streamGenerateContent"
    headers = request["headers"]
    assert headers["authorization"] == "Bearer ya29.scripted" and headers["accept"] == "text/event-stream"
    assert headers["user-agent"] == "google-cloud-sdk vscode_cloudshelleditor/0.1"
    assert json.loads(headers["client-metadata"])["pluginType"] == "GEMINI"
    body = request["body"]
    assert body["project"] == "proj-1" and body["model"] == "gemini-2.5-flash"
    assert body["userAgent"] == "pi-coding-agent" and body["requestId"].startswith("pi-") and "requestType" not in body
    inner = body["request"]
    assert inner["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert inner["systemInstruction"] == {"parts": [{"text": "You are terse."}]}
    assert [d["name"] for d in inner["tools"][0]["functionDeclarations"]] == ["ls", "read"]
    assert inner["generationConfig"]["temperature"] == 0.5
    assert inner["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 8192}


async def test_the_code_assist_body_is_compact_utf8_json_as_pi_sends_it():
    """The body is what pi's ``JSON.stringify`` gives: no spaces after separators, non-ASCII
    text as UTF-8 (not ``\\u`` escapes), keys in order — and the same JSON as before."""
    context = ai.Context(system_prompt="Be terse — “quoted”", messages=[
        ai.UserMessage(content="héllo 日本 \U0001f600 \u2028 </script>", timestamp=1)])
    _msg, _rec, server = await one_call([Reply(text="ok")], context=context)
    raw = server.requests[0]["raw"]
    body = json.loads(raw)
    assert raw == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    assert "héllo 日本".encode() in raw and b"\\u" not in raw
    assert body["request"]["contents"] == [{"role": "user", "parts": [{"text": "héllo 日本 \U0001f600 \u2028 </script>"}]}]


async def test_code_assist_signed_text_finish_reasons_and_replay_of_its_own_thinking():
    signature = base64.b64encode(b"sig").decode()
    first, _, _ = await one_call([Reply(thinking="plan", text="ok", thinking_signature=signature)])
    assert first.stop_reason == "stop" and first.content[0].thinking_signature == signature
    history = [ai.UserMessage(content="hi", timestamp=1), first, ai.UserMessage(content="again", timestamp=3)]
    _, _, server = await one_call([Reply(text="fine")], context=ai.Context(messages=history))
    parts = server.requests[0]["body"]["request"]["contents"][1]["parts"]
    assert parts[0] == {"thought": True, "text": "plan", "thoughtSignature": signature}
    msg, rec, _ = await one_call([Reply(text="cut at the limit", stop_reason="length")])
    assert msg.stop_reason == "length" and rec.types[-1] == "done"
    msg, rec, _ = await one_call([Reply(text="blocked", stop_reason="error")])
    assert rec.types[-1] == "error" and msg.error_message == "Gemini stopped: SAFETY"


async def test_code_assist_http_errors_name_the_status_and_google_s_retry_delay_capped_by_max_retry_delay():
    body = {"error": {"code": 429, "message": "You have exhausted your capacity. Your quota will reset after 4s.",
                      "status": "RESOURCE_EXHAUSTED"}}
    msg, rec, _ = await one_call([Reply(status=429, error_body=body)])
    assert rec.types == ["error"] and msg.error_message.startswith("Cloud Code Assist API error (429): ")
    assert msg.error_message.endswith("(the server asked to retry in 5 s)")  # 4 s + pi's one second
    long = {"error": {"code": 429, "message": "Your quota will reset after 1h2m3s.", "status": "RESOURCE_EXHAUSTED"}}
    msg, _, _ = await one_call([Reply(status=429, error_body=long)],
                               options=ai.StreamOptions(api_key=KEY, extra={"max_retry_delay_ms": 60000}))
    assert msg.error_message.startswith("Server requested a 3724 s retry delay, above the maximum of 60 s")
    msg, rec, _ = await one_call([Reply(status=403, error_body="denied")])
    assert rec.types == ["error"] and msg.error_message == "Cloud Code Assist API error (403): denied"


@pytest.mark.parametrize(("key", "fragment"), [
    (None, "Google Cloud Code Assist requires OAuth authentication. Use /login to authenticate."),
    ("ya29.bare-token", "Invalid Google Cloud Code Assist credentials. Use /login to re-authenticate."),
    ('{"token": "t"}', "Missing token or projectId in Google Cloud credentials. Use /login to re-authenticate."),
])
async def test_without_a_google_login_the_call_fails_saying_to_login(key, fragment):
    msg, rec, server = await one_call([], options=ai.StreamOptions(api_key=key))
    assert rec.types == ["error"] and msg.error_message == fragment and server.requests == []


async def test_code_assist_cut_or_failing_streams_end_in_error_keeping_partial_text():
    msg, rec, _ = await one_call([Reply(text="one two three four", chunks=4, truncate=True)])
    assert rec.types[0] == "start" and msg.stop_reason == "error" and msg.content[0].text
    msg, _, _ = await one_call([Reply(text="one two three four", chunks=4, truncate=True, truncate_style="clean")])
    assert msg.error_message == "Stream ended without a finish reason (the response was cut short)"
    msg, _, _ = await one_call([Reply(text="partial", stream_error="model overloaded")])
    assert msg.error_message == "Cloud Code Assist API error (503): model overloaded"
    assert msg.content[0].text == "partial"
    msg, _, _ = await one_call([Reply(text="abcdef", malformed=True)])
    assert msg.stop_reason == "error" and "\n" not in msg.error_message


async def test_antigravity_sends_its_own_headers_request_type_and_user_role_system_instruction():
    msg, _, server = await one_call([Reply(text="hello from claude")],
                                    model_kw={"id": "claude-sonnet-4-5", "provider": "google-antigravity"})
    assert msg.content[0].text == "hello from claude"
    request = server.requests[0]
    assert request["headers"]["user-agent"] == "antigravity/1.11.5 darwin/arm64"
    body = request["body"]
    assert body["requestType"] == "agent" and body["userAgent"] == "antigravity"
    assert body["requestId"].startswith("agent-") and body["model"] == "claude-sonnet-4-5"
    assert body["request"]["systemInstruction"] == {"role": "user", "parts": [{"text": "You are terse."}]}


def test_the_catalog_offers_pi_s_code_assist_models_under_their_logins():
    from pi_actors.ai.catalog import get_models

    gemini = {m.id: m for m in get_models("google-gemini-cli")}
    antigravity = {m.id: m for m in get_models("google-antigravity")}
    assert {"gemini-2.5-pro", "gemini-2.5-flash", "gemini-3-pro-preview"} <= set(gemini)
    assert {"claude-sonnet-4-5", "gemini-3-flash", "gpt-oss-120b-medium"} <= set(antigravity)
    assert all(m.api == API for m in [*gemini.values(), *antigravity.values()])
    assert gemini["gemini-2.5-pro"].base_url == cli.DEFAULT_ENDPOINT
    assert antigravity["gemini-3-flash"].base_url == "https://daily-cloudcode-pa.sandbox.googleapis.com"


@pytest.mark.parametrize(("text", "delay"), [
    ("Your quota will reset after 18h31m10s.", (18 * 3600 + 31 * 60 + 10) * 1000 + 1000),
    ("Please retry in 250ms", 1250), ('"retryDelay": "34.5s"', 35500), ("no delay here", None),
])
def test_google_s_retry_delays_are_read_from_the_error_text(text, delay):
    assert cli.body_retry_delay_ms(text) == delay


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_error_text_gives_a_positive_delay_or_none(text):
    delay = cli.body_retry_delay_ms("reset after " + text) if text[:1].isdigit() else cli.body_retry_delay_ms(text)
    assert delay is None or delay > 0


_hostile_events = st.lists(
    st.one_of(
        st.binary(max_size=40).map(lambda b: b"data: " + b.replace(b"\n", b" ") + b"\n\n"),
        st.sampled_from([
            b'data: {"response": {"candidates": [{"content": {"parts": [{"text": "x", "thought": "yes"}]}}]}}\n\n',
            b'data: {"response": {"candidates": [{"content": {"parts": [{"functionCall": {"name": 5, "args": []}}]}}]}}\n\n',
            b'data: {"response": {"candidates": [{"finishReason": "NOT_A_REASON"}]}}\n\n',
            b'data: {"response": {"candidates": [{"finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": -3}}}\n\n',
            b'data: {"response": {"candidates": "nope"}}\n\n', b'data: {"response": {"candidates": [{"content": 7}]}}\n\n',
            b'data: {"response": {"candidates": [{"content": {"parts": {"a": 1}}}]}}\n\n',
            b'data: {"response": []}\n\n', b'data: {"error": {"code": "x", "message": null}}\n\n', b'data: {"error": 3}\n\n',
            b'data: []\n\n', b'data: null\n\n', b": comment\n\n", b"event: odd\n\n",
            b'data: {"response": {"candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}}\n\n',
        ]),
    ),
    max_size=6,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_hostile_events)
def test_hostile_code_assist_streams_end_in_exactly_one_terminal_event(events):
    async def main():
        server = ScriptedLLM([Reply(raw_sse=b"".join(events).decode("latin-1"))])
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            rec = Recorder()
            with trio.fail_after(20):
                msg = await ai.stream(code_assist_model(server), hello_context(), ai.StreamOptions(api_key=KEY), rec)
            nursery.cancel_scope.cancel()
        rec.check()
        if msg.stop_reason == "error":
            assert msg.error_message and "\n" not in msg.error_message.strip()

    trio.run(main)
