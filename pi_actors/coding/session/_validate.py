"""Is one parsed session line a usable record? (used by :mod:`.loader`)

:func:`parse_line` turns the raw bytes of one line into a dict or says why it cannot: not
UTF-8, not JSON (strict: no ``NaN``/``Infinity``, no lone surrogate escapes, no number a
double cannot hold), nested too deeply to parse, not an object.

:func:`entry_problem` says what is wrong with a parsed entry, or returns None:

- the common fields: ``type`` a string; ``id`` a non-empty string and ``parentId`` a string
  or null (both only when ``with_ids``: version-1 files get theirs from the migration);
  ``timestamp`` a string or number when present;
- the fields the program reads, by type (``message`` entries: a ``message`` object with a
  string ``role``; a ``user``/``assistant``/``toolResult`` message must match pi's shape, as
  the LLM context needs it; ``label``: ``targetId``; ...). Unknown entry types and unknown
  fields are fine (extensions write their own);
- the record must be something every actor can carry (PROTOCOL §3): integers within
  −2**63 … 2**64−1, at most :data:`MAX_ENTRY_DEPTH` nested arrays/objects (the envelope that
  carries an entry adds a few levels to the codec's 64).

Parsing is msgspec's JSON decoder (several times faster than :mod:`json`, and strict where
the codec is); the checks run in C where they can, so loading stays fast for big sessions.
Nothing here raises: every problem is a returned reason (a short phrase for a warning).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

__all__ = ["MAX_ENTRY_DEPTH", "parse_line", "entry_problem", "header_problem"]

#: Deepest nesting of arrays/objects in one entry (the entry object itself counts as 1).
MAX_ENTRY_DEPTH = 56

_LLM_ROLES = ("user", "assistant", "toolResult")
_decode = msgspec.json.decode
_msgpack_encode = msgspec.msgpack.encode


def parse_line(raw: bytes) -> tuple[dict | None, str | None]:
    """``(record, None)`` for a JSON object, else ``(None, reason)``."""
    try:
        value = _decode(raw)
    except RecursionError:
        return None, "nested too deeply"
    except msgspec.ValidationError:  # 1e400, or an integer of very many digits
        return None, "holds a number too large to carry"
    except msgspec.DecodeError as exc:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, "not valid UTF-8"
        if "surrogate" in str(exc):
            return None, "holds text that is not valid Unicode (a lone surrogate)"
        return None, "not valid JSON"
    if not isinstance(value, dict):
        return None, "not a JSON object"
    return value, None


def _carriable_problem(value: Any, raw: bytes) -> str | None:
    """Why the record cannot travel between actors (integers out of range, too deep)."""
    if raw.count(b"[") + raw.count(b"{") > MAX_ENTRY_DEPTH and _depth(value) > MAX_ENTRY_DEPTH:
        return f"nested more than {MAX_ENTRY_DEPTH} levels deep"
    try:
        _msgpack_encode(value)  # C speed; refuses exactly the integers outside 64 bits
    except OverflowError:
        return "holds a number too large to carry"
    except RecursionError:
        return f"nested more than {MAX_ENTRY_DEPTH} levels deep"
    return None


def _depth(value: Any) -> int:
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _is_number(value: Any) -> bool:
    return type(value) in (int, float) and (type(value) is int or math.isfinite(value))


def _is_str_or_null(value: Any) -> bool:
    return value is None or isinstance(value, str)


# Fields each entry type must (required) or may (optional) have, with their check.
_STR = ("a string", lambda v: isinstance(v, str))
_STR_OR_NULL = ("a string or null", _is_str_or_null)
_NUMBER = ("a number", _is_number)
_BOOL = ("true or false", lambda v: isinstance(v, bool))
_CONTENT = ("a string or a list", lambda v: isinstance(v, (str, list)))
_OBJECT = ("an object", lambda v: isinstance(v, dict))

_FIELDS: dict[str, tuple[dict[str, tuple], dict[str, tuple]]] = {
    # type: (required, optional)
    "message": ({"message": _OBJECT}, {}),
    "thinking_level_change": ({}, {"thinkingLevel": _STR}),
    "model_change": ({}, {"provider": _STR, "modelId": _STR}),
    "compaction": ({}, {"summary": _STR, "firstKeptEntryId": _STR_OR_NULL, "tokensBefore": _NUMBER}),
    "branch_summary": ({}, {"summary": _STR, "fromId": _STR_OR_NULL}),
    "custom": ({}, {"customType": _STR}),
    "custom_message": ({}, {"customType": _STR, "content": _CONTENT, "display": _BOOL}),
    "label": ({"targetId": _STR}, {"label": _STR_OR_NULL}),
    "session_info": ({}, {"name": _STR_OR_NULL}),
}


def _field_problem(record: dict, required: dict, optional: dict) -> str | None:
    for name, (what, check) in required.items():
        if name not in record:
            return f"has no {name!r}"
        if not check(record[name]):
            return f"{name!r} is not {what}"
    for name, (what, check) in optional.items():
        if name in record and not check(record[name]):
            return f"{name!r} is not {what}"
    return None


_llm_entry: Any = None  # a decoder of {"message": <user|assistant|toolResult message>}


def _llm_message_problem(raw: bytes, role: str) -> str | None:
    """Whether the line's message validates as the Struct the agent uses (decoding the raw
    line again, typed, is several times faster than converting the parsed dict)."""
    global _llm_entry
    if _llm_entry is None:
        from ...ai import types as T

        _llm_entry = msgspec.json.Decoder(msgspec.defstruct("_LlmEntry", [("message", T.Message)]))
    try:
        _llm_entry.decode(raw)
    except msgspec.ValidationError as exc:
        return f"its {role} message does not match pi's shape ({exc})"
    return None


def _message_problem(message: dict, raw: bytes) -> str | None:
    role = message.get("role")
    if not isinstance(role, str):
        return "its message has no string 'role'"
    if role in _LLM_ROLES:
        return _llm_message_problem(raw, role)
    if role == "bashExecution":
        return _field_problem(message, {}, {"command": _STR, "output": _STR})
    if role == "custom":
        return _field_problem(message, {}, {"content": _CONTENT})
    return None


def entry_problem(record: dict, raw: bytes, *, with_ids: bool) -> str | None:
    """What makes ``record`` (parsed from ``raw``) unusable as an entry, or None."""
    kind = record.get("type")
    if not isinstance(kind, str):
        return "has no string 'type'"
    if with_ids:
        if not isinstance(record.get("id"), str) or not record["id"]:
            return "has no string 'id'"
        if not _is_str_or_null(record.get("parentId")):
            return "'parentId' is not a string or null"
    if "timestamp" in record and not (record["timestamp"] is None or isinstance(record["timestamp"], str) or _is_number(record["timestamp"])):
        return "'timestamp' is not a string"
    required, optional = _FIELDS.get(kind, ({}, {}))
    problem = _field_problem(record, required, optional)
    if problem is None and kind == "message":
        problem = _message_problem(record["message"], raw)
    if problem is not None:
        return f"{kind} entry: {problem}"
    return _carriable_problem(record, raw)


def header_problem(record: dict, raw: bytes) -> str | None:
    """What makes ``record`` unusable as the session header, or None."""
    if record.get("type") != "session" or not isinstance(record.get("id"), str) or not record["id"]:
        return "the first record is not a session header"
    version = record.get("version")
    if version is not None and type(version) is not int:
        return "the header's 'version' is not a number"
    for name in ("timestamp", "cwd", "parentSession"):
        if name in record and not isinstance(record[name], str):
            return f"the header's {name!r} is not a string"
    return _carriable_problem(record, raw)
