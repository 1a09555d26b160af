"""Parse the JSON of a tool call while it is still arriving (pi's packages/ai, docs/architecture.md §7).

Contract: ``parse_streaming_json(s)`` never raises. None, empty or whitespace-only input gives
``{}``; complete JSON gives its value (so ``"null"`` gives None, as in pi); a truncated document
gives its completed prefix (unfinished strings, numbers, ``tr``/``nu`` literals and containers are
closed; a key whose value has not started is dropped); anything else gives ``{}``.
"""

from __future__ import annotations

import json
from typing import Any

from partial_json_parser import Allow
from partial_json_parser import loads as _partial_loads

__all__ = ["parse_streaming_json", "parse_tool_arguments"]


def parse_streaming_json(text: str | None) -> Any:
    if text is None or not text.strip():
        return {}
    try:
        return json.loads(text)
    except Exception:  # ValueError, RecursionError on deep nesting, ...
        pass
    try:
        return _partial_loads(text, Allow.ALL)
    except BaseException as exc:  # the parser raises IndexError, RecursionError, ...
        if not isinstance(exc, Exception):
            raise
        return {}


def parse_tool_arguments(text: str | None) -> dict[str, Any]:
    """Like ``parse_streaming_json`` but always an object: tool-call arguments are never None."""
    value = parse_streaming_json(text)
    return value if isinstance(value, dict) else {}
