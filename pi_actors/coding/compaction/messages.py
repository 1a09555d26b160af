"""Session messages for compaction: plain shapes, entry → message, provider messages.

Session entries are plain dicts in pi's JSONL v3 shapes (see ``pi_actors.coding.session``);
their ``message`` payloads are plain dicts too (``role`` user / assistant / toolResult /
bashExecution / custom, camelCase fields). Compaction also meets the synthesised roles
``compactionSummary``, ``branchSummary`` and ``custom`` (from ``custom_message`` entries).

Every function here accepts a message either as such a dict or as a ``pi_actors.ai.types``
Struct (UserMessage, AssistantMessage, ToolResultMessage) or any msgspec-encodable object;
:func:`as_plain` turns each into pi's plain camelCase shape without copying dicts.

- :func:`message_from_entry` — the message an entry contributes to a conversation, as pi's
  compaction sees it (``message``, ``custom_message``, ``branch_summary``; ``compaction`` only
  when asked for, as ``compactionSummary``). Other entry types give None.
- :func:`to_llm` — provider messages (Structs) for such a list, through
  ``pi_actors.coding.messages.convert_to_llm`` (pi's ``convertToLlm``, spec §2.4).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...ai.types import Message
from ..messages import convert_to_llm, from_session_messages
from ..session.format import timestamp_ms

__all__ = ["as_plain", "entry_ms", "message_from_entry", "to_llm"]


def as_plain(message: Any) -> dict:
    """``message`` in pi's plain camelCase shape (dicts are returned as they are)."""
    if isinstance(message, dict):
        return message
    plain = msgspec.to_builtins(message)
    if isinstance(plain, dict) and "role" not in plain:
        role = getattr(message, "role", None)
        if isinstance(role, str):
            plain["role"] = role
    return plain if isinstance(plain, dict) else {}


def entry_ms(entry: dict) -> int | None:
    """An entry's ISO ``timestamp`` in epoch milliseconds (None when absent or unreadable)."""
    value = entry.get("timestamp")
    if isinstance(value, str):
        try:
            return timestamp_ms(value)
        except ValueError:
            return None
    return value if isinstance(value, int) else None


def message_from_entry(entry: dict, *, include_compaction: bool = False) -> dict | None:
    """The message ``entry`` contributes, in pi's plain shape, or None.

    ``message`` → its message; ``custom_message`` → a ``custom`` message; ``branch_summary`` →
    a ``branchSummary`` message (even with an empty summary, as pi's compaction does);
    ``compaction`` → a ``compactionSummary`` message only with ``include_compaction``.
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
            "timestamp": entry_ms(entry),
        }
        if entry.get("details") is not None:
            message["details"] = entry["details"]
        return message
    if kind == "branch_summary":
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


def to_llm(messages: list[Any]) -> list[Message]:
    """Provider messages for session/agent messages given as dicts or Structs: LLM-role dicts
    are validated into Structs, then ``pi_actors.coding.messages.convert_to_llm`` (pi's
    ``convertToLlm``) turns bash executions, custom messages and summaries into user text."""
    items = [m if isinstance(m, (dict, msgspec.Struct)) else as_plain(m) for m in messages]
    return convert_to_llm(from_session_messages(items))
