"""The strict codec of ``proto/PROTOCOL.md`` §3 written on cbor2's C extension: the
micro-benchmark's same-work baseline for ``pi_actors.runtime._codec``.

Issue 14 asked to replace the hand-written codec by cbor2 wrapped in §3's rules. This is
that codec, complete: the same contract, the same error codes, the golden vectors byte for
byte (``tests/test_benchmarks_cbor2_codec.py`` checks it). Measured against the hand-written
one (``benchmarks/micro.py``, ``benchmarks/RESULTS.md``) it is not faster on the messages
that matter (small ones: cbor2's per-call setup plus the checks it cannot do itself cost
more than the pure-Python single pass) and only modestly faster on large decodes, so the
runtime keeps its own codec and this one is kept as the honest baseline.

Contract: as ``pi_actors.runtime._codec`` (``encode_message``, ``encode_message_into``,
``decode_message``, ``MAX_DEPTH``, ``MAX_ITEMS``).

How (both directions run on cbor2's C extension; the strictness is layered around it):

* Decoding: ``cbor2.loads`` refuses duplicate keys, keys that are neither text nor bytes,
  nesting past ``MAX_DEPTH``, reserved bytes, bad UTF-8 and truncation. Tags: cbor2 consults
  ``semantic_decoders`` before ``tag_hook`` and has its own decoders for many tag numbers,
  so the mapping passed (``_EveryTag``) answers *every* tag number with a refusal. What cbor2
  accepts silently is checked afterwards, at C speed where possible: a payload that
  re-encodes to itself (``cbor2.dumps``) has nothing after its item, no indefinite length
  and no float16/32 (NaN/±inf are the three float16 items cbor2 writes, looked for
  separately); simple values and ``undefined`` make ``msgspec.msgpack.encode`` fail; byte
  strings show as msgpack bin heads, and only then are map keys walked. Anything that does
  not pass — other encoders' non-shortest heads included — gets the exact scan ``_scan``.
  Decode budget: every item takes at least one byte, so a payload of at most ``max_items``
  bytes cannot hold more items; a longer one is scanned head by head first, each array/map
  head charged its element count before anything is built, so a hostile frame (16 MiB of
  empty arrays) is refused after one head.
* Encoding: ``msgspec.to_builtins`` makes the tree, ``_walk`` checks its keys, depth and
  item count, ``cbor2.dumps`` writes it (shortest heads, float64 for every finite float);
  NaN/infinity (which cbor2 writes as float16) and integers past 64 bits (bignum tags) are
  caught from the bytes written.
* Errors: whatever trips, the message comes from the slow exact path (``_scan`` for input,
  ``_explain`` for output), which names the rule and the byte or value.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import cbor2
import msgspec
import msgspec.inspect as mi

from pi_actors.runtime._errors import INVALID_REQUEST, LocalProtocolError, RemoteProtocolError
from pi_actors.runtime._messages import MESSAGE_TYPES, Message, Result

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "decode_message", "encode_message", "encode_message_into"]

#: Maximum nesting of arrays and maps in one message, the envelope map included.
MAX_DEPTH = 64
#: Maximum number of CBOR data items in one message (map keys included): one item per 16
#: bytes of a maximal 16 MiB frame, far above what real messages hold.
MAX_ITEMS = 1 << 20

_MAX_UINT = 2**64 - 1
_BYTES_TYPES = (bytes, bytearray, memoryview)
_u16, _u32, _u64 = (struct.Struct(f">{c}").unpack_from for c in "HIQ")
_f64 = struct.Struct(">d").unpack_from
_NONFINITE16 = (b"\xf9\x7e\x00", b"\xf9\x7c\x00", b"\xf9\xfc\x00")  # cbor2's NaN, inf, -inf


class _Bad(Exception):
    """Internal: a rule broken at byte ``pos`` (``None``: unknown or not about bytes)."""

    def __init__(self, pos: int | None, what: str) -> None:
        super().__init__(pos, what)
        self.pos, self.what = pos, what


def _excerpt(value: Any, limit: int = 60) -> str:
    """A bounded repr of ``value`` (possibly peer-controlled) for error messages."""
    try:
        text = repr(value)
    except Exception:  # a huge int, a broken __repr__
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _walk(node: Any, depth: int, left: int) -> int:
    """Check the containers of the plain tree ``node`` (a dict or list): text keys, depth and
    item budget; replace each ``memoryview`` by ``bytes`` in place (cbor2 would write an array).

    ``depth`` counts the containers around ``node``; ``left`` is the item budget left, and
    the return value what remains of it. Raises _Bad.
    """
    if depth >= MAX_DEPTH:
        raise _Bad(None, f"nesting deeper than {MAX_DEPTH} arrays/maps")
    if type(node) is dict:
        left -= 2 * len(node)
        for key, value in node.items():
            if type(key) is not str:
                raise _Bad(None, f"map key {_excerpt(key)} is not a str")
            if type(value) is dict or type(value) is list:
                left = _walk(value, depth + 1, left)
            elif type(value) is memoryview:
                node[key] = value.tobytes()
    else:
        left -= len(node)
        for i, value in enumerate(node):
            if type(value) is dict or type(value) is list:
                left = _walk(value, depth + 1, left)
            elif type(value) is memoryview:
                node[i] = value.tobytes()
    if left < 0:
        raise _Bad(None, f"more than {MAX_ITEMS} items in one message")
    return left


# ======================================================================================
# Encoding
# ======================================================================================

_Check = Callable[[Any], "str | None"]


def _compile(t: mi.Type, where: str) -> _Check | None:
    """A check of an envelope field of msgspec type ``t`` (None: a payload, checked later).

    Raises TypeError (at import) for a field type the envelope does not use, so that a new
    kind of field cannot slip past the checks.
    """
    if isinstance(t, mi.AnyType):
        return None
    if isinstance(t, mi.IntType) and t.ge == 0 and (t.gt, t.lt, t.le, t.multiple_of) == (None,) * 4:
        return lambda v: None if type(v) is int and 0 <= v <= _MAX_UINT else (
            f"`{where}` must be a non-negative int of at most 64 bits, got {_excerpt(v)}")
    if isinstance(t, mi.StrType) and (t.min_length, t.max_length, t.pattern) == (None,) * 3:
        return lambda v: None if type(v) is str else f"`{where}` must be a str, got {_excerpt(v)}"
    if isinstance(t, mi.BoolType):
        return lambda v: None if type(v) is bool else f"`{where}` must be a bool, got {_excerpt(v)}"
    if isinstance(t, mi.ListType):
        item = _compile(t.item_type, f"{where}[]")
        lo, hi = t.min_length or 0, t.max_length if t.max_length is not None else _MAX_UINT

        def check_list(v: Any) -> str | None:
            if type(v) is not list and type(v) is not tuple:
                return f"`{where}` must be a list, got {_excerpt(v)}"
            if not lo <= len(v) <= hi:
                return f"`{where}` must have {lo}..{hi} items, got {len(v)}"
            return next(filter(None, map(item, v)), None) if item else None

        return check_list
    if isinstance(t, mi.UnionType) and len(t.types) == 2 and isinstance(t.types[1], mi.NoneType):
        inner = _compile(t.types[0], where)
        return None if inner is None else (lambda v: None if v is None else inner(v))
    if isinstance(t, mi.StructType):
        return _compile_struct(t, where + ".")
    raise TypeError(f"no envelope check for field `{where}` of type {t!r}")


def _compile_struct(info: mi.StructType, prefix: str = "") -> _Check:
    """A check that a value is a ``info.cls`` whose fields all have the right type."""
    cls, name = info.cls, info.tag or info.cls.__name__
    fields = [(f.name, c) for f in info.fields if (c := _compile(f.type, prefix + f.name))]

    def check_struct(v: Any) -> str | None:
        if type(v) is not cls:
            return f"`{prefix[:-1] or name}` must be of type {cls.__name__}, got {_excerpt(v)}"
        for attr, check in fields:
            if (problem := check(getattr(v, attr))) is not None:
                return problem
        return None

    return check_struct


_INFO = {cls: mi.type_info(cls) for cls in MESSAGE_TYPES.values()}
_CHECKS = {cls: _compile_struct(info) for cls, info in _INFO.items()}  # type: ignore[arg-type]
#: The payload (``Any``) fields of each message type.
_PAYLOADS = {cls: [f.name for f in info.fields if isinstance(f.type, mi.AnyType)]  # type: ignore[attr-defined]
             for cls, info in _INFO.items()}


def _explain(obj: Any, depth: int, left: int) -> int:
    """The slow, exact check of payload value ``obj`` (before ``to_builtins``): raises _Bad
    naming the first value the decoder would refuse; returns the item budget left."""
    t = type(obj)
    if t is str:
        try:
            obj.encode()
        except UnicodeEncodeError:
            raise _Bad(None, f"text {_excerpt(obj)} is not valid Unicode (lone surrogate)") from None
    elif t is int and not -_MAX_UINT - 1 <= obj <= _MAX_UINT:
        raise _Bad(None, f"integer of {obj.bit_length()} bits does not fit in 64 bits")
    elif t is float and not math.isfinite(obj):
        raise _Bad(None, f"float {obj!r} is not finite")
    elif t is dict or t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise _Bad(None, f"nesting deeper than {MAX_DEPTH} arrays/maps")
        left -= len(obj) * (2 if t is dict else 1)
        if left < 0:
            raise _Bad(None, f"more than {MAX_ITEMS} items in one message")
        for key in obj if t is dict else ():
            if type(key) is not str:
                raise _Bad(None, f"map key {_excerpt(key)} is not a str")
            left = _explain(key, depth + 1, left)
        for value in obj.values() if t is dict else obj:
            left = _explain(value, depth + 1, left)
    elif obj is not None and t is not bool and t is not int and t is not float and t not in _BYTES_TYPES:
        try:  # Structs, dataclasses, enums, datetimes, str/int/dict subclasses, sets, …
            converted = msgspec.to_builtins(obj, builtin_types=_BYTES_TYPES)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _Bad(None, f"cannot encode a {t.__name__}: {exc}") from None
        if type(converted) is t:
            raise _Bad(None, f"a {t.__name__} is not a JSON-like value")
        return _explain(converted, depth, left)
    return left


def _payload_problem(msg: Message) -> str | None:
    """What ``_explain`` finds wrong in the payload of ``msg``, or None."""
    try:
        for name in _PAYLOADS[type(msg)]:
            _explain(getattr(msg, name), 1, MAX_ITEMS - 2 * 23 - 1)  # ≤ 23 envelope entries
    except _Bad as bad:
        return bad.what
    return None


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

    On error ``out`` is left as it was.
    """
    check = _CHECKS.get(type(msg))
    if check is None:
        raise LocalProtocolError(
            INVALID_REQUEST, f"cannot send a {type(msg).__name__}: not a protocol message"
        )
    tag = type(msg).__struct_config__.tag
    problem = check(msg)
    try:
        if problem is not None:
            raise _Bad(None, problem)
        tree = msgspec.to_builtins(msg, builtin_types=_BYTES_TYPES)
        left = MAX_ITEMS - 1 - 2 * len(tree)
        for name in _PAYLOADS[type(msg)]:
            if type(payload := tree.get(name)) is dict or type(payload) is list:
                left = _walk(payload, 1, left)
        data = cbor2.dumps(tree)
        # cbor2 writes NaN/±inf as these float16 items, integers past 64 bits as tags 2/3;
        # the bytes can also occur inside other items, so a hit only calls the exact check.
        if (b"\xf9" in data and any(p in data for p in _NONFINITE16)) or (
            (b"\xc2" in data or b"\xc3" in data) and not _fits_64_bits(tree)
        ):
            if (why := _payload_problem(msg)) is not None:
                raise _Bad(None, why)
    except (_Bad, TypeError, ValueError, RecursionError, cbor2.CBOREncodeError) as exc:
        why = exc.what if isinstance(exc, _Bad) else _payload_problem(msg) or str(exc)
        raise LocalProtocolError(INVALID_REQUEST, f"cannot encode {tag} message: {why}") from None
    if isinstance(msg, Result) and (problem := _check_result(msg)) is not None:
        raise LocalProtocolError(INVALID_REQUEST, f"invalid result message: {problem}")
    out += data


