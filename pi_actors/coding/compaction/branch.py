"""Branch summaries: what a conversation branch left behind by ``/tree`` contained (spec §3.9).

- :func:`collect_branch_entries` — the abandoned entries: from the old leaf up to (not
  including) the deepest common ancestor of the old leaf and the target, in chronological
  order. Compaction entries do not stop the walk.
- :func:`prepare_branch_entries` — the messages to summarize under a token budget, newest
  first: messages are included while the running estimate stays within the budget; a
  ``compaction`` / ``branch_summary`` entry that would overflow is still included when the
  total so far is below 90 % of the budget; then the walk stops. Tool results are left out
  (their context is in the assistant's tool call); model/thinking/custom/label entries give
  nothing. File operations: the ``details`` of every pi-generated (not ``fromHook``)
  ``branch_summary`` among the entries first, whatever the budget, then the tool calls of the
  assistant messages included (pi also counted the one message that overflowed the budget).
- :func:`summarize_branch` — budget ``(model.context_window or 128000) - reserve_tokens``;
  no messages → summary ``No content to summarize`` without an LLM call; otherwise one call
  (system prompt as for compaction, ``max_tokens`` 2048, no reasoning option). The summary is
  :data:`BRANCH_SUMMARY_PREAMBLE` + the reply text + the file-list tags. An aborted reply
  gives ``aborted=True``; an error reply gives ``error``; nothing raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...ai.abort import AbortSignal
from ...ai.options import StreamOptions
from ...ai.types import Context, Model, TextContent, UserMessage, now_ms
from .fileops import FileOperations, add_details, add_file_ops, compute_file_lists, format_file_operations
from .messages import message_from_entry, to_llm
from .prompts import BRANCH_SUMMARY_PREAMBLE, SUMMARIZATION_SYSTEM_PROMPT, branch_summary_prompt, serialize_conversation
from .summarize import StreamFn, call_llm, reply_text
from .tokens import estimate_tokens

__all__ = [
    "NO_CONTENT_TO_SUMMARIZE",
    "BRANCH_SUMMARY_MAX_TOKENS",
    "BranchEntries",
    "BranchPreparation",
    "BranchSummaryResult",
    "collect_branch_entries",
    "prepare_branch_entries",
    "summarize_branch",
]

NO_CONTENT_TO_SUMMARIZE = "No content to summarize"
BRANCH_SUMMARY_MAX_TOKENS = 2048
DEFAULT_CONTEXT_WINDOW = 128000


@dataclass
class BranchEntries:
    #: The abandoned entries, chronological (oldest first).
    entries: list[dict]
    #: The deepest entry on both paths, or None when they share none.
    common_ancestor_id: str | None


def _path_ids(by_id: dict[str, dict], leaf_id: str) -> list[str]:
    """Ids from ``leaf_id`` up to its root (leaf first); a broken chain or a cycle ends it."""
    ids: list[str] = []
    seen: set[str] = set()
    current: Any = leaf_id
    while isinstance(current, str) and current in by_id and current not in seen:
        seen.add(current)
        ids.append(current)
        current = by_id[current].get("parentId")
    return ids


def collect_branch_entries(entries: list[dict], old_leaf_id: str | None, target_id: str) -> BranchEntries:
    """The entries left behind when moving from ``old_leaf_id`` to ``target_id``.

    ``entries`` are all session entries (any order). ``old_leaf_id`` None (a reset leaf)
    gives nothing. An unknown ``target_id`` raises ``ValueError("Entry {id} not found")``.
    """
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    if target_id not in by_id:
        raise ValueError(f"Entry {target_id} not found")
    if old_leaf_id is None:
        return BranchEntries([], None)
    old_path = set(_path_ids(by_id, old_leaf_id))
    ancestor = next((i for i in _path_ids(by_id, target_id) if i in old_path), None)
    collected: list[dict] = []
    for entry_id in _path_ids(by_id, old_leaf_id):
        if entry_id == ancestor:
            break
        collected.append(by_id[entry_id])
    collected.reverse()
    return BranchEntries(collected, ancestor)


@dataclass
class BranchPreparation:
    messages: list[dict]
    file_ops: FileOperations
    total_tokens: int


def prepare_branch_entries(entries: list[dict], token_budget: int = 0) -> BranchPreparation:
    """Messages (chronological) and file operations for ``entries``; budget 0 means no limit."""
    ops = FileOperations()
    for entry in entries:
        if entry.get("type") == "branch_summary" and not entry.get("fromHook"):
            add_details(entry.get("details"), ops)

    messages: list[dict] = []
    total = 0
    for entry in reversed(entries):
        message = message_from_entry(entry, include_compaction=True)
        if message is None or message.get("role") == "toolResult":
            continue
        tokens = estimate_tokens(message)
        overflows = token_budget > 0 and total + tokens > token_budget
        if overflows and not (entry.get("type") in ("compaction", "branch_summary") and total < token_budget * 0.9):
            break
        add_file_ops(message, ops)
        messages.append(message)
        total += tokens
        if overflows:
            break
    messages.reverse()
    return BranchPreparation(messages, ops, total)


@dataclass
class BranchSummaryResult:
    """``summary`` and the file lists on success; ``aborted`` or ``error`` otherwise."""

    summary: str | None = None
    read_files: list[str] = field(default_factory=list)
    modified_files: list[str] = field(default_factory=list)
    aborted: bool = False
    error: str | None = None

    @property
    def details(self) -> dict:
        """The ``branch_summary`` entry's ``details``: ``{"readFiles", "modifiedFiles"}``."""
        return {"readFiles": self.read_files, "modifiedFiles": self.modified_files}


async def summarize_branch(
    entries: list[dict],
    model: Model,
    stream_fn: StreamFn,
    *,
    api_key: str | None,
    signal: AbortSignal | None = None,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    reserve_tokens: int = 16384,
    session_id: str | None = None,
) -> BranchSummaryResult:
    """Summarize the abandoned ``entries`` (from :func:`collect_branch_entries`); never raises
    for an LLM failure (see the module docstring)."""
    budget = (model.context_window or DEFAULT_CONTEXT_WINDOW) - reserve_tokens
    prepared = prepare_branch_entries(entries, budget)
    if not prepared.messages:
        return BranchSummaryResult(summary=NO_CONTENT_TO_SUMMARIZE)

    conversation = serialize_conversation(to_llm(prepared.messages))
    prompt = branch_summary_prompt(conversation, custom_instructions, replace_instructions)
    context = Context(
        system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
        messages=[UserMessage(content=[TextContent(text=prompt)], timestamp=now_ms())],
    )
    options = StreamOptions(api_key=api_key, signal=signal, max_tokens=BRANCH_SUMMARY_MAX_TOKENS, session_id=session_id)
    reply = await call_llm(stream_fn, model, context, options)
    if reply.stop_reason == "aborted" or (signal is not None and signal.aborted):
        return BranchSummaryResult(aborted=True)
    if reply.stop_reason == "error":
        return BranchSummaryResult(error=reply.error_message or "Summarization failed")

    read_files, modified_files = compute_file_lists(prepared.file_ops)
    summary = BRANCH_SUMMARY_PREAMBLE + reply_text(reply) + format_file_operations(read_files, modified_files)
    return BranchSummaryResult(summary=summary, read_files=read_files, modified_files=modified_files)
