"""The sans-I/O Connection: handshake, ordering, fatal errors — driven entirely in memory."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.runtime.protocol import (
    CHUNK_WINDOW,
    CLOSED,
    HANDSHAKE,
    HANDSHAKE_TIMEOUT,
    NEED_DATA,
    OPEN,
    PROTOCOL_NAME,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
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
    decode_message,
    encode_frame,
    encode_message,
)


def hello(lo: int = 1, hi: int = 1, **kw) -> Hello:
    return Hello(protocol=PROTOCOL_NAME, min_version=lo, max_version=hi, role="ui", name="client", **kw)


def hello_ok(server: Connection) -> HelloOk:
    return HelloOk(version=server.negotiated_version, role="server", name="srv")


def frame(msg) -> bytes:
    """A frame for ``msg`` that bypasses the sender's ordering checks."""
    return encode_frame(encode_message(msg))


def drain(conn: Connection) -> list:
    """Every event available now, ending with NEED_DATA or CLOSED."""
    events = []
    while True:
        event = conn.next_event()
        events.append(event)
        if event is NEED_DATA or event is CLOSED:
            return events


def open_pair() -> tuple[Connection, Connection]:
    client, server = Connection("client"), Connection("server")
    server.receive_data(client.send(hello()))
    assert drain(server) == [hello(), NEED_DATA]
    client.receive_data(server.send(hello_ok(server)))
    assert drain(client) == [hello_ok(server), NEED_DATA]
    assert client.state is OPEN and server.state is OPEN
    return client, server


def remote_error(conn: Connection) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        drain(conn)
    return info.value


def test_the_public_constants():
    assert (PROTOCOL_NAME, PROTOCOL_VERSION, SUPPORTED_VERSIONS) == ("pi-actors", 2, (1, 2))
    assert HANDSHAKE_TIMEOUT == 5.0


# -- a whole conversation, fed at every split point ---------------------------------------------

ARGS = {"path": "src/main.py", "offset": 0, "text": "naïve ✓", "blob": b"\x00\xff", "ratio": 0.25}


#: What the client sends before anything else: its hello, two pipelined calls and a cancel.
CLIENT_OPENING = (hello(), Call(id=1, method="read", args=ARGS), Call(id=2, method="slow"), Cancel(id=2))
#: The server's own call to the client.
SERVER_CALL = Call(id=1, method="confirm", args=["Overwrite?", None, True], target="ui")


def conversation() -> tuple[bytes, list, bytes, list]:
    """Drive a client and a server through a full exchange.

    Returns the client->server byte stream with the events the server saw, and the
    server->client stream with the events the client saw.
    """
    client, server = Connection("client"), Connection("server")
    to_server = bytearray()
    to_client = bytearray()
    # The client pipelines two calls and a cancel right behind its hello.
    for msg in CLIENT_OPENING:
        to_server += client.send(msg)
    assert client.state is HANDSHAKE
    server.receive_data(bytes(to_server))
    server_saw = drain(server)[:-1]
    assert server.negotiated_version == 1 and server.peer_hello == hello()
    # The server opens, answers both calls, and calls the client back.
    for msg in (
        hello_ok(server),
        Chunk(id=1, seq=0, data="line 1\n"),
        Chunk(id=1, seq=1, data={"progress": 0.5}),
        Result(id=1, ok=True, value={"content": "line 1\nline 2\n", "lines": 2}),
        Result(id=2, ok=False, error=ErrorInfo(code="cancelled", message="call cancelled")),
        SERVER_CALL,
    ):
        to_client += server.send(msg)
    client.receive_data(bytes(to_client))
    client_saw = drain(client)[:-1]
    assert client.state is OPEN and client.negotiated_version == 1
    # The client answers the server's call, then closes its side.
    start = len(to_server)
    to_server += client.send(Chunk(id=1, seq=0, data="asking the user"))
    to_server += client.send(Result(id=1, ok=True, value=True))
    server.receive_data(bytes(to_server[start:]))
    server_saw += drain(server)[:-1]
    return bytes(to_server), server_saw, bytes(to_client), client_saw