def _fits_64_bits(tree: Any) -> bool:
    """Whether every integer in ``tree`` is within msgpack's −2**63 … 2**64−1 (a cheap,
    slightly strict stand-in: a False sends the caller to the exact check)."""
    try:
        msgspec.msgpack.encode(tree)
    except OverflowError:
        return False
    return True


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

_MAJOR_NAMES = ("an unsigned integer", "a negative integer", "a byte string",
                "a text string", "an array", "a map", "a tag")
_SIMPLE_WHY = {
    0xF7: "undefined is not allowed",
    0xF9: "half-precision (float16) floats are not allowed; floats must be float64",
    0xFA: "single-precision (float32) floats are not allowed; floats must be float64",
    0xFF: "unexpected break byte 0xff (indefinite-length items are not allowed)",
}


def _describe(ib: int) -> str:
    """What the item starting with initial byte ``ib`` is, for error messages."""
    if ib >> 5 < 7:
        return _MAJOR_NAMES[ib >> 5]
    return {0xF4: "false", 0xF5: "true", 0xF6: "null", 0xFB: "a float64"}.get(
        ib, f"the simple value/float 0x{ib:02x}")


def _scan(buf: bytes, max_items: int) -> None:
    """The exact check of ``buf`` against every rule of §3 but UTF-8 and duplicate keys,
    head by head without building anything; raises _Bad at the first rule broken.

    Each array/map head is charged its element count against ``max_items`` before its
    elements are looked at, and a head announcing more elements than bytes remain is
    refused at once.
    """
    n = len(buf)
    if not n:
        raise _Bad(0, "empty payload (a frame must hold one CBOR item)")
    stack: list[tuple[int, bool]] = []
    pos, left, in_map, budget = 0, 1, False, max_items - 1
    try:
        while True:
            while not left:  # close the containers that are complete
                if not stack:
                    if pos != n:
                        raise _Bad(pos, f"{n - pos} trailing bytes after the CBOR item")
                    return
                left, in_map = stack.pop()
            ib = buf[pos]
            major, ai = ib >> 5, ib & 31
            if in_map and not left & 1 and major != 3:
                raise _Bad(pos, f"map keys must be text strings, found {_describe(ib)}")
            left -= 1
            if ai < 24:
                arg, start = ai, pos + 1
            elif ai < 28:
                width = 1 << (ai - 24)
                arg = buf[pos + 1] if width == 1 else (_u16, _u32, _u64)[ai - 25](buf, pos + 1)[0]
                start = pos + 1 + width
            elif major == 7:
                raise _Bad(pos, _SIMPLE_WHY.get(ib, f"reserved initial byte 0x{ib:02x}"))
            elif ai == 31 and 2 <= major <= 5:
                raise _Bad(pos, f"indefinite-length items are not allowed ({_describe(ib)})")
            else:
                raise _Bad(pos, f"malformed initial byte 0x{ib:02x} (reserved additional information)")
            if major < 2:
                pos = start
            elif major < 4:
                if arg > n - start:
                    raise _Bad(pos, f"truncated string: {arg} bytes announced, {n - start} present")
                pos = start + arg
            elif major < 6:
                if len(stack) >= MAX_DEPTH - 1:
                    raise _Bad(pos, f"nesting deeper than {MAX_DEPTH} arrays/maps")
                count = arg << (major - 4)  # a map's entries count twice: key and value
                if count > n - start:
                    kind = "map" if major == 5 else "array"
                    raise _Bad(pos, f"truncated {kind}: {arg} elements announced, {n - start} bytes left")
                budget -= count
                if budget < 0:
                    raise _Bad(pos, f"too many items: this {'map' if major == 5 else 'array'} of"
                                    f" {arg} elements takes the message past {max_items} items")
                stack.append((left, in_map))
                left, in_map, pos = count, major == 5, start
            elif major == 6:
                raise _Bad(pos, f"tags are not allowed (found tag {arg})")
            elif ai == 27:
                if not math.isfinite(value := _f64(buf, pos + 1)[0]):
                    raise _Bad(pos, f"float {value!r} is not allowed (floats must be finite)")
                pos = start
            elif 20 <= ai <= 22:  # false, true, null
                pos = start
            else:
                raise _Bad(pos, _SIMPLE_WHY.get(ib, "simple values other than false, true and null are not allowed"))
    except (IndexError, struct.error):
        raise _Bad(None, f"truncated: the payload ends ({n} bytes) inside an item") from None


