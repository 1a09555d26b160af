"""The sans-I/O connection state machine of the pi-actors protocol.

Theory of operation
-------------------

A :class:`Connection` is one side (``"client"`` or ``"server"``) of one byte stream. It
never does I/O: the caller feeds it the bytes it read (``receive_data``; ``b""`` for end of
stream) and pulls messages out (``next_event``), and it turns messages to send into bytes
(``send``) for the caller to write. Everything is checked here, so the I/O adapter only
moves bytes:

* Framing and strict CBOR (``_framing``, ``_codec``), or JSON (``_codec_json``): anything
  malformed raises :class:`RemoteProtocolError` from ``next_event``. The codec is the
  hello's: a client writes its hello in ``codecs[0]``; a server tells the codec of the hello
  from its first byte (``{``: JSON), accepts it if it is one of its ``codecs`` and the hello
  offers it, and from then on both sides write and accept only that codec.
* The handshake. The client's first frame is ``Hello``; the server answers ``HelloOk``
  (the highest common version, which ``next_event`` computed into ``negotiated_version``
  when the Hello arrived) or ``HelloError``. The client may pipeline ``Call`` and
  ``Cancel`` right after its Hello; the server receives them as events after the Hello and
  must not answer them before it has sent ``HelloOk``.
* ``state`` is ``HANDSHAKE`` → ``OPEN`` → ``CLOSED``. The client opens on receiving
  ``HelloOk``, the server on sending it. ``CLOSED`` is reached by sending or receiving a
  ``HelloError`` (the last frame of a failed connection, at any time) or by the peer
  violating the protocol. End of stream alone does not close the sending side:
  ``next_event`` returns ``CLOSED`` but answers may still be sent (half-close).
* Errors. A :class:`LocalProtocolError` from ``send`` leaves the connection untouched
  (nothing was sent). A :class:`RemoteProtocolError` from ``next_event`` is final: the
  connection is ``CLOSED`` and every later ``next_event`` raises the same error; the caller
  then writes ``fail(err.code, err.message, err.supported)`` and closes the stream.

* The call rules (PROTOCOL.md §6), in both directions. A call is *in flight* from its
  ``Call`` until its ``Result``; ids are unique among the calls in flight of one direction;
  chunks are numbered 0, 1, 2, … per call; exactly one ``Result`` ends a call. A ``Cancel``
  changes nothing here: the call stays in flight until its result, so chunks and the result
  arriving after we sent a cancel are normal. Breaking a rule ourselves raises
  :class:`LocalProtocolError` from ``send`` (nothing is sent); the peer breaking one (a
  duplicate id, a gap or repeat in ``seq``, a chunk or result for an id not in flight) is a
  :class:`RemoteProtocolError`. A ``Cancel`` for an id not in flight is ignored on receipt
  (it may race the result) but refused on ``send``: our side knows the call is over.
* Flow control (version 2, when ``flow_control`` is true). The callee of a call may send
  chunk ``seq`` only while ``seq`` is below the call's *limit*, which starts at
  ``CHUNK_WINDOW`` and grows by ``n`` with every ``Credit{id, n}`` the caller sends as it
  consumes chunks. ``chunk_allowance(id)`` tells the callee how many chunks it may send now;
  a chunk past the limit is a protocol error either way. The connection only counts: the
  I/O adapter decides when to wait and when to grant credit (see ``_peer``).
"""

from __future__ import annotations

import math
from typing import Final, Literal

from ._codec import decode_message, encode_message, encode_message_into
from ._codec_json import decode_json_message, encode_json_message
from ._errors import INVALID_REQUEST, VERSION, LocalProtocolError, RemoteProtocolError
from ._framing import DEFAULT_MAX_FRAME, FrameDecoder, encode_frame
from ._messages import Call, Cancel, Chunk, Credit, Hello, HelloError, HelloOk, Message, Result

