"""The coding session's messages: what a session file holds, what the model is sent.

A session's transcript holds the three LLM roles (as ``pi_actors.ai.types`` Structs) and
pi's app-defined roles, kept as plain dicts: ``bashExecution`` (``!cmd``), ``custom``
(extension messages), ``branchSummary`` and ``compactionSummary``. ``convert_to_llm`` turns
the latter into user messages exactly as pi does (pi's packages/coding-agent, docs/architecture.md §7), so the same
transcript can be replayed against any model.

``interrupted_tool_results`` repairs a transcript whose last assistant message asked for tool
calls that never got a result (the process died mid-call): each gets an error result, so the
next request is valid and the model learns what happened.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..ai import types as T

__all__ = ["from_session_messages", "convert_to_llm", "interrupted_tool_results", "INTERRUPTED_TOOL_TEXT"]

INTERRUPTED_TOOL_TEXT = "Tool call was interrupted: no result was recorded before the session ended."
_LLM_ROLES = ("user", "assistant", "toolResult")


def from_session_messages(messages: list[Any]) -> list[Any]:
    """Session messages (pi's JSON shapes) as transcript items: Structs for the LLM roles,
    dicts for the app roles. A malformed LLM-role message is kept as a dict (and skipped by
    ``convert_to_llm``) rather than losing the rest of the session."""
    out: list[Any] = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") in _LLM_ROLES:
            try:
                out.append(T.message_from_plain(message))
                continue
            except msgspec.ValidationError:
                pass
        out.append(message)
    return out


def _text_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [T.TextContent(text=content)]
    if isinstance(content, list):
        try:
            return msgspec.convert(content, list[T.UserContent])
        except msgspec.ValidationError:
            return []
    return []


def _user(content: Any, timestamp: Any) -> T.UserMessage:
    stamp = timestamp if isinstance(timestamp, int) else T.now_ms()
    return T.UserMessage(content=content, timestamp=stamp)


def _bash_text(m: dict) -> str:
    fence = "```"
    text = f"Ran `{m.get('command', '')}`\n"
    output = m.get("output") or ""
    text += f"{fence}\n{output}\n{fence}" if output else "(no output)"
    if m.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif isinstance(m.get("exitCode"), int) and m["exitCode"] != 0:
        text += f"\n\nCommand exited with code {m['exitCode']}"
    if m.get("truncated") and m.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {m['fullOutputPath']}]"
    return text


def convert_to_llm(messages: list[Any]) -> list[T.Message]:
    """The provider messages for a transcript (pi's ``convertToLlm``)."""
    out: list[T.Message] = []
    for m in messages:
        if isinstance(m, (T.UserMessage, T.AssistantMessage, T.ToolResultMessage)):
            out.append(m)
            continue
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "bashExecution":
            if not m.get("excludeFromContext"):
                out.append(_user([T.TextContent(text=_bash_text(m))], m.get("timestamp")))
        elif role == "custom":
            blocks = _text_blocks(m.get("content"))
            if blocks:
                out.append(_user(blocks, m.get("timestamp")))
        elif role == "branchSummary":
            text = (
                "The following is a summary of a branch that this conversation came back from:\n\n"
                f"<summary>\n{m.get('summary', '')}</summary>"
            )
            out.append(_user([T.TextContent(text=text)], m.get("timestamp")))
        elif role == "compactionSummary":
            text = (
                "The conversation history before this point was compacted into the following summary:\n\n"
                f"<summary>\n{m.get('summary', '')}\n</summary>"
            )
            out.append(_user([T.TextContent(text=text)], m.get("timestamp")))
    return out


def interrupted_tool_results(messages: list[Any]) -> list[T.ToolResultMessage]:
    """Error results for the tool calls of the last assistant message that have none."""
    last = None
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], T.AssistantMessage):
            last = index
            break
    if last is None or messages[last].stop_reason in ("error", "aborted"):
        return []
    answered = {m.tool_call_id for m in messages[last + 1 :] if isinstance(m, T.ToolResultMessage)}
    return [
        T.ToolResultMessage(
            tool_call_id=block.id,
            tool_name=block.name,
            content=[T.TextContent(text=INTERRUPTED_TOOL_TEXT)],
            is_error=True,
            timestamp=T.now_ms(),
        )
        for block in messages[last].content
        if isinstance(block, T.ToolCall) and block.id not in answered
    ]
