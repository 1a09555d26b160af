"""The bedrock-converse-stream API (Amazon Bedrock ConverseStream) against the scripted server's
real wire — AWS event-stream binary framing — with botocore's credential chain and SigV4:
thinking with signatures, parallel tool calls, usage, images, cache points, HTTP and in-stream
errors, cut and corrupt streams, aborts, a bearer token, missing credentials; and the
event-stream decoder under hypothesis (round trips cut anywhere, hostile bytes)."""

from __future__ import annotations

import importlib.util
import struct
import sys
import zlib

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.providers import abort_at_first_text_delta, run

from pi_actors import ai
from pi_actors.ai import catalog
from pi_actors.ai.providers import bedrock_converse_stream as bedrock
from pi_actors.ai.providers.eventstream import EventStreamDecoder, EventStreamError
from pi_actors.testing import ScriptedLLM
from pi_actors.testing.aws_eventstream import encode_message
from pi_actors.testing.wire_formats import Reply, ScriptToolCall, ScriptUsage

API = "bedrock-converse-stream"
CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.fixture(autouse=True)
def aws_env(monkeypatch, tmp_path):
    """Static keys in the environment, and nothing else botocore could find (no files, no IMDS)."""
    for name in ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION",
                 "AWS_BEDROCK_SKIP_AUTH", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "PI_CACHE_RETENTION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSCRIPTED")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    return monkeypatch


def bedrock_model(server: ScriptedLLM, **kw) -> ai.Model:
    fields = dict(id=CLAUDE, name="Claude Sonnet 4.5", api=API, provider="amazon-bedrock",
                  base_url=server.base_url_bedrock, reasoning=True, input=["text", "image"],
                  cost=ai.ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75), max_tokens=64000)
    fields.update(kw)
    return ai.Model(**fields)


async def one_call(replies, options=None, *, context=None, simple=False, model_kw=None):
    server = ScriptedLLM(replies)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        result, rec = await run(API, server, options or ai.StreamOptions(), context=context, simple=simple,
                                model=bedrock_model(server, **(model_kw or {})))
        nursery.cancel_scope.cancel()
    return result, rec, server


async def test_bedrock_streams_signed_thinking_text_parallel_tool_calls_and_usage_with_sigv4():
    reply = Reply(thinking="Let me look.", thinking_signature="c2lnLXBhcnQ=", text="Both.",
                  tool_calls=[ScriptToolCall(name="ls", arguments={"path": "."}, id="tooluse_a"),
                              ScriptToolCall(name="read", arguments={"path": "a"}, id="tooluse_b")],
                  usage=ScriptUsage(input=100, output=30, cache_read=40, cache_write=5))
    tools = [ai.Tool(name="ls", description="List", parameters={"type": "object"}),
             ai.Tool(name="read", description="Read", parameters={"type": "object"})]
    context = ai.Context(system_prompt="Be terse.", tools=tools, messages=[ai.UserMessage(content=[
        ai.TextContent(text="what is this?"), ai.ImageContent(data=PNG, mime_type="image/png")], timestamp=1)])
    msg, rec, server = await one_call([reply], ai.StreamOptions(reasoning="medium"), context=context, simple=True)

    assert rec.types[0] == "start" and rec.types[-1] == "done" and msg.stop_reason == "toolUse"
    assert [type(b).__name__ for b in msg.content] == ["ThinkingContent", "TextContent", "ToolCall", "ToolCall"]
    thinking, text, first, second = msg.content
    assert thinking.thinking == "Let me look." and thinking.thinking_signature == "c2lnLXBhcnQ="
    assert text.text == "Both."
    assert (first.id, first.name, first.arguments) == ("tooluse_a", "ls", {"path": "."})
    assert (second.id, second.arguments) == ("tooluse_b", {"path": "a"})
    u = msg.usage
    assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (100, 30, 40, 5, 175)
    assert u.cost.total > 0

    request = server.requests[0]
    assert request["path"] == "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    auth = request["headers"]["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDSCRIPTED/") and "/us-west-2/bedrock/aws4_request" in auth
    assert "x-amz-date" in request["headers"]
    body = request["body"]
    assert body["system"] == [{"text": "Be terse."}, {"cachePoint": {"type": "default"}}]
    assert body["messages"] == [{"role": "user", "content": [
        {"text": "what is this?"}, {"image": {"format": "png", "source": {"bytes": PNG}}},
        {"cachePoint": {"type": "default"}}]}]
    assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]] == ["ls", "read"]
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 8192, "display": "summarized"},
        "anthropic_beta": ["interleaved-thinking-2025-05-14"]}
    assert body["inferenceConfig"]["maxTokens"] == 32000 + 8192


