"""The texts a summarizer is sent: pi's prompts and the conversation serialization (§3.6, §3.9).

The prompt constants are pi's texts verbatim, so a summary has pi's section skeleton
(``## Goal``, ``## Constraints & Preferences``, ``## Progress`` with ``### Done`` /
``### In Progress`` / ``### Blocked``, ``## Key Decisions``, ``## Next Steps``,
``## Critical Context``; branch summaries have no Critical Context).

:func:`serialize_conversation` turns provider messages into plain text so the summarizer reads
a transcript instead of continuing a chat. Blocks are joined by a blank line:

- ``[User]: {text blocks concatenated}`` (skipped when empty);
- ``[Assistant thinking]: {thinking blocks joined by \\n}``, ``[Assistant]: {text blocks
  joined by \\n}``, ``[Assistant tool calls]: name(k=<JSON v>, ...); ...`` — each only when
  present, in this order;
- ``[Tool result]: {text blocks concatenated}``, cut to 2000 characters followed by
  ``\\n\\n[... {n} more characters truncated]`` (skipped when empty).

Images are dropped. Messages may be ai Structs or plain dicts; call ``to_llm`` (``convert_to_llm``) first so
custom, bash and summary messages appear as ``[User]``. Character counts here are Python code
points (pi counts UTF-16 units; they differ only for characters outside the BMP, and a cut
here never splits a surrogate pair).
"""

from __future__ import annotations

import json
from typing import Any

from .messages import as_plain

__all__ = [
    "TOOL_RESULT_MAX_CHARS",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "SUMMARIZATION_PROMPT",
    "UPDATE_SUMMARIZATION_PROMPT",
    "TURN_PREFIX_SUMMARIZATION_PROMPT",
    "BRANCH_SUMMARY_PROMPT",
    "BRANCH_SUMMARY_PREAMBLE",
    "NO_PRIOR_HISTORY",
    "serialize_conversation",
    "summarization_prompt",
    "branch_summary_prompt",
]

TOOL_RESULT_MAX_CHARS = 2000

SUMMARIZATION_SYSTEM_PROMPT = """You are a context summarization assistant. Your task is to read a conversation between a user and an AI coding assistant, then produce a structured summary following the exact format specified.

Do NOT continue the conversation. Do NOT respond to any questions in the conversation. ONLY output the structured summary."""

SUMMARIZATION_PROMPT = """The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

## Goal
[What is the user trying to accomplish? Can be multiple items if the session covers different tasks.]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned by user]
- [Or "(none)" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Any data, examples, or references needed to continue]
- [Or "(none)" if not applicable]

Keep each section concise. Preserve exact file paths, function names, and error messages."""

UPDATE_SUMMARIZATION_PROMPT = """The messages above are NEW conversation messages to incorporate into the existing summary provided in <previous-summary> tags.

Update the existing structured summary with new information. RULES:
- PRESERVE all existing information from the previous summary
- ADD new progress, decisions, and context from the new messages
- UPDATE the Progress section: move items from "In Progress" to "Done" when completed
- UPDATE "Next Steps" based on what was accomplished
- PRESERVE exact file paths, function names, and error messages
- If something is no longer relevant, you may remove it

Use this EXACT format:

## Goal
[Preserve existing goals, add new ones if the task expanded]

## Constraints & Preferences
- [Preserve existing, add new ones discovered]

## Progress
### Done
- [x] [Include previously done items AND newly completed items]

### In Progress
- [ ] [Current work - update based on progress]

### Blocked
- [Current blockers - remove if resolved]

## Key Decisions
- **[Decision]**: [Brief rationale] (preserve all previous, add new)

## Next Steps
1. [Update based on current state]

## Critical Context
- [Preserve important context, add new if needed]

Keep each section concise. Preserve exact file paths, function names, and error messages."""

TURN_PREFIX_SUMMARIZATION_PROMPT = """This is the PREFIX of a turn that was too large to keep. The SUFFIX (recent work) is retained.

Summarize the prefix to provide context for the retained suffix:

## Original Request
[What did the user ask for in this turn?]

## Early Progress
- [Key decisions and work done in the prefix]

## Context for Suffix
- [Information needed to understand the retained recent work]

Be concise. Focus on what's needed to understand the kept suffix."""

BRANCH_SUMMARY_PREAMBLE = """The user explored a different conversation branch before returning here.
Summary of that exploration:

"""

BRANCH_SUMMARY_PROMPT = """Create a structured summary of this conversation branch for context when returning later.

Use this EXACT format:

## Goal
[What was the user trying to accomplish in this branch?]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned]
- [Or "(none)" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Work that was started but not finished]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [What should happen next to continue this work]

Keep each section concise. Preserve exact file paths, function names, and error messages."""

#: The history summary of a split turn when nothing precedes the turn.
NO_PRIOR_HISTORY = "No prior history."


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content or [] if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n\n[... {len(text) - limit} more characters truncated]"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def serialize_conversation(messages: list[Any]) -> str:
    """The transcript of provider messages, in pi's format (see the module docstring)."""
    parts: list[str] = []
    for message in messages:
        plain = as_plain(message)
        role = plain.get("role")
        if role == "user":
            text = "".join(_texts(plain.get("content")))
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            texts, thinking, calls = [], [], []
            for block in plain.get("content") or []:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "text":
                    texts.append(block.get("text") or "")
                elif kind == "thinking":
                    thinking.append(block.get("thinking") or "")
                elif kind == "toolCall":
                    arguments = block.get("arguments")
                    items = arguments.items() if isinstance(arguments, dict) else ()
                    rendered = ", ".join(f"{k}={_json(v)}" for k, v in items)
                    calls.append(f"{block.get('name', '')}({rendered})")
            if thinking:
                parts.append("[Assistant thinking]: " + "\n".join(thinking))
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif role == "toolResult":
            text = "".join(_texts(plain.get("content")))
            if text:
                parts.append(f"[Tool result]: {_truncate(text, TOOL_RESULT_MAX_CHARS)}")
    return "\n\n".join(parts)


def summarization_prompt(conversation: str, previous_summary: str | None = None, custom_instructions: str | None = None) -> str:
    """The compaction user prompt: ``<conversation>``, optional ``<previous-summary>``, then the
    initial or update instructions (with ``Additional focus: …`` when given)."""
    instructions = UPDATE_SUMMARIZATION_PROMPT if previous_summary else SUMMARIZATION_PROMPT
    if custom_instructions:
        instructions += f"\n\nAdditional focus: {custom_instructions}"
    text = f"<conversation>\n{conversation}\n</conversation>\n\n"
    if previous_summary:
        text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    return text + instructions


def branch_summary_prompt(conversation: str, custom_instructions: str | None = None, replace_instructions: bool = False) -> str:
    """The branch-summary user prompt: ``<conversation>`` then pi's branch instructions, with
    ``Additional focus: …`` appended, or replaced by the custom text when ``replace_instructions``."""
    if custom_instructions and replace_instructions:
        instructions = custom_instructions
    elif custom_instructions:
        instructions = f"{BRANCH_SUMMARY_PROMPT}\n\nAdditional focus: {custom_instructions}"
    else:
        instructions = BRANCH_SUMMARY_PROMPT
    return f"<conversation>\n{conversation}\n</conversation>\n\n{instructions}"
