"""The three providers through the real SDKs against the scripted LLM server (no network).

Every scenario runs for all three APIs. The event-sequence invariants of pi's packages/ai, docs/architecture.md §7
(one start first, one terminal last, contentIndex valid and of the right block type, partial is
the live message) are checked on every recorded stream.
"""

from __future__ import annotations

import json

import msgspec
import pytest
import trio
import trio.testing
from support.providers import APIS, KEY_VAR, OPENAI, PROVIDER, Recorder, free_port, hello_context, model_for, run, tag

from pi_actors import ai
from pi_actors.ai.partial_json import parse_tool_arguments
from pi_actors.testing import Reply, ScriptedLLM, ScriptToolCall, ScriptUsage

pytestmark = pytest.mark.parametrize("api", APIS)


# --- success paths ----------------------------------------------------------------------------


async def test_text_streams_as_start_text_blocks_then_done(api, start_llm):
    server = await start_llm([Reply(text="Hello there, world", chunks=3)])
    result, rec = await run(api, server)
    # The three chunks' deltas come as one to three text_delta events: the chunks read at once
    # are joined (``_sse.TextRuns``).
    deltas = rec.types.count("text_delta")
    assert rec.types == ["start", "text_start", *["text_delta"] * deltas, "text_end", "done"] and 1 <= deltas <= 3
    assert all(e.content_index == 0 for e in rec.events[1:-1])
    assert "".join(e.delta for e in rec.events if tag(e) == "text_delta") == "Hello there, world"
    assert rec.events[-2].content == "Hello there, world"
    assert result.stop_reason == "stop" and result.error_message is None
    assert [b.text for b in result.content] == ["Hello there, world"]
    if api == "openai-responses":  # the message item's id, for replay
        assert json.loads(result.content[0].text_signature) == {"v": 1, "id": "msg_scripted_0"}
    else:
        assert result.content[0].text_signature is None
    assert (result.api, result.provider, result.model) == (api, PROVIDER[api], "test-model")


async def test_thinking_block_precedes_text_and_keeps_its_signature(api, start_llm):
    server = await start_llm([Reply(thinking="Let me think.", thinking_signature="sig-abc", text="Answer")])
    result, rec = await run(api, server)
    kinds = [t for t in rec.types if t.endswith(("_start", "_end")) and t != "start"]
    if api == "openai-completions":  # pi 0.73 ends every block when the stream ends
        assert kinds == ["thinking_start", "text_start", "thinking_end", "text_end"]
    else:
        assert kinds == ["thinking_start", "thinking_end", "text_start", "text_end"]
    thinking, text = result.content
    assert thinking.thinking == "Let me think." and text.text == "Answer"
    if api == "anthropic-messages":
        assert thinking.thinking_signature == "sig-abc"  # signature_delta: no event, block updated
    elif api == "openai-responses":  # the whole reasoning item, encrypted content included
        item = json.loads(thinking.thinking_signature)
        assert item["type"] == "reasoning" and item["encrypted_content"] == "sig-abc"
        assert json.loads(text.text_signature) == {"v": 1, "id": "msg_scripted_1"}
    else:
        assert thinking.thinking_signature == "reasoning_content"  # the delta field's name


async def test_parallel_tool_calls_parse_arguments_progressively(api, start_llm):
    calls = [ScriptToolCall(name="read", arguments={"path": "/tmp/a.txt", "limit": 20}, chunks=4),
             ScriptToolCall(name="bash", arguments={"command": "ls -la", "timeout": 5}, chunks=3)]
    server = await start_llm([Reply(text="Running both.", tool_calls=calls)])
    seen: dict[int, list] = {}

    async def watch(event):
        if tag(event) == "toolcall_delta":
            block = event.partial.content[event.content_index]
            assert isinstance(block.arguments, dict)
            seen.setdefault(event.content_index, []).append((event.delta, dict(block.arguments)))

    result, rec = await run(api, server, on_event=watch)
    assert result.stop_reason == "toolUse" and rec.events[-1].reason == "toolUse"
    tool_blocks = [b for b in result.content if isinstance(b, ai.ToolCall)]
    assert [(b.name, b.arguments) for b in tool_blocks] == [(c.name, c.arguments) for c in calls]
    assert len({b.id for b in tool_blocks}) == 2
    for deltas in seen.values():
        buffer = ""
        for fragment, arguments in deltas:
            buffer += fragment
            assert arguments == parse_tool_arguments(buffer)
        assert sum(1 for _, a in deltas if a) >= 2, "arguments should fill in over several deltas"
    ends = [e for e in rec.events if tag(e) == "toolcall_end"]
    assert [e.tool_call for e in ends] == tool_blocks
    if api == "openai-responses":  # a fresh object with the same id, name and arguments (§1.7)
        assert ends[0].tool_call is not result.content[ends[0].content_index]
    else:
        assert ends[0].tool_call is result.content[ends[0].content_index]


