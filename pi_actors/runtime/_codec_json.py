"""The JSON codec: one envelope message <-> one JSON text, for clients without CBOR (browsers).

Same envelope, same Structs, same limits as the CBOR codec (``_codec``); only the bytes
differ. ``proto/PROTOCOL.md`` §3a states the rules for other implementations.

* ``encode_json_message(msg) -> bytes``: UTF-8 JSON, no whitespace, a single object whose
  first key is ``type``, the Struct's fields in declaration order, optional fields left out
  when they hold their default (exactly the CBOR encoding's map, written as JSON). The
  message is first put through the CBOR encoder's checks (field types, the payload subset:
  finite floats, 64-bit integers, text keys, at most ``MAX_DEPTH`` levels and ``MAX_ITEMS``
  items, a consistent ``Result``), so whatever one codec refuses to send the other refuses
  too. A ``bytes`` value in a payload is written as a base64 string (RFC 4648 standard
  alphabet, padded) and arrives as that string: JSON has no byte strings. (No method's
  Struct has a bytes field; images travel as base64 text already.)
  Raises :class:`LocalProtocolError` (``invalid_request``) as the CBOR encoder does, and for
  a message whose JSON would break the item rule below.
* ``decode_json_message(payload) -> Message`` accepts exactly one JSON object (RFC 8259,
  UTF-8, surrounding whitespace allowed) and refuses, as :class:`RemoteProtocolError`
  (``invalid_request``) saying what was wrong: invalid UTF-8 or JSON, ``NaN``/``Infinity``,
  numbers that overflow to infinity, integers outside −2**64 … 2**64−1, lone surrogates
  (``"\\ud800"``), duplicate keys in any object, more than ``MAX_DEPTH`` nested
  arrays/objects, and too many items (below). The object is then validated exactly as a
  CBOR message (``_codec.message_of_tree``: a known ``type``, strict Struct conversion,
  unknown keys ignored).

Decode budget: before anything is parsed, the structural characters ``[ { , :`` outside
strings are counted; one plus their number bounds the items (the CBOR count of items, plus
one for every empty array or object), and more than ``MAX_ITEMS`` is refused without
building anything — so 16 MiB of ``[],`` costs one pass over the bytes, not millions of
lists. The encoder applies the same count to what it writes.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

from ._codec import MAX_DEPTH, MAX_ITEMS, encode_message_into, message_of_tree
from ._errors import INVALID_REQUEST, LocalProtocolError, RemoteProtocolError
from ._messages import Message

__all__ = ["decode_json_message", "encode_json_message", "json_item_bound"]

_MAX_INT = 2**64 - 1
_MIN_INT = -(2**64)
_encode = msgspec.json.Encoder().encode
#: A JSON string literal (escapes included): blanked out before counting structure.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
#: An escaped UTF-16 surrogate: only then can a decoded string hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_item_bound(payload: bytes) -> int:
    """One plus the number of ``[ { , :`` outside strings in ``payload``: an upper bound of
    the items a JSON text holds (see the module docstring). Cheap when the raw count is
    already small: strings are only blanked out when it is not."""
    raw = payload.count(b"[") + payload.count(b"{") + payload.count(b",") + payload.count(b":")
    if raw < MAX_ITEMS:
        return raw + 1
    bare = _STRING.sub(b'""', payload)
    return bare.count(b"[") + bare.count(b"{") + bare.count(b",") + bare.count(b":") + 1


def encode_json_message(msg: Message) -> bytes:
    """Encode one envelope message as one JSON text (UTF-8 bytes); see the module docstring.

    Raises:
        LocalProtocolError: (``invalid_request``) what the CBOR encoder refuses, or a JSON
            text past the item budget.
    """
    encode_message_into(msg, bytearray())  # every check of the CBOR encoder
    data = _encode(msg)
    if json_item_bound(data) > MAX_ITEMS:
        raise LocalProtocolError(
            INVALID_REQUEST,
            f"cannot encode {type(msg).__struct_config__.tag} message as JSON: more than {MAX_ITEMS} items"
            " (empty arrays and objects count as one each)",
        )
    return data


class _Refused(Exception):
    """Internal: a JSON value outside the accepted subset."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"duplicate key {_excerpt(key)}")
            seen.add(key)
    return out


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not allowed (numbers must be finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {_excerpt(text)} overflows a float64")
    return value


def _bounded_int(text: str) -> int:
    if len(text) > 21:  # more digits than any integer in range (sign + 20 digits)
        raise _Refused(f"integer {_excerpt(text)} does not fit in 64 bits")
    value = int(text)
    if not _MIN_INT <= value <= _MAX_INT:
        raise _Refused(f"integer {_excerpt(text)} does not fit in 64 bits")
    return value


def _check_tree(tree: Any, strings: bool) -> None:
    """Depth (and, with ``strings``, lone surrogates) of a decoded tree; iterative."""
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if type(node) is dict:
            if depth > MAX_DEPTH:
                raise _Refused(f"nesting deeper than {MAX_DEPTH} arrays/objects")
            if strings:
                for key in node:
                    _check_text(key)
            stack.extend((v, depth + 1) for v in node.values())
        elif type(node) is list:
            if depth > MAX_DEPTH:
                raise _Refused(f"nesting deeper than {MAX_DEPTH} arrays/objects")
            stack.extend((v, depth + 1) for v in node)
        elif strings and type(node) is str:
            _check_text(node)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _Refused(f"text {_excerpt(text)} holds a lone surrogate") from None


def decode_json_message(payload: bytes) -> Message:
    """Decode and validate one envelope message from one JSON text.

    Raises:
        RemoteProtocolError: (``invalid_request``) for any input that is not exactly one
            JSON object in the accepted subset holding a valid envelope message (see the
            module docstring). No other exception escapes, whatever the input.
    """
    try:
        data = bytes(payload)
        if json_item_bound(data) > MAX_ITEMS:
            raise _Refused(f"more than {MAX_ITEMS} items (counting [ {{ , : outside strings)")
        text = data.decode("utf-8")
        tree = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
        containers = data.count(b"[") + data.count(b"{")
        surrogates = _SURROGATE_ESCAPE.search(data) is not None
        if containers > MAX_DEPTH or surrogates:
            _check_tree(tree, surrogates)
    except _Refused as exc:
        raise RemoteProtocolError(INVALID_REQUEST, f"invalid JSON: {exc}") from None
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(INVALID_REQUEST, f"invalid JSON: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise RemoteProtocolError(INVALID_REQUEST, f"invalid JSON at character {exc.pos}: {exc.msg}") from None
    except RecursionError:
        raise RemoteProtocolError(INVALID_REQUEST, f"invalid JSON: nesting deeper than {MAX_DEPTH} arrays/objects") from None
    except ValueError as exc:  # int() of a huge literal past Python's digit limit
        raise RemoteProtocolError(INVALID_REQUEST, f"invalid JSON: {_excerpt(str(exc))}") from None
    return message_of_tree(tree, "JSON")


def _excerpt(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
