"""A long run of text events that differ only in their text is read without decoding each one
(``_text_shape``), and reads exactly as decoding each one would, whatever the events hold.

The streams are a real reply's frames for each API (openai-completions, anthropic-messages,
openai-responses), with the text delta frame repeated many times with other texts put
between its bytes as they are, valid or not: plain text of any script, JSON escapes (a quote,
a backslash, ``\\n``, ``\\u`` escapes, a lone surrogate), raw control characters, NUL, bytes
that are not UTF-8 (a sequence cut in two across two events, overlong forms, surrogates,
past U+10FFFF), text that holds a quote and so changes the JSON around it, text that holds
a whole event boundary; and look-alike events that differ from the repeated one elsewhere
(another id, a finish reason, an event line, a comment, data on two lines). Cut into reads
anywhere, the mapper with runs joined must give the same final message (or error) and the
same events, joined per block, as the whole body read event by event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ai_text_runs import APIS, check_same

from pi_actors import ai
from pi_actors.ai import types as T
from pi_actors.ai.providers._common import StreamRun, run_stream
from pi_actors.ai.providers._stream import sse_reader
from pi_actors.testing import Reply

_MARK = b"QQQQ"


def _template(api: str) -> tuple[list[bytes], bytes, bytes, list[bytes]]:
    """(frames before the text delta, its bytes before the text, after it, frames after)."""
    frames = APIS[api][1](Reply(text=_MARK.decode(), chunks=1), "m")
    content = list(frames.content)
    at = next(i for i, f in enumerate(content) if _MARK in f and b"delta" in f)
    before, after = content[at].split(_MARK, 1)
    return content[:at], before, after, content[at + 1:] + list(frames.closing)


#: Texts put between the delta frame's bytes as they are.
HOSTILE = st.sampled_from([
    b"", b"plain ", "\u00e9t\u00e9 \U0001F600 \u4e2d".encode(), b'a\\"b', b"\\\\", b"\\n", b"\\u00e9", b"\\ud800",
    b"\\ud83d\\ude00", b"\x01", b"\x1f", b"\x7f", b"\x00", b"\xff", b"\xc3", b"\xa9", b"\xe2\x82", b"\xc0\x80",
    b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\n", b"\r", b"\t", b'"', b'a", "role": "x',
    b'a", "content": "b', b'x"}}]}\n\ndata: {"choices": [{"delta": {"content": "y', b"a\n\ndata: b",
    b'"}, "finish_reason": "stop"}]}\n\ndata: {"id": "c2", "choices": [{"delta": {"content": "z',
])
TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6).map(
    lambda t: t.replace("\\", "/").replace('"', "'").encode())


@st.composite
def shaped_streams(draw: st.DrawFn, api: str) -> bytes:
    opening, before, after, closing = _template(api)
    events: list[bytes] = []
    for _ in range(draw(st.integers(1, 120))):
        kind = draw(st.integers(0, 9))
        text = draw(HOSTILE) if kind == 0 else draw(TEXTS)
        event = before + text + after
        if kind == 1:  # a look-alike: the same event, changed somewhere else
            event = draw(st.sampled_from([
                event.replace(b'"m"', b'"m2"', 1), event.replace(b"null", b'"stop"', 1),
                event.replace(b": ", b":", 1), b": comment\n" + event, event.replace(b"data: ", b"data:", 1),
                event.replace(b"data: {", b"data: {\ndata: ", 1), event.replace(b"\n\n", b"\n\n\n", 1),
                event.replace(b"event: ", b"event:", 1), b"event: other\n" + event if b"event:" not in event else event,
            ]))
        events.append(event)
    body = b"".join(opening + events + closing)
    return body.replace(b"\n", b"\r\n") if draw(st.integers(0, 9)) == 0 else body


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_runs_of_same_shaped_events_with_hostile_texts_read_as_event_by_event(data):
    api = data.draw(st.sampled_from(sorted(APIS)))
    body = data.draw(shaped_streams(api))
    points = data.draw(st.lists(st.integers(0, len(body)), max_size=6))
    live = data.draw(st.booleans())
    trio.run(check_same, api, body, points, live)


class _Counting:
    """A mapper's ``TextRuns`` that counts the events its ``plain`` decodes."""

    def __init__(self, mapper: Any) -> None:
        self.mapper, self.calls = mapper, 0

    def plain(self, name: str | None, data: bytes) -> Any:
        self.calls += 1
        return self.mapper.plain(name, data)

    async def apply(self, key: Any, text: str) -> None:
        await self.mapper.apply(key, text)


async def test_a_long_uniform_reply_is_not_decoded_event_by_event():
    """4,000 text events in 64 KiB reads: only the first read's events (and a probe) are
    decoded one by one, the rest are found by their shape; the message is all there."""
    text = "".join(f"w{n} " for n in range(4000))
    for api in sorted(APIS):
        opening, before, after, closing = _template(api)
        closing = [f.replace(_MARK, text.encode()) for f in closing]  # a final text, if the API sends one
        body = b"".join(opening + [before + f"w{n} ".encode() + after for n in range(4000)] + closing)
        counting: list[_Counting] = []

        async def reader(run: StreamRun, body: bytes = body, api: str = api,
                         counting: list[_Counting] = counting) -> None:
            await run.start()
            mapper, finish = APIS[api][0](run)
            counting.append(_Counting(mapper))

            async def chunks() -> AsyncIterator[bytes]:
                for i in range(0, len(body), 65536):
                    yield body[i:i + 65536]

            await sse_reader(run, mapper.sse, finish, counting[0])(chunks())

        final = await _run(api, reader)
        assert text in [getattr(b, "text", None) for b in final.content], api
        first_read = body[:65536].count(b"\n\n")
        assert counting[0].calls <= first_read + 10, (api, counting[0].calls, first_read)


async def _run(api: str, body: Any) -> T.AssistantMessage:
    async def emit(event: Any) -> None:
        pass

    model = T.Model(id="m", name="m", api=api, provider="p", base_url="http://127.0.0.1:9")
    final = await run_stream(model, ai.StreamOptions(api_key="k"), emit, body)
    assert final.stop_reason == "stop", final.error_message
    return final
