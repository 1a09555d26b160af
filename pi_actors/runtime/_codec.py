"""Message codec: one envelope message <-> one CBOR data item, in a strict subset of CBOR.

Contract (``proto/PROTOCOL.md`` §3 states the same rules for other implementations):

* ``encode_message(msg) -> bytes`` writes one CBOR item: a map whose first key is
  ``type``, then the Struct's fields in declaration order, optional fields left out when
  they hold their default; definite lengths, shortest-form heads, floats always float64,
  text map keys, no tags. Payloads (``Any`` fields) may hold anything
  ``msgspec.to_builtins`` turns into a JSON-like tree (Structs, dataclasses, tuples,
  datetimes, enums, …); they are written as that tree. It raises
  :class:`LocalProtocolError` (``invalid_request``) for anything the decoder would refuse:
  an envelope field of the wrong type, a payload value that is not JSON-like, a
  non-``str`` map key, an integer outside −2**64 … 2**64−1, NaN or infinity, a lone
  surrogate, nesting deeper than 64 arrays/maps, more than ``MAX_ITEMS`` items, or an
  inconsistent ``Result``.
* ``decode_message(payload) -> Message`` accepts exactly one CBOR item made of integers
  (any head width), byte strings, UTF-8 text strings, definite-length arrays, maps with
  text keys and no duplicate key, ``false``/``true``/``null`` and finite float64 — at most
  64 arrays/maps deep, the envelope map included, and at most ``MAX_ITEMS`` (2**20) data
  items in all — and nothing after it. The item must be
  a map with a known ``type``; it is then validated into that Struct with
  ``msgspec.convert(strict=True)`` (unknown keys are ignored). Every failure, whatever the
  input, raises :class:`RemoteProtocolError` (``invalid_request``) saying what was wrong.

Decode budget: the cost of decoding is bounded by the payload's size *and* by
``MAX_ITEMS``. Every array and map head is charged its element count (a map's entries
count twice: key and value) before any element is decoded, and a head announcing more
elements than bytes remain, or more than the budget left, is refused at once — so a hostile
frame (say 16 MiB of empty arrays, which would otherwise build 16 million Python lists) is
refused after reading one head, and no accepted frame builds more than ``MAX_ITEMS`` Python
objects (≈ 80 MB and well under a second in the worst case); strings and byte strings cost
one copy of their bytes. Depth is bounded by ``MAX_DEPTH``, so is the recursion.

The CBOR reader and writer are written here rather than taken from cbor2: cbor2 silently
decodes tags (tag 1 becomes a ``datetime``, tag 55799 vanishes), accepts float16/float32,
``undefined``, simple values, non-text keys and trailing bytes, and its encoder writes
NaN/infinity as float16 and big integers as tags. Hand-written, both directions reject
those by construction. Both are tuned for small messages (this is the hot path).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import msgspec
import msgspec.inspect as mi

from ._errors import INVALID_REQUEST, LocalProtocolError, RemoteProtocolError
from ._messages import MESSAGE_TYPES, Message, Result

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "decode_message", "encode_message", "encode_message_into", "message_of_tree"]

#: Maximum nesting of arrays and maps in one message, the envelope map included.
MAX_DEPTH = 64
#: Maximum number of CBOR data items in one message (map keys included): one item per 16
#: bytes of a maximal 16 MiB frame, far above what real messages hold (a transcript of
#: tool calls runs at about one item per 30-100 bytes).
MAX_ITEMS = 1 << 20

_MAX_UINT = 2**64 - 1
#: Items an envelope map can hold around its payload (≤ 23 entries: key and value each).
_ENVELOPE_ITEMS = 2 * 23 + 1
_BUILTIN_TYPES = (bytes, bytearray, memoryview)
_isfinite = math.isfinite
_pack_double = struct.Struct(">d").pack
_unpack_double = struct.Struct(">d").unpack_from
_unpack_u16 = struct.Struct(">H").unpack_from
_unpack_u32 = struct.Struct(">I").unpack_from
_unpack_u64 = struct.Struct(">Q").unpack_from
_pack_head8 = struct.Struct(">BB").pack
_pack_head16 = struct.Struct(">BH").pack
_pack_head32 = struct.Struct(">BI").pack
_pack_head64 = struct.Struct(">BQ").pack


def _excerpt(value: Any, limit: int = 60) -> str:
    """A bounded repr of ``value`` (possibly peer-controlled) for error messages."""
    try:
        text = repr(value)
    except Exception:  # a huge int, a broken __repr__
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ======================================================================================
# Encoding
# ======================================================================================


class _EncodeError(Exception):
    """Internal: a value outside the strict subset; becomes a LocalProtocolError."""


def _head(major: int, n: int) -> bytes:
    """The CBOR head for ``major`` (already shifted left by 5) and argument 0 ≤ n < 2**64."""
    if n < 24:
        return bytes((major | n,))
    if n < 0x100:
        return _pack_head8(major | 24, n)
    if n < 0x10000:
        return _pack_head16(major | 25, n)
    if n < 0x100000000:
        return _pack_head32(major | 26, n)
    return _pack_head64(major | 27, n)


def _encode_str(s: str, out: bytearray) -> None:
    try:
        b = s.encode()
    except UnicodeEncodeError:
        raise _EncodeError(f"text {_excerpt(s)} is not valid Unicode (lone surrogate)") from None
    n = len(b)
    if n < 24:
        out.append(0x60 | n)
    else:
        out += _head(0x60, n)
    out += b


def _encode_int(i: int, out: bytearray) -> None:
    if i >= 0:
        if i < 24:
            out.append(i)
        elif i <= _MAX_UINT:
            out += _head(0x00, i)
        else:
            raise _EncodeError(f"integer of {i.bit_length()} bits does not fit in 64 bits")
    elif i >= -_MAX_UINT - 1:
        out += _head(0x20, -1 - i)
    else:
        raise _EncodeError(f"integer of {i.bit_length()} bits does not fit in 64 bits")


def _encode_value(obj: Any, out: bytearray, depth: int, budget: list[int]) -> None:
    """Append the CBOR encoding of the payload value ``obj`` to ``out``.

    ``depth`` is the number of arrays/maps enclosing ``obj``; ``budget[0]`` is the number of
    items still allowed (each container is charged its elements, as the decoder does).
    """
    t = type(obj)
    if t is str:
        b = obj.encode()  # UnicodeEncodeError: reported by encode_message_into
        n = len(b)
        if n < 24:
            out.append(0x60 | n)
        else:
            out += _head(0x60, n)
        out += b
    elif t is int:
        if 0 <= obj < 24:
            out.append(obj)
        else:
            _encode_int(obj, out)
    elif t is dict:
        if depth >= MAX_DEPTH:
            raise _EncodeError(f"nesting deeper than {MAX_DEPTH} arrays/maps")
        n = len(obj)
        budget[0] -= 2 * n
        if budget[0] < 0:
            raise _EncodeError(f"more than {MAX_ITEMS} items in one message")
        if n < 24:
            out.append(0xA0 | n)
        else:
            out += _head(0xA0, n)
        depth += 1
        for key, value in obj.items():
            if type(key) is not str:
                raise _EncodeError(f"map key {_excerpt(key)} is not a str")
            b = key.encode()
            n = len(b)
            if n < 24:
                out.append(0x60 | n)
            else:
                out += _head(0x60, n)
            out += b
            _encode_value(value, out, depth, budget)
    elif t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise _EncodeError(f"nesting deeper than {MAX_DEPTH} arrays/maps")
        n = len(obj)
        budget[0] -= n
        if budget[0] < 0:
            raise _EncodeError(f"more than {MAX_ITEMS} items in one message")
        if n < 24:
            out.append(0x80 | n)
        else:
            out += _head(0x80, n)
        depth += 1
        for value in obj:
            _encode_value(value, out, depth, budget)
    elif obj is None:
        out.append(0xF6)
    elif obj is True:
        out.append(0xF5)
    elif obj is False:
        out.append(0xF4)
    elif t is float:
        if not _isfinite(obj):
            raise _EncodeError(f"float {obj!r} is not finite")
        out.append(0xFB)
        out += _pack_double(obj)
    elif t is bytes or t is bytearray or t is memoryview:
        b = bytes(obj)
        out += _head(0x40, len(b))
        out += b
    else:
        # Structs, dataclasses, enums, datetimes, str/int/dict subclasses, sets, …
        try:
            converted = msgspec.to_builtins(obj, builtin_types=_BUILTIN_TYPES)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _EncodeError(f"cannot encode a {t.__name__}: {exc}") from None
        if type(converted) is t:
            raise _EncodeError(f"a {t.__name__} is not a JSON-like value")
        _encode_value(converted, out, depth, budget)


_FieldEncoder = Callable[[Any, bytearray], None]


def _compile(t: mi.Type, where: str) -> _FieldEncoder:
    """An encoder for an envelope field of msgspec type ``t``; checks the value's type.

    Raises TypeError (at import) for a field type the envelope does not use, so that a new
    kind of field cannot slip past the checks.
    """
    if isinstance(t, mi.AnyType):

        def enc_any(v: Any, out: bytearray) -> None:
            # The one payload field of a message; the envelope around it takes at most
            # _ENVELOPE_ITEMS of the budget, so whatever is encoded also decodes.
            _encode_value(v, out, 1, [MAX_ITEMS - _ENVELOPE_ITEMS])

        return enc_any
    if isinstance(t, mi.IntType) and t.ge == 0 and (t.gt, t.lt, t.le, t.multiple_of) == (None,) * 4:

        def enc_uint(v: Any, out: bytearray) -> None:
            if type(v) is not int or v < 0:
                raise _EncodeError(f"`{where}` must be a non-negative int, got {_excerpt(v)}")
            if v < 24:
                out.append(v)
            else:
                _encode_int(v, out)

        return enc_uint
    if isinstance(t, mi.StrType) and (t.min_length, t.max_length, t.pattern) == (None,) * 3:

        def enc_str(v: Any, out: bytearray) -> None:
            if type(v) is not str:
                raise _EncodeError(f"`{where}` must be a str, got {_excerpt(v)}")
            _encode_str(v, out)

        return enc_str
    if isinstance(t, mi.BoolType):

        def enc_bool(v: Any, out: bytearray) -> None:
            if type(v) is not bool:
                raise _EncodeError(f"`{where}` must be a bool, got {_excerpt(v)}")
            out.append(0xF5 if v else 0xF4)

        return enc_bool
    if isinstance(t, mi.ListType):
        item = _compile(t.item_type, f"{where}[]")
        lo = t.min_length or 0
        hi = t.max_length if t.max_length is not None else _MAX_UINT

        def enc_list(v: Any, out: bytearray) -> None:
            if type(v) is not list and type(v) is not tuple:
                raise _EncodeError(f"`{where}` must be a list, got {_excerpt(v)}")
            if not lo <= len(v) <= hi:
                raise _EncodeError(f"`{where}` must have {lo}..{hi} items, got {len(v)}")
            out += _head(0x80, len(v))
            for x in v:
                item(x, out)

        return enc_list
    if isinstance(t, mi.UnionType) and len(t.types) == 2 and isinstance(t.types[1], mi.NoneType):
        inner = _compile(t.types[0], where)

        def enc_optional(v: Any, out: bytearray) -> None:
            if v is None:
                out.append(0xF6)
            else:
                inner(v, out)

        return enc_optional
    if isinstance(t, mi.StructType):
        return _compile_struct(t, where + ".")
    raise TypeError(f"no envelope encoder for field `{where}` of type {t!r}")


def _compile_struct(info: mi.StructType, prefix: str = "") -> _FieldEncoder:
    """An encoder writing Struct ``info.cls`` as a map: the tag first, then its fields."""
    cls = info.cls
    config = cls.__struct_config__
    omit = config.omit_defaults
    head = bytearray()
    count0 = 0
    if info.tag is not None:
        if not isinstance(info.tag, str) or info.tag_field is None:
            raise TypeError(f"{cls.__name__}: the envelope's tags are text")
        _encode_str(info.tag_field, head)
        _encode_str(info.tag, head)
        count0 = 1
    tag_bytes = bytes(head)
    plan = []
    for field in info.fields:
        key = bytearray()
        _encode_str(field.encode_name, key)
        has_default = omit and field.default is not msgspec.NODEFAULT
        plan.append(
            (field.name, bytes(key), _compile(field.type, prefix + field.name), has_default, field.default)
        )
    if count0 + len(plan) >= 24:
        raise TypeError(f"{cls.__name__} has too many fields for a one-byte map head")
    name = info.tag or cls.__name__

    def enc_struct(msg: Any, out: bytearray) -> None:
        if type(msg) is not cls:
            raise _EncodeError(f"`{prefix[:-1] or name}` must be of type {cls.__name__}, got {_excerpt(msg)}")
        at = len(out)
        out.append(0)  # the map head, filled in below
        out += tag_bytes
        count = count0
        for attr, key, field_enc, has_default, default in plan:
            v = getattr(msg, attr)
            if has_default and (v is default or (type(v) is type(default) and v == default)):
                continue
            out += key
            field_enc(v, out)
            count += 1
        out[at] = 0xA0 | count

    return enc_struct


#: The encoder of every envelope Struct.
_ENCODERS: dict[type, _FieldEncoder] = {
    cls: _compile_struct(mi.type_info(cls)) for cls in MESSAGE_TYPES.values()  # type: ignore[arg-type]
}


def _check_result(msg: Result) -> str | None:
    """Why a Result is inconsistent, or None when it is fine."""
    if msg.ok:
        if msg.error is not None:
            return "a result with ok=true must not carry an error"
    elif msg.error is None:
        return "a result with ok=false must carry an error"
    elif msg.value is not None:
        return "a result with ok=false must not carry a value"
    return None


def encode_message_into(msg: Message, out: bytearray) -> None:
    """Append the CBOR encoding of ``msg`` to ``out``; see ``encode_message``.

    On error ``out`` may hold a partial encoding after its original length.
    """
    enc = _ENCODERS.get(type(msg))
    if enc is None:
        raise LocalProtocolError(
            INVALID_REQUEST, f"cannot send a {type(msg).__name__}: not a protocol message"
        )
    try:
        enc(msg, out)
    except _EncodeError as exc:
        raise LocalProtocolError(
            INVALID_REQUEST, f"cannot encode {type(msg).__struct_config__.tag} message: {exc}"
        ) from None
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(
            INVALID_REQUEST,
            f"cannot encode {type(msg).__struct_config__.tag} message: text"
            f" {_excerpt(exc.object)} is not valid Unicode (lone surrogate)",
        ) from None
    except RecursionError:
        raise LocalProtocolError(
            INVALID_REQUEST,
            f"cannot encode {type(msg).__struct_config__.tag} message: structure too deep or cyclic",
        ) from None
    if isinstance(msg, Result):
        problem = _check_result(msg)
        if problem is not None:
            raise LocalProtocolError(INVALID_REQUEST, f"invalid result message: {problem}")


def encode_message(msg: Message) -> bytes:
    """Encode one envelope message as one strict CBOR item (no frame header).

    Args:
        msg: an instance of one of the envelope Structs.

    Returns:
        The CBOR bytes.

    Raises:
        LocalProtocolError: (``invalid_request``) ``msg`` is not an envelope message, a
            field has the wrong type, a payload holds something outside the strict subset
            (see the module docstring), or a ``Result`` is inconsistent.
    """
    out = bytearray()
    encode_message_into(msg, out)
    return bytes(out)


# ======================================================================================
# Decoding
# ======================================================================================


class _DecodeError(Exception):
    """Internal: malformed or out-of-subset CBOR at byte ``pos`` (``None``: unknown)."""

    def __init__(self, pos: int | None, what: str) -> None:
        super().__init__(pos, what)
        self.pos = pos
        self.what = what


_MAJOR_NAMES = ("an unsigned integer", "a negative integer", "a byte string",
                "a text string", "an array", "a map", "a tag")
_SIMPLE_NAMES = {0xF4: "false", 0xF5: "true", 0xF6: "null", 0xFB: "a float64"}


def _describe(ib: int) -> str:
    """What the item starting with initial byte ``ib`` is, for error messages."""
    if ib >> 5 < 7:
        return _MAJOR_NAMES[ib >> 5]
    return _SIMPLE_NAMES.get(ib, f"the simple value/float 0x{ib:02x}")


def _bad_simple(ib: int, pos: int) -> _DecodeError:
    """The error for a major-type-7 initial byte other than false/true/null/float64."""
    if ib == 0xF7:
        what = "undefined is not allowed"
    elif ib == 0xF9:
        what = "half-precision (float16) floats are not allowed; floats must be float64"
    elif ib == 0xFA:
        what = "single-precision (float32) floats are not allowed; floats must be float64"
    elif ib == 0xFF:
        what = "unexpected break byte 0xff (indefinite-length items are not allowed)"
    elif ib >= 0xFC:
        what = f"reserved initial byte 0x{ib:02x}"
    else:
        what = "simple values other than false, true and null are not allowed"
    return _DecodeError(pos, what)


def _read_arg(buf: bytes, start: int, ib: int) -> tuple[int, int]:
    """The argument following initial byte ``ib`` (``ib & 31 >= 24``) at ``start``.

    Returns ``(argument, position after the head)``; a short buffer raises IndexError or
    struct.error, which the caller reports as truncation.
    """
    ai = ib & 31
    if ai == 24:
        return buf[start + 1], start + 2
    if ai == 25:
        return _unpack_u16(buf, start + 1)[0], start + 3
    if ai == 26:
        return _unpack_u32(buf, start + 1)[0], start + 5
    if ai == 27:
        return _unpack_u64(buf, start + 1)[0], start + 9
    if ai == 31 and 2 <= ib >> 5 <= 5:
        raise _DecodeError(start, f"indefinite-length items are not allowed ({_describe(ib)})")
    raise _DecodeError(start, f"malformed initial byte 0x{ib:02x} (reserved additional information)")


def _truncated_string(start: int, length: int, n: int, pos: int) -> _DecodeError:
    return _DecodeError(
        start, f"truncated string: {length} bytes announced, {max(n - pos, 0)} present"
    )


def _decode_item(buf: bytes, start: int, n: int, depth: int, budget: list[int]) -> tuple[Any, int]:
    """Decode the item at ``start``, enclosed by ``depth`` arrays/maps; ``budget[0]`` is the
    number of items still allowed, charged at every array/map head.

    Returns ``(value, position after the item)``. Truncation may surface as IndexError or
    struct.error; ``_decode_tree`` reports those.
    """
    ib = buf[start]
    if ib < 0x18:  # small unsigned integer
        return ib, start + 1
    if 0x60 <= ib < 0x78:  # short text string
        end = start + ib - 0x5F
        if end > n:
            raise _truncated_string(start, ib - 0x60, n, start + 1)
        return buf[start + 1 : end].decode(), end
    major = ib >> 5
    if major == 7:
        if ib == 0xF6:
            return None, start + 1
        if ib == 0xF5:
            return True, start + 1
        if ib == 0xF4:
            return False, start + 1
        if ib == 0xFB:
            value = _unpack_double(buf, start + 1)[0]
            if not _isfinite(value):
                raise _DecodeError(start, f"float {value!r} is not allowed (floats must be finite)")
            return value, start + 9
        raise _bad_simple(ib, start)
    if ib & 31 < 24:
        arg = ib & 31
        pos = start + 1
    else:
        arg, pos = _read_arg(buf, start, ib)
    if major == 5:
        return _decode_map(buf, start, pos, n, depth, arg, budget)
    if major == 3:
        end = pos + arg
        if end > n:
            raise _truncated_string(start, arg, n, pos)
        return buf[pos:end].decode(), end
    if major == 0:
        return arg, pos
    if major == 4:
        if depth >= MAX_DEPTH:
            raise _DecodeError(start, f"nesting deeper than {MAX_DEPTH} arrays/maps")
        if arg > n - pos:
            raise _DecodeError(start, f"truncated array: {arg} items announced, {n - pos} bytes left")
        left = budget[0] - arg
        if left < 0:
            raise _too_many(start, "array", arg)
        budget[0] = left
        depth += 1
        items: list[Any] = []
        append = items.append
        for _ in range(arg):
            ib = buf[pos]
            if ib < 0x18:
                append(ib)
                pos += 1
            else:
                value, pos = _decode_item(buf, pos, n, depth, budget)
                append(value)
        return items, pos
    if major == 1:
        return -1 - arg, pos
    if major == 2:
        end = pos + arg
        if end > n:
            raise _truncated_string(start, arg, n, pos)
        return buf[pos:end], end
    raise _DecodeError(start, f"tags are not allowed (found tag {arg})")


def _too_many(start: int, kind: str, count: int) -> _DecodeError:
    return _DecodeError(
        start, f"too many items: this {kind} of {count} elements takes the message past {MAX_ITEMS} items"
    )


def _decode_map(
    buf: bytes, start: int, pos: int, n: int, depth: int, count: int, budget: list[int]
) -> tuple[dict[str, Any], int]:
    """Decode the ``count`` entries at ``pos`` of the map whose head is at ``start``."""
    if depth >= MAX_DEPTH:
        raise _DecodeError(start, f"nesting deeper than {MAX_DEPTH} arrays/maps")
    if count > (n - pos) >> 1:
        raise _DecodeError(start, f"truncated map: {count} entries announced, {n - pos} bytes left")
    left = budget[0] - 2 * count
    if left < 0:
        raise _too_many(start, "map", count)
    budget[0] = left
    depth += 1
    result: dict[str, Any] = {}
    for _ in range(count):
        kb = buf[pos]
        if 0x60 <= kb < 0x78:  # short text key, the common case
            end = pos + kb - 0x5F
            if end > n:
                raise _truncated_string(pos, kb - 0x60, n, pos + 1)
            key = buf[pos + 1 : end].decode()
        elif kb >> 5 == 3:
            key, end = _decode_item(buf, pos, n, depth, budget)
        else:
            raise _DecodeError(pos, f"map keys must be text strings, found {_describe(kb)}")
        if key in result:
            raise _DecodeError(pos, f"duplicate map key {_excerpt(key)}")
        pos = end
        vb = buf[pos]
        if vb < 0x18:  # small unsigned integer
            result[key] = vb
            pos += 1
        elif 0x60 <= vb < 0x78:  # short text
            end = pos + vb - 0x5F
            if end > n:
                raise _truncated_string(pos, vb - 0x60, n, pos + 1)
            result[key] = buf[pos + 1 : end].decode()
            pos = end
        elif vb == 0x18:  # unsigned integer < 256 (ids, sequence numbers)
            result[key] = buf[pos + 1]
            pos += 2
        elif 0xA0 <= vb < 0xB8:  # small map
            result[key], pos = _decode_map(buf, pos, pos + 1, n, depth, vb - 0xA0, budget)
        else:
            result[key], pos = _decode_item(buf, pos, n, depth, budget)
    return result, pos


def _decode_tree(payload: bytes, max_items: int = MAX_ITEMS) -> Any:
    """Decode exactly one strict-CBOR item filling all of ``payload`` (bytes), of at most
    ``max_items`` items."""
    n = len(payload)
    budget = [max_items - 1]
    if n == 0:
        raise _DecodeError(0, "empty payload (a frame must hold one CBOR item)")
    try:
        ib = payload[0]
        if 0xA0 <= ib < 0xB8:  # the envelope: a small map
            value, pos = _decode_map(payload, 0, 1, n, 0, ib - 0xA0, budget)
        else:
            value, pos = _decode_item(payload, 0, n, 0, budget)
    except (IndexError, struct.error):
        raise _DecodeError(None, f"truncated: the payload ends ({n} bytes) inside an item") from None
    except UnicodeDecodeError as exc:
        raise _DecodeError(None, f"a text string is not valid UTF-8 ({exc.reason})") from None
    if pos != n:
        raise _DecodeError(pos, f"{n - pos} trailing bytes after the CBOR item")
    return value


def decode_message(payload: bytes, max_items: int = MAX_ITEMS) -> Message:
    """Decode and validate one envelope message from one frame's payload.

    Args:
        payload: the frame payload (bytes-like): exactly one CBOR item.
        max_items: the item budget (``MAX_ITEMS``; tests use smaller ones).

    Returns:
        The message Struct.

    Raises:
        RemoteProtocolError: (``invalid_request``) for any input that is not exactly one
            strict-CBOR item (see the module docstring) holding a valid envelope message.
            No other exception escapes, whatever the input.
    """
    try:
        if type(payload) is not bytes:
            payload = bytes(payload)
        tree = _decode_tree(payload, max_items)
    except _DecodeError as exc:
        where = "" if exc.pos is None else f" at byte {exc.pos}"
        raise RemoteProtocolError(INVALID_REQUEST, f"invalid CBOR{where}: {exc.what}") from None
    except Exception as exc:  # pragma: no cover - defensive: the reader has a bug
        raise RemoteProtocolError(
            INVALID_REQUEST, f"undecodable CBOR: {type(exc).__name__}: {exc}"
        ) from None
    return message_of_tree(tree, "CBOR")


def message_of_tree(tree: Any, codec: str) -> Message:
    """Validate a decoded tree (``codec`` names where it came from, for messages) into its
    envelope Struct: a map with a known ``type``, converted strictly (unknown keys ignored),
    a ``Result`` also checked for consistency. Shared by the CBOR and JSON codecs.

    Raises:
        RemoteProtocolError: (``invalid_request``) saying what was wrong.
    """
    if type(tree) is not dict:
        raise RemoteProtocolError(
            INVALID_REQUEST, f"a message must be a {codec} map, got {type(tree).__name__}"
        )
    name = tree.get("type")
    cls = MESSAGE_TYPES.get(name) if type(name) is str else None
    if cls is None:
        if "type" not in tree:
            problem = "message has no 'type' field"
        else:
            problem = f"unknown message type {_excerpt(name)}"
        raise RemoteProtocolError(INVALID_REQUEST, problem)
    try:
        msg = msgspec.convert(tree, cls, strict=True)
    except msgspec.ValidationError as exc:
        raise RemoteProtocolError(INVALID_REQUEST, f"invalid {name} message: {exc}") from None
    except Exception as exc:  # pragma: no cover - defensive
        raise RemoteProtocolError(
            INVALID_REQUEST, f"invalid {name} message: {type(exc).__name__}: {exc}"
        ) from None
    if isinstance(msg, Result):
        inconsistency = _check_result(msg)
        if inconsistency is not None:
            raise RemoteProtocolError(INVALID_REQUEST, f"invalid result message: {inconsistency}")
    return msg
