"""The envelope messages of the pi-actors wire protocol, as msgspec Structs.

This module is the single source of truth for the envelope; ``proto/schema.cddl`` mirrors
it and ``tests/test_protocol_schema.py`` keeps the two in agreement.

Every message is a ``msgspec.Struct`` in one tagged union: on the wire a CBOR map whose
``type`` key names the message (``"hello"``, ``"call"``, …). Fields are keyword-only;
optional fields are omitted from the encoding when they hold their default. Receivers
ignore map keys they do not know, which is what lets a later revision add a field (with a
default) without a new protocol version.

Payloads (``Call.args``, ``Chunk.data``, ``Result.value``) are JSON-like trees: ``None``,
``bool``, ``int`` (−2**64 … 2**64−1), finite ``float``, ``str``, ``bytes``, ``list`` and
``dict`` with ``str`` keys. On send they may also hold anything ``msgspec.to_builtins``
turns into such a tree (Structs, dataclasses, tuples, datetimes, …); they arrive as the tree.

Constructing a Struct does not validate it; ``encode_message`` and ``decode_message`` do.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

__all__ = [
    "MESSAGE_TYPES",
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
]

#: A non-negative integer (CDDL ``uint``): ids, sequence numbers, versions.
Uint = Annotated[int, msgspec.Meta(ge=0)]


def _default_codecs() -> list[str]:
    return ["cbor"]


class _Envelope(
    msgspec.Struct, tag_field="type", kw_only=True, omit_defaults=True, repr_omit_defaults=True
):
    """Base of every envelope message (not itself a message)."""


class Hello(_Envelope, tag="hello"):
    """The client's first frame: who it is and which protocol versions it speaks.

    Attributes:
        protocol: must be ``"pi-actors"``.
        min_version, max_version: the inclusive range of versions the client supports.
        role: what the client is (``"ui"``, ``"client"``, ``"tool-host"``, an actor role…).
        name: a human-readable name for logs.
        codecs: payload codecs the client can use; must hold the codec the hello is written in
            (``"cbor"``, or ``"json"`` for browsers: PROTOCOL.md §3a).
    """

    protocol: str
    min_version: Uint
    max_version: Uint
    role: str
    name: str
    codecs: list[str] = msgspec.field(default_factory=_default_codecs)


class HelloOk(_Envelope, tag="hello_ok"):
    """The server's first frame on success: the chosen version and its identity."""

    version: Uint
    role: str
    name: str
    codec: str = "cbor"


class HelloError(_Envelope, tag="hello_error"):
    """The last frame of a connection that failed (handshake or any fatal protocol error).

    ``supported`` is the sender's inclusive ``[min, max]`` version range and is present
    only with ``code == "version"``.
    """

    code: str
    message: str
    supported: Annotated[list[Uint], msgspec.Meta(min_length=2, max_length=2)] | None = None


class Call(_Envelope, tag="call"):
    """Start call ``id`` of ``method`` on actor ``target`` (``""``: the peer's root actor).

    Ids are chosen by the caller, unique among its calls in flight on this connection; the
    two directions have separate id spaces. Answered by zero or more ``Chunk`` and exactly
    one ``Result`` with the same id.
    """

    id: Uint
    method: str
    args: Any = None
    target: str = ""


class Chunk(_Envelope, tag="chunk"):
    """One streamed item of call ``id``; ``seq`` counts the call's chunks 0, 1, 2, …"""

    id: Uint
    seq: Uint
    data: Any = None


class ErrorInfo(msgspec.Struct, kw_only=True):
    """Why a call failed: a stable ``code`` (e.g. ``"not_found"``) and a message for humans."""

    code: str
    message: str


class Result(_Envelope, tag="result"):
    """The final answer to call ``id``.

    ``ok=True`` carries ``value`` (``None`` when omitted) and no ``error``; ``ok=False``
    carries ``error`` and no ``value``. The codec rejects any other combination.
    """

    id: Uint
    ok: bool
    value: Any = None
    error: ErrorInfo | None = None


class Cancel(_Envelope, tag="cancel"):
    """Ask the callee to cancel call ``id``. Fire and forget: the call still gets its one
    ``Result`` (error ``"cancelled"``, or the real result if it finished first)."""

    id: Uint


class Credit(_Envelope, tag="credit"):
    """(Protocol version 2.) The caller of call ``id`` has taken ``n`` more of its chunks off
    its buffer: the callee may send ``n`` chunks more than it could so far. Flow control of
    one call (PROTOCOL.md §6); sent caller → callee only on a version-2 connection."""

    id: Uint
    n: Uint


Message = Hello | HelloOk | HelloError | Call | Chunk | Result | Cancel | Credit

#: Every envelope Struct by its ``type`` tag.
MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in (Hello, HelloOk, HelloError, Call, Chunk, Result, Cancel, Credit)
}
