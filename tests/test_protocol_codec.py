"""The strict CBOR message codec: what encodes, what decodes, and what is refused."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import math
import struct

import cbor2
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.runtime.protocol import (
    MAX_DEPTH,
    Call,
    Cancel,
    Chunk,
    ErrorInfo,
    Hello,
    HelloError,
    HelloOk,
    LocalProtocolError,
    RemoteProtocolError,
    Result,
    decode_message,
    encode_message,
)

# type: call, id: 1, method: "m" — three map entries, to wrap test items in.
CALL_ENTRIES = bytes.fromhex("6474797065 6463616c6c 626964 01 666d6574686f64 616d".replace(" ", ""))


def call_with_args(args: bytes) -> bytes:
    """A call message whose ``args`` value is the raw CBOR ``args``."""
    return b"\xa4" + CALL_ENTRIES + b"\x64args" + args


def rejected(payload: bytes) -> str:
    """Decode ``payload``, expecting rejection; return the error message."""
    with pytest.raises(RemoteProtocolError) as info:
        decode_message(payload)
    assert info.value.code == "invalid_request"
    return info.value.message


def nested(levels: int) -> object:
    value: object = 0
    for _ in range(levels):
        value = [value]
    return value


# -- what a receiver sees ----------------------------------------------------------------------


def test_a_plain_call_decodes_to_its_struct():
    assert decode_message(b"\xa3" + CALL_ENTRIES) == Call(id=1, method="m")


def test_messages_are_maps_with_type_first_and_defaults_left_out():
    encoded = encode_message(Call(id=1, method="m"))
    assert encoded == b"\xa3" + CALL_ENTRIES
    assert list(cbor2.loads(encode_message(Result(id=2, ok=True)))) == ["type", "id", "ok"]


def test_floats_are_always_written_as_float64():
    encoded = encode_message(Chunk(id=1, seq=0, data=[1.0, 0.5, -0.0]))
    # 1.0 and 0.5 would fit in float16; the reference decoder accepts only float64.
    assert encoded.endswith(
        b"\x83\xfb" + struct.pack(">d", 1.0) + b"\xfb" + struct.pack(">d", 0.5) + b"\xfb" + struct.pack(">d", -0.0)
    )


def test_unknown_keys_are_ignored_so_fields_can_be_added_later():
    payload = cbor2.dumps({"type": "cancel", "id": 3, "reason": "user pressed escape"})
    assert decode_message(payload) == Cancel(id=3)


def test_integer_heads_of_any_width_are_accepted():
    # id 7 written with a 4-byte argument instead of the shortest form
    payload = bytes.fromhex("a2 6474797065 6663616e63656c 626964 1a00000007".replace(" ", ""))
    assert decode_message(payload) == Cancel(id=7)


def test_explicit_null_for_optional_fields_is_accepted():
    payload = cbor2.dumps({"type": "result", "id": 1, "ok": True, "value": None, "error": None})
    assert decode_message(payload) == Result(id=1, ok=True)


def test_the_full_64_bit_integer_range_round_trips():
    data = [2**64 - 1, -(2**64), 0, -1, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32]
    assert decode_message(encode_message(Chunk(id=1, seq=0, data=data))).data == data


def test_nesting_up_to_64_levels_including_the_envelope_is_fine():
    msg = Chunk(id=1, seq=0, data=nested(MAX_DEPTH - 1))
    assert decode_message(encode_message(msg)) == msg


# -- strict decoding: everything outside the subset is a protocol error -----------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (call_with_args(b"\x9f\x01\xff"), "indefinite-length"),
        (b"\xbf" + CALL_ENTRIES + b"\xff", "indefinite-length"),
        (call_with_args(b"\x7f\x61a\xff"), "indefinite-length"),
        (call_with_args(b"\xff"), "break byte"),
    ],
    ids=["array", "map", "text", "stray-break"],
)
def test_indefinite_lengths_are_rejected(payload, expected):
    assert expected in rejected(payload)


def test_duplicate_map_keys_are_rejected():
    assert "duplicate map key 'id'" in rejected(b"\xa4" + CALL_ENTRIES + b"\x62id\x02")


def test_duplicate_keys_inside_payloads_are_rejected_too():
    assert "duplicate map key 'a'" in rejected(call_with_args(b"\xa2\x61a\x01\x61a\x02"))


@pytest.mark.parametrize(
    "key", [b"\x01", b"\x20", b"\x41a", b"\x80", b"\xa0", b"\xf6", b"\xf5", b"\xfb" + bytes(8)],
    ids=["uint", "negint", "bytes", "array", "map", "null", "true", "float"],
)
def test_map_keys_must_be_text(key):
    assert "map keys must be text strings" in rejected(call_with_args(b"\xa1" + key + b"\x01"))


def test_tag_1_datetime_is_rejected_not_turned_into_a_datetime():
    # cbor2 on its own would decode this to datetime(2020, 9, 13, ...)
    assert "tags are not allowed (found tag 1)" in rejected(call_with_args(b"\xc1\x1a\x5f\x5e\x10\x00"))


def test_self_described_cbor_tag_55799_is_rejected():
    # cbor2 on its own would silently strip it
    assert "found tag 55799" in rejected(b"\xd9\xd9\xf7\xa3" + CALL_ENTRIES)


@pytest.mark.parametrize("tag", [0, 2, 3, 24, 32, 256, 2**32])
def test_every_tag_is_rejected(tag):
    head = cbor2.dumps(tag)
    tagged = bytes([0xC0 | head[0] & 31]) + head[1:] + b"\x00"
    assert f"found tag {tag}" in rejected(call_with_args(tagged))


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (b"\xf7", "undefined is not allowed"),
        (b"\xf0", "simple values"),
        (b"\xf8\x20", "simple values"),
        (b"\xf9\x3c\x00", "float16"),
        (b"\xfa\x3f\xc0\x00\x00", "float32"),
        (b"\xfb" + struct.pack(">d", math.nan), "must be finite"),
        (b"\xfb" + struct.pack(">d", -math.inf), "must be finite"),
        (b"\xfc", "reserved initial byte"),
        (b"\x1c", "reserved additional information"),
        (b"\x3f", "reserved additional information"),
    ],
    ids=["undefined", "simple-16", "simple-32", "float16", "float32", "nan", "-inf", "0xfc", "ai-28", "negint-ai-31"],
)
def test_values_outside_the_subset_are_rejected(item, expected):
    assert expected in rejected(call_with_args(item))


def test_trailing_bytes_after_the_item_are_rejected():
    assert "1 trailing bytes" in rejected(b"\xa3" + CALL_ENTRIES + b"\x00")


def test_two_items_in_one_payload_are_rejected():
    one = b"\xa3" + CALL_ENTRIES
    assert "trailing bytes" in rejected(one + one)


@pytest.mark.parametrize("cut", range(1, len(CALL_ENTRIES)))
def test_a_truncated_item_is_rejected_at_every_cut(cut):
    assert "truncated" in rejected((b"\xa3" + CALL_ENTRIES)[:cut])


def test_an_empty_payload_is_rejected():
    assert "empty payload" in rejected(b"")


def test_invalid_utf8_and_encoded_surrogates_are_rejected():
    assert "not valid UTF-8" in rejected(call_with_args(b"\x62\xc3\x28"))
    assert "not valid UTF-8" in rejected(call_with_args(b"\x63\xed\xa0\x80"))


def test_nesting_deeper_than_64_levels_is_rejected():
    too_deep = cbor2.dumps({"type": "chunk", "id": 1, "seq": 0, "data": nested(MAX_DEPTH)})
    assert "nesting deeper than 64" in rejected(too_deep)


def test_huge_announced_lengths_fail_fast_without_allocating():
    assert "truncated array" in rejected(call_with_args(b"\x9b" + b"\xff" * 8))
    assert "truncated map" in rejected(call_with_args(b"\xbb" + b"\xff" * 8))
    assert "truncated string" in rejected(call_with_args(b"\x7b" + b"\xff" * 8))


# -- the envelope schema -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tree", "expected"),
    [
        ([1, 2], "must be a CBOR map, got list"),
        ("call", "must be a CBOR map, got str"),
        ({"id": 1}, "no 'type' field"),
        ({"type": "subscribe"}, "unknown message type 'subscribe'"),
        ({"type": 7}, "unknown message type 7"),
        ({"type": "call", "id": 1}, "missing required field `method`"),
        ({"type": "call", "id": -1, "method": "m"}, "`$.id`"),
        ({"type": "call", "id": "1", "method": "m"}, "got `str` - at `$.id`"),
        ({"type": "call", "id": 1.0, "method": "m"}, "got `float` - at `$.id`"),
        ({"type": "call", "id": True, "method": "m"}, "got `bool` - at `$.id`"),
        ({"type": "result", "id": 1, "ok": 1}, "got `int` - at `$.ok`"),
        ({"type": "result", "id": 1, "ok": True, "error": {"code": "x"}}, "`message`"),
        ({"type": "hello_error", "code": "version", "message": "m", "supported": [1]}, "`$.supported`"),
        ({"type": "hello", "protocol": "pi-actors", "min_version": 1, "max_version": 1,
          "role": "ui", "name": "n", "codecs": "cbor"}, "`$.codecs`"),
    ],
)
def test_schema_violations_are_rejected_with_the_field_named(tree, expected):
    assert expected in rejected(cbor2.dumps(tree))


@pytest.mark.parametrize(
    ("tree", "expected"),
    [
        ({"type": "result", "id": 1, "ok": False}, "ok=false must carry an error"),
        ({"type": "result", "id": 1, "ok": True, "error": {"code": "x", "message": "y"}},
         "ok=true must not carry an error"),
        ({"type": "result", "id": 1, "ok": False, "value": 1, "error": {"code": "x", "message": "y"}},
         "ok=false must not carry a value"),
    ],
)
def test_an_inconsistent_result_is_rejected(tree, expected):
    assert expected in rejected(cbor2.dumps(tree))


def test_peer_controlled_text_in_error_messages_is_cut_short():
    message = rejected(cbor2.dumps({"type": "x" * 10_000}))
    assert len(message) < 200


# -- encoding refuses what the decoder would refuse ----------------------------------------------


def refused(msg) -> str:
    with pytest.raises(LocalProtocolError) as info:
        encode_message(msg)
    assert info.value.code == "invalid_request"
    return info.value.message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (math.nan, "not finite"),
        (math.inf, "not finite"),
        (2**64, "does not fit in 64 bits"),
        (-(2**64) - 1, "does not fit in 64 bits"),
        ({1: "a"}, "map key 1 is not a str"),
        ({("a",): 1}, "is not a str"),
        ("\ud800", "lone surrogate"),
        ({"k": "\udfff"}, "lone surrogate"),
        (object(), "cannot encode a object"),
        (nested(MAX_DEPTH), "nesting deeper than 64"),
    ],
    ids=["nan", "inf", "2**64", "-2**64-1", "int-key", "tuple-key", "surrogate", "nested-surrogate",
         "object", "too-deep"],
)
def test_payloads_outside_the_subset_cannot_be_sent(data, expected):
    assert expected in refused(Chunk(id=1, seq=0, data=data))


def test_a_cyclic_payload_cannot_be_sent():
    cyclic: list = []
    cyclic.append(cyclic)
    assert "nesting deeper" in refused(Chunk(id=1, seq=0, data=cyclic))


@pytest.mark.parametrize(
    ("msg", "expected"),
    [
        (Call(id="1", method="m"), "`id` must be a non-negative int"),
        (Call(id=-1, method="m"), "`id` must be a non-negative int"),
        (Call(id=True, method="m"), "`id` must be a non-negative int"),
        (Call(id=1, method=None), "`method` must be a str"),
        (Result(id=1, ok="yes"), "`ok` must be a bool"),
        (Result(id=1, ok=False, error={"code": "x", "message": "y"}), "`error` must be of type ErrorInfo"),
        (Result(id=1, ok=False, error=ErrorInfo(code=1, message="y")), "`error.code` must be a str"),
        (HelloError(code="version", message="m", supported=[1]), "`supported` must have 2..2 items"),
        (Hello(protocol="pi-actors", min_version=1, max_version=1, role="ui", name="n", codecs="cbor"),
         "`codecs` must be a list"),
        (Result(id=1, ok=False), "ok=false must carry an error"),
        (Result(id=1, ok=True, error=ErrorInfo(code="x", message="y")), "ok=true must not carry an error"),
    ],
)
def test_envelope_fields_of_the_wrong_type_cannot_be_sent(msg, expected):
    assert expected in refused(msg)


def test_only_protocol_messages_can_be_encoded():
    assert "not a protocol message" in refused(ErrorInfo(code="x", message="y"))
    assert "not a protocol message" in refused({"type": "call"})


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Item(msgspec.Struct):
    name: str
    tags: tuple[str, ...] = ()


def test_payloads_may_hold_structs_dataclasses_and_friends_which_arrive_as_trees():
    data = {
        "struct": Item(name="a", tags=("x",)),
        "dataclass": Point(1, 2),
        "enum": Color.RED,
        "tuple": (1, 2),
        "when": datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.UTC),
        "bytes": bytearray(b"\x00\x01"),
        "view": memoryview(b"\x02"),
    }
    got = decode_message(encode_message(Chunk(id=1, seq=0, data=data))).data
    assert got == {
        "struct": {"name": "a", "tags": ["x"]},
        "dataclass": {"x": 1, "y": 2},
        "enum": "red",
        "tuple": [1, 2],
        "when": "2024-05-01T12:00:00Z",
        "bytes": b"\x00\x01",
        "view": b"\x02",
    }


# -- properties ----------------------------------------------------------------------------------

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
error_infos = st.builds(ErrorInfo, code=st.text(), message=st.text())
messages = st.one_of(
    st.builds(Hello, protocol=st.text(), min_version=uints, max_version=uints, role=st.text(),
              name=st.text(), codecs=st.lists(st.text(), max_size=3)),
    st.builds(HelloOk, version=uints, role=st.text(), name=st.text(), codec=st.text()),
    st.builds(HelloError, code=st.text(), message=st.text(),
              supported=st.none() | st.lists(uints, min_size=2, max_size=2)),
    st.builds(Call, id=uints, method=st.text(), args=json_like, target=st.text()),
    st.builds(Chunk, id=uints, seq=uints, data=json_like),
    st.builds(Result, id=uints, ok=st.just(True), value=json_like),
    st.builds(Result, id=uints, ok=st.just(False), error=error_infos),
    st.builds(Cancel, id=uints),
)


@settings(max_examples=400, deadline=None)
@given(messages)
def test_any_valid_message_round_trips_exactly(msg):
    encoded = encode_message(msg)
    assert decode_message(encoded) == msg
    # An independent decoder reads the same tree.
    assert cbor2.loads(encoded) == msgspec.to_builtins(msg, builtin_types=(bytes,))


@settings(max_examples=300, deadline=None)
@given(json_like)
def test_payloads_written_by_another_encoder_decode_the_same(data):
    # cbor2 writes finite floats as float64 and never tags JSON-like values.
    payload = cbor2.dumps({"type": "chunk", "id": 1, "seq": 2, "data": data})
    assert decode_message(payload) == Chunk(id=1, seq=2, data=data)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_only_ever_raise_remote_protocol_error(payload):
    try:
        decode_message(payload)
    except RemoteProtocolError as exc:
        assert exc.code == "invalid_request"


@settings(max_examples=400, deadline=None)
@given(messages, st.data())
def test_corrupted_messages_only_ever_raise_remote_protocol_error(msg, data):
    encoded = bytearray(encode_message(msg))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(encoded) - 1))
        encoded[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(encoded)))
    try:
        decode_message(bytes(encoded[:cut]))
    except RemoteProtocolError as exc:
        assert exc.code == "invalid_request"