TO_SERVER, SERVER_SAW, TO_CLIENT, CLIENT_SAW = conversation()


def test_the_conversation_delivers_every_message_in_order():
    assert [type(m).__name__ for m in SERVER_SAW] == ["Hello", "Call", "Call", "Cancel", "Chunk", "Result"]
    assert [type(m).__name__ for m in CLIENT_SAW] == ["HelloOk", "Chunk", "Chunk", "Result", "Result", "Call"]
    assert SERVER_SAW[1].args == ARGS


def replay_to_server(pieces: list[bytes]) -> list:
    """Feed ``pieces`` to a fresh server that answers the hello; return all its events."""
    server = Connection("server")
    events = []
    for piece in [*pieces, b""]:
        server.receive_data(piece)
        while (event := server.next_event()) is not NEED_DATA:
            if isinstance(event, Hello):
                server.send(hello_ok(server))  # as an adapter does, before reading on
                server.send(SERVER_CALL)  # the call the client's chunk and result answer
            events.append(event)
            if event is CLOSED:
                break
    return events


def replay_to_client(pieces: list[bytes]) -> list:
    """Feed ``pieces`` to a fresh client that has sent its hello; return all its events."""
    client = Connection("client")
    for msg in CLIENT_OPENING:
        client.send(msg)
    events = []
    for piece in [*pieces, b""]:
        client.receive_data(piece)
        events += drain(client)
    return [e for e in events if e is not NEED_DATA]


@pytest.mark.parametrize(
    ("stream", "replay", "expected"),
    [(TO_SERVER, replay_to_server, SERVER_SAW), (TO_CLIENT, replay_to_client, CLIENT_SAW)],
    ids=["client-to-server", "server-to-client"],
)
def test_the_same_events_arrive_however_the_stream_is_split(stream, replay, expected):
    want = [*expected, CLOSED]
    assert replay([stream]) == want  # all frames coalesced in one read
    assert replay([stream[i : i + 1] for i in range(len(stream))]) == want  # byte by byte
    for cut in range(1, len(stream)):  # every 2-way split
        assert replay([stream[:cut], stream[cut:]]) == want, cut


# -- handshake -----------------------------------------------------------------------------------


def test_the_server_picks_the_highest_common_version():
    client = Connection("client", versions=(2, 5))
    server = Connection("server", versions=(1, 3))
    server.receive_data(client.send(hello(2, 5)))
    assert drain(server)[0] == hello(2, 5)
    assert server.negotiated_version == 3
    client.receive_data(server.send(hello_ok(server)))
    assert isinstance(client.next_event(), HelloOk)
    assert client.negotiated_version == 3 and client.peer_hello_ok.version == 3


def test_no_common_version_is_a_version_error_with_the_supported_range():
    client = Connection("client", versions=(3, 4))
    server = Connection("server")
    server.receive_data(client.send(hello(3, 4)))
    err = remote_error(server)
    assert err.code == "version" and err.supported == [1, 2]
    assert "3..4" in err.message and "1..2" in err.message
    # The adapter answers with the final hello_error; the client sees it and closes.
    client.receive_data(server.fail(err.code, err.message, err.supported))
    event = client.next_event()
    assert event == HelloError(code="version", message=err.message, supported=[1, 2])
    assert client.state is CLOSED and client.next_event() is CLOSED


def test_an_unknown_protocol_name_is_refused():
    server = Connection("server")
    server.receive_data(frame(Hello(protocol="pi-protocol", min_version=1, max_version=1, role="ui", name="c")))
    err = remote_error(server)
    assert err.code == "invalid_request" and "unknown protocol 'pi-protocol'" in err.message


def test_an_empty_version_range_is_refused():
    server = Connection("server")
    server.receive_data(frame(hello(3, 2)))
    assert "empty version range 3..2" in remote_error(server).message


def test_a_client_without_the_cbor_codec_is_refused():
    server = Connection("server")
    server.receive_data(frame(hello(codecs=["json"])))
    assert "no common codec" in remote_error(server).message