async def test_bedrock_replays_history_with_signed_thinking_and_normalised_ids_in_one_tool_result_turn():
    first, _, _ = await one_call([Reply(thinking="plan", thinking_signature="c2ln", text="ok",
                                        tool_calls=[ScriptToolCall(name="ls", id="tooluse_1")])])
    foreign = ai.AssistantMessage(
        content=[ai.ThinkingContent(thinking="other plan", thinking_signature="zzz"),
                 ai.ToolCall(id="call_9|fc_weird", name="read", arguments={})],
        api="openai-responses", provider="openai", model="gpt-5", stop_reason="toolUse", usage=ai.Usage(), timestamp=5)
    history = [ai.UserMessage(content="hi", timestamp=1), first,
               ai.ToolResultMessage(tool_call_id="tooluse_1", tool_name="ls", content=[ai.TextContent(text="a")],
                                    is_error=False, timestamp=3),
               foreign,
               ai.ToolResultMessage(tool_call_id="call_9|fc_weird", tool_name="read", is_error=True,
                                    content=[ai.TextContent(text="no")], timestamp=6),
               ai.UserMessage(content="go on", timestamp=7)]
    msg, _, server = await one_call([Reply(text="done")], context=ai.Context(messages=history),
                                    options=ai.StreamOptions(cache_retention="none"))
    assert msg.stop_reason == "stop"
    messages = server.requests[0]["body"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "user"]
    assert messages[1]["content"][0] == {"reasoningContent": {"reasoningText": {"text": "plan", "signature": "c2ln"}}}
    assert messages[3]["content"] == [{"text": "other plan"},  # another model's thinking: plain text
                                      {"toolUse": {"toolUseId": "call_9_fc_weird", "name": "read", "input": {}}}]
    assert messages[4]["content"] == [{"toolResult": {"toolUseId": "call_9_fc_weird", "content": [{"text": "no"}],
                                                      "status": "error"}}]
    assert all("cachePoint" not in b for m in messages for b in m["content"])


async def test_bedrock_errors_cut_and_corrupt_streams_are_error_events():
    msg, rec, _ = await one_call([Reply(status=429, error_body={"message": "Too many requests"})])
    assert rec.types == ["error"] and msg.error_message == "Throttling error: Too many requests"
    msg, rec, _ = await one_call([Reply(text="partial answer", stream_error="model overloaded")])
    assert rec.types[0] == "start" and msg.stop_reason == "error"
    assert msg.error_message == "Model stream error: model overloaded" and msg.content[0].text == "partial answer"
    msg, rec, _ = await one_call([Reply(text="one two three four", chunks=4, truncate=True, truncate_style="clean")])
    assert msg.error_message == "Stream ended without a stop reason (the response was cut short)"
    msg, rec, _ = await one_call([Reply(text="one two three four", chunks=4, truncate=True)])
    assert msg.stop_reason == "error" and msg.error_message.startswith("Connection error:")
    msg, rec, _ = await one_call([Reply(text="abcdef", malformed=True)])
    assert msg.error_message == "Malformed event stream: message checksum mismatch"
    msg, rec, _ = await one_call([Reply(text="stopped", stop_reason="guardrail_intervened")])
    assert rec.types[-1] == "error" and msg.error_message == "Bedrock stopped: guardrail_intervened"
    msg, rec, _ = await one_call([Reply(text="long", stop_reason="length")])
    assert rec.types[-1] == "done" and msg.stop_reason == "length"


async def test_bedrock_bearer_token_and_missing_credentials(aws_env):
    aws_env.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key")
    msg, _, server = await one_call([Reply(text="hi")], model_kw={"id": "amazon.nova-pro-v1:0", "name": "Nova Pro"})
    assert msg.stop_reason == "stop"
    request = server.requests[0]
    assert request["headers"]["authorization"] == "Bearer bedrock-api-key"
    assert "additionalModelRequestFields" not in request["body"] and "system" in request["body"]
    for name in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        aws_env.delenv(name)
    msg, rec, _ = await one_call([])
    assert rec.types == ["error"]
    assert msg.error_message == ("No AWS credentials for amazon-bedrock: set AWS_PROFILE, AWS_ACCESS_KEY_ID and "
                                 "AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK")


