"""The JSON codec browsers speak: the same envelope and limits as CBOR, chosen by the hello's
own codec, and a decoder that refuses hostile input with one clear error."""

from __future__ import annotations

import json
import time

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.runtime.protocol import (
    CLOSED,
    MAX_DEPTH,
    MAX_ITEMS,
    NEED_DATA,
    OPEN,
    Call,
    Cancel,
    Chunk,
    Connection,
    Credit,
    ErrorInfo,
    Hello,
    HelloError,
    HelloOk,
    LocalProtocolError,
    RemoteProtocolError,
    Result,
    decode_json_message,
    decode_message,
    encode_frame,
    encode_json_message,
    encode_message,
)


def refused(payload: bytes | str) -> str:
    data = payload.encode() if isinstance(payload, str) else payload
    with pytest.raises(RemoteProtocolError) as info:
        decode_json_message(data)
    assert info.value.code == "invalid_request"
    return info.value.message


def chunk_with(data_json: str) -> str:
    return '{"type":"chunk","id":1,"seq":0,"data":' + data_json + "}"


# -- the encoding ---------------------------------------------------------------------------


def test_a_message_is_one_json_object_with_the_cbor_maps_keys_type_first_and_defaults_left_out():
    call = Call(id=7, method="prompt", args={"text": "hé", "attachmentId": "a1"}, target="s1")
    text = encode_json_message(call)
    assert text == b'{"type":"call","id":7,"method":"prompt","args":{"text":"h\xc3\xa9","attachmentId":"a1"},"target":"s1"}'
    assert encode_json_message(Call(id=1, method="list")) == b'{"type":"call","id":1,"method":"list"}'
    assert decode_json_message(text) == call
    # The same tree as CBOR: one protocol, two spellings.
    assert json.loads(text) == msgspec.to_builtins(decode_message(encode_message(call)))
    ok = Result(id=3, ok=False, error=ErrorInfo(code="not_found", message="no such method"))
    assert json.loads(encode_json_message(ok)) == {"type": "result", "id": 3, "ok": False,
                                                  "error": {"code": "not_found", "message": "no such method"}}


def test_bytes_in_a_payload_travel_as_base64_text():
    assert json.loads(encode_json_message(Chunk(id=1, seq=0, data={"raw": b"\x00\xffpi"})))["data"] == {"raw": "AP9waQ=="}


def test_the_encoder_refuses_what_the_cbor_encoder_refuses():
    for bad in (Chunk(id=1, seq=0, data=float("nan")), Chunk(id=1, seq=0, data=2**64), Chunk(id=1, seq=0, data={1: "x"}),
                Chunk(id=1, seq=0, data="\ud800"), Call(id=-1, method="m"), Result(id=1, ok=True, error=ErrorInfo(code="x", message="y"))):
        with pytest.raises(LocalProtocolError) as info:
            encode_json_message(bad)
        assert info.value.code == "invalid_request"
        with pytest.raises(LocalProtocolError):
            encode_message(bad)
    # Past the item budget only in JSON (empty arrays count there): refused before sending.
    with pytest.raises(LocalProtocolError, match="more than .* items"):
        encode_json_message(Chunk(id=1, seq=0, data=[[]] * (MAX_ITEMS - 10)))


# -- hostile input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"", "invalid JSON at character 0"),
        (b"\xff{}", "not UTF-8"),
        (b'{"type":"cancel","id":1', "invalid JSON"),
        (b'{"type":"cancel","id":1} {}', "Extra data"),
        (b"[1,2]", "must be a JSON map, got list"),
        (b'{"id":1}', "no 'type' field"),
        (b'{"type":"nope"}', "unknown message type 'nope'"),
        (b'{"type":"cancel","id":"1"}', "Expected `int`, got `str`"),
        (b'{"type":"cancel","id":1.0}', "Expected `int`, got `float`"),
        (b'{"type":"cancel","id":-1}', ">= 0"),
        (chunk_with("NaN").encode(), "NaN is not allowed"),
        (chunk_with("-Infinity").encode(), "-Infinity is not allowed"),
        (chunk_with("1e400").encode(), "overflows a float64"),
        (chunk_with(str(2**64)).encode(), "does not fit in 64 bits"),
        (chunk_with(str(-(2**64) - 1)).encode(), "does not fit in 64 bits"),
        (chunk_with("1" * 5000).encode(), "does not fit in 64 bits"),
        (chunk_with('"\\ud800"').encode(), "lone surrogate"),
        (chunk_with('{"\\udfff":1}').encode(), "lone surrogate"),
        (b'{"type":"cancel","type":"cancel","id":1}', "duplicate key 'type'"),
        (chunk_with('{"a":1,"a":2}').encode(), "duplicate key 'a'"),
        (chunk_with("[" * MAX_DEPTH + "]" * MAX_DEPTH).encode(), f"nesting deeper than {MAX_DEPTH}"),
        (b'{"type":"result","id":1,"ok":true,"error":{"code":"x","message":"y"}}', "ok=true must not carry an error"),
    ],
)
def test_hostile_json_is_refused_with_one_clear_error(payload, expected):
    assert expected in refused(payload)


