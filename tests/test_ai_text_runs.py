"""A run of plain text deltas read at once is applied as one (``_sse.TextRuns``): the event
stream keeps its meaning however the bytes were split into reads.

The mappers of openai-completions, anthropic-messages and openai-responses are driven
in-process over a body cut into reads (the parser's input, no HTTP), once event by event (the
path every other event takes) and once with the runs joined, and the two must agree: the same
final message, the same events in the same order once consecutive deltas of one block are
joined, each block's deltas adding up to its content; and, with runs, no more events. Streams
are the scripted server's frames with odd and hostile events put in anywhere, cut at any
byte (inside a ``data:`` line, a UTF-8 sequence, a ``\\r\\n``). The end-to-end check (real SDK,
real HTTP) is that a long reply sent in one write arrives as a few deltas, complete.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from support.providers import run, tag

from pi_actors import ai
from pi_actors.ai import types as T
from pi_actors.ai.providers import anthropic_messages, openai_completions, openai_responses
from pi_actors.ai.providers._common import StreamRun, run_stream
from pi_actors.ai.providers._stream import sse_reader
from pi_actors.testing import Reply, ScriptToolCall
from pi_actors.testing.wire_formats import anthropic_frames, openai_frames, responses_frames


def _completions(run: StreamRun) -> tuple[Any, Callable[[], Any]]:
    mapper = openai_completions._Mapper(run)
    return mapper, mapper.finish


def _anthropic(run: StreamRun) -> tuple[Any, Callable[[], Any]]:
    mapper = anthropic_messages._Mapper(run, T.Context(messages=[]), False)
    return mapper, mapper.check_stopped


def _responses(run: StreamRun) -> tuple[Any, Callable[[], Any]]:
    mapper = openai_responses._Mapper(run, None)
    return mapper, mapper.check_completed


APIS = {
    "openai-completions": (_completions, openai_frames),
    "anthropic-messages": (_anthropic, anthropic_frames),
    "openai-responses": (_responses, responses_frames),
}


async def feed(api: str, reads: list[bytes], *, runs: bool, live: bool) -> tuple[list[Any], T.AssistantMessage]:
    """The mapper of ``api`` over a body arriving as ``reads``: (events, final message)."""
    make = APIS[api][0]
    events: list[Any] = []

    async def emit(event: Any) -> None:
        events.append(event)

    async def body(run: StreamRun) -> None:
        await run.start()
        mapper, finish = make(run)

        async def chunks() -> AsyncIterator[bytes]:
            for piece in reads:
                yield piece

        await sse_reader(run, mapper.sse, finish, mapper if runs else None)(chunks())

    options = ai.StreamOptions(api_key="k")
    options.live_partial = live
    model = T.Model(id="m", name="m", api=api, provider="p", base_url="http://127.0.0.1:9")
    final = await run_stream(model, options, emit, body)
    return events, final


def joined(events: list[Any]) -> list[tuple[Any, ...]]:
    """The events as (kind, block, payload), consecutive deltas of one block joined."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        kind = tag(e)
        if kind.endswith("_delta"):
            if out and out[-1][0] == kind and out[-1][1] == e.content_index:
                out[-1] = (kind, e.content_index, out[-1][2] + e.delta)
            else:
                out.append((kind, e.content_index, e.delta))
        elif kind in ("text_end", "thinking_end"):
            out.append((kind, e.content_index, e.content))
        elif kind == "toolcall_end":
            out.append((kind, e.content_index, json.dumps(T.to_plain(e.tool_call), sort_keys=True)))
        elif kind in ("done", "error"):
            message = T.to_plain(e.message if kind == "done" else e.error)
            message.pop("timestamp", None)
            out.append((kind, None, json.dumps(message, sort_keys=True)))
        else:
            out.append((kind, getattr(e, "content_index", None), None))
    return out


def plain(message: T.AssistantMessage) -> dict[str, Any]:
    data = T.to_plain(message)
    data.pop("timestamp", None)
    return data


def cut(body: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({min(p, len(body)) for p in points})
    return [body[a:b] for a, b in zip([0, *marks], [*marks, len(body)], strict=True) if b > a]


async def check_same(api: str, body: bytes, points: list[int], live: bool) -> tuple[list[Any], list[Any]]:
    """Runs joined over ``body`` cut at ``points`` == event by event over the whole body."""
    reference, ref_final = await feed(api, [body], runs=False, live=live)
    events, final = await feed(api, cut(body, points), runs=True, live=live)
    assert plain(final) == plain(ref_final)
    assert joined(events) == joined(reference)
    assert len(events) <= len(reference)
    return events, reference


# --- the streams ---------------------------------------------------------------------------------

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def _chunk(delta: Any, **extra: Any) -> bytes:
    return _sse({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, **extra}]})


