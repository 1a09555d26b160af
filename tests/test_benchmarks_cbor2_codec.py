"""The cbor2-based strict codec (benchmarks/cbor2_codec.py), the codec micro-benchmark's
baseline, does the same work as the runtime's codec: the golden vectors byte for byte, every
tag refused, and the same verdict as the runtime's codec on any input, hostile or not."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

import cbor2
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_actors.runtime.protocol import (
    Call,
    Cancel,
    Chunk,
    ErrorInfo,
    Hello,
    HelloError,
    HelloOk,
    RemoteProtocolError,
    Result,
    decode_message,
    encode_message,
)

ROOT = Path(__file__).resolve().parent.parent
VECTORS = json.loads((ROOT / "proto" / "vectors" / "vectors.json").read_text(encoding="utf-8"))
_spec = importlib.util.spec_from_file_location("cbor2_codec", ROOT / "benchmarks" / "cbor2_codec.py")
assert _spec is not None and _spec.loader is not None
strict_cbor2 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(strict_cbor2)
CHUNK_ENTRIES = encode_message(Chunk(id=1, seq=0))[1:]  # type, id, seq: wrap items as `data`

json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.binary(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=25,
)
uints = st.integers(min_value=0, max_value=2**64 - 1)
messages = st.one_of(
    st.builds(Hello, protocol=st.text(), min_version=uints, max_version=uints, role=st.text(),
              name=st.text(), codecs=st.lists(st.text(), max_size=3)),
    st.builds(HelloOk, version=uints, role=st.text(), name=st.text(), codec=st.text()),
    st.builds(HelloError, code=st.text(), message=st.text(),
              supported=st.none() | st.lists(uints, min_size=2, max_size=2)),
    st.builds(Call, id=uints, method=st.text(), args=json_like, target=st.text()),
    st.builds(Chunk, id=uints, seq=uints, data=json_like),
    st.builds(Result, id=uints, ok=st.just(True), value=json_like),
    st.builds(Result, id=uints, ok=st.just(False), error=st.builds(ErrorInfo, code=st.text(), message=st.text())),
    st.builds(Cancel, id=uints),
)


def payload_of(frame_hex: str) -> bytes:
    frame = bytes.fromhex(frame_hex)
    return frame[4 : 4 + struct.unpack(">I", frame[:4])[0]]


def verdict(decode, payload: bytes) -> object:
    """What ``decode`` makes of ``payload``: the message as a tree, or "refused"."""
    try:
        return msgspec.to_builtins(decode(payload), builtin_types=(bytes,))
    except RemoteProtocolError as exc:
        assert exc.code == "invalid_request"
        return "refused"


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=[v["name"] for v in VECTORS["valid"]])
def test_the_baseline_reads_and_writes_the_valid_vectors_byte_for_byte(vector):
    payload = payload_of(vector["frame"])
    msg = strict_cbor2.decode_message(payload)
    assert msg == decode_message(payload)
    assert strict_cbor2.encode_message(msg) == payload


@pytest.mark.parametrize("vector", VECTORS["accepted"], ids=[v["name"] for v in VECTORS["accepted"]])
def test_the_baseline_accepts_the_accepted_vectors(vector):
    payload = payload_of(vector["frame"])
    assert strict_cbor2.decode_message(payload) == decode_message(payload)


PAYLOAD_INVALID = [v for v in VECTORS["invalid"] if v["name"] not in ("frame-too-large", "truncated-frame")]


@pytest.mark.parametrize("vector", PAYLOAD_INVALID, ids=[v["name"] for v in PAYLOAD_INVALID])
def test_the_baseline_refuses_the_invalid_vectors(vector):
    assert verdict(strict_cbor2.decode_message, payload_of(vector["frame"])) == "refused"


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_every_tag_number_is_refused_even_those_cbor2_decodes_itself(tag):
    head = cbor2.dumps(tag)
    tagged = bytes([0xC0 | head[0] & 31]) + head[1:] + b"\x00"
    payload = b"\xa4" + CHUNK_ENTRIES + b"\x64data" + tagged
    with pytest.raises(RemoteProtocolError, match=f"found tag {tag}"):
        strict_cbor2.decode_message(payload)
    # ... by cbor2 itself, before it builds anything from the tag (a datetime, a regex, a
    # bignum, a shared reference), not only by the checks that run after it.
    with pytest.raises(cbor2.CBORDecodeError, match="semantic tag"):
        cbor2.loads(payload, **strict_cbor2._STRICT)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_the_baseline_writes_what_the_runtime_codec_writes(msg):
    assert strict_cbor2.encode_message(msg) == encode_message(msg)


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(messages, st.data())
def test_on_corrupted_messages_the_baseline_agrees_with_the_runtime_codec(msg, data):
    encoded = bytearray(encode_message(msg))
    for _ in range(data.draw(st.integers(1, 3))):
        encoded[data.draw(st.integers(0, len(encoded) - 1))] = data.draw(st.integers(0, 255))
    payload = bytes(encoded[: data.draw(st.integers(0, len(encoded)))])
    assert verdict(strict_cbor2.decode_message, payload) == verdict(decode_message, payload)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_on_arbitrary_bytes_the_baseline_agrees_with_the_runtime_codec(payload):
    assert verdict(strict_cbor2.decode_message, payload) == verdict(decode_message, payload)


@pytest.mark.parametrize(
    "item",
    [b"\xf9\x7e\x00", b"\xf9\x3c\x00", b"\xfa\x3f\xc0\x00\x00", b"\xfb\x7f\xf8" + bytes(6), b"\xf7", b"\xf0",
     b"\xa1\x41a\x01", b"\x9f\x01\xff", b"\x1b" + bytes(7) + b"\x07"],
    ids=["float16-nan", "float16", "float32", "float64-nan", "undefined", "simple", "bytes-key", "indefinite",
         "non-shortest-int"],
)
def test_items_cbor2_decodes_silently_get_the_same_verdict(item):
    payload = b"\xa4" + CHUNK_ENTRIES + b"\x64data" + item
    assert verdict(strict_cbor2.decode_message, payload) == verdict(decode_message, payload)