__all__ = [
    "CHUNK_WINDOW",
    "CLOSED",
    "CODECS",
    "FLOW_CONTROL_VERSION",
    "HANDSHAKE",
    "NEED_DATA",
    "OPEN",
    "PROTOCOL_NAME",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "Connection",
]

PROTOCOL_NAME: Final = "pi-actors"
PROTOCOL_VERSION: Final = 2
#: The inclusive range of protocol versions this implementation speaks.
SUPPORTED_VERSIONS: Final = (1, 2)
#: The first version with per-call flow control (``Credit``).
FLOW_CONTROL_VERSION: Final = 2
#: Chunks a callee may send before the caller grants credit (version 2).
CHUNK_WINDOW: Final = 32
#: The payload codecs: ``cbor`` (every peer) and ``json`` (browsers; PROTOCOL.md §3a).
CODECS: Final = ("cbor", "json")
#: A JSON message is an object: its payload starts with ``{`` — a CBOR text string with an
#: 8-byte length, never a CBOR message (a map). The codec of a hello is told by this byte.
_JSON_FIRST_BYTE = 0x7B

#: ``state``: the hello exchange is not finished.
HANDSHAKE: Final = "HANDSHAKE"
#: ``state``: the handshake succeeded; calls flow both ways.
OPEN: Final = "OPEN"
#: ``state``: the connection failed or ended with a hello_error; also the ``next_event``
#: sentinel meaning "the peer will send nothing more".
CLOSED: Final = "CLOSED"
#: ``next_event`` sentinel: feed more bytes with ``receive_data``.
NEED_DATA: Final = "NEED_DATA"

_CALL_TYPES = (Call, Chunk, Result, Cancel, Credit)
_MAX_FAIL_MESSAGE = 500