async def test_usage_and_cost_on_the_final_message(api, start_llm):
    usage = ScriptUsage(input=100, output=20, cache_read=30, cache_write=7, reasoning=5)
    server = await start_llm([Reply(text="ok", usage=usage)])
    result, _ = await run(api, server)
    u = result.usage
    if api == "openai-completions":
        # prompt 130 incl. 30 cached; the 5 reasoning tokens are inside completion's 20 (the
        # total sent is prompt + completion), so they are not added again
        assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (100, 20, 30, 0, 150)
    elif api == "openai-responses":  # input 130 incl. 30 cached; the provider's own total
        assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (100, 20, 30, 0, 150)
    else:
        assert (u.input, u.output, u.cache_read, u.cache_write, u.total_tokens) == (100, 20, 30, 7, 157)
    assert u.cost.input == pytest.approx(3 * u.input / 1e6)
    assert u.cost.output == pytest.approx(15 * u.output / 1e6)
    assert u.cost.cache_read == pytest.approx(0.3 * u.cache_read / 1e6)
    assert u.cost.total == pytest.approx(u.cost.input + u.cost.output + u.cost.cache_read + u.cost.cache_write)


async def test_length_stop_reason_ends_with_done_length(api, start_llm):
    server = await start_llm([Reply(text="cut", stop_reason="length")])
    result, rec = await run(api, server)
    assert result.stop_reason == "length" and rec.events[-1].reason == "length"


@pytest.mark.parametrize("raw", ["weird_reason"])
async def test_unknown_stop_reason_is_an_error(api, start_llm, raw):
    server = await start_llm([Reply(text="x", stop_reason=raw)])
    result, _ = await run(api, server)
    assert result.stop_reason == "error" and result.error_message == f"Unhandled stop reason: {raw}"


async def test_refusal_or_content_filter_is_an_unknown_error(api, start_llm):
    raw = {"openai-completions": "content_filter", "openai-responses": "cancelled"}.get(api, "refusal")
    server = await start_llm([Reply(text="partial", stop_reason=raw)])
    result, _ = await run(api, server)
    assert result.stop_reason == "error" and result.error_message == "An unknown error occurred"
    assert result.content[0].text == "partial"


# --- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 500])
async def test_http_error_becomes_error_event_with_status_and_provider_message(api, start_llm, status):
    server = await start_llm([Reply(status=status, error_body=None)])
    result, rec = await run(api, server)
    assert result.stop_reason == "error"
    assert result.error_message == f"{status} scripted error {status}"
    # the openai APIs emit start only once the request is accepted; anthropic before it
    assert rec.types == (["error"] if api in OPENAI else ["start", "error"])


async def test_non_json_error_body_is_reported_verbatim(api, start_llm):
    server = await start_llm([Reply(status=502, error_body="<html>Bad Gateway</html>")])
    result, _ = await run(api, server)
    assert result.error_message == "502 <html>Bad Gateway</html>"


async def test_empty_error_body_says_no_body(api, start_llm):
    server = await start_llm([Reply(status=400, error_body="")])
    result, _ = await run(api, server)
    assert result.error_message == "400 status code (no body)"


async def test_refused_connection_is_a_connection_error(api):
    result, rec = await run(api, None, model=model_for(api, None, port=free_port()))
    assert result.stop_reason == "error"
    assert result.error_message.startswith("Connection error")
    assert "error" == rec.types[-1]


