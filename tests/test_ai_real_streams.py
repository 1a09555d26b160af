"""Streams shaped like real providers' (tests/real_stream_shapes.py), through the real SDKs and
the scripted server over real HTTP, each delivered three ways: the whole body in one write, one
SSE event per write, and 13-byte writes that split lines and UTF-8 characters.

The 12-event contract is checked generically on every run: ``start`` first; every block's
``*_start`` has its ``*_end``; a block's deltas concatenate to its final content; exactly one
``done`` or ``error``, last; the blocks, usage and stop reason are what the provider sent;
nothing is raised to the caller.
"""

from __future__ import annotations

import gc
import json
import sys
import types

import msgspec
import pytest
import real_stream_shapes as shapes
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from real_stream_shapes import COMPLETIONS, RESPONSES, Shape, all_shapes
from support.providers import model_for, run, tag

from pi_actors import ai
from pi_actors.testing import Reply, ScriptedLLM

DELIVERIES = ["batched", "event", "slices"]
SHAPES = all_shapes()
# Shapes whose fix is still to come: they must fail (strict), so the mark goes when it passes.
PENDING: set[str] = set()


def _params():
    for shape in SHAPES:
        marks = [pytest.mark.xfail(strict=True, reason=f"issue 21 item {shape.fixed_by}")] \
            if shape.fixed_by in PENDING else []
        for delivery in DELIVERIES:
            yield pytest.param(shape, delivery, id=f"{shape.name}-{delivery}", marks=marks)


def _block_content(block) -> str:
    if isinstance(block, ai.TextContent):
        return block.text
    if isinstance(block, ai.ThinkingContent):
        return block.thinking
    return block.name


def check_contract(shape: Shape, events: list, result: ai.AssistantMessage) -> None:
    types = [tag(e) for e in events]
    assert types[0] == "start", types
    assert types[-1] in ("done", "error") and types.count("done") + types.count("error") == 1, types
    final = events[-1]
    message = final.message if types[-1] == "done" else final.error
    assert message is result

    deltas: dict[int, list[str]] = {}
    ended: dict[int, object] = {}
    started: list[int] = []
    for e, kind in zip(events, types, strict=True):
        if kind in ("text_start", "thinking_start", "toolcall_start"):
            assert e.content_index not in started, f"{kind} twice for block {e.content_index}"
            started.append(e.content_index)
            deltas[e.content_index] = []
        elif kind.endswith("_delta"):
            assert e.content_index in started and e.content_index not in ended, f"{kind} outside its block"
            deltas[e.content_index].append(e.delta)
        elif kind in ("text_end", "thinking_end", "toolcall_end"):
            assert e.content_index in started and e.content_index not in ended, f"{kind} without its start"
            ended[e.content_index] = e
    if types[-1] == "done":
        assert sorted(ended) == sorted(started), "a block was started but never ended"
    for i, e in ended.items():
        block = result.content[i]
        joined = "".join(deltas[i])
        if tag(e) == "toolcall_end":
            assert json.loads(joined or "{}") == block.arguments == e.tool_call.arguments
        else:
            assert joined == e.content == _block_content(block), f"block {i}: deltas do not add up"

    assert result.stop_reason == shape.stop_reason, result.error_message
    if shape.error is not None:
        assert shape.error in (result.error_message or ""), result.error_message
        assert "\n" not in result.error_message.strip() or "Traceback" not in result.error_message
    else:
        assert [(b.type, _block_content(b)) for b in result.content] == shape.blocks
    for field, value in shape.usage.items():
        assert getattr(result.usage, field) == value, f"usage.{field}: {result.usage}"


@pytest.mark.parametrize("shape,delivery", list(_params()))
async def test_a_real_providers_stream_keeps_the_event_contract(start_llm, shape: Shape, delivery: str):
    server = await start_llm([Reply(raw_sse=shape.body, delivery=delivery)])
    result, rec = await run(shape.api, server)
    check_contract(shape, rec.events, result)


# --- one behaviour per test (the same shapes, delivered in 13-byte slices) ----------------------


async def run_shape(start_llm, shape: Shape) -> ai.AssistantMessage:
    server = await start_llm([Reply(raw_sse=shape.body, delivery="slices")])
    result, rec = await run(shape.api, server)
    check_contract(shape, rec.events, result)
    return result


