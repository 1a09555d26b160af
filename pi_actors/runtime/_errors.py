"""Protocol errors and the stable error codes of the pi-actors wire protocol.

Contract:

* :class:`ProtocolError` is the base of every error the sans-I/O protocol core raises. It
  carries a stable machine-readable ``code`` (one of the ``*`` constants below, or any other
  non-empty string a peer sent), a human-readable ``message``, and — only for the
  ``"version"`` code — the ``supported`` inclusive version range ``[min, max]``.
* :class:`LocalProtocolError`: *we* tried to do something invalid (send a message out of
  order, send a message that cannot be encoded or is too large, misuse the connection).
  The connection is left as it was: nothing was sent.
* :class:`RemoteProtocolError`: the *peer* sent something invalid (bad frame, bad CBOR,
  schema violation, out-of-order message, no common version). The connection is dead; the
  only useful thing left is to send the final ``hello_error`` (``Connection.fail``).

Both are plain exceptions, picklable, with ``str(err) == f"{code}: {message}"``.
"""

from __future__ import annotations

__all__ = [
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

#: A fatal decoding or sequencing error: bad frame, bad CBOR, schema violation, a message
#: before ``hello``, a second ``hello``, handshake timeout. Ends the connection.
INVALID_REQUEST = "invalid_request"
#: No common protocol version (``hello_error`` with ``supported = [min, max]``).
VERSION = "version"
#: The call was cancelled by its caller (a ``result`` error).
CANCELLED = "cancelled"
#: The call named an unknown method or target (a ``result`` error).
NOT_FOUND = "not_found"
#: The callee failed while handling the call (a ``result`` error).
INTERNAL = "internal"
#: Never on the wire: the connection dropped while the call was in flight, so its outcome
#: is unknown. Produced locally for every pending call.
CONNECTION_LOST = "connection_lost"


class ProtocolError(Exception):
    """A protocol violation, with a stable ``code`` and a human-readable ``message``.

    Args:
        code: stable machine-readable error code, e.g. ``"invalid_request"``.
        message: what was wrong, for humans.
        supported: for ``code == "version"`` only: the inclusive ``[min, max]`` version
            range the side raising the error supports; otherwise ``None``.
    """

    code: str
    message: str
    supported: list[int] | None

    def __init__(self, code: str, message: str, supported: list[int] | None = None) -> None:
        super().__init__(code, message, supported)
        self.code = code
        self.message = message
        self.supported = supported

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        extra = f", supported={self.supported!r}" if self.supported is not None else ""
        return f"{type(self).__name__}({self.code!r}, {self.message!r}{extra})"


class LocalProtocolError(ProtocolError):
    """We tried to send something invalid or out of order; nothing was sent."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something invalid; the connection cannot continue."""