async def test_missing_api_key_is_an_error_event_before_any_request(api, start_llm, monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    server = await start_llm([Reply(text="never")])
    for simple in (False, True):
        result, rec = await run(api, server, ai.StreamOptions(), simple=simple)
        assert rec.types == ["error"]
        assert result.error_message == f"No API key for provider: {PROVIDER[api]}"
    assert server.requests == []


async def test_api_key_from_environment_reaches_the_server(api, start_llm, monkeypatch):
    monkeypatch.setenv(KEY_VAR[api], "sk-from-env")
    monkeypatch.delenv("ANTHROPIC_OAUTH_TOKEN", raising=False)
    server = await start_llm([Reply(text="ok")])
    result, _ = await run(api, server, ai.StreamOptions())
    assert result.stop_reason == "stop"
    headers = server.requests[0]["headers"]
    # (the anthropic SDK of this generation sends API keys as a Bearer token too)
    assert headers.get("x-api-key") == "sk-from-env" or headers["authorization"] == "Bearer sk-from-env"


async def test_abort_mid_stream_keeps_partial_text_and_closes_the_response(api, start_llm):
    server = await start_llm([Reply(text="Hello there, world", chunks=3, hang_after_start=True)])
    signal = ai.AbortSignal()
    first: list[str] = []

    async def abort_on_first_delta(event):
        if tag(event) == "text_delta":
            first.append(event.delta)
            signal.abort()

    result, rec = await run(api, server, ai.StreamOptions(api_key="k", signal=signal), on_event=abort_on_first_delta)
    assert rec.types[-1] == "error" and rec.events[-1].reason == "aborted"
    assert result.stop_reason == "aborted" and result.error_message
    # The text of the first delta event, and nothing after it: "Hello ", or more of the reply
    # when its chunks were read at once (one event for the run).
    assert first and result.content and result.content[0].text == first[0]
    assert first[0].startswith("Hello ") and "Hello there, world".startswith(first[0])
    if api == "anthropic-messages":  # usage arrives with message_start, so an abort keeps it
        assert result.usage.input == 10 and result.usage.cost.input > 0
    else:  # usage comes only in the last chunk
        assert result.usage.input == 0 and result.usage.output == 0
    with trio.fail_after(5):
        await server.wait_hung_up(1)  # the client closed the connection


async def test_abort_while_waiting_for_data_interrupts_the_read(api, start_llm, nursery):
    server = await start_llm([Reply(text="all of it", chunks=2, hang_after_start=True)])
    signal = ai.AbortSignal()
    got_text = trio.Event()

    async def note(event):
        if tag(event) == "text_end" or (tag(event) == "text_delta" and event.partial.content[0].text == "all of it"):
            got_text.set()

    async def abort_later():
        await got_text.wait()
        await trio.testing.wait_all_tasks_blocked()  # the provider is blocked reading the hanging stream
        signal.abort()

    nursery.start_soon(abort_later)
    result, rec = await run(api, server, ai.StreamOptions(api_key="k", signal=signal), on_event=note)
    assert result.stop_reason == "aborted" and result.content[0].text == "all of it"
    with trio.fail_after(5):
        await server.wait_hung_up(1)


async def test_abort_while_waiting_for_the_response_headers(api, start_llm, nursery):
    server = await start_llm([Reply(hang_before_headers=True)])
    signal = ai.AbortSignal()

    async def abort_when_request_arrives():
        while not server.requests:
            await trio.testing.wait_all_tasks_blocked()
        await trio.testing.wait_all_tasks_blocked()
        signal.abort()

    nursery.start_soon(abort_when_request_arrives)
    result, rec = await run(api, server, ai.StreamOptions(api_key="k", signal=signal))
    assert result.stop_reason == "aborted" and result.content == []
    assert rec.types == (["error"] if api in OPENAI else ["start", "error"])
    with trio.fail_after(5):
        await server.wait_hung_up(1)


async def test_already_aborted_signal_gives_aborted_error_without_start(api, start_llm):
    server = await start_llm([Reply(text="never")])
    signal = ai.AbortSignal()
    signal.abort()
    result, rec = await run(api, server, ai.StreamOptions(api_key="k", signal=signal))
    assert rec.types == ["error"] and rec.events[0].reason == "aborted"
    assert result.stop_reason == "aborted" and result.content == []
    assert server.requests == []


async def test_outer_cancellation_propagates_and_is_not_an_event(api, start_llm):
    server = await start_llm([Reply(text="slow", hang_after_start=True)] * 2)
    for signal in (None, ai.AbortSignal()):  # with a signal the abort watcher task is running too
        scope = trio.CancelScope()

        async def cancel_on_text(event, scope=scope):
            if tag(event) == "text_delta":
                scope.cancel()

        rec = Recorder(cancel_on_text)
        raised = []
        with scope:
            try:
                await ai.stream(model_for(api, server), hello_context(), ai.StreamOptions(api_key="k", signal=signal),
                                rec)
            except BaseException as exc:
                raised.append(type(exc))
                raise
            pytest.fail("stream returned inside a cancelled scope")
        assert scope.cancelled_caught
        assert raised == [trio.Cancelled]  # a plain Cancelled, not an exception group
        assert "done" not in rec.types and "error" not in rec.types
    with trio.fail_after(5):
        await server.wait_hung_up(2)


@pytest.mark.parametrize("style", ["abrupt", "clean"])
async def test_truncated_stream_is_an_error_keeping_partial_content(api, start_llm, style):
    server = await start_llm([Reply(text="one two three four five six", chunks=6, truncate=True,
                                    truncate_style=style)])
    result, rec = await run(api, server)
    assert result.stop_reason == "error"
    if style == "abrupt":
        assert result.error_message.startswith("Connection error")
    else:
        assert "cut short" in result.error_message
    assert result.content and result.content[0].text  # partial text kept
    assert "done" not in rec.types


async def test_malformed_sse_data_is_an_error(api, start_llm):
    server = await start_llm([Reply(text="alpha beta gamma", malformed=True)])
    result, _ = await run(api, server)
    assert result.stop_reason == "error"
    assert result.error_message.startswith("Malformed stream data")


async def test_in_stream_error_event_is_an_error(api, start_llm):
    server = await start_llm([Reply(text="so far", stream_error="Overloaded right now")])
    result, _ = await run(api, server)
    expected = "Error Code server_error: Overloaded right now" if api == "openai-responses" else "Overloaded right now"
    assert result.stop_reason == "error" and result.error_message == expected
    assert result.content[0].text == "so far"


async def test_emit_that_raises_ends_the_call_with_an_error_event(api, start_llm):
    server = await start_llm([Reply(text="a b c")])

    async def boom(event):
        if tag(event) == "text_delta":
            raise RuntimeError("consumer broke")

    result, rec = await run(api, server, on_event=boom)
    assert result.stop_reason == "error" and "consumer broke" in result.error_message
    assert rec.types[-1] == "error"


# --- requests ---------------------------------------------------------------------------------


async def test_headers_and_payload_hook_shape_the_request(api, start_llm):
    server = await start_llm([Reply(text="ok")])
    seen = []

    def hook(payload, model):
        seen.append(payload)
        return {**payload, "temperature": 0.25}

    model = model_for(api, server, headers={"x-model-header": "m", "x-both": "model"})
    options = ai.StreamOptions(api_key="k", headers={"x-both": "options"}, extra={"onPayload": hook})
    await run(api, server, options, model=model)
    request = server.requests[0]
    assert request["headers"]["x-model-header"] == "m" and request["headers"]["x-both"] == "options"
    assert request["body"]["temperature"] == 0.25 and seen[0]["model"] == "test-model"


async def test_simple_reasoning_reaches_the_wire(api, start_llm):
    server = await start_llm([Reply(text="ok")])
    options = ai.StreamOptions(api_key="k", reasoning="medium", temperature=0.5)
    await run(api, server, options, simple=True, model=model_for(api, server, max_tokens=64000))
    body = server.requests[0]["body"]
    if api == "openai-responses":
        assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
        assert body["include"] == ["reasoning.encrypted_content"] and body["max_output_tokens"] == 32000
        assert body["input"][0] == {"role": "developer", "content": "You are terse."} and body["store"] is False
    elif api == "openai-completions":
        assert body["reasoning_effort"] == "medium" and body["max_completion_tokens"] == 32000
        assert body["messages"][0] == {"role": "developer", "content": "You are terse."}
        assert body["stream_options"] == {"include_usage": True} and body["store"] is False
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
        assert body["max_tokens"] == 40192 and "temperature" not in body
        assert "interleaved-thinking-2025-05-14" in server.requests[0]["headers"]["anthropic-beta"]


async def test_replaying_a_tool_turn_sends_the_results_back(api, start_llm):
    server = await start_llm([Reply(tool_calls=[ScriptToolCall(name="read", arguments={"path": "a"}),
                                                ScriptToolCall(name="read", arguments={"path": "b"})]),
                              Reply(text="done")])
    tools = [ai.Tool(name="read", description="Read a file", parameters={
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})]
    context = hello_context(tools=tools)
    first, _ = await run(api, server, context=context)
    assert first.stop_reason == "toolUse"
    context.messages.append(first)
    for call in first.content:
        context.messages.append(ai.ToolResultMessage(tool_call_id=call.id, tool_name=call.name,
                                                     content=[ai.TextContent(text=f"contents of {call.arguments['path']}")],
                                                     is_error=False, timestamp=2))
    second, _ = await run(api, server, context=context)
    assert second.stop_reason == "stop"
    if api == "openai-responses":
        items = server.requests[1]["body"]["input"]
        assert [i.get("type") or i["role"] for i in items] == [
            "developer", "user", "function_call", "function_call", "function_call_output", "function_call_output"]
        assert [i["call_id"] + "|" + i["id"] for i in items[2:4]] == [c.id for c in first.content]
        assert [i["call_id"] for i in items[4:]] == [c.id.split("|")[0] for c in first.content]
        assert items[3]["arguments"] == '{"path": "b"}' and items[5]["output"] == "contents of b"
        return
    messages = server.requests[1]["body"]["messages"]
    if api == "openai-completions":
        assert [m["role"] for m in messages] == ["developer", "user", "assistant", "tool", "tool"]
        assert [m["tool_call_id"] for m in messages[3:]] == [c.id for c in first.content]
        assert messages[2]["tool_calls"][1]["function"]["arguments"] == '{"path": "b"}'
    else:
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        results = messages[2]["content"]
        assert [r["tool_use_id"] for r in results] == [c.id for c in first.content]
        assert results[1]["content"] == "contents of b" and results[1]["is_error"] is False
        assert results[-1]["cache_control"] == {"type": "ephemeral"}


async def test_outgoing_text_loses_lone_surrogates(api, start_llm):
    server = await start_llm([Reply(text="ok")])
    context = ai.Context(messages=[ai.UserMessage(content="bad \ud83d half, good \U0001F600", timestamp=1)])
    result, _ = await run(api, server, context=context)
    assert result.stop_reason == "stop"
    body = server.requests[0]["body"]
    content = (body["input"] if api == "openai-responses" else body["messages"])[-1]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    assert text == "bad  half, good \U0001F600"


async def test_event_partial_is_not_serialised_across_the_wire(api, start_llm):
    server = await start_llm([Reply(text="abc")])
    _, rec = await run(api, server)
    for event in rec.events:
        plain = ai.to_plain(msgspec.structs.replace(event, partial=None)) if hasattr(event, "partial") else ai.to_plain(event)
        assert ai.event_from_plain(plain) is not None


class _RawRecordingLLM(ScriptedLLM):
    """The scripted server, also keeping each request's body bytes as they arrived."""

    def __init__(self, replies) -> None:
        super().__init__(replies)
        self.raw_bodies: list[bytes] = []
        self.peers: list[tuple] = []  # the client's address of each request's connection

    async def _respond(self, conn, stream, request, raw):
        self.raw_bodies.append(raw)
        self.peers.append(stream.socket.getpeername())
        return await super()._respond(conn, stream, request, raw)


def _long_context(api: str, turns: int) -> ai.Context:
    """Many turns of every block kind, with text that JSON must escape or keep as UTF-8."""
    provider = PROVIDER[api]
    messages: list = []
    for i in range(turns):
        messages.append(ai.UserMessage(content=[ai.TextContent(text=f"step {i}: héllo ☃ \"q\" \\ \n\t\x01"),
                                                ai.ImageContent(data="aGVsbG8=", mime_type="image/png")], timestamp=1))
        messages.append(ai.AssistantMessage(
            content=[ai.ThinkingContent(thinking=f"think {i}", thinking_signature="sig"),
                     ai.TextContent(text=f"reply {i} \U0001F600"),
                     ai.ToolCall(id=f"call_{i}", name="bash", arguments={"command": f"echo {i}", "n": 1.5, "deep": [{"a": None}]})],
            api=api, provider=provider, model="test-model", timestamp=1, stop_reason="toolUse", usage=ai.Usage()))
        messages.append(ai.ToolResultMessage(tool_call_id=f"call_{i}", tool_name="bash",
                                             content=[ai.TextContent(text=f"{i}\n" * 3)], is_error=i % 7 == 0, timestamp=1))
    messages.append(ai.UserMessage(content="and now?", timestamp=1))
    tools = [ai.Tool(name="bash", description="Run a command", parameters={
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})]
    return ai.Context(system_prompt="You are terse. ✓", messages=messages, tools=tools)


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"duplicate keys in the request body: {keys}"
    return dict(pairs)


@pytest.mark.parametrize("simple", [False, True])
async def test_a_long_context_reaches_the_server_exactly_as_built(api, nursery, simple):
    # The SDKs' request transform is bypassed (the body goes in extra_body); the server must
    # still receive exactly the payload the provider built: every message, nothing added,
    # no key twice, compact UTF-8 JSON.
    server = _RawRecordingLLM([Reply(text="ok")])
    await nursery.start(server.serve)
    built = []
    options = ai.StreamOptions(api_key="k", temperature=0.5, max_tokens=300, session_id="s1",
                               reasoning="high" if simple else None,
                               extra={"onPayload": lambda payload, model: built.append(payload)})
    result, _ = await run(api, server, options, context=_long_context(api, 60), simple=simple)
    assert result.stop_reason == "stop", result.error_message
    [raw] = server.raw_bodies
    received = json.loads(raw, object_pairs_hook=_no_duplicate_keys)
    assert received == json.loads(json.dumps(built[0]))
    assert raw == json.dumps(received, ensure_ascii=False, separators=(",", ":")).encode()
    bulk = received["input"] if api == "openai-responses" else received["messages"]
    assert len(bulk) > 3 * 60


async def test_inside_reuse_clients_calls_share_a_client_and_its_connection(api, nursery):
    from pi_actors.ai.providers import _common

    server = _RawRecordingLLM([Reply(text="one"), Reply(text="two"), Reply(text="three"), Reply(text="four")])
    await nursery.start(server.serve)
    for _ in range(2):  # without reuse: a client, and a connection, per call
        result, _ = await run(api, server)
        assert result.stop_reason == "stop"
    assert server.peers[0] != server.peers[1]
    async with _common.reuse_clients():
        for _ in range(2):
            result, _ = await run(api, server)
            assert result.stop_reason == "stop"
        [client] = _common._reused_clients.get().values()
        assert not client.is_closed()
    assert server.peers[2] == server.peers[3]
    assert client.is_closed()  # leaving the block closed it
    assert result.content[0].text == "four"


async def test_an_aborted_call_inside_reuse_clients_drops_its_connection_and_the_next_call_works(api, nursery):
    from pi_actors.ai.providers import _common

    server = _RawRecordingLLM([Reply(text="Hello there, world", chunks=3, hang_after_start=True), Reply(text="again")])
    await nursery.start(server.serve)
    signal = ai.AbortSignal()

    async def abort_on_first_delta(event):
        if tag(event) == "text_delta":
            signal.abort()

    async with _common.reuse_clients():
        first, _ = await run(api, server, ai.StreamOptions(api_key="k", signal=signal), on_event=abort_on_first_delta)
        assert first.stop_reason == "aborted"
        with trio.fail_after(10):
            await server.wait_hung_up(1)  # the half-read response's connection was closed
        second, _ = await run(api, server)
    assert second.stop_reason == "stop" and second.content[0].text == "again"
    assert server.peers[0] != server.peers[1]


async def test_toolcall_start_already_names_the_call_with_its_id_and_tool_name(api, start_llm):
    server = await start_llm([Reply(tool_calls=[ScriptToolCall(name="read", arguments={"path": "a.txt"}),
                                                ScriptToolCall(name="bash", arguments={"command": "ls"})])])
    seen: list[tuple[str, str]] = []

    async def on_event(event) -> None:
        if tag(event) == "toolcall_start":
            block = event.partial.content[event.content_index]
            seen.append((block.id, block.name))

    result, _ = await run(api, server, on_event=on_event)
    final = [(b.id, b.name) for b in result.content if isinstance(b, ai.ToolCall)]
    assert [name for _, name in seen] == ["read", "bash"]
    assert seen == final and all(call_id for call_id, _ in seen)
