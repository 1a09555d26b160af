"""The providers' own SSE decoder: events from raw bytes, split anywhere, any line ending."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.ai.providers._common import ProviderError
from pi_actors.ai.providers._sse import SSEDecoder, decode_json
from pi_actors.testing.wire_formats import Reply, ScriptToolCall, anthropic_frames, openai_frames, responses_frames


def decode_all(pieces: list[bytes]) -> list[tuple[str | None, bytes]]:
    decoder = SSEDecoder()
    out = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    return out + decoder.close()


def test_single_data_lines_named_events_comments_and_multiline_data():
    stream = (b": keep-alive comment\n\n"
              b"data: {\"a\": 1}\n\n"
              b"event: message_start\ndata: {\"b\": 2}\n\n"
              b"id: 7\nretry: 100\nevent: multi\ndata: line one\ndata: line two\n\n"
              b"event: empty\n\n"
              b"data:no-space\n\n")
    assert decode_all([stream]) == [(None, b'{"a": 1}'), ("message_start", b'{"b": 2}'),
                                    ("multi", b"line one\nline two"), (None, b"no-space")]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(ending):
    stream = ending.join([b"event: x", b"data: 1", b"", b"data: 2", b"", b""])
    assert decode_all([stream]) == [("x", b"1"), (None, b"2")]


def test_crlf_split_between_feeds():
    assert decode_all([b"data: 1\r", b"\n\r", b"\ndata: 2\r\n\r\n"]) == [(None, b"1"), (None, b"2")]


def test_close_keeps_a_complete_last_event_without_its_blank_line_and_drops_a_cut_line():
    assert decode_all([b"data: 1\n\ndata: [DONE]\n"]) == [(None, b"1"), (None, b"[DONE]")]
    assert decode_all([b"data: 1\n\ndata: {\"cut"]) == [(None, b"1")]
    assert decode_all([b"event: a\ndata: {}\n\nevent: b\ndata: {\"cu"]) == [("a", b"{}")]


_REPLY = Reply(thinking="hmm, let me see", text="Hello, wörld! \U0001F600 done", chunks=5,
               tool_calls=[ScriptToolCall(name="read", arguments={"path": "/tmp/ä b", "n": [1, 2]}, chunks=4)])


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([openai_frames, anthropic_frames, responses_frames]),
       st.lists(st.integers(min_value=0, max_value=4000), max_size=20))
def test_any_split_of_a_real_stream_gives_the_same_events(make_frames, cuts):
    frames = make_frames(_REPLY, "m")
    stream = b"".join(frames.content + frames.closing)
    whole = decode_all([stream])
    points = sorted({min(c, len(stream)) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert decode_all(pieces) == whole
    assert len(whole) == len(frames.content) + len(frames.closing)
    for _name, data in whole:
        if data != b"[DONE]":
            decode_json(data)


def test_malformed_json_says_so():
    with pytest.raises(ProviderError, match=r"^Malformed stream data \(not JSON\)"):
        decode_json(b'{"this is": not json')


def reference_events(stream: bytes) -> list[tuple[str | None, bytes]]:
    """The event-stream format read line by line, as the standard describes it (and what
    ``SSEDecoder.close`` adds: a last event complete but for its blank line)."""
    import re

    lines = re.split(rb"\r\n|\r|\n", stream)[:-1]  # the last piece has no line end: cut off
    events: list[tuple[str | None, bytes]] = []
    name: str | None = None
    data: list[bytes] = []
    for line in [*lines, b""]:
        if not line:
            if data:
                events.append((name, b"\n".join(data)))
            name, data = None, []
        elif line[:1] != b":":
            field, colon, value = line.partition(b":")
            value = value[1:] if colon and value[:1] == b" " else value
            if field == b"data":
                data.append(value)
            elif field == b"event":
                name = value.decode("utf-8", "replace")
    return events


_TOKENS = st.sampled_from([b"data: ", b"data:", b"data", b"event: e", b": c", b"id: 1", b"\n", b"\n\n", b"\r",
                           b"\r\n", b"{}", b'{"a": "\xc3\xa9"}', b"x", b" ", b"\xf0\x9f\x98", b"\x80"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_TOKENS, st.just(b"data: {\"k\": 1}\n\n")), max_size=40),
       st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_hostile_bytes_split_anywhere_decode_as_the_standard_says(tokens, cuts):
    stream = b"".join(tokens)
    points = sorted({min(c, len(stream)) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert decode_all(pieces) == reference_events(stream)
