"""Building the LLM context from session entries (pi spec §2.4, ``buildSessionContext``).

The path is walked from the leaf up through ``parentId`` (a broken chain simply ends it),
then emitted root first:

- ``message`` entries → their message;
- ``custom_message`` entries → ``{"role": "custom", customType, content, display, details?,
  timestamp}``;
- ``branch_summary`` entries with a non-empty summary → ``{"role": "branchSummary", summary,
  fromId, timestamp}``;
- with a ``compaction`` on the path (only the latest counts): first ``{"role":
  "compactionSummary", summary, tokensBefore, timestamp}``, then the entries before it from
  ``firstKeptEntryId`` on, then everything after it.

Timestamps of synthesised messages are the entry's, in epoch milliseconds. Leaf ``None``
means pi's ``null`` (an explicitly reset leaf): empty context. Leaf omitted or unknown: the
last entry. Turning these roles into provider messages is the caller's job (``convertToLlm``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .format import timestamp_ms

_LAST_ENTRY: Any = object()


@dataclass
class SessionContext:
    messages: list[dict]
    thinking_level: str
    # {"provider": ..., "modelId": ...} from the last model_change or assistant message.
    model: dict | None


def entry_ms(entry: dict) -> int | None:
    """An entry's ISO ``timestamp`` in epoch milliseconds (None when absent or unreadable)."""
    value = entry.get("timestamp")
    if isinstance(value, str):
        try:
            return timestamp_ms(value)
        except ValueError:
            return None
    return value if isinstance(value, int) else None


def _path_to(entries: list[dict], leaf_id: Any) -> list[dict]:
    if leaf_id is None or not entries:
        return []
    by_id = {entry.get("id"): entry for entry in entries}
    leaf = by_id.get(leaf_id) if leaf_id is not _LAST_ENTRY else None
    if leaf is None:
        leaf = entries[-1]
    path: list[dict] = []
    seen: set[int] = set()
    node: dict | None = leaf
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        path.append(node)
        parent = node.get("parentId")
        node = by_id.get(parent) if parent is not None and parent != node.get("id") else None
    path.reverse()
    return path


def message_from_entry(entry: dict, *, include_compaction: bool = False, empty_summaries: bool = False) -> dict | None:
    """The message ``entry`` contributes, in pi's plain shape, or None.

    ``message`` → its message; ``custom_message`` → a ``custom`` message; ``branch_summary`` →
    a ``branchSummary`` message (only with a summary, unless ``empty_summaries``: pi's
    compaction keeps empty ones); ``compaction`` → a ``compactionSummary`` message only with
    ``include_compaction``. Timestamps of synthesised messages are the entry's, in ms.
    """
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        return message if isinstance(message, dict) else None
    if kind == "custom_message":
        message = {
            "role": "custom",
            "customType": entry.get("customType"),
            "content": entry.get("content"),
            "display": entry.get("display"),
        }
        if entry.get("details") is not None:
            message["details"] = entry["details"]
        message["timestamp"] = entry_ms(entry)
        return message
    if kind == "branch_summary" and (entry.get("summary") or empty_summaries):
        return {
            "role": "branchSummary",
            "summary": entry.get("summary") or "",
            "fromId": entry.get("fromId"),
            "timestamp": entry_ms(entry),
        }
    if kind == "compaction" and include_compaction:
        return {
            "role": "compactionSummary",
            "summary": entry.get("summary") or "",
            "tokensBefore": entry.get("tokensBefore"),
            "timestamp": entry_ms(entry),
        }
    return None


def session_context(entries: list[dict], leaf_id: Any = _LAST_ENTRY) -> SessionContext:
    """Messages, thinking level and model along the path to ``leaf_id``."""
    path = _path_to(entries, leaf_id)
    thinking_level = "off"
    model: dict | None = None
    compaction: dict | None = None
    compaction_index = -1
    for index, entry in enumerate(path):
        kind = entry.get("type")
        if kind == "thinking_level_change" and entry.get("thinkingLevel"):
            thinking_level = entry["thinkingLevel"]
        elif kind == "model_change":
            model = {"provider": entry.get("provider"), "modelId": entry.get("modelId")}
        elif kind == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                model = {"provider": message.get("provider"), "modelId": message.get("model")}
        elif kind == "compaction":
            compaction, compaction_index = entry, index

    messages: list[dict] = []

    def emit(entry: dict) -> None:
        message = message_from_entry(entry)
        if message is not None:
            messages.append(message)

    if compaction is None:
        for entry in path:
            emit(entry)
    else:
        messages.append(
            {
                "role": "compactionSummary",
                "summary": compaction.get("summary"),
                "tokensBefore": compaction.get("tokensBefore"),
                "timestamp": entry_ms(compaction),
            }
        )
        kept = False
        for entry in path[:compaction_index]:
            if entry.get("id") == compaction.get("firstKeptEntryId"):
                kept = True
            if kept:
                emit(entry)
        for entry in path[compaction_index + 1 :]:
            emit(entry)
    return SessionContext(messages=messages, thinking_level=thinking_level, model=model)


def build_session_context(entries: list[dict], leaf_id: Any = _LAST_ENTRY) -> list[dict]:
    """The messages along the path to ``leaf_id`` (see the module docstring)."""
    return session_context(entries, leaf_id).messages
