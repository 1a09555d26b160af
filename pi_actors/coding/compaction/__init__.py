"""Compaction and branch summarization: the pure logic of pi's context management (spec §3).

Inputs are session entries as plain dicts in pi's JSONL v3 shapes (root → leaf for a branch)
and messages as plain dicts or ``pi_actors.ai.types`` Structs. LLM calls go through a
push-style stream function ``await stream_fn(model, context, options, emit)``. Nothing here
touches files, actors or the UI.

- tokens: :class:`CompactionSettings`, :func:`calculate_context_tokens`,
  :func:`estimate_tokens`, :func:`estimate_context_tokens`, :func:`should_compact`;
- prepare: :func:`prepare_compaction`, :func:`find_cut_point`,
  :func:`compaction_unavailable_reason`;
- prompts: :func:`serialize_conversation` and pi's prompt texts;
- summarize: :func:`compact` → :class:`CompactionResult`, :class:`CompactionError`;
- branch: :func:`collect_branch_entries`, :func:`prepare_branch_entries`,
  :func:`summarize_branch` → :class:`BranchSummaryResult`;
- auto: :func:`decide_auto_compaction` → :class:`CompactionDecision`.
"""

from .auto import (
    OVERFLOW_RECOVERY_FAILED,
    CompactionDecision,
    OverflowDetector,
    auto_compaction_error_message,
    decide_auto_compaction,
    is_overflow_error,
    overflow_detector,
    resets_overflow_flag,
)
from .branch import (
    BRANCH_SUMMARY_MAX_TOKENS,
    NO_CONTENT_TO_SUMMARIZE,
    BranchEntries,
    BranchPreparation,
    BranchSummaryResult,
    collect_branch_entries,
    prepare_branch_entries,
    summarize_branch,
)
from .fileops import FileOperations, add_details, add_file_ops, compute_file_lists, format_file_operations
from .messages import as_plain, entry_ms, message_from_entry, to_llm
from .prepare import (
    ALREADY_COMPACTED,
    NO_MESSAGES_YET,
    NOTHING_TO_COMPACT,
    CompactionPreparation,
    CutPoint,
    compaction_unavailable_reason,
    find_cut_point,
    find_turn_start_index,
    prepare_compaction,
)
from .prompts import (
    BRANCH_SUMMARY_PREAMBLE,
    BRANCH_SUMMARY_PROMPT,
    NO_PRIOR_HISTORY,
    SUMMARIZATION_PROMPT,
    SUMMARIZATION_SYSTEM_PROMPT,
    TOOL_RESULT_MAX_CHARS,
    TURN_PREFIX_SUMMARIZATION_PROMPT,
    UPDATE_SUMMARIZATION_PROMPT,
    branch_summary_prompt,
    serialize_conversation,
    summarization_prompt,
)
from .summarize import (
    CompactionCancelled,
    CompactionError,
    CompactionResult,
    StreamFn,
    compact,
    generate_summary,
    generate_turn_prefix_summary,
)
from .tokens import (
    CompactionSettings,
    ContextTokens,
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
    last_assistant_usage,
    should_compact,
)

__all__ = [
    "ALREADY_COMPACTED",
    "BRANCH_SUMMARY_MAX_TOKENS",
    "BRANCH_SUMMARY_PREAMBLE",
    "BRANCH_SUMMARY_PROMPT",
    "BranchEntries",
    "BranchPreparation",
    "BranchSummaryResult",
    "CompactionCancelled",
    "CompactionDecision",
    "CompactionError",
    "CompactionPreparation",
    "CompactionResult",
    "CompactionSettings",
    "ContextTokens",
    "CutPoint",
    "FileOperations",
    "NOTHING_TO_COMPACT",
    "NO_CONTENT_TO_SUMMARIZE",
    "NO_MESSAGES_YET",
    "NO_PRIOR_HISTORY",
    "OVERFLOW_RECOVERY_FAILED",
    "OverflowDetector",
    "StreamFn",
    "SUMMARIZATION_PROMPT",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "TOOL_RESULT_MAX_CHARS",
    "TURN_PREFIX_SUMMARIZATION_PROMPT",
    "UPDATE_SUMMARIZATION_PROMPT",
    "add_details",
    "add_file_ops",
    "as_plain",
    "auto_compaction_error_message",
    "branch_summary_prompt",
    "calculate_context_tokens",
    "collect_branch_entries",
    "compact",
    "compaction_unavailable_reason",
    "compute_file_lists",
    "decide_auto_compaction",
    "entry_ms",
    "estimate_context_tokens",
    "estimate_tokens",
    "find_cut_point",
    "find_turn_start_index",
    "format_file_operations",
    "generate_summary",
    "generate_turn_prefix_summary",
    "is_overflow_error",
    "last_assistant_usage",
    "message_from_entry",
    "overflow_detector",
    "prepare_branch_entries",
    "prepare_compaction",
    "resets_overflow_flag",
    "serialize_conversation",
    "should_compact",
    "summarization_prompt",
    "summarize_branch",
    "to_llm",
]