#: Events the scripted frames never hold, put anywhere in an openai-completions stream: plain
#: text in other dresses, text beside something else, no-ops, and data that is wrong.
COMPLETIONS_ODD = st.one_of(
    _TEXT.map(lambda t: _chunk({"content": t, "role": "assistant", "refusal": None}, logprobs=None)),
    _TEXT.map(lambda t: _sse({"choices": [{"delta": {"content": t}}], "usage": None, "obfuscation": "x"})),
    _TEXT.map(lambda t: _chunk({"content": t, "reasoning_content": "why "})),
    _TEXT.map(lambda t: _chunk({"content": [{"type": "text", "text": t}, {"type": "thinking", "thinking": "hm"}]})),
    _TEXT.map(lambda t: _chunk({"reasoning": t})),
    _TEXT.map(lambda t: _chunk({"tool_calls": [{"index": 3, "id": "t3", "function": {"name": "read", "arguments": t}}]})),
    _TEXT.map(lambda t: _sse({"choices": [{"delta": {"content": t}, "usage": {"prompt_tokens": 2}}]})),
    _TEXT.map(lambda t: b'data: {"choices":[{"delta":{"content":"dup","content":' + json.dumps(t).encode() + b"}}]}\n\n"),
    _TEXT.map(lambda t: b"data: {\"choices\":\ndata: [{\"delta\":{\"content\":" + json.dumps(t).encode() + b"}}]}\n\n"),
    st.sampled_from([
        _sse({"choices": []}), _sse({"choices": [{"delta": {}}]}), _sse({"choices": [{"delta": None}]}),
        _chunk({"content": ""}), _chunk({"content": None}), b": keep-alive\n\n", b"event: ping\ndata: {}\n\n",
        _chunk({"content": "\\\"\u00e9\U0001F600\n"}),
        _chunk({"content": 7}), _chunk({"content": "x"}, finish_reason="bogus"), _sse([1, 2]), _sse("text"),
        _sse({"choices": "x"}), _sse({"choices": [{"delta": "x"}]}), _sse({"error": {"message": "boom"}}),
        b"data: not json\n\n", b'data: {"choices":[{"delta":{"content":"\xff"}}]}\n\n',
        b'data: {"choices":[{"delta":{"content":"\\ud800"}}]}\n\n', b'data: {"choices":[{"delta":{"content":"a"}}]}x\n\n',
    ]),
)

