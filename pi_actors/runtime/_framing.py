"""Length-prefixed framing: a 4-byte big-endian unsigned length, then that many bytes.

Contract:

* ``encode_frame(payload)`` returns the header and the payload as one ``bytes``.
* :class:`FrameDecoder` takes bytes in chunks of any size (``feed``) and hands back the
  complete payloads in order (``next_frame``). It splits every chunk into frames as soon as
  it is fed, so the bytes it holds beyond the queued complete frames are at most one partial
  frame: never more than ``max_frame + 4`` bytes. A header announcing more than
  ``max_frame`` bytes is refused as soon as its 4 bytes are in, before any of its payload is
  buffered: ``next_frame`` raises :class:`RemoteProtocolError` (``invalid_request``) once the
  frames before it have been taken, and keeps raising it; later input is discarded.
* A frame of length 0 is valid framing (an empty payload, which the codec then refuses).
* End of stream is the caller's business: call ``check_end()`` when the stream ended and
  ``next_frame`` returned ``None``; it raises if a partial frame is left over.
"""

from __future__ import annotations

import struct
from collections import deque

from ._errors import INVALID_REQUEST, LocalProtocolError, RemoteProtocolError

__all__ = ["DEFAULT_MAX_FRAME", "HEADER_SIZE", "FrameDecoder", "encode_frame"]

#: Default largest payload, in bytes, either side accepts (16 MiB).
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
#: Size of the length header, in bytes.
HEADER_SIZE = 4
_MAX_LENGTH = 2**32 - 1

_pack_length = struct.Struct(">I").pack
_unpack_length = struct.Struct(">I").unpack_from


def encode_frame(payload: bytes) -> bytes:
    """Return ``payload`` prefixed with its length as a 4-byte big-endian unsigned integer.

    Raises:
        LocalProtocolError: (``invalid_request``) the payload is longer than 2**32 − 1
            bytes. (The caller enforces its own, smaller, ``max_frame``.)
    """
    n = len(payload)
    if n > _MAX_LENGTH:
        raise LocalProtocolError(
            INVALID_REQUEST, f"a payload of {n} bytes cannot be framed (limit 2**32 - 1)"
        )
    return _pack_length(n) + payload


class FrameDecoder:
    """Split a byte stream into frame payloads; sans-I/O.

    Args:
        max_frame: the largest payload accepted, in bytes (``0 … 2**32 − 1``).
    """

    __slots__ = ("_buf", "_error", "_frames", "max_frame")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if not 0 <= max_frame <= _MAX_LENGTH:
            raise ValueError(f"max_frame must be in 0 .. 2**32 - 1, got {max_frame}")
        self.max_frame = max_frame
        self._buf = bytearray()
        self._frames: deque[bytes] = deque()
        self._error: RemoteProtocolError | None = None

    @property
    def at_boundary(self) -> bool:
        """True when no partial frame is buffered (complete queued frames don't count)."""
        return not self._buf

    @property
    def buffered(self) -> int:
        """Bytes of the partial frame held (at most ``max_frame + 4``)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray) -> None:
        """Append ``data`` (bytes-like, any length) and split off every complete frame.

        Never raises for bad input: a framing error is reported by ``next_frame``, after
        the frames that preceded it, and input after it is discarded.
        """
        if self._error is not None or not data:
            return
        buf = self._buf
        if buf:
            buf += data
            with memoryview(buf) as view:  # slices of the view copy once, not twice
                pos = self._split(view, len(buf))
            if self._error is None:
                del buf[:pos]
            return
        if type(data) is not bytes:
            data = bytes(data)
        pos = self._split(data, len(data))
        if pos < len(data) and self._error is None:
            buf += data[pos:]

    def _split(self, data: bytes | memoryview, n: int) -> int:
        """Queue the complete frames at the start of ``data[:n]``; return where they end.

        On an oversize header, records the error and drops the partial buffer.
        """
        pos = 0
        max_frame = self.max_frame
        frames = self._frames
        while n - pos >= 4:
            length = _unpack_length(data, pos)[0]
            if length > max_frame:
                self._error = RemoteProtocolError(
                    INVALID_REQUEST,
                    f"frame announces {length} bytes, more than the limit of {max_frame} bytes",
                )
                self._buf = bytearray()
                return pos
            end = pos + 4 + length
            if end > n:
                break
            frames.append(bytes(data[pos + 4 : end]))
            pos = end
        return pos

    def next_frame(self) -> bytes | None:
        """The next complete payload, or ``None`` if more data is needed.

        Raises:
            RemoteProtocolError: (``invalid_request``) a frame header announced more than
                ``max_frame`` bytes; raised again on every later call.
        """
        if self._frames:
            return self._frames.popleft()
        if self._error is not None:
            raise self._error
        return None

    def check_end(self) -> None:
        """Call at end of stream, once ``next_frame`` returned ``None``.

        Raises:
            RemoteProtocolError: (``invalid_request``) a partial frame is buffered, or a
                framing error is pending.
        """
        if self._error is not None:
            raise self._error
        have = len(self._buf)
        if have:
            if have < 4:
                detail = f"{have} of the 4 header bytes"
            else:
                length = _unpack_length(self._buf, 0)[0]
                detail = f"{have - 4} of the {length} payload bytes announced"
            raise RemoteProtocolError(
                INVALID_REQUEST, f"truncated frame at end of stream: got {detail}"
            )
