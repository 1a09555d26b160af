"""A decoder for AWS event-stream framing (``application/vnd.amazon.eventstream``), the binary
framing of Bedrock's ``ConverseStream`` response body.

Wire format of one message (all integers big-endian)::

    total length u32 | headers length u32 | prelude CRC32 u32   (the 12-byte prelude)
    headers (headers-length bytes) | payload | message CRC32 u32

The prelude CRC covers the first 8 bytes; the message CRC covers everything before it. A
header is ``name length u8 | name (UTF-8) | type u8 | value``; value types: 0 true, 1 false,
2 i8, 3 i16, 4 i32, 5 i64, 6 bytes (u16 length), 7 string (u16 length, UTF-8), 8 timestamp
(i64 ms), 9 UUID (16 bytes).

Contract: ``EventStreamDecoder.feed(data)`` takes the body in pieces cut anywhere and returns
the messages completed so far, in order; ``finish()`` raises when the body ended inside a
message. Any framing fault — a length out of range, a CRC mismatch, a header running past its
block, an unknown header type, a name or string that is not UTF-8 — raises
``EventStreamError`` with one line saying what was wrong; after that the decoder stays failed
(the stream cannot be resynchronised). Pure: no I/O.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, NamedTuple

__all__ = ["EventStreamDecoder", "EventStreamError", "EventMessage", "MAX_MESSAGE_BYTES"]

#: AWS caps one message at 16 MiB of payload and 128 KiB of headers.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024 + 128 * 1024 + 16
_PRELUDE = struct.Struct(">III")
_MIN_MESSAGE = _PRELUDE.size + 4
_FIXED = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}


class EventStreamError(Exception):
    """The body is not valid event-stream framing (the message says how)."""


class EventMessage(NamedTuple):
    """One decoded message: its headers (name → bool/int/bytes/str/UUID hex) and raw payload."""

    headers: dict[str, Any]
    payload: bytes


def _headers(block: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pos, end = 0, len(block)
    while pos < end:
        name_len = block[pos]
        pos += 1
        if name_len == 0 or pos + name_len + 1 > end:
            raise EventStreamError("Malformed event stream: a header name runs past the header block")
        try:
            name = block[pos:pos + name_len].decode("utf-8")
        except UnicodeDecodeError:
            raise EventStreamError("Malformed event stream: a header name is not UTF-8") from None
        pos += name_len
        kind = block[pos]
        pos += 1
        value: Any
        if kind in (0, 1):
            value = kind == 0
        elif kind in _FIXED:
            size = struct.calcsize(_FIXED[kind])
            if pos + size > end:
                raise EventStreamError(f"Malformed event stream: header {name!r} runs past the header block")
            (value,) = struct.unpack_from(_FIXED[kind], block, pos)
            pos += size
        elif kind in (6, 7):
            if pos + 2 > end:
                raise EventStreamError(f"Malformed event stream: header {name!r} runs past the header block")
            (length,) = struct.unpack_from(">H", block, pos)
            pos += 2
            if pos + length > end:
                raise EventStreamError(f"Malformed event stream: header {name!r} runs past the header block")
            raw = block[pos:pos + length]
            pos += length
            if kind == 6:
                value = raw
            else:
                try:
                    value = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise EventStreamError(f"Malformed event stream: header {name!r} is not UTF-8") from None
        elif kind == 9:
            if pos + 16 > end:
                raise EventStreamError(f"Malformed event stream: header {name!r} runs past the header block")
            value = block[pos:pos + 16].hex()
            pos += 16
        else:
            raise EventStreamError(f"Malformed event stream: header {name!r} has unknown type {kind}")
        out[name] = value
    return out


class EventStreamDecoder:
    """Incremental decoder (module docstring)."""

    def __init__(self, max_message: int = MAX_MESSAGE_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_message
        self._failed: EventStreamError | None = None

    def feed(self, data: bytes) -> list[EventMessage]:
        if self._failed is not None:
            raise self._failed
        self._buffer += data
        messages: list[EventMessage] = []
        try:
            while len(self._buffer) >= _PRELUDE.size:
                total, headers_len, prelude_crc = _PRELUDE.unpack_from(self._buffer, 0)
                if zlib.crc32(self._buffer[:8]) != prelude_crc:
                    raise EventStreamError("Malformed event stream: prelude checksum mismatch")
                if total < _MIN_MESSAGE or total > self._max:
                    raise EventStreamError(f"Malformed event stream: message length {total} out of range")
                if headers_len > total - _MIN_MESSAGE:
                    raise EventStreamError(f"Malformed event stream: headers length {headers_len} exceeds "
                                           f"the message ({total} bytes)")
                if len(self._buffer) < total:
                    break
                frame = bytes(self._buffer[:total])
                del self._buffer[:total]
                (message_crc,) = struct.unpack_from(">I", frame, total - 4)
                if zlib.crc32(frame[:-4]) != message_crc:
                    raise EventStreamError("Malformed event stream: message checksum mismatch")
                start = _PRELUDE.size
                headers = _headers(frame[start:start + headers_len])
                messages.append(EventMessage(headers, frame[start + headers_len:-4]))
        except EventStreamError as exc:
            self._failed = exc
            raise
        return messages

    def finish(self) -> None:
        """Raise ``EventStreamError`` if the body ended inside a message."""
        if self._failed is not None:
            raise self._failed
        if self._buffer:
            self._failed = EventStreamError(f"Event stream ended inside a message ({len(self._buffer)} bytes left over)")
            raise self._failed
