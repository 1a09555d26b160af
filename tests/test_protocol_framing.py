"""Length-prefixed framing: splitting a byte stream into payloads, and its limits."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.runtime.protocol import (
    DEFAULT_MAX_FRAME,
    FrameDecoder,
    LocalProtocolError,
    RemoteProtocolError,
    encode_frame,
)


def frames_of(decoder: FrameDecoder) -> list[bytes]:
    out = []
    while (frame := decoder.next_frame()) is not None:
        out.append(frame)
    return out


def test_a_frame_is_a_big_endian_length_then_the_payload():
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"


def test_the_default_limit_is_16_mib():
    assert DEFAULT_MAX_FRAME == 16 * 1024 * 1024
    assert FrameDecoder().max_frame == DEFAULT_MAX_FRAME


def test_frames_come_out_whole_whatever_the_chunking():
    stream = encode_frame(b"first") + encode_frame(b"") + encode_frame(b"x" * 300)
    for size in (1, 2, 3, 5, 7, 64, len(stream)):
        decoder = FrameDecoder()
        got = []
        for i in range(0, len(stream), size):
            decoder.feed(stream[i : i + size])
            got += frames_of(decoder)
        assert got == [b"first", b"", b"x" * 300], size
        assert decoder.at_boundary


def test_at_boundary_is_false_while_a_frame_is_partial():
    decoder = FrameDecoder()
    assert decoder.at_boundary
    decoder.feed(b"\x00\x00")
    assert not decoder.at_boundary
    decoder.feed(b"\x00\x02a")
    assert not decoder.at_boundary and decoder.next_frame() is None
    decoder.feed(b"b")
    assert decoder.at_boundary
    assert decoder.next_frame() == b"ab"


def test_a_frame_of_exactly_the_limit_is_accepted():
    decoder = FrameDecoder(max_frame=10)
    decoder.feed(encode_frame(b"0123456789"))
    assert decoder.next_frame() == b"0123456789"


def test_an_oversize_header_is_refused_before_any_payload_arrives():
    decoder = FrameDecoder(max_frame=10)
    decoder.feed(struct.pack(">I", 11))  # only the header
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_frame()
    assert info.value.code == "invalid_request"
    assert "11 bytes" in info.value.message and "limit of 10 bytes" in info.value.message
    assert decoder.buffered == 0


def test_a_4_gib_header_is_refused_at_the_default_limit():
    decoder = FrameDecoder()
    decoder.feed(b"\xff\xff\xff\xff")
    with pytest.raises(RemoteProtocolError, match="4294967295 bytes"):
        decoder.next_frame()


def test_frames_before_an_oversize_header_are_still_delivered_then_the_error_sticks():
    decoder = FrameDecoder(max_frame=4)
    decoder.feed(encode_frame(b"ok") + struct.pack(">I", 5) + b"12345" + encode_frame(b"late"))
    assert decoder.next_frame() == b"ok"
    for _ in range(2):
        with pytest.raises(RemoteProtocolError):
            decoder.next_frame()
    decoder.feed(encode_frame(b"more"))  # discarded
    with pytest.raises(RemoteProtocolError):
        decoder.next_frame()


@pytest.mark.parametrize(
    ("tail", "expected"),
    [(b"\x00", "1 of the 4 header bytes"), (b"\x00\x00\x00\x05ab", "2 of the 5 payload bytes")],
)
def test_a_partial_frame_at_end_of_stream_is_a_truncated_frame(tail, expected):
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"whole") + tail)
    assert frames_of(decoder) == [b"whole"]
    with pytest.raises(RemoteProtocolError, match="truncated frame") as info:
        decoder.check_end()
    assert expected in info.value.message


def test_end_of_stream_at_a_boundary_is_clean():
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"x"))
    assert frames_of(decoder) == [b"x"]
    decoder.check_end()


def test_payloads_do_not_alias_the_fed_buffer():
    chunk = bytearray(encode_frame(b"abc"))
    decoder = FrameDecoder()
    decoder.feed(chunk)
    chunk[4:7] = b"xyz"
    assert decoder.next_frame() == b"abc"


def test_payloads_over_4_gib_cannot_be_framed():
    class Huge(bytes):
        def __len__(self):
            return 2**32

    with pytest.raises(LocalProtocolError, match="cannot be framed"):
        encode_frame(Huge())


def test_max_frame_must_fit_the_header():
    with pytest.raises(ValueError):
        FrameDecoder(max_frame=2**32)


@settings(max_examples=300, deadline=None)
@given(
    max_frame=st.integers(0, 40),
    chunks=st.lists(st.binary(max_size=60), max_size=12),
)
def test_arbitrary_bytes_never_raise_anything_else_nor_buffer_past_the_limit(max_frame, chunks):
    decoder = FrameDecoder(max_frame=max_frame)
    for chunk in chunks:
        decoder.feed(chunk)
        assert decoder.buffered <= max_frame + 4
        try:
            for frame in frames_of(decoder):
                assert len(frame) <= max_frame
        except RemoteProtocolError as exc:
            assert exc.code == "invalid_request"
    try:
        frames_of(decoder)
        decoder.check_end()
    except RemoteProtocolError as exc:
        assert exc.code == "invalid_request"


@settings(max_examples=300, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=40), max_size=8),
    cuts=st.lists(st.integers(0, 400), max_size=10),
)
def test_any_split_of_a_frame_stream_yields_the_same_payloads(payloads, cuts):
    stream = b"".join(encode_frame(p) for p in payloads)
    decoder = FrameDecoder(max_frame=40)
    got = []
    last = 0
    for cut in sorted({c for c in cuts if c <= len(stream)} | {len(stream)}):
        decoder.feed(stream[last:cut])
        last = cut
        got += frames_of(decoder)
    assert got == payloads
    decoder.check_end()