def test_a_message_before_hello_is_refused():
    server = Connection("server")
    server.receive_data(frame(Call(id=1, method="m")))
    err = remote_error(server)
    assert err.code == "invalid_request"
    assert err.message == "the first client message must be hello, got call"


def test_a_second_hello_is_refused_during_the_handshake():
    server = Connection("server")
    server.receive_data(frame(hello()) + frame(hello()))
    assert server.next_event() == hello()
    assert remote_error(server).message == "hello may only be sent as the first message"


def test_a_second_hello_is_refused_after_the_handshake():
    client, server = open_pair()
    server.receive_data(frame(hello()))
    assert remote_error(server).message == "hello may only be sent as the first message"


def test_the_server_refuses_chunks_and_results_before_it_opened():
    server = Connection("server")
    server.receive_data(frame(hello()) + frame(Result(id=1, ok=True)))
    assert server.next_event() == hello()
    assert "before the handshake completed" in remote_error(server).message


def test_a_server_never_receives_hello_ok():
    client, server = open_pair()
    server.receive_data(frame(HelloOk(version=1, role="x", name="y")))
    assert "never sends hello_ok" in remote_error(server).message


def test_the_client_refuses_anything_but_hello_ok_or_hello_error_first():
    client = Connection("client")
    client.send(hello())
    client.receive_data(frame(Result(id=1, ok=True)))
    err = remote_error(client)
    assert err.message == "the first server message must be hello_ok or hello_error, got result"


def test_the_client_refuses_hello_ok_before_sending_its_hello():
    client = Connection("client")
    client.receive_data(frame(HelloOk(version=1, role="s", name="s")))
    assert "before our hello was sent" in remote_error(client).message


def test_the_client_refuses_a_version_it_did_not_offer():
    client = Connection("client")
    client.send(hello())
    client.receive_data(frame(HelloOk(version=2, role="s", name="s")))
    err = remote_error(client)
    assert err.code == "invalid_request" and "version 2" in err.message


def test_the_client_refuses_a_codec_it_did_not_offer():
    client = Connection("client")
    client.send(hello())
    client.receive_data(frame(HelloOk(version=1, role="s", name="s", codec="json")))
    assert "codec 'json'" in remote_error(client).message


def test_the_client_refuses_a_second_hello_ok_and_any_hello():
    client, _ = open_pair()
    client.receive_data(frame(HelloOk(version=1, role="s", name="s")))
    assert "hello_ok may only be sent once" in remote_error(client).message
    client, _ = open_pair()
    client.receive_data(frame(hello()))
    assert "never sends hello" in remote_error(client).message


def test_a_refused_hello_arrives_as_an_event_and_closes():
    client = Connection("client")
    client.send(hello())
    client.send(Call(id=1, method="pipelined"))
    client.receive_data(frame(HelloError(code="invalid_request", message="handshake timeout")))
    assert client.next_event() == HelloError(code="invalid_request", message="handshake timeout")
    assert client.state is CLOSED
    assert client.next_event() is CLOSED
    with pytest.raises(LocalProtocolError, match="closed"):
        client.send(Call(id=2, method="m"))


def test_a_hello_error_after_the_handshake_ends_the_connection():
    client, server = open_pair()
    client.receive_data(server.fail("invalid_request", "bad frame") + frame(Cancel(id=1)))
    assert client.next_event() == HelloError(code="invalid_request", message="bad frame")
    assert client.next_event() is CLOSED and client.state is CLOSED


def test_the_server_can_time_out_a_silent_client():
    server = Connection("server")
    data = server.fail("invalid_request", f"handshake not finished within {HANDSHAKE_TIMEOUT:g} s")
    assert decode_message(data[4:]) == HelloError(code="invalid_request", message="handshake not finished within 5 s")
    assert server.state is CLOSED and server.next_event() is CLOSED


# -- fatal errors ----------------------------------------------------------------------------------


