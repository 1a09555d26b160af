"""Choosing what a compaction summarizes and what it keeps (pi spec §3.5, ``prepareCompaction``).

Input: the current branch as session entry dicts, root → leaf (``path_entries``). Only the
entries after the latest ``compaction`` on it (the *window*) are considered.

Cut point (:func:`find_cut_point`):

- valid cut points are ``message`` entries of role user, assistant, bashExecution, custom,
  branchSummary or compactionSummary — **never toolResult** — and ``branch_summary`` /
  ``custom_message`` entries. Cutting at an assistant keeps the tool results after it, so a
  tool call is never separated from its result;
- walking back from the newest entry and summing :func:`estimate_tokens` of ``message``
  entries, at the first index where the sum reaches ``keep_recent_tokens`` the cut is the first
  valid cut point at or after it; if the budget is never reached, the first valid cut point
  (everything is kept); with no valid cut point, the window start;
- the cut then extends back over immediately preceding non-message entries (model/thinking
  changes, labels, custom entries...), stopping at a ``message``, a ``compaction`` or the
  window start;
- the turn is *split* when the chosen cut point is not a user message and a turn start (a
  user or bashExecution message, or a ``branch_summary`` / ``custom_message`` entry) lies
  before the first kept entry in the window; the entries from that turn start up to the cut
  are the *turn prefix*.

Deliberate difference from pi: whether the turn is split is judged at the chosen cut point,
before the extension over non-message entries. pi judges it after, so a cut extended onto a
model or thinking change in front of a user message counted as a split of the *previous*
turn; here it is no split (the previous turn is summarized as history).

:func:`prepare_compaction` returns None when the last entry is a compaction ("Already
compacted") or there is nothing to keep an id of ("Nothing to compact (session too
small)"); :func:`compaction_unavailable_reason` says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .fileops import FileOperations, add_details, add_file_ops
from .messages import message_from_entry
from .tokens import CompactionSettings, estimate_context_tokens, estimate_tokens

__all__ = [
    "ALREADY_COMPACTED",
    "NOTHING_TO_COMPACT",
    "NO_MESSAGES_YET",
    "CutPoint",
    "CompactionPreparation",
    "find_cut_point",
    "find_turn_start_index",
    "prepare_compaction",
    "compaction_unavailable_reason",
]

ALREADY_COMPACTED = "Already compacted"
NOTHING_TO_COMPACT = "Nothing to compact (session too small)"
#: Interactive ``/compact`` refuses with fewer than 2 message entries on the branch.
NO_MESSAGES_YET = "Nothing to compact (no messages yet)"

_CUT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"})
_USER_LIKE_ENTRIES = frozenset({"branch_summary", "custom_message"})


def _role(entry: dict) -> str | None:
    message = entry.get("message")
    return message.get("role") if isinstance(message, dict) else None


def _is_cut_point(entry: dict) -> bool:
    kind = entry.get("type")
    if kind == "message":
        return _role(entry) in _CUT_ROLES
    return kind in _USER_LIKE_ENTRIES


@dataclass(frozen=True)
class CutPoint:
    #: Index of the first entry kept.
    first_kept_entry_index: int
    #: Index of the entry starting the split turn, or -1 when the turn is not split.
    turn_start_index: int
    is_split_turn: bool


def find_turn_start_index(entries: list[dict], entry_index: int, start_index: int) -> int:
    """The nearest turn start at or before ``entry_index`` (not before ``start_index``), or -1."""
    for index in range(entry_index, start_index - 1, -1):
        entry = entries[index]
        if entry.get("type") in _USER_LIKE_ENTRIES:
            return index
        if entry.get("type") == "message" and _role(entry) in ("user", "bashExecution"):
            return index
    return -1


def find_cut_point(entries: list[dict], start_index: int, end_index: int, keep_recent_tokens: int) -> CutPoint:
    """Where to cut ``entries[start_index:end_index]`` to keep about ``keep_recent_tokens``."""
    cut_points = [i for i in range(start_index, end_index) if _is_cut_point(entries[i])]
    if not cut_points:
        return CutPoint(start_index, -1, False)

    cut = cut_points[0]
    accumulated = 0
    for index in range(end_index - 1, start_index - 1, -1):
        entry = entries[index]
        if entry.get("type") != "message":
            continue
        accumulated += estimate_tokens(entry.get("message") or {})
        if accumulated >= keep_recent_tokens:
            cut = next((c for c in cut_points if c >= index), cut)
            break

    chosen = entries[cut]
    if chosen.get("type") == "message" and _role(chosen) == "user":
        turn_start = -1
    else:
        turn_start = find_turn_start_index(entries, cut, start_index)

    while cut > start_index:
        previous = entries[cut - 1]
        if previous.get("type") in ("compaction", "message"):
            break
        cut -= 1

    if turn_start == -1 or turn_start >= cut:
        return CutPoint(cut, -1, False)
    return CutPoint(cut, turn_start, True)


@dataclass
class CompactionPreparation:
    """Everything :func:`~pi_actors.coding.compaction.compact` needs; messages are plain dicts
    in pi's shapes (custom_message → ``custom``, branch_summary → ``branchSummary``)."""

    first_kept_entry_id: str
    messages_to_summarize: list[dict]
    turn_prefix_messages: list[dict]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    file_ops: FileOperations
    settings: CompactionSettings
    first_kept_entry_index: int = 0
    #: The branch entries this was prepared from (extensions and callers may want them).
    path_entries: list[dict] = field(default_factory=list, repr=False)