class _EveryTag(dict[int, Any]):
    """cbor2's ``semantic_decoders``, consulted for every tag before ``tag_hook`` (cbor2 has
    its own decoders for tags 0-5, 25, 28-30, 35-37, 55799 and more): this one answers every
    tag number, before its content is decoded, with a refusal."""

    def __missing__(self, tag: int) -> Any:
        raise _Bad(None, f"tags are not allowed (found tag {tag})")


#: cbor2 refuses: any tag, duplicate keys, keys that are neither text nor bytes, too deep.
_STRICT: dict[str, Any] = {"semantic_decoders": _EveryTag(), "max_depth": MAX_DEPTH,
                           "allow_duplicate_keys": False, "strict_hashable_types": True}


def _has_byte_keys(node: Any) -> bool:
    """Whether a map in the decoded tree ``node`` has a key that is not text."""
    if type(node) is dict:
        for key, value in node.items():
            if type(key) is not str or (type(value) is dict or type(value) is list) and _has_byte_keys(value):
                return True
    elif type(node) is list:
        for value in node:
            if (type(value) is dict or type(value) is list) and _has_byte_keys(value):
                return True
    return False


def _decode_tree(payload: bytes, max_items: int) -> Any:
    """Decode exactly one strict-CBOR item filling all of ``payload`` (see the module
    docstring for how each rule is enforced)."""
    if not 0 < len(payload) <= max_items:  # empty, or possibly over the item budget
        _scan(payload, max_items)
    tree = cbor2.loads(payload, **_STRICT)
    # Re-encoded, a canonical payload gives itself back; that proves there is nothing after
    # the item, no indefinite length and no float16/32 (cbor2 writes every float as float64,
    # but NaN/±inf as these three float16 items). Other encoders' non-shortest heads and
    # everything else get the exact scan.
    if cbor2.dumps(tree) != payload or (b"\xf9" in payload and any(p in payload for p in _NONFINITE16)):
        _scan(payload, max_items)
    # Simple values and undefined decode to cbor2 objects msgpack cannot encode (an integer
    # below -2**63, fine here, overflows it: the exact scan tells them apart); byte strings
    # show as msgpack bin heads 0xc4-0xc6 (or those bytes inside other items): then the keys
    # are looked at.
    try:
        packed = msgspec.msgpack.encode(tree)
    except OverflowError:
        _scan(payload, max_items)  # exact, simple values included
        packed = b""
    except TypeError:
        _scan(payload, max_items)
        raise
    if (b"\xc4" in packed or b"\xc5" in packed or b"\xc6" in packed) and _has_byte_keys(tree):
        _scan(payload, max_items)
    return tree