def test_nesting_up_to_the_limit_is_accepted():
    deepest = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)  # with the envelope: MAX_DEPTH levels
    assert decode_json_message(chunk_with(deepest).encode()) == Chunk(id=1, seq=0, data=json.loads(deepest))
    assert decode_json_message(chunk_with('"\\ud83d\\ude00"').encode()).data == "\U0001f600"  # a surrogate pair is fine


def test_sixteen_mebibytes_of_empty_arrays_are_refused_without_building_them():
    payload = chunk_with("[" + "[]," * (16 * 2**20 // 3 - 10) + "[]]").encode()
    started = time.process_time()
    message = refused(payload)
    assert "more than" in message and "items" in message
    assert time.process_time() - started < 5  # one pass over the bytes, not millions of lists
    # Commas inside strings do not count against the budget.
    many_commas = chunk_with(json.dumps("," * (MAX_ITEMS + 5))).encode()
    assert decode_json_message(many_commas).data == "," * (MAX_ITEMS + 5)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=25,
)
uints = st.integers(min_value=0, max_value=2**64 - 1)
messages = st.one_of(
    st.builds(Hello, protocol=st.text(), min_version=uints, max_version=uints, role=st.text(), name=st.text(),
              codecs=st.lists(st.text(), max_size=3)),
    st.builds(HelloOk, version=uints, role=st.text(), name=st.text(), codec=st.text()),
    st.builds(HelloError, code=st.text(), message=st.text(), supported=st.none() | st.lists(uints, min_size=2, max_size=2)),
    st.builds(Call, id=uints, method=st.text(), args=json_like, target=st.text()),
    st.builds(Chunk, id=uints, seq=uints, data=json_like),
    st.builds(Result, id=uints, ok=st.just(True), value=json_like),
    st.builds(Result, id=uints, ok=st.just(False), error=st.builds(ErrorInfo, code=st.text(), message=st.text())),
    st.builds(Cancel, id=uints),
    st.builds(Credit, id=uints, n=uints),
)


@settings(max_examples=60, deadline=None)
@given(messages)
def test_any_valid_message_round_trips_and_reads_as_the_same_tree_as_its_cbor(msg):
    text = encode_json_message(msg)
    assert decode_json_message(text) == msg
    assert json.loads(text) == msgspec.to_builtins(msg)


@settings(max_examples=60, deadline=None)
@given(json_like)
def test_payloads_written_by_another_json_encoder_decode_the_same(data):
    # What a browser's JSON.stringify writes (here: Python's json, spaces and escapes included).
    payload = json.dumps({"type": "chunk", "id": 1, "seq": 2, "data": data}, ensure_ascii=True, indent=1)
    assert decode_json_message(payload.encode()) == Chunk(id=1, seq=2, data=data)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64) | st.text(alphabet='{}[]",:0123456789.eE+-truefalsn\\u \t', max_size=64).map(str.encode))
def test_arbitrary_input_only_ever_raises_remote_protocol_error(payload):
    try:
        decode_json_message(payload)
    except RemoteProtocolError as exc:
        assert exc.code == "invalid_request"


@settings(max_examples=100, deadline=None)
@given(messages, st.data())
def test_corrupted_messages_only_ever_raise_remote_protocol_error(msg, data):
    encoded = bytearray(encode_json_message(msg))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(encoded) - 1))
        encoded[at] = data.draw(st.sampled_from(b'{}[]",:\\0123456789eE-+ntfu') | st.integers(0, 255))
    cut = data.draw(st.integers(0, len(encoded)))
    try:
        decode_json_message(bytes(encoded[:cut]))
    except RemoteProtocolError as exc:
        assert exc.code == "invalid_request"


# -- negotiation: the hello's own codec -----------------------------------------------------


def json_frame(msg) -> bytes:
    return encode_frame(encode_json_message(msg))


def hello(codecs: list[str]) -> Hello:
    return Hello(protocol="pi-actors", min_version=1, max_version=2, role="ui", name="web", codecs=codecs)