async def test_mistral_thinking_and_text_parts_become_thinking_and_text_blocks(start_llm):
    result = await run_shape(start_llm, shapes.chat_content_parts())
    assert [b.type for b in result.content] == ["thinking", "text"] and result.usage.output == 40


async def test_reasoning_counted_inside_completion_tokens_is_not_billed_twice(start_llm):
    result = await run_shape(start_llm, shapes.chat_reasoning_inside_completion())
    assert result.usage.output == 219 and result.usage.total_tokens == 237
    assert result.usage.cost.output == pytest.approx(15 * 219 / 1e6)
    result = await run_shape(start_llm, shapes.chat_groq_reasoning_field())
    assert result.usage.output == 50


async def test_reasoning_counted_beside_completion_tokens_is_added(start_llm):
    result = await run_shape(start_llm, shapes.chat_reasoning_outside_completion())
    assert result.usage.output == 292 and result.usage.total_tokens == 304
    assert result.usage.cost.output == pytest.approx(15 * 292 / 1e6)


async def test_a_done_line_after_a_complete_responses_reply_is_not_an_error(start_llm):
    result = await run_shape(start_llm, shapes.responses_plain(done_trailer=True))
    assert result.stop_reason == "stop" and result.error_message is None


async def test_a_responses_error_nested_under_error_shows_the_providers_message(start_llm):
    result = await run_shape(start_llm, shapes.responses_error_nested())
    assert result.error_message == "Error Code insufficient_quota: You exceeded your current quota — check your plan."


async def test_responses_thinking_deltas_add_up_to_the_final_thinking_across_summary_parts(start_llm):
    result = await run_shape(start_llm, shapes.responses_reasoning_summary())
    assert result.content[0].thinking.count("\n\n") == 1
    assert json.loads(result.content[0].thinking_signature)["encrypted_content"] == "gAAAAenc=="


async def test_raw_reasoning_text_is_kept_as_thinking_and_ended_before_the_answer_starts(start_llm):
    server = await start_llm([Reply(raw_sse=shapes.responses_raw_reasoning_interleaved().body, delivery="event")])
    result, rec = await run(RESPONSES, server)
    check_contract(shapes.responses_raw_reasoning_interleaved(), rec.events, result)
    types = [tag(e) for e in rec.events]
    assert types.index("thinking_end") < types.index("text_start")
    signature = json.loads(result.content[0].thinking_signature)  # the late item done, kept for hand-off
    assert signature["id"] == "rs_or3" and signature["encrypted_content"] == "opaque-or3"


# --- a failure mid-stream leaves nothing behind ---------------------------------------------------

FAILURES = {
    "malformed": dict(malformed=True),
    "dropped": dict(truncate=True),
    "in-stream-error": dict(stream_error="Overloaded right now"),
    "emit-raises": dict(),
    "abort-while-reading": dict(hang_after_start=True),
}


@pytest.fixture
def unraisable(monkeypatch):
    """Whatever Python reports as 'Exception ignored in ...' (e.g. an SDK stream left open and
    finalized by the garbage collector), collected instead of printed."""
    seen: list = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(f"{u.err_msg}: {u.object!r}: {u.exc_value!r}"))
    return seen


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "anthropic-messages"])
async def test_a_failure_mid_stream_leaves_no_open_stream_for_the_garbage_collector(start_llm, unraisable, no_cyclic_gc,
                                                                                      api, failure):
    server = await start_llm([Reply(text="alpha beta gamma delta epsilon", chunks=5, **FAILURES[failure])] * 2)
    for _ in range(2):
        signal = ai.AbortSignal()

        async def on_event(event, signal=signal):
            if tag(event) == "text_delta" and failure == "emit-raises":
                raise RuntimeError("the listener broke")
            if tag(event) == "text_delta" and failure == "abort-while-reading":
                signal.abort()

        options = ai.StreamOptions(api_key="k", signal=signal)
        result, _rec = await run(api, server, options, on_event=on_event)
        assert result.stop_reason in ("error", "aborted")
        # Held only by the failure's traceback cycle, an unclosed body stream would wait for a
        # later garbage collection to be finalized (and complain there): none may be left open.
        # (A body generator dropped unfinished is closed by trio from a task of its own: those
        # run first. One held by a cycle stays open: cycles are not collected here.)
        await trio.testing.wait_all_tasks_blocked()
        assert _open_http_body_streams() == [], f"after a {failure} failure"
    gc.collect()
    await trio.testing.wait_all_tasks_blocked()
    gc.collect()
    assert unraisable == []