def test_a_bad_frame_is_fatal_and_the_error_sticks():
    server = Connection("server")
    server.receive_data(encode_frame(b"\xa1\x01\x02"))
    err = remote_error(server)
    assert err.code == "invalid_request" and "map keys must be text" in err.message
    assert server.state is CLOSED and server.error is err
    for _ in range(2):
        with pytest.raises(RemoteProtocolError) as again:
            server.next_event()
        assert again.value is err
    server.receive_data(frame(hello()))  # ignored now
    with pytest.raises(RemoteProtocolError):
        server.next_event()


def test_an_oversize_header_is_fatal_before_its_payload_arrives():
    server = Connection("server", max_frame=100)
    server.receive_data(struct.pack(">I", 101))  # the header alone
    err = remote_error(server)
    assert err.code == "invalid_request"
    assert "101 bytes" in err.message and "limit of 100 bytes" in err.message


def test_frames_before_a_fatal_one_are_still_delivered():
    client, server = open_pair()
    server.receive_data(frame(Call(id=5, method="m")) + encode_frame(b"\xf7"))
    assert server.next_event() == Call(id=5, method="m")
    assert "undefined" in remote_error(server).message


def test_clean_end_of_stream_closes_and_a_truncated_frame_is_fatal():
    client, server = open_pair()
    server.receive_data(b"")
    assert server.next_event() is CLOSED
    assert server.next_event() is CLOSED

    client, server = open_pair()
    server.receive_data(frame(Cancel(id=1))[:-1])
    assert server.next_event() is NEED_DATA
    server.receive_data(b"")
    err = remote_error(server)
    assert err.code == "invalid_request" and "truncated frame" in err.message


def test_end_of_stream_before_any_hello_is_a_clean_close():
    server = Connection("server")
    server.receive_data(b"")
    assert server.next_event() is CLOSED


def test_after_the_peer_half_closes_answers_can_still_be_sent():
    client, server = open_pair()
    server.receive_data(client.send(Call(id=1, method="m")))
    server.receive_data(b"")
    assert drain(server) == [Call(id=1, method="m"), CLOSED]
    client.receive_data(server.send(Result(id=1, ok=True, value=42)))
    assert client.next_event() == Result(id=1, ok=True, value=42)


def test_data_after_end_of_stream_is_a_caller_bug():
    server = Connection("server")
    server.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="after end of stream"):
        server.receive_data(b"x")


def test_fail_gives_one_final_hello_error_frame():
    client, server = open_pair()
    data = server.fail("invalid_request", "x" * 10_000)
    msg = decode_message(data[4:])
    assert isinstance(msg, HelloError) and len(msg.message) == 500
    assert server.state is CLOSED
    with pytest.raises(LocalProtocolError, match="already sent"):
        server.fail("invalid_request", "again")
    with pytest.raises(LocalProtocolError, match="closed"):
        server.send(Cancel(id=1))


def test_fail_survives_a_message_that_is_not_valid_unicode():
    server = Connection("server")
    msg = decode_message(server.fail("invalid_request", "bad \udc80 text")[4:])
    assert msg.message == "bad \\udc80 text"


def test_fail_works_after_a_remote_error_and_after_receiving_hello_error():
    server = Connection("server")
    server.receive_data(encode_frame(b""))
    err = remote_error(server)
    assert decode_message(server.fail(err.code, err.message)[4:]).code == "invalid_request"

    client, server = open_pair()
    client.receive_data(server.fail("invalid_request", "bye"))
    client.next_event()
    assert isinstance(decode_message(client.fail("invalid_request", "ok")[4:]), HelloError)


# -- what may be sent when ----------------------------------------------------------------------


def local_error(conn: Connection, msg) -> str:
    with pytest.raises(LocalProtocolError) as info:
        conn.send(msg)
    return info.value.message


def test_the_client_must_start_with_hello():
    client = Connection("client")
    assert "before hello" in local_error(client, Call(id=1, method="m"))
    assert client.state is HANDSHAKE
    client.send(hello())
    assert "only be sent once" in local_error(client, hello())


def test_the_client_hello_must_match_its_own_range_and_name():
    client = Connection("client", versions=(1, 2))
    assert "not a non-empty part" in local_error(client, hello(1, 3))
    assert "not a non-empty part" in local_error(client, hello(2, 1))
    assert "must name protocol" in local_error(
        client, Hello(protocol="other", min_version=1, max_version=1, role="ui", name="n")
    )
    assert "must offer the 'cbor' codec" in local_error(client, hello(codecs=[]))
    client.send(hello(2, 2))  # a narrower range is fine