def test_a_json_hello_opens_a_json_connection_both_ways():
    client, server = Connection("client", codecs=("json",)), Connection("server", codecs=("cbor", "json"))
    sent = client.send(hello(["json"]))
    assert sent[4:5] == b"{"
    call = client.send(Call(id=1, method="list"))  # pipelined after the hello
    assert json.loads(call[4:]) == {"type": "call", "id": 1, "method": "list"}
    server.receive_data(sent + call)
    assert server.next_event() == hello(["json"]) and server.codec == "json"
    assert server.next_event() == Call(id=1, method="list")
    ok = server.send(HelloOk(version=2, role="server", name="s", codec="json"))
    assert json.loads(ok[4:]) == {"type": "hello_ok", "version": 2, "role": "server", "name": "s", "codec": "json"}
    client.receive_data(ok + server.send(Result(id=1, ok=True, value={"sessions": []})))
    assert isinstance(client.next_event(), HelloOk) and client.state is OPEN
    assert client.next_event() == Result(id=1, ok=True, value={"sessions": []})
    assert client.next_event() is NEED_DATA and server.state is OPEN


def test_a_cbor_hello_still_opens_a_cbor_connection_on_a_server_that_also_speaks_json():
    server = Connection("server", codecs=("cbor", "json"))
    server.receive_data(encode_frame(encode_message(hello(["cbor"]))))
    assert server.next_event() == hello(["cbor"]) and server.codec == "cbor"
    frame = server.send(HelloOk(version=2, role="server", name="s"))
    assert decode_message(frame[4:]) == HelloOk(version=2, role="server", name="s", codec="cbor")


def test_a_json_hello_to_a_cbor_only_listener_gets_a_readable_hello_error():
    server = Connection("server")
    server.receive_data(json_frame(hello(["json"])))
    with pytest.raises(RemoteProtocolError) as info:
        server.next_event()
    assert "no common codec: the hello is written in json; this server speaks ['cbor'] here" in info.value.message
    # The final hello_error is CBOR (the listener's codec); a JSON client still reads it.
    client = Connection("client", codecs=("json",))
    client.send(hello(["json"]))
    client.receive_data(server.fail(info.value.code, info.value.message))
    event = client.next_event()
    assert isinstance(event, HelloError) and "no common codec" in event.message and client.state is CLOSED


def test_a_hello_must_offer_the_codec_it_is_written_in_and_the_answer_must_keep_it():
    server = Connection("server", codecs=("cbor", "json"))
    server.receive_data(json_frame(hello(["cbor"])))
    with pytest.raises(RemoteProtocolError, match="no common codec"):
        server.next_event()
    with pytest.raises(LocalProtocolError, match="must offer the 'json' codec"):
        Connection("client", codecs=("json",)).send(hello(["cbor"]))
    client = Connection("client", codecs=("json",))
    client.send(hello(["json"]))
    client.receive_data(encode_frame(encode_message(HelloOk(version=2, role="server", name="s"))))
    with pytest.raises(RemoteProtocolError, match="hello_ok written in cbor on a json connection"):
        client.next_event()
    client = Connection("client", codecs=("json",))
    client.send(hello(["json"]))
    client.receive_data(json_frame(HelloOk(version=2, role="server", name="s", codec="cbor")))
    with pytest.raises(RemoteProtocolError, match="codec 'cbor'"):
        client.next_event()


def test_once_open_a_json_connection_refuses_cbor_and_the_reverse():
    server = Connection("server", codecs=("cbor", "json"))
    server.receive_data(json_frame(hello(["json"])))
    server.next_event()
    server.send(HelloOk(version=2, role="server", name="s", codec="json"))
    server.receive_data(encode_frame(encode_message(Call(id=1, method="m"))))
    with pytest.raises(RemoteProtocolError, match="invalid JSON"):
        server.next_event()
    assert server.state is CLOSED
    # Its final hello_error is JSON, as the connection is.
    assert json.loads(server.fail("invalid_request", "bad")[4:])["type"] == "hello_error"

    cbor = Connection("server", codecs=("cbor", "json"))
    cbor.receive_data(encode_frame(encode_message(hello(["cbor"]))))
    cbor.next_event()
    cbor.send(HelloOk(version=2, role="server", name="s"))
    cbor.receive_data(json_frame(Call(id=1, method="m")))
    with pytest.raises(RemoteProtocolError, match="invalid CBOR"):
        cbor.next_event()


def test_a_connection_refuses_codecs_it_does_not_know():
    with pytest.raises(ValueError, match="codecs"):
        Connection("server", codecs=("msgpack",))
    with pytest.raises(ValueError, match="codecs"):
        Connection("client", codecs=())