def _messages(entries: list[dict]) -> list[dict]:
    result = []
    for entry in entries:
        message = message_from_entry(entry)
        if message is not None:
            result.append(message)
    return result


def prepare_compaction(path_entries: list[dict], settings: CompactionSettings | None = None) -> CompactionPreparation | None:
    """The compaction plan for the branch ``path_entries`` (root → leaf), or None (see module)."""
    settings = settings or CompactionSettings()
    if path_entries and path_entries[-1].get("type") == "compaction":
        return None

    previous = -1
    for index in range(len(path_entries) - 1, -1, -1):
        if path_entries[index].get("type") == "compaction":
            previous = index
            break
    start, end = previous + 1, len(path_entries)

    context = [
        m
        for m in (message_from_entry(e, include_compaction=True) for e in path_entries[max(previous, 0) :])
        if m is not None
    ]
    tokens_before = estimate_context_tokens(context).tokens

    cut = find_cut_point(path_entries, start, end, settings.keep_recent_tokens)
    if cut.first_kept_entry_index >= end:
        return None
    first_kept_id = path_entries[cut.first_kept_entry_index].get("id")
    if not isinstance(first_kept_id, str) or not first_kept_id:
        return None

    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    to_summarize = _messages(path_entries[start:history_end])
    turn_prefix = _messages(path_entries[cut.turn_start_index : cut.first_kept_entry_index]) if cut.is_split_turn else []

    previous_summary: str | None = None
    ops = FileOperations()
    if previous >= 0:
        compaction = path_entries[previous]
        summary = compaction.get("summary")
        previous_summary = summary if isinstance(summary, str) else None
        if not compaction.get("fromHook"):
            add_details(compaction.get("details"), ops)
    for message in to_summarize + turn_prefix:
        add_file_ops(message, ops)

    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=turn_prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=ops,
        settings=settings,
        first_kept_entry_index=cut.first_kept_entry_index,
        path_entries=path_entries,
    )


def compaction_unavailable_reason(path_entries: list[dict], settings: CompactionSettings | None = None) -> str | None:
    """Why :func:`prepare_compaction` gives None: :data:`ALREADY_COMPACTED` or
    :data:`NOTHING_TO_COMPACT`; None when a compaction can be prepared."""
    if path_entries and path_entries[-1].get("type") == "compaction":
        return ALREADY_COMPACTED
    if prepare_compaction(path_entries, settings) is None:
        return NOTHING_TO_COMPACT
    return None