def test_the_client_may_pipeline_calls_and_cancels_but_nothing_else():
    client = Connection("client")
    client.send(hello())
    client.send(Call(id=1, method="m"))
    client.send(Cancel(id=1))
    assert "before the handshake completed" in local_error(client, Chunk(id=1, seq=0))
    assert "before the handshake completed" in local_error(client, Result(id=1, ok=True))
    assert "never sends hello_ok" in local_error(client, HelloOk(version=1, role="r", name="n"))


def test_the_server_answers_only_after_hello_and_only_with_hello_ok_or_hello_error():
    server = Connection("server")
    assert "before the client's hello" in local_error(server, HelloOk(version=1, role="r", name="n"))
    assert "before hello_ok" in local_error(server, Call(id=1, method="m"))
    server.receive_data(frame(hello()) + frame(Call(id=1, method="m")))
    assert drain(server)[:2] == [hello(), Call(id=1, method="m")]
    assert "before hello_ok" in local_error(server, Result(id=1, ok=True))
    assert "never sends hello" in local_error(server, hello())
    assert "outside the common range" in local_error(server, HelloOk(version=2, role="r", name="n"))
    assert "not offered" in local_error(server, HelloOk(version=1, role="r", name="n", codec="json"))
    server.send(hello_ok(server))
    assert server.state is OPEN
    assert "only be sent once" in local_error(server, hello_ok(server))
    server.send(Result(id=1, ok=True))


def test_sending_hello_error_closes_the_connection():
    client, server = open_pair()
    server.send(HelloError(code="invalid_request", message="going away"))
    assert server.state is CLOSED and server.next_event() is CLOSED
    assert "closed" in local_error(server, Cancel(id=1))


def test_a_message_larger_than_the_frame_limit_is_not_sent_and_the_connection_lives_on():
    client = Connection("client", max_frame=128)
    client.send(hello())
    message = local_error(client, Call(id=1, method="m", args="x" * 200))
    assert "exceeds the frame limit of 128 bytes" in message
    client.send(Call(id=1, method="m"))


def test_an_unencodable_message_is_not_sent_and_the_connection_lives_on():
    client, server = open_pair()
    client.receive_data(server.send(Call(id=1, method="m")))
    assert client.next_event() == Call(id=1, method="m")
    assert "not finite" in local_error(client, Chunk(id=1, seq=0, data=float("nan")))
    assert client.state is OPEN
    server.receive_data(client.send(Chunk(id=1, seq=0, data=1.5)))
    assert server.next_event() == Chunk(id=1, seq=0, data=1.5)


def test_bad_constructor_arguments_are_refused():
    with pytest.raises(ValueError):
        Connection("peer")
    with pytest.raises(ValueError):
        Connection("client", versions=(2, 1))


# -- properties ----------------------------------------------------------------------------------

any_message = st.sampled_from(
    [
        hello(),
        hello(2, 3),
        HelloOk(version=1, role="s", name="s"),
        HelloError(code="invalid_request", message="m"),
        Call(id=1, method="m", args=[1, "a"]),
        Chunk(id=1, seq=0, data={"k": None}),
        Result(id=1, ok=True, value=1.5),
        Cancel(id=1),
    ]
)
chunkings = st.lists(st.integers(1, 50), min_size=1, max_size=20)


def feed_in_pieces(conn: Connection, data: bytes, sizes: list[int]) -> None:
    """Feed ``data`` in pieces, draining after each; only RemoteProtocolError may escape."""
    pos = 0
    i = 0
    while True:
        size = sizes[i % len(sizes)]
        piece = data[pos : pos + size]
        pos += size
        i += 1
        conn.receive_data(piece)  # b"" at the end: EOF
        try:
            drain(conn)
        except RemoteProtocolError as exc:
            assert exc.code in ("invalid_request", "version")
            with pytest.raises(RemoteProtocolError) as again:
                conn.next_event()
            assert again.value is exc and conn.state is CLOSED
            return
        if not piece:
            return