async def test_bedrock_abort_mid_stream_ends_aborted_and_hangs_up():
    msg, rec = await abort_at_first_text_delta(bedrock_model)
    assert msg.stop_reason == "aborted" and msg.content[0].text


def test_missing_botocore_fails_the_import_with_one_line_naming_the_extra(monkeypatch):
    for name in [n for n in sys.modules if n == "botocore" or n.startswith("botocore.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "botocore", None)
    spec = importlib.util.spec_from_file_location("_bedrock_without_sdk", bedrock.__file__)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "pi_actors.ai.providers"
    with pytest.raises(ImportError) as info:
        spec.loader.exec_module(module)
    text = str(info.value)
    assert "\n" not in text and "pip install 'pi-actors[bedrock]'" in text and "botocore" in text


def test_catalog_bedrock_models_are_usable():
    models = catalog.get_models("amazon-bedrock")
    assert models and all(catalog.unsupported_api_message(m) is None for m in models)


# --- the event-stream decoder -----------------------------------------------------------------

_header_values = st.one_of(st.text(max_size=40), st.binary(max_size=40), st.booleans(),
                           st.integers(min_value=-(2**31), max_value=2**31 - 1))
_messages = st.lists(st.tuples(st.dictionaries(st.text(min_size=1, max_size=20).filter(lambda s: len(s.encode()) < 256),
                                               _header_values, max_size=4),
                               st.binary(max_size=300)), max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_messages, st.lists(st.integers(min_value=0, max_value=4000), max_size=6))
def test_event_stream_round_trips_messages_cut_anywhere(messages, cuts):
    wire = b"".join(encode_message(h, p) for h, p in messages)
    decoder = EventStreamDecoder()
    out = []
    last = 0
    for cut in sorted({c % (len(wire) + 1) for c in cuts}) + [len(wire)]:
        out += decoder.feed(wire[last:cut])
        last = cut
    decoder.finish()
    assert [(m.headers, m.payload) for m in out] == [(h, p) for h, p in messages]


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=400), st.binary(min_size=1, max_size=8))
def test_event_stream_decoder_rejects_hostile_bytes_with_one_line(junk, where, patch):
    good = encode_message({":event-type": "contentBlockDelta", ":message-type": "event"}, b'{"delta": {"text": "hi"}}')
    for wire in (junk, good[:where % len(good)] + patch + good[where % len(good) + len(patch):], good + junk):
        decoder = EventStreamDecoder()
        try:
            decoder.feed(wire)
            decoder.finish()
        except EventStreamError as exc:
            assert "\n" not in str(exc) and str(exc)
            with pytest.raises(EventStreamError):
                decoder.feed(b"")  # stays failed


def test_event_stream_decoder_names_each_framing_fault():
    good = encode_message({"a": "b"}, b"payload")
    with pytest.raises(EventStreamError, match="prelude checksum mismatch"):
        EventStreamDecoder().feed(bytes([good[0] ^ 1]) + good[1:])
    with pytest.raises(EventStreamError, match="message checksum mismatch"):
        EventStreamDecoder().feed(good[:-1] + bytes([good[-1] ^ 1]))
    prelude = struct.pack(">II", 8, 0)
    with pytest.raises(EventStreamError, match="message length 8 out of range"):
        EventStreamDecoder().feed(prelude + struct.pack(">I", zlib.crc32(prelude)))
    with pytest.raises(EventStreamError, match="ended inside a message"):
        decoder = EventStreamDecoder()
        decoder.feed(good[:-3])
        decoder.finish()
    bad_type = struct.pack(">B", 1) + b"x" + b"\x0b"
    total = 12 + len(bad_type) + 4
    head = struct.pack(">II", total, len(bad_type))
    body = head + struct.pack(">I", zlib.crc32(head)) + bad_type
    with pytest.raises(EventStreamError, match="unknown type 11"):
        EventStreamDecoder().feed(body + struct.pack(">I", zlib.crc32(body)))


async def test_bedrock_and_vertex_warm_up_without_a_request():
    from pi_actors.ai.providers import google_vertex

    bedrock.prepare()
    google_vertex.prepare()
    await bedrock.warm_up()
    await google_vertex.warm_up()
