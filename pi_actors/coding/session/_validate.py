"""Is one parsed session line a usable record? (used by :mod:`.loader`)

:func:`parse_line` turns the raw bytes of one line into a dict or says why it cannot:
not UTF-8, not JSON (JavaScript's ``JSON.parse`` rules: no ``NaN``/``Infinity``, integers of
at most 4300 digits), nested too deeply, not an object.

:func:`entry_problem` says what is wrong with a parsed entry, or returns None:

- the common fields: ``type`` a string; ``id`` a non-empty string and ``parentId`` a string
  or null (both only when ``with_ids``: version-1 files get theirs from the migration);
  ``timestamp`` a string or number when present;
- the fields the program reads, by type (``message`` entries: a ``message`` object with a
  string ``role``; a ``user``/``assistant``/``toolResult`` message must match pi's shape, as
  the LLM context needs it; ``label``: ``targetId``; ...). Unknown entry types and unknown
  fields are fine (extensions write their own);
- the record must be something every actor can carry (PROTOCOL §3): integers within
  −2**64 … 2**64−1, no lone surrogates, at most :data:`MAX_ENTRY_DEPTH` nested
  arrays/objects (the envelope that carries an entry adds a few levels to the codec's 64).

Nothing here raises: every problem is a returned reason (a short phrase for a warning).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["MAX_ENTRY_DEPTH", "parse_line", "entry_problem", "header_problem"]

#: Deepest nesting of arrays/objects in one entry (the entry object itself counts as 1).
MAX_ENTRY_DEPTH = 56

_MIN_INT = -(2**64)
_MAX_INT = 2**64 - 1
_BIG_NUMBER = re.compile(rb"\d{19}|[eE]\+?\d{3}")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]", re.ASCII)
_LLM_ROLES = ("user", "assistant", "toolResult")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_line(raw: bytes) -> tuple[dict | None, str | None]:
    """``(record, None)`` for a JSON object, else ``(None, reason)``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not valid UTF-8"
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        return None, "nested too deeply"
    except ValueError:  # JSONDecodeError, NaN/Infinity, an integer of more than 4300 digits
        return None, "not valid JSON"
    if not isinstance(value, dict):
        return None, "not a JSON object"
    return value, None


def _carriable_problem(value: Any, raw: bytes) -> str | None:
    """Why the record cannot travel between actors, checked only where the raw line hints
    at a problem (long digit runs, surrogate escapes, many brackets): most lines skip it."""
    if _BIG_NUMBER.search(raw) and _has_big_number(value):
        return "holds a number too large to carry"
    if _SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(value):
        return "holds text that is not valid Unicode (a lone surrogate)"
    if raw.count(b"[") + raw.count(b"{") > MAX_ENTRY_DEPTH and _depth(value) > MAX_ENTRY_DEPTH:
        return f"nested more than {MAX_ENTRY_DEPTH} levels deep"
    return None


def _walk(value: Any):
    stack = [value]
    while stack:
        item = stack.pop()
        yield item
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _has_big_number(value: Any) -> bool:
    for v in _walk(value):
        if type(v) is int and not _MIN_INT <= v <= _MAX_INT:
            return True
        if type(v) is float and not math.isfinite(v):  # 1e400 parses as infinity
            return True
    return False


def _has_lone_surrogate(value: Any) -> bool:
    for item in _walk(value):
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


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


def _message_problem(message: dict) -> str | None:
    role = message.get("role")
    if not isinstance(role, str):
        return "its message has no string 'role'"
    if role in _LLM_ROLES:
        import msgspec

        from ...ai import types as T

        try:
            T.message_from_plain(message)
        except msgspec.ValidationError as exc:
            return f"its {role} message does not match pi's shape ({exc})"
    elif role == "bashExecution":
        return _field_problem(message, {}, {"command": _STR, "output": _STR})
    elif role == "custom":
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
        problem = _message_problem(record["message"])
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