@settings(max_examples=300, deadline=None)
@given(side=st.sampled_from(["client", "server"]), data=st.binary(max_size=200), sizes=chunkings)
def test_arbitrary_bytes_never_raise_anything_but_remote_protocol_error(side, data, sizes):
    conn = Connection(side, max_frame=128)
    if side == "client":
        conn.send(hello())
    feed_in_pieces(conn, data, sizes)


@settings(max_examples=300, deadline=None)
@given(
    side=st.sampled_from(["client", "server"]),
    msgs=st.lists(any_message, max_size=6),
    noise=st.binary(max_size=20),
    sizes=chunkings,
)
def test_messages_in_any_order_never_raise_anything_but_remote_protocol_error(side, msgs, noise, sizes):
    conn = Connection(side)
    if side == "client":
        conn.send(hello())
    data = b"".join(frame(m) for m in msgs) + noise
    feed_in_pieces(conn, data, sizes)


# -- the call rules (PROTOCOL.md §6) --------------------------------------------------------------


def open_pair_v2() -> tuple[Connection, Connection]:
    """An open client/server pair on protocol version 2 (flow control)."""
    client, server = Connection("client"), Connection("server")
    server.receive_data(client.send(hello(1, 2)))
    drain(server)
    client.receive_data(server.send(hello_ok(server)))
    drain(client)
    assert client.flow_control and server.flow_control
    return client, server


def test_a_second_call_with_an_id_still_in_flight_is_fatal_instead_of_replacing_the_first():
    client, server = open_pair()
    server.receive_data(frame(Call(id=7, method="first")) + frame(Call(id=7, method="second")))
    assert server.next_event() == Call(id=7, method="first")
    err = remote_error(server)
    assert err.code == "invalid_request" and "duplicate call id 7" in err.message
    assert server.state is CLOSED


def test_an_id_may_be_used_again_once_its_call_was_answered():
    client, server = open_pair()
    server.receive_data(client.send(Call(id=7, method="m")))
    assert server.next_event() == Call(id=7, method="m")
    client.receive_data(server.send(Result(id=7, ok=True)))
    assert client.next_event() == Result(id=7, ok=True)
    server.receive_data(client.send(Call(id=7, method="again")))
    assert server.next_event() == Call(id=7, method="again")


def test_the_two_directions_have_separate_id_spaces():
    client, server = open_pair()
    server.receive_data(client.send(Call(id=1, method="from the client")))
    client.receive_data(server.send(Call(id=1, method="from the server")))
    assert server.next_event() == Call(id=1, method="from the client")
    assert client.next_event() == Call(id=1, method="from the server")


@pytest.mark.parametrize(
    ("seqs", "expected"),
    [([0, 2], 1), ([0, 1, 1], 2), ([1], 0), ([0, 0], 1)],
    ids=["gap", "repeat", "not-from-zero", "zero-twice"],
)
def test_a_gap_or_repeat_in_a_calls_chunk_numbers_is_fatal(seqs, expected):
    client, server = open_pair()
    server.receive_data(client.send(Call(id=3, method="stream")))
    drain(server)
    client.receive_data(b"".join(frame(Chunk(id=3, seq=s)) for s in seqs))
    err = remote_error(client)
    assert f"numbered {seqs[-1]}, expected {expected}" in err.message


def test_each_call_numbers_its_chunks_on_its_own():
    client, server = open_pair()
    for call_id in (1, 2):
        server.receive_data(client.send(Call(id=call_id, method="stream")))
    drain(server)
    for call_id, seq in [(1, 0), (2, 0), (1, 1), (2, 1), (2, 2)]:
        client.receive_data(server.send(Chunk(id=call_id, seq=seq)))
    assert [(e.id, e.seq) for e in drain(client)[:-1]] == [(1, 0), (2, 0), (1, 1), (2, 1), (2, 2)]