class Connection:
    """One side of a pi-actors connection, as a sans-I/O state machine.

    Args:
        side: ``"client"`` (sends the first Hello) or ``"server"``.
        versions: the inclusive ``(min, max)`` protocol versions this side supports.
        max_frame: the largest payload sent or accepted, in bytes.
        codecs: the payload codecs this side speaks on this connection (``CODECS``).
            A client writes its hello in ``codecs[0]`` and expects the server to choose
            it. A server accepts a hello written in any of them (told by its first byte,
            ``{`` for JSON) that offers the codec it is written in, and answers in it.

    Attributes:
        side: as given.
        state: ``HANDSHAKE``, ``OPEN`` or ``CLOSED``.
        negotiated_version: the agreed version once known, else ``None``.
        peer_hello: (server) the client's Hello once received.
        peer_hello_ok: (client) the server's HelloOk once received.
        error: the RemoteProtocolError that killed the connection, if any.
        codec: the codec of this connection: ``codecs[0]`` until a server has read the
            client's hello, then the hello's.
        last_payload_size: the size in bytes of the last frame's payload ``next_event``
            decoded (0 before the first), e.g. what a received call cost on the wire.
    """

    def __init__(
        self,
        side: Literal["client", "server"],
        *,
        versions: tuple[int, int] = SUPPORTED_VERSIONS,
        max_frame: int = DEFAULT_MAX_FRAME,
        codecs: tuple[str, ...] = ("cbor",),
    ) -> None:
        if side not in ("client", "server"):
            raise ValueError(f"side must be 'client' or 'server', got {side!r}")
        lo, hi = versions
        if not (isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi):
            raise ValueError(f"versions must be an inclusive (min, max) range, got {versions!r}")
        if not codecs or any(c not in CODECS for c in codecs):
            raise ValueError(f"codecs must be a non-empty selection of {CODECS}, got {codecs!r}")
        self.codecs: Final = tuple(codecs)
        self.codec: str = codecs[0]
        self._encode = encode_json_message if self.codec == "json" else None
        self.side: Final = side
        self.versions: Final = (lo, hi)
        self.max_frame: Final = max_frame
        self.state: str = HANDSHAKE
        self.negotiated_version: int | None = None
        self.peer_hello: Hello | None = None
        self.peer_hello_ok: HelloOk | None = None
        self.error: RemoteProtocolError | None = None
        self.last_payload_size = 0
        self._decoder = FrameDecoder(max_frame)
        self._eof = False
        self._hello_sent = False  # client: our Hello went out
        self._announced: tuple[int, int] | None = None  # client: the range our Hello announced
        self._hello_error_sent = False
        self._peer_done = False  # a HelloError arrived or EOF was reported: no more events
        # Calls in flight, by id: [the next chunk seq, the seq limit of flow control].
        self._calls_out: dict[int, list[int]] = {}  # ours, waiting for their result
        self._calls_in: dict[int, list[int]] = {}  # the peer's, not answered yet

    # -- calls in flight -----------------------------------------------------------------

    @property
    def flow_control(self) -> bool:
        """Whether the negotiated version has per-call flow control (``Credit``)."""
        version = self.negotiated_version
        return version is not None and version >= FLOW_CONTROL_VERSION

    def awaiting_result(self, call_id: int) -> bool:
        """Whether our call ``call_id`` is in flight (sent, its result not yet received)."""
        return call_id in self._calls_out

    def chunk_allowance(self, call_id: int) -> float:
        """How many chunks of the peer's call ``call_id`` we may send now: 0 while we wait
        for credit, ``math.inf`` without flow control.

        Raises:
            LocalProtocolError: the call is not in flight (never received, or answered).
        """
        state = self._calls_in.get(call_id)
        if state is None:
            raise LocalProtocolError(INVALID_REQUEST, _not_in_flight("chunk", call_id, "theirs"))
        if not self.flow_control:
            return math.inf
        return max(0, state[1] - state[0])

    def next_chunk_seq(self, call_id: int) -> int:
        """The ``seq`` the next chunk we send for the peer's call ``call_id`` must carry.

        Raises:
            LocalProtocolError: the call is not in flight.
        """
        state = self._calls_in.get(call_id)
        if state is None:
            raise LocalProtocolError(INVALID_REQUEST, _not_in_flight("chunk", call_id, "theirs"))
        return state[0]

    # -- sending ---------------------------------------------------------------------------

    def send(self, msg: Message) -> bytes:
        """Check that ``msg`` may be sent now, and return its frame.

        Returns:
            The bytes to write: header and CBOR payload.

        Raises:
            LocalProtocolError: (``invalid_request``) ``msg`` is out of order (see the
                module docstring), cannot be encoded, or is larger than ``max_frame``.
                The connection's state is unchanged.
        """
        state = self.state
        if state is OPEN and type(msg) in _CALL_TYPES:
            return self._send_call_traffic(msg)  # the hot path
        if state is CLOSED:
            raise LocalProtocolError(
                INVALID_REQUEST, f"cannot send {_name(msg)}: the connection is closed"
            )
        if type(msg) is HelloError:
            data = self._frame(msg)
            self._close_by_hello_error()
            return data
        if self.side == "client":
            return self._client_send(msg)
        return self._server_send(msg)

    def _client_send(self, msg: Message) -> bytes:
        if type(msg) is Hello:
            if self._hello_sent:
                raise LocalProtocolError(INVALID_REQUEST, "hello may only be sent once")
            if msg.protocol != PROTOCOL_NAME:
                raise LocalProtocolError(
                    INVALID_REQUEST, f"hello must name protocol {PROTOCOL_NAME!r}, not {msg.protocol!r}"
                )
            lo, hi = self.versions
            if not lo <= msg.min_version <= msg.max_version <= hi:
                raise LocalProtocolError(
                    INVALID_REQUEST,
                    f"hello announces versions {msg.min_version}..{msg.max_version}, which is not"
                    f" a non-empty part of this connection's range {lo}..{hi}",
                )
            if self.codec not in msg.codecs:
                raise LocalProtocolError(
                    INVALID_REQUEST, f"hello must offer the {self.codec!r} codec, got {msg.codecs!r}"
                )
            data = self._frame(msg)
            self._hello_sent = True
            self._announced = (msg.min_version, msg.max_version)
            return data
        if type(msg) is HelloOk:
            raise LocalProtocolError(INVALID_REQUEST, "a client never sends hello_ok")
        if not self._hello_sent:
            raise LocalProtocolError(
                INVALID_REQUEST, f"cannot send {_name(msg)} before hello: hello must be first"
            )
        if self.state is HANDSHAKE and type(msg) not in (Call, Cancel):
            raise LocalProtocolError(
                INVALID_REQUEST,
                f"cannot send {_name(msg)} before the handshake completed"
                " (only call and cancel may be pipelined after hello)",
            )
        return self._send_call_traffic(msg)

    def _send_call_traffic(self, msg: Message) -> bytes:
        """Check ``msg`` against the call rules, frame it, then record it (in that order:
        a message that cannot be framed changes nothing)."""
        kind = type(msg)
        if kind is Chunk:
            chunk: Chunk = msg  # type: ignore[assignment]
            state = self._calls_in.get(chunk.id)
            if state is None:
                raise LocalProtocolError(INVALID_REQUEST, _not_in_flight("chunk", chunk.id, "theirs"))
            if chunk.seq != state[0]:
                raise LocalProtocolError(
                    INVALID_REQUEST, f"chunk of call {chunk.id} numbered {chunk.seq}; the next is {state[0]}"
                )
            if self.flow_control and chunk.seq >= state[1]:
                raise LocalProtocolError(
                    INVALID_REQUEST,
                    f"chunk {chunk.seq} of call {chunk.id} is past the caller's credit"
                    f" (chunks below {state[1]} may be sent)",
                )
            data = self._frame(msg)
            state[0] += 1
            return data
        if kind is Result:
            call_id = msg.id  # type: ignore[union-attr]
            if call_id not in self._calls_in:
                raise LocalProtocolError(INVALID_REQUEST, _not_in_flight("result", call_id, "theirs"))
            data = self._frame(msg)
            del self._calls_in[call_id]
            return data
        if kind is Call:
            call_id = msg.id  # type: ignore[union-attr]
            if call_id in self._calls_out:
                raise LocalProtocolError(
                    INVALID_REQUEST, f"call id {call_id} is already in flight; ids must be unique"
                )
            data = self._frame(msg)
            self._calls_out[call_id] = [0, CHUNK_WINDOW]
            return data
        if kind is Cancel:
            call_id = msg.id  # type: ignore[union-attr]
            if call_id not in self._calls_out:
                raise LocalProtocolError(INVALID_REQUEST, _not_in_flight("cancel", call_id, "ours"))
            return self._frame(msg)
        # Credit
        credit: Credit = msg  # type: ignore[assignment]
        if not self.flow_control:
            raise LocalProtocolError(
                INVALID_REQUEST,
                f"credit needs protocol version {FLOW_CONTROL_VERSION}; this connection speaks"
                f" {self.negotiated_version}",
            )
        state = self._calls_out.get(credit.id)
        if state is None:
            raise LocalProtocolError(INVALID_REQUEST, _not_in_flight("credit", credit.id, "ours"))
        data = self._frame(msg)
        state[1] += credit.n
        return data

    def _server_send(self, msg: Message) -> bytes:
        if type(msg) is Hello:
            raise LocalProtocolError(INVALID_REQUEST, "a server never sends hello")
        if type(msg) is HelloOk:
            if self.state is not HANDSHAKE:
                raise LocalProtocolError(INVALID_REQUEST, "hello_ok may only be sent once")
            hello = self.peer_hello
            if hello is None:
                raise LocalProtocolError(
                    INVALID_REQUEST, "cannot send hello_ok before the client's hello arrived"
                )
            lo = max(self.versions[0], hello.min_version)
            hi = min(self.versions[1], hello.max_version)
            if not lo <= msg.version <= hi:
                raise LocalProtocolError(
                    INVALID_REQUEST,
                    f"hello_ok version {msg.version} is outside the common range {lo}..{hi}",
                )
            if msg.codec not in hello.codecs or msg.codec != self.codec:
                raise LocalProtocolError(
                    INVALID_REQUEST, f"hello_ok codec {msg.codec!r} was not offered by the client"
                )
            data = self._frame(msg)
            self.negotiated_version = msg.version
            self.state = OPEN
            return data
        # A call-type message while still in the handshake.
        raise LocalProtocolError(
            INVALID_REQUEST,
            f"cannot send {_name(msg)} before hello_ok: the handshake is not finished",
        )

    def _frame(self, msg: Message) -> bytes:
        out = bytearray(4)  # the length header, filled in below
        if self._encode is None:
            encode_message_into(msg, out)
        else:
            out += self._encode(msg)
        size = len(out) - 4
        if size > self.max_frame:
            error = LocalProtocolError(
                INVALID_REQUEST,
                f"{_name(msg)} message of {size} bytes exceeds the frame limit"
                f" of {self.max_frame} bytes",
            )
            error.size = size  # type: ignore[attr-defined]  # for the caller's own wording
            raise error
        out[0:4] = size.to_bytes(4, "big")
        return bytes(out)

    def fail(self, code: str, message: str, supported: list[int] | None = None) -> bytes:
        """Return the final ``hello_error`` frame and close the connection.

        For use after a RemoteProtocolError (pass its ``code``, ``message`` and
        ``supported``) or on a handshake timeout. ``message`` is cut to 500 characters, and
        the frame is returned even if it exceeds ``max_frame``, so that this never fails in
        an error path except for misuse.

        Raises:
            LocalProtocolError: a hello_error was already sent, or ``code`` is not a
                non-empty str.
        """
        if self._hello_error_sent:
            raise LocalProtocolError(INVALID_REQUEST, "a hello_error was already sent")
        if not isinstance(code, str) or not code:
            raise LocalProtocolError(INVALID_REQUEST, f"error code must be a non-empty str, got {code!r}")
        # Never let the message itself make this fail: no lone surrogates, bounded length.
        message = str(message).encode("utf-8", "backslashreplace").decode("utf-8")
        if len(message) > _MAX_FAIL_MESSAGE:
            message = message[: _MAX_FAIL_MESSAGE - 3] + "..."
        if supported is not None:
            supported = list(supported)
        final = HelloError(code=code, message=message, supported=supported)
        data = encode_frame(encode_json_message(final) if self.codec == "json" else encode_message(final))
        self._close_by_hello_error()
        return data

    def _close_by_hello_error(self) -> None:
        self._hello_error_sent = True
        self.state = CLOSED

    # -- receiving -------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Feed bytes read from the stream; ``b""`` reports end of stream.

        Data arriving after the connection closed is ignored.

        Raises:
            LocalProtocolError: data fed after end of stream was reported.
        """
        if self._eof:
            if data:
                raise LocalProtocolError(INVALID_REQUEST, "data received after end of stream")
            return
        if not data:
            self._eof = True
            return
        if self.state is not CLOSED:
            self._decoder.feed(data)

    def next_event(self) -> Message | str:
        """The next message from the peer, ``NEED_DATA`` or ``CLOSED``.

        Returns:
            A message; ``NEED_DATA`` when more bytes are needed; ``CLOSED`` when the peer
            will send nothing more (clean end of stream, after a hello_error either way).

        Raises:
            RemoteProtocolError: the peer broke the protocol (``invalid_request``), or its
                Hello shares no version with us (``version``, with ``supported`` set). The
                connection is then CLOSED and the same error is raised on every later call.
        """
        if self.error is not None:
            raise self.error
        if self._peer_done or self._hello_error_sent:
            return CLOSED
        try:
            payload = self._decoder.next_frame()
            if payload is None:
                if self._eof:
                    self._decoder.check_end()
                    self._peer_done = True
                    return CLOSED
                return NEED_DATA
            self.last_payload_size = len(payload)
            if self.state is HANDSHAKE:
                msg = self._decode_first(payload)
            elif self._encode is None:
                msg = decode_message(payload)
            else:
                msg = decode_json_message(payload)
            if self.state is OPEN and type(msg) in _CALL_TYPES:
                return self._receive_call_traffic(msg)  # the hot path
            return self._check_received(msg)
        except RemoteProtocolError as exc:
            self.error = exc
            self.state = CLOSED
            raise

    def _decode_first(self, payload: bytes) -> Message:
        """Decode a message received during the handshake, in the codec its first byte tells
        (a server learns the client's codec from its hello; a client may get a hello_error
        in CBOR from a server that speaks no JSON)."""
        is_json = len(payload) > 0 and payload[0] == _JSON_FIRST_BYTE
        codec = "json" if is_json else "cbor"
        if self.side == "server" and self.peer_hello is None:
            if codec not in self.codecs:
                raise RemoteProtocolError(
                    INVALID_REQUEST,
                    f"no common codec: the hello is written in {codec}; this server speaks {list(self.codecs)!r} here",
                )
            self.codec = codec
            self._encode = encode_json_message if codec == "json" else None
        elif codec != self.codec:
            msg = decode_json_message(payload) if is_json else decode_message(payload)
            if type(msg) is not HelloError:
                raise RemoteProtocolError(
                    INVALID_REQUEST, f"{_name(msg)} written in {codec} on a {self.codec} connection"
                )
            return msg
        return decode_json_message(payload) if is_json else decode_message(payload)

    def _check_received(self, msg: Message) -> Message:
        """Sequencing checks for everything but call traffic on an open connection."""
        kind = type(msg)
        if kind is HelloError:
            self._peer_done = True
            self.state = CLOSED
            return msg
        if self.side == "server":
            if kind is Hello:
                if self.peer_hello is not None:
                    raise RemoteProtocolError(
                        INVALID_REQUEST, "hello may only be sent as the first message"
                    )
                self._accept_hello(msg)  # type: ignore[arg-type]
                return msg
            if self.peer_hello is None:
                raise RemoteProtocolError(
                    INVALID_REQUEST, f"the first client message must be hello, got {_name(msg)}"
                )
            if kind is HelloOk:
                raise RemoteProtocolError(INVALID_REQUEST, "a client never sends hello_ok")
            if kind in (Chunk, Result, Credit):
                raise RemoteProtocolError(
                    INVALID_REQUEST,
                    f"{_name(msg)} received before the handshake completed"
                    " (only call and cancel may be pipelined after hello)",
                )
            return self._receive_call_traffic(msg)  # a pipelined Call or Cancel
        # client
        if kind is Hello:
            raise RemoteProtocolError(INVALID_REQUEST, "a server never sends hello")
        if kind is HelloOk:
            if self.state is not HANDSHAKE:
                raise RemoteProtocolError(INVALID_REQUEST, "hello_ok may only be sent once")
            self._accept_hello_ok(msg)  # type: ignore[arg-type]
            return msg
        if self.state is HANDSHAKE:
            raise RemoteProtocolError(
                INVALID_REQUEST,
                f"the first server message must be hello_ok or hello_error, got {_name(msg)}",
            )
        return msg

    def _receive_call_traffic(self, msg: Message) -> Message:
        """Check a received call message against the call rules and record it."""
        kind = type(msg)
        if kind is Chunk:
            chunk: Chunk = msg  # type: ignore[assignment]
            state = self._calls_out.get(chunk.id)
            if state is None:
                raise RemoteProtocolError(INVALID_REQUEST, _not_in_flight("chunk", chunk.id, "ours"))
            if chunk.seq != state[0]:
                raise RemoteProtocolError(
                    INVALID_REQUEST,
                    f"chunk of call {chunk.id} numbered {chunk.seq}, expected {state[0]}"
                    " (chunks are numbered 0, 1, 2, ... without gaps)",
                )
            if self.flow_control and chunk.seq >= state[1]:
                raise RemoteProtocolError(
                    INVALID_REQUEST,
                    f"chunk {chunk.seq} of call {chunk.id} is past the credit we granted"
                    f" (chunks below {state[1]})",
                )
            state[0] += 1
            return msg
        if kind is Result:
            if self._calls_out.pop(msg.id, None) is None:  # type: ignore[union-attr]
                raise RemoteProtocolError(INVALID_REQUEST, _not_in_flight("result", msg.id, "ours"))  # type: ignore[union-attr]
            return msg
        if kind is Call:
            call_id = msg.id  # type: ignore[union-attr]
            if call_id in self._calls_in:
                raise RemoteProtocolError(
                    INVALID_REQUEST, f"duplicate call id {call_id}: a call with this id is still in flight"
                )
            self._calls_in[call_id] = [0, CHUNK_WINDOW]
            return msg
        if kind is Credit:
            if not self.flow_control:
                raise RemoteProtocolError(
                    INVALID_REQUEST,
                    f"credit received on a version {self.negotiated_version} connection"
                    f" (it needs version {FLOW_CONTROL_VERSION})",
                )
            state = self._calls_in.get(msg.id)  # type: ignore[union-attr]
            if state is not None:  # else the call is over: credit racing our result
                state[1] += msg.n  # type: ignore[union-attr]
            return msg
        return msg  # Cancel: one for an id not in flight raced the result, and is ignored

    def _accept_hello(self, hello: Hello) -> None:
        if hello.protocol != PROTOCOL_NAME:
            raise RemoteProtocolError(
                INVALID_REQUEST,
                f"unknown protocol {_excerpt(hello.protocol)}; this peer speaks {PROTOCOL_NAME!r}",
            )
        if hello.min_version > hello.max_version:
            raise RemoteProtocolError(
                INVALID_REQUEST,
                f"hello announces an empty version range {hello.min_version}..{hello.max_version}",
            )
        lo, hi = self.versions
        common_hi = min(hi, hello.max_version)
        if max(lo, hello.min_version) > common_hi:
            raise RemoteProtocolError(
                VERSION,
                f"no common protocol version: the client speaks"
                f" {hello.min_version}..{hello.max_version}, this server {lo}..{hi}",
                [lo, hi],
            )
        if self.codec not in hello.codecs:
            raise RemoteProtocolError(
                INVALID_REQUEST,
                f"no common codec: the client offers {_excerpt(hello.codecs)} in a hello written in"
                f" {self.codec}; this server speaks {list(self.codecs)!r} here",
            )
        self.peer_hello = hello
        self.negotiated_version = common_hi

    def _accept_hello_ok(self, ok: HelloOk) -> None:
        if not self._hello_sent:
            raise RemoteProtocolError(INVALID_REQUEST, "hello_ok received before our hello was sent")
        lo, hi = self._announced  # type: ignore[misc]
        if not lo <= ok.version <= hi:
            raise RemoteProtocolError(
                INVALID_REQUEST,
                f"the server chose version {ok.version}, outside the range {lo}..{hi} we announced",
            )
        if ok.codec != self.codec:
            raise RemoteProtocolError(
                INVALID_REQUEST, f"the server chose codec {_excerpt(ok.codec)}, which we did not offer"
            )
        self.peer_hello_ok = ok
        self.negotiated_version = ok.version
        self.state = OPEN


def _name(msg: object) -> str:
    """The wire name of a message, for error messages."""
    config = getattr(type(msg), "__struct_config__", None)
    tag = getattr(config, "tag", None)
    return tag if isinstance(tag, str) else type(msg).__name__


def _not_in_flight(what: str, call_id: int, whose: str) -> str:
    if whose == "ours":
        why = "we made no call with this id, or its result arrived"
    else:
        why = "the peer made no call with this id, or it was answered"
    return f"{what} for call {call_id}, which is not in flight ({why})"


def _excerpt(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
