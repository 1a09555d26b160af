"""The pi-actors wire protocol, sans-I/O (in the manner of h11).

Everything needed to speak the protocol over any byte stream, without doing any I/O:

* messages — the envelope Structs: ``Hello``, ``HelloOk``, ``HelloError``, ``Call``,
  ``Chunk``, ``Result`` (with ``ErrorInfo``), ``Cancel``, ``Credit`` (version 2); ``Message`` is their union;
* ``encode_message`` / ``decode_message`` — one message <-> one strict CBOR item;
  ``encode_json_message`` / ``decode_json_message`` — the same as one JSON text (browsers);
* ``encode_frame`` / ``FrameDecoder`` — 4-byte big-endian length framing;
* ``Connection`` — the state machine (handshake, ordering, fatal errors), with the states
  ``HANDSHAKE`` / ``OPEN`` / ``CLOSED`` and the ``next_event`` sentinel ``NEED_DATA``;
* ``ProtocolError`` / ``LocalProtocolError`` / ``RemoteProtocolError`` and the stable
  error codes.

The normative description, for other implementations, is ``proto/PROTOCOL.md``.
"""

from __future__ import annotations

from ._codec import MAX_DEPTH, MAX_ITEMS, decode_message, encode_message
from ._codec_json import decode_json_message, encode_json_message
from ._connection import (
    CHUNK_WINDOW,
    CLOSED,
    CODECS,
    FLOW_CONTROL_VERSION,
    HANDSHAKE,
    NEED_DATA,
    OPEN,
    PROTOCOL_NAME,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    Connection,
)
from ._errors import (
    CANCELLED,
    CONNECTION_LOST,
    INTERNAL,
    INVALID_REQUEST,
    NOT_FOUND,
    VERSION,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)
from ._framing import DEFAULT_MAX_FRAME, FrameDecoder, encode_frame
from ._messages import Call, Cancel, Chunk, Credit, ErrorInfo, Hello, HelloError, HelloOk, Message, Result

#: Seconds a server waits for the client's Hello before failing the connection.
HANDSHAKE_TIMEOUT = 5.0

#: Seconds either end of an inherited link (a socketpair from the common owner) waits for the
#: other's Hello: the other end is a sibling process still starting, not a stranger, and on a
#: busy machine its interpreter start and imports take well over ``HANDSHAKE_TIMEOUT`` (a
#: provider that gave up after 5 s while its coordinator was still importing failed the run).
#: A sibling that dies instead closes its end, which ends the wait at once.
SIBLING_HANDSHAKE_TIMEOUT = 60.0

__all__ = [
    # constants
    "CHUNK_WINDOW",
    "CODECS",
    "DEFAULT_MAX_FRAME",
    "FLOW_CONTROL_VERSION",
    "HANDSHAKE_TIMEOUT",
    "SIBLING_HANDSHAKE_TIMEOUT",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "PROTOCOL_NAME",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    # messages
    "Call",
    "Cancel",
    "Chunk",
    "Credit",
    "ErrorInfo",
    "Hello",
    "HelloError",
    "HelloOk",
    "Message",
    "Result",
    # codec and framing
    "FrameDecoder",
    "decode_json_message",
    "decode_message",
    "encode_frame",
    "encode_json_message",
    "encode_message",
    # connection
    "CLOSED",
    "HANDSHAKE",
    "NEED_DATA",
    "OPEN",
    "Connection",
    # errors and error codes
    "CANCELLED",
    "CONNECTION_LOST",
    "INTERNAL",
    "INVALID_REQUEST",
    "NOT_FOUND",
    "VERSION",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
]