def _open_http_body_streams() -> list:
    """The async generators of httpx/httpcore (a response body being read) not yet closed."""
    return [g for g in gc.get_objects() if isinstance(g, types.AsyncGeneratorType) and g.ag_frame is not None
            and ("httpx" in g.ag_code.co_filename or "httpcore" in g.ag_code.co_filename)]


@pytest.fixture
def no_cyclic_gc():
    """Cycles are collected only when a test says so (as in a long-lived process, later)."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


# --- what the provider says about the response ------------------------------------------------------


@pytest.mark.parametrize("shape", [s for s in SHAPES if s.response_id], ids=lambda s: s.name)
async def test_the_assistant_message_carries_the_providers_response_id_and_answering_model(start_llm, shape):
    server = await start_llm([Reply(raw_sse=shape.body)])
    result, _rec = await run(shape.api, server)
    assert (result.response_id, result.response_model) == (shape.response_id, shape.response_model)
    wire = json.loads(msgspec.json.encode(result))
    assert wire["responseId"] == shape.response_id  # the name pi 0.73.1 writes in sessions
    assert msgspec.json.decode(msgspec.json.encode(result), type=ai.AssistantMessage) == result


async def test_a_message_without_a_response_id_encodes_as_before(start_llm):
    server = await start_llm([Reply(text="hi")])
    result, _rec = await run("anthropic-messages", server, model=model_for("anthropic-messages", server,
                                                                            id="scripted-model"))
    assert "responseModel" not in json.loads(msgspec.json.encode(result))
    old = {k: v for k, v in json.loads(msgspec.json.encode(result)).items() if k not in ("responseId",)}
    assert msgspec.json.decode(json.dumps(old), type=ai.AssistantMessage).response_id is None


async def test_responses_signatures_are_written_as_compact_json(start_llm):
    result = await run_shape(start_llm, shapes.responses_reasoning_summary())
    for signature in (result.content[0].thinking_signature, result.content[1].text_signature):
        assert ", " not in signature and '": ' not in signature
        assert json.dumps(json.loads(signature), ensure_ascii=False, separators=(",", ":")) == signature


# --- hostile stream content ---------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                     max_leaves=8)
_part = st.fixed_dictionaries({"type": st.sampled_from(["text", "thinking", "image_url", "reference", 7])},
                              optional={"text": _json, "thinking": _json | st.lists(
                                  st.fixed_dictionaries({"type": st.just("text"), "text": _json}), max_size=3)})
_content = st.none() | st.text(max_size=10) | st.lists(_part | _json, max_size=4) | _json
_usage = st.fixed_dictionaries({}, optional={k: st.integers(0, 10**6) | _json for k in
                                             ("prompt_tokens", "completion_tokens", "total_tokens")})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents=st.lists(_content, min_size=1, max_size=5), usage=_usage)
def test_hostile_chat_content_ends_in_done_or_one_clear_error_never_a_raise(contents, usage):
    body = "".join(f"data: {json.dumps({'id': 'h', 'model': 'm', 'choices': [{'index': 0, 'delta': {'content': c}}]})}\n\n"
                   for c in contents)
    body += f"data: {json.dumps({'id': 'h', 'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}], 'usage': usage})}\n\n"

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            server = ScriptedLLM([Reply(raw_sse=body, delivery="slices")])
            await nursery.start(server.serve)
            result, rec = await run(COMPLETIONS, server)
            nursery.cancel_scope.cancel()
        types = [tag(e) for e in rec.events]
        assert types[-1] in ("done", "error") and types.count("done") + types.count("error") == 1
        if result.stop_reason == "error":
            assert result.error_message and "\n" not in result.error_message.strip()
            assert result.error_message.startswith("Malformed stream data:"), result.error_message
        else:
            assert all(isinstance(getattr(result.usage, f), int) for f in ("input", "output", "total_tokens"))

    trio.run(main)