@pytest.mark.parametrize(
    "late", [Result(id=4, ok=True), Chunk(id=4, seq=1)], ids=["second-result", "chunk-after-result"]
)
def test_anything_for_a_call_after_its_result_is_fatal(late):
    client, server = open_pair()
    server.receive_data(client.send(Call(id=4, method="m")))
    drain(server)
    client.receive_data(frame(Chunk(id=4, seq=0)) + frame(Result(id=4, ok=True)) + frame(late))
    assert [type(e) for e in (client.next_event(), client.next_event())] == [Chunk, Result]
    err = remote_error(client)
    assert "call 4, which is not in flight" in err.message


@pytest.mark.parametrize("stray", [Result(id=9, ok=True), Chunk(id=9, seq=0)], ids=["result", "chunk"])
def test_a_chunk_or_result_for_a_call_never_made_is_fatal(stray):
    client, server = open_pair()
    client.receive_data(frame(stray))
    assert "call 9, which is not in flight (we made no call with this id" in remote_error(client).message


def test_chunks_and_the_result_arriving_after_we_cancelled_are_normal():
    client, server = open_pair()
    server.receive_data(client.send(Call(id=5, method="slow")))
    drain(server)
    client.receive_data(server.send(Chunk(id=5, seq=0)))  # already on its way when we cancel
    server.receive_data(client.send(Cancel(id=5)))
    assert drain(server) == [Cancel(id=5), NEED_DATA]
    client.receive_data(server.send(Chunk(id=5, seq=1)) + server.send(Result(id=5, ok=True, value="done anyway")))
    assert drain(client)[:-1] == [Chunk(id=5, seq=0), Chunk(id=5, seq=1), Result(id=5, ok=True, value="done anyway")]


def test_a_cancel_racing_the_result_is_ignored_but_we_never_send_one_for_a_finished_call():
    client, server = open_pair()
    server.receive_data(client.send(Call(id=6, method="m")))
    drain(server)
    client.receive_data(server.send(Result(id=6, ok=True)))
    drain(client)
    server.receive_data(frame(Cancel(id=6)))  # sent by a peer before the result reached it
    assert drain(server) == [Cancel(id=6), NEED_DATA] and server.state is OPEN
    assert "cancel for call 6, which is not in flight" in local_error(client, Cancel(id=6))


def test_breaking_the_call_rules_ourselves_sends_nothing_and_changes_nothing():
    client, server = open_pair()
    server.receive_data(client.send(Call(id=1, method="m")))
    drain(server)
    assert "call id 1 is already in flight" in local_error(client, Call(id=1, method="again"))
    assert "chunk for call 2, which is not in flight" in local_error(server, Chunk(id=2, seq=0))
    assert "result for call 2, which is not in flight" in local_error(server, Result(id=2, ok=True))
    assert "numbered 1; the next is 0" in local_error(server, Chunk(id=1, seq=1))
    # An unencodable chunk takes no number: the next one is still 0.
    local_error(server, Chunk(id=1, seq=0, data=float("inf")))
    assert server.next_chunk_seq(1) == 0
    client.receive_data(server.send(Chunk(id=1, seq=0)) + server.send(Result(id=1, ok=True)))
    assert drain(client)[:-1] == [Chunk(id=1, seq=0), Result(id=1, ok=True)]
    assert "result for call 1, which is not in flight" in local_error(server, Result(id=1, ok=True))
    assert client.state is OPEN and server.state is OPEN


# -- flow control (version 2) ---------------------------------------------------------------------


def test_version_2_is_negotiated_when_both_sides_speak_it_and_brings_flow_control():
    client, server = open_pair_v2()
    assert client.negotiated_version == server.negotiated_version == 2
    v1_client, v1_server = open_pair()
    assert v1_client.negotiated_version == 1 and not v1_client.flow_control and not v1_server.flow_control


