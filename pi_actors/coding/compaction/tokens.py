"""Token accounting for compaction (pi spec §3.1–§3.2).

- :class:`CompactionSettings` — ``enabled`` (True), ``reserve_tokens`` (16384),
  ``keep_recent_tokens`` (20000); pi's ``settings.json`` ``compaction`` object is read
  (typed, checked) as ``protocol.config.CompactionSection``.
- :func:`calculate_context_tokens` — ``totalTokens`` or, when it is 0, the sum of
  input + output + cacheRead + cacheWrite.
- :func:`estimate_tokens` — ceil(chars / 4) for one message, chars counted as pi does.
- :func:`estimate_context_tokens` — the last valid assistant usage plus estimates of the
  messages after it (:class:`ContextTokens`).
- :func:`should_compact` — ``enabled and tokens > window - reserve``.
- :func:`last_assistant_usage` — the usage of the last non-aborted, non-error assistant
  among session entries.

Messages may be plain dicts (pi's shape) or ai Structs; usages may be a ``Usage`` Struct or a
plain dict. Character counts are JavaScript string lengths (UTF-16 code units), so estimates
equal pi's also for text outside the Basic Multilingual Plane.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .messages import as_plain

__all__ = [
    "CompactionSettings",
    "ContextTokens",
    "js_len",
    "calculate_context_tokens",
    "estimate_tokens",
    "estimate_context_tokens",
    "should_compact",
    "assistant_usage",
    "last_assistant_usage",
]

IMAGE_CHARS = 4800


@dataclass(frozen=True)
class CompactionSettings:
    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000


def js_len(text: str) -> int:
    """``text.length`` in JavaScript: UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _usage_field(usage: Any, camel: str, snake: str) -> float:
    value = usage.get(camel, 0) if isinstance(usage, dict) else getattr(usage, snake, 0)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def calculate_context_tokens(usage: Any) -> int:
    """Context size a usage reports: ``totalTokens`` or input + output + cacheRead + cacheWrite."""
    total = _usage_field(usage, "totalTokens", "total_tokens")
    if total:
        return int(total)
    return int(
        _usage_field(usage, "input", "input")
        + _usage_field(usage, "output", "output")
        + _usage_field(usage, "cacheRead", "cache_read")
        + _usage_field(usage, "cacheWrite", "cache_write")
    )


def _block_chars(content: Any, *, images: bool) -> int:
    if isinstance(content, str):
        return js_len(content)
    chars = 0
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            chars += js_len(block["text"])
        elif images and block.get("type") == "image":
            chars += IMAGE_CHARS
    return chars


def _json_stringify(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def estimate_tokens(message: Any) -> int:
    """pi's ``estimateTokens``: ceil(chars / 4), chars by role (spec §3.2); unknown roles 0."""
    plain = as_plain(message)
    role = plain.get("role")
    if role == "user":
        chars = _block_chars(plain.get("content"), images=False)
    elif role == "assistant":
        chars = 0
        for block in plain.get("content") or []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                chars += js_len(block.get("text") or "")
            elif kind == "thinking":
                chars += js_len(block.get("thinking") or "")
            elif kind == "toolCall":
                chars += js_len(block.get("name") or "") + js_len(_json_stringify(block.get("arguments")))
    elif role in ("toolResult", "custom"):
        chars = _block_chars(plain.get("content"), images=True)
    elif role == "bashExecution":
        chars = js_len(plain.get("command") or "") + js_len(plain.get("output") or "")
    elif role in ("branchSummary", "compactionSummary"):
        chars = js_len(plain.get("summary") or "")
    else:
        return 0
    return math.ceil(chars / 4)


def assistant_usage(message: Any) -> Any | None:
    """The usage of an assistant message that is neither aborted nor an error, else None."""
    if isinstance(message, dict):
        if message.get("role") != "assistant" or message.get("stopReason") in ("aborted", "error"):
            return None
        return message.get("usage") or None
    if getattr(message, "role", None) != "assistant":
        return None
    if getattr(message, "stop_reason", None) in ("aborted", "error"):
        return None
    return getattr(message, "usage", None)


@dataclass(frozen=True)
class ContextTokens:
    """``tokens`` = ``usage_tokens`` + ``trailing_tokens``; ``last_usage_index`` is the index
    of the assistant whose usage was taken (None: no usage, everything estimated)."""

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None


def estimate_context_tokens(messages: list[Any]) -> ContextTokens:
    """pi's ``estimateContextTokens``: the last valid assistant usage plus estimates after it."""
    for index in range(len(messages) - 1, -1, -1):
        usage = assistant_usage(messages[index])
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing = sum(estimate_tokens(m) for m in messages[index + 1 :])
            return ContextTokens(usage_tokens + trailing, usage_tokens, trailing, index)
    estimated = sum(estimate_tokens(m) for m in messages)
    return ContextTokens(estimated, 0, estimated, None)


def should_compact(context_tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """True when compaction is enabled and the context exceeds ``window - reserve``."""
    if not settings.enabled:
        return False
    return context_tokens > context_window - settings.reserve_tokens


def last_assistant_usage(entries: list[dict]) -> Any | None:
    """The usage of the last non-aborted, non-error assistant ``message`` entry, or None."""
    for entry in reversed(entries):
        if entry.get("type") == "message":
            usage = assistant_usage(entry.get("message") or {})
            if usage is not None:
                return usage
    return None