def _why(payload: bytes, max_items: int, exc: Exception) -> str:
    """The message for a payload ``_decode_tree`` refused with ``exc``."""
    try:
        _scan(payload, max_items)
    except _Bad as bad:
        exc = bad
    if isinstance(exc, _Bad):
        return f"invalid CBOR{'' if exc.pos is None else f' at byte {exc.pos}'}: {exc.what}"
    if isinstance(exc.__cause__, UnicodeDecodeError):
        return f"invalid CBOR: a text string is not valid UTF-8 ({exc.__cause__.reason})"
    text = str(exc)
    if "Duplicate map key: " in text:
        key = text.split("Duplicate map key: ", 1)[1]  # cbor2 gives the key's repr
        return f"invalid CBOR: duplicate map key {key if len(key) <= 60 else key[:57] + '...'}"
    return f"undecodable CBOR: {type(exc).__name__}: {_excerpt(text, 200)}"


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
    if type(payload) is not bytes:
        payload = bytes(payload)
    try:
        tree = _decode_tree(payload, max_items)
    except Exception as exc:  # cbor2's errors, _Bad, the walk's TypeError (a byte-string key)
        raise RemoteProtocolError(INVALID_REQUEST, _why(payload, max_items, exc)) from None
    if type(tree) is not dict:
        raise RemoteProtocolError(
            INVALID_REQUEST, f"a message must be a CBOR map, got {type(tree).__name__}"
        )
    name = tree.get("type")
    cls = MESSAGE_TYPES.get(name) if type(name) is str else None
    if cls is None:
        problem = f"unknown message type {_excerpt(name)}" if "type" in tree else "message has no 'type' field"
        raise RemoteProtocolError(INVALID_REQUEST, problem)
    try:
        msg = msgspec.convert(tree, cls, strict=True)
    except msgspec.ValidationError as exc:
        raise RemoteProtocolError(INVALID_REQUEST, f"invalid {name} message: {exc}") from None
    if isinstance(msg, Result) and (result_problem := _check_result(msg)) is not None:
        raise RemoteProtocolError(INVALID_REQUEST, f"invalid result message: {result_problem}")
    return msg
