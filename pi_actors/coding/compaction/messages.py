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
from ..session.context import entry_ms
from ..session.context import message_from_entry as _message_from_entry

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


def message_from_entry(entry: dict, *, include_compaction: bool = False) -> dict | None:
    """The message ``entry`` contributes to a compaction (``session.message_from_entry``,
    keeping empty branch summaries, as pi's compaction does)."""
    return _message_from_entry(entry, include_compaction=include_compaction, empty_summaries=True)


def to_llm(messages: list[Any]) -> list[Message]:
    """Provider messages for session/agent messages given as dicts or Structs: LLM-role dicts
    are validated into Structs, then ``pi_actors.coding.messages.convert_to_llm`` (pi's
    ``convertToLlm``) turns bash executions, custom messages and summaries into user text."""
    items = [m if isinstance(m, (dict, msgspec.Struct)) else as_plain(m) for m in messages]
    return convert_to_llm(from_session_messages(items))