def test_a_callee_may_send_a_window_of_chunks_and_more_only_as_credit_arrives():
    client, server = open_pair_v2()
    server.receive_data(client.send(Call(id=1, method="stream")))
    drain(server)
    assert server.chunk_allowance(1) == CHUNK_WINDOW
    for seq in range(CHUNK_WINDOW):
        client.receive_data(server.send(Chunk(id=1, seq=seq)))
    assert server.chunk_allowance(1) == 0
    assert "past the caller's credit" in local_error(server, Chunk(id=1, seq=CHUNK_WINDOW))
    assert len(drain(client)) == CHUNK_WINDOW + 1
    server.receive_data(client.send(Credit(id=1, n=3)))
    assert drain(server) == [Credit(id=1, n=3), NEED_DATA]
    assert server.chunk_allowance(1) == 3
    client.receive_data(server.send(Chunk(id=1, seq=CHUNK_WINDOW)))
    assert client.next_event() == Chunk(id=1, seq=CHUNK_WINDOW)


def test_a_chunk_past_the_credit_granted_is_fatal():
    client, server = open_pair_v2()
    server.receive_data(client.send(Call(id=1, method="stream")))
    drain(server)
    client.receive_data(b"".join(frame(Chunk(id=1, seq=s)) for s in range(CHUNK_WINDOW + 1)))
    err = remote_error(client)
    assert f"chunk {CHUNK_WINDOW} of call 1 is past the credit we granted" in err.message


def test_without_flow_control_there_is_no_window_and_credit_is_a_protocol_error():
    client, server = open_pair()
    server.receive_data(client.send(Call(id=1, method="stream")))
    drain(server)
    assert server.chunk_allowance(1) == float("inf")
    for seq in range(CHUNK_WINDOW + 5):
        server.send(Chunk(id=1, seq=seq))
    assert "credit needs protocol version 2" in local_error(client, Credit(id=1, n=1))
    server.receive_data(frame(Credit(id=1, n=1)))
    assert "credit received on a version 1 connection" in remote_error(server).message


def test_credit_for_a_call_already_answered_is_ignored_but_not_sent():
    client, server = open_pair_v2()
    server.receive_data(client.send(Call(id=1, method="m")))
    drain(server)
    credit = client.send(Credit(id=1, n=4))  # crosses the result on the wire
    client.receive_data(server.send(Result(id=1, ok=True)))
    server.receive_data(credit)
    assert drain(server) == [Credit(id=1, n=4), NEED_DATA] and server.state is OPEN
    drain(client)
    assert "credit for call 1, which is not in flight" in local_error(client, Credit(id=1, n=4))


# A model of the call rules, for hostile message sequences: which messages from the peer a
# client with calls 1 and 2 in flight (version 2) must accept.
call_traffic = st.lists(
    st.one_of(
        st.builds(lambda i, s: Chunk(id=i, seq=s), st.integers(0, 3), st.integers(0, 4)),
        st.builds(lambda i: Result(id=i, ok=True), st.integers(0, 3)),
        st.builds(lambda i: Call(id=i, method="m"), st.integers(0, 3)),
        st.builds(lambda i: Cancel(id=i), st.integers(0, 3)),
        st.builds(lambda i, n: Credit(id=i, n=n), st.integers(0, 3), st.integers(0, 3)),
    ),
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(msgs=call_traffic)
def test_hostile_call_traffic_is_accepted_exactly_when_it_keeps_the_rules(msgs):
    client, server = open_pair_v2()
    for call_id in (1, 2):
        server.receive_data(client.send(Call(id=call_id, method="m")))
    ours = {1: 0, 2: 0}  # our calls in flight: next chunk seq
    theirs: set[int] = set()  # the peer's calls in flight
    for msg in msgs:
        if isinstance(msg, Chunk):
            ok = ours.get(msg.id) == msg.seq
            if ok:
                ours[msg.id] += 1
        elif isinstance(msg, Result):
            ok = ours.pop(msg.id, None) is not None
        elif isinstance(msg, Call):
            ok = msg.id not in theirs
            theirs.add(msg.id)
        else:
            ok = True  # a cancel or credit for an id not in flight raced its result
        client.receive_data(frame(msg))
        if not ok:
            with pytest.raises(RemoteProtocolError) as info:
                client.next_event()
            assert info.value.code == "invalid_request" and client.state is CLOSED
            return
        assert client.next_event() == msg
