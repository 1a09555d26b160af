"""The events an extension may handle (``pi.on(name, handler)``), pi's names, and what a
handler may return for each. The payloads use pi's camelCase field names.

========================  ===================================================================
event                     payload -> what a handler may return
========================  ===================================================================
session_start             ``{reason}`` -> nothing
input                     ``{text}`` -> ``{"action": "transform", "text"}`` or
                          ``{"action": "handled"}`` (the prompt is not sent)
before_agent_start        ``{prompt, systemPrompt}`` -> ``{"systemPrompt"}`` (this run's
                          system prompt) and/or ``{"message": {customType, content,
                          display}}`` (injected before the prompt, saved in the session)
context                   ``{messages}`` -> ``{"messages"}`` (what the next LLM call is sent;
                          the session keeps its own)
tool_call                 ``{toolName, toolCallId, input}`` -> ``{"block": True, "reason"}``,
                          or ``{"input": {...}}`` (the call runs with that input)
tool_result               ``{toolName, toolCallId, input, content, details, isError}`` ->
                          any of ``{"content", "details", "isError"}``
turn_end                  ``{turnIndex, message, toolResults}`` -> nothing
agent_end                 ``{messages}`` -> nothing
session_before_compact    ``{messagesToSummarize, turnPrefixMessages, customInstructions}`` -> ``{"cancel": True}``
                          or ``{"compaction": {"summary"}}`` (replaces the summary)
session_shutdown          ``{}`` -> nothing
========================  ===================================================================
"""

from __future__ import annotations

__all__ = ["EVENTS", "RESULT_EVENTS"]

EVENTS: tuple[str, ...] = (
    "session_start",
    "input",
    "before_agent_start",
    "context",
    "tool_call",
    "tool_result",
    "turn_end",
    "agent_end",
    "session_before_compact",
    "session_shutdown",
)

#: Events whose handlers' results change something (the others are notifications).
RESULT_EVENTS: frozenset[str] = frozenset(
    {"input", "before_agent_start", "context", "tool_call", "tool_result", "session_before_compact"}
)