ANTHROPIC_ODD = st.one_of(
    _TEXT.map(lambda t: _sse({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": t}})),
    _TEXT.map(lambda t: _sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})),
    _TEXT.map(lambda t: b"event: content_block_delta\n" + _sse({"index": 1, "delta": {"type": "text_delta", "text": t}})),
    _TEXT.map(lambda t: _sse({"type": "content_block_delta", "index": 2, "delta": {"type": "thinking_delta", "thinking": t}})),
    st.sampled_from([
        _sse({"type": "ping"}), _sse({"type": "content_block_delta", "index": 9, "delta": {"type": "text_delta", "text": "x"}}),
        _sse({"type": "content_block_delta", "index": True, "delta": {"type": "text_delta", "text": "b"}}),
        _sse({"type": "content_block_delta", "index": 1.0, "delta": {"type": "text_delta", "text": "f"}}),
        _sse({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta"}}),
        _sse({"type": "content_block_delta", "index": 1, "delta": "x"}), _sse({"type": "content_block_delta", "index": [1]}),
        _sse({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": 5}}),
        _sse({"type": "error", "error": {"message": "overloaded"}}), b"data: not json\n\n", _sse([1]),
    ]),
)

RESPONSES_ODD = st.one_of(
    _TEXT.map(lambda t: _sse({"type": "response.output_text.delta", "delta": t})),
    _TEXT.map(lambda t: _sse({"type": "response.refusal.delta", "delta": t, "item_id": "x"})),
    _TEXT.map(lambda t: b"event: response.output_text.delta\n" + _sse({"delta": t})),
    _TEXT.map(lambda t: _sse({"type": "response.reasoning_summary_text.delta", "delta": t})),
    st.sampled_from([
        _sse({"type": "response.output_text.delta"}), _sse({"type": "response.output_text.delta", "delta": 5}),
        _sse({"type": "response.output_text.delta", "delta": None}), _sse({"type": "something.else"}),
        b"data: [DONE]\n\n", b"data: not json\n\n", _sse({"type": "error", "code": "x", "message": "bad"}),
    ]),
)

ODD = {"openai-completions": COMPLETIONS_ODD, "anthropic-messages": ANTHROPIC_ODD, "openai-responses": RESPONSES_ODD}


@st.composite
def streams(draw: st.DrawFn, api: str) -> bytes:
    """A reply's frames (thinking?, text, tool call?) with odd events put in anywhere before
    the closing ones, line endings sometimes ``\\r\\n``."""
    text = draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=60))
    reply = Reply(text=text, chunks=draw(st.integers(1, 30)),
                  thinking=draw(st.none() | st.just("thinking it over")),
                  tool_calls=draw(st.sampled_from([[], [ScriptToolCall(name="read", arguments={"path": "ä"}, chunks=3)]])))
    frames = APIS[api][1](reply, "m")
    content = list(frames.content)
    for odd in draw(st.lists(ODD[api], max_size=4)):
        content.insert(draw(st.integers(0, len(content))), odd)
    body = b"".join(content + frames.closing)
    return body.replace(b"\n", b"\r\n") if draw(st.booleans()) else body


_POINTS = st.lists(st.integers(0, 20_000), max_size=25)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_any_split_into_reads_gives_the_message_and_events_of_delta_by_delta(data):
    api = data.draw(st.sampled_from(sorted(APIS)))
    body = data.draw(streams(api))
    points = data.draw(_POINTS | st.just(list(range(1, 20_000, 7))))
    live = data.draw(st.booleans())
    trio.run(check_same, api, body, points, live)


async def test_a_run_broken_by_reasoning_and_tool_calls_keeps_its_order():
    body = b"".join([
        _chunk({"role": "assistant", "content": ""}), _chunk({"content": "ab"}), _chunk({"content": "cd"}),
        _chunk({"reasoning_content": "hm"}), _chunk({"content": "ef"}), _chunk({"content": "gh"}),
        _chunk({"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "read", "arguments": "{}"}}]}),
        _chunk({"content": "ij"}), _chunk({}, finish_reason="tool_calls"), b"data: [DONE]\n\n",
    ])
    events, reference = await check_same("openai-completions", body, [], live=False)
    assert [(tag(e), e.content_index, e.delta) for e in events if tag(e).endswith("_delta")] == [
        ("text_delta", 0, "abcd"), ("thinking_delta", 1, "hm"), ("text_delta", 2, "efgh"),
        ("toolcall_delta", 3, "{}"), ("text_delta", 4, "ij")]
    assert len(reference) == len(events) + 2  # delta by delta: abcd and efgh were two each


async def test_a_run_ends_with_its_read():
    frames = anthropic_frames(Reply(text="aaaabbbbccccdddd", chunks=4), "m")
    body = b"".join(frames.content + frames.closing)
    middle = body.index(b'"cccc"') + 3  # the first read ends inside the third delta's data line
    events, _ = await feed("anthropic-messages", [body[:middle], body[middle:]], runs=True, live=True)
    assert [e.delta for e in events if tag(e) == "text_delta"] == ["aaaabbbb", "ccccdddd"]
    assert events[-1].message.content[0].text == "aaaabbbbccccdddd"


async def test_an_abort_during_a_run_keeps_the_text_applied_so_far():
    signal = ai.AbortSignal()
    frames = openai_frames(Reply(text="a b c d e f", chunks=6, thinking="hmm"), "m")
    body = b"".join(frames.content + frames.closing)
    seen: list[str] = []

    async def emit(event: Any) -> None:
        if tag(event) == "text_delta":
            seen.append(event.delta)
            signal.abort()

    async def body_reader(run: StreamRun) -> None:
        mapper = openai_completions._Mapper(run)

        async def chunks() -> AsyncIterator[bytes]:
            yield body

        await sse_reader(run, mapper.sse, mapper.finish, mapper)(chunks())

    model = T.Model(id="m", name="m", api="openai-completions", provider="p", base_url="http://127.0.0.1:9")
    final = await run_stream(model, ai.StreamOptions(api_key="k", signal=signal), emit, body_reader)
    assert seen == ["a b c d e f"]  # the run, as one delta; nothing after the abort
    assert final.stop_reason == "aborted" and final.content[1].text == "a b c d e f"


async def test_a_long_reply_sent_at_once_arrives_as_a_few_deltas_with_all_its_text(start_llm):
    text = "".join(f"w{n} " for n in range(2000))
    for api in APIS:
        server = await start_llm([Reply(text=text, chunks=2000)])
        result, rec = await run(api, server)
        rec.check()
        deltas = [e.delta for e in rec.events if tag(e) == "text_delta"]
        assert result.content[0].text == text == "".join(deltas)
        assert 1 <= len(deltas) < 1000, (api, len(deltas))  # delta by delta: 2000


async def test_a_text_delta_that_is_not_a_string_ends_the_reply_in_an_error():
    """A number where the text goes is an error event, live or lazy (lazy, it used to raise
    out of the stream when the lagging pieces were joined)."""
    odd = {"openai-responses": _sse({"type": "response.output_text.delta", "delta": 5}),
           "anthropic-messages": _sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}})}
    for api, event in odd.items():
        frames = APIS[api][1](Reply(text="ab", chunks=2), "m")
        content = list(frames.content)
        first = next(i for i, f in enumerate(content) if b'"a"' in f)
        body = b"".join([*content[:first + 1], event, *content[first + 1:], *frames.closing])
        for live in (False, True):
            _, final = await feed(api, [body], runs=True, live=live)
            assert final.stop_reason == "error", (api, live)
            assert "expected a string" in (final.error_message or ""), (api, live, final.error_message)
