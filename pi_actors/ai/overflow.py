"""Did a call fail because the context was too long? (pi's packages/ai, docs/architecture.md §7)

Contract: ``is_context_overflow(message, context_window=None)`` is True when

1. ``stopReason`` is ``error`` and ``errorMessage`` matches one of the providers' overflow
   texts (case-insensitive; ``get_overflow_patterns()`` lists them), or the Cerebras form
   ``400/413 (no body)``; a 429 never counts;
2. or, with ``context_window`` given, ``stopReason`` is ``stop`` and the prompt alone
   (``input + cacheRead``) exceeds the window (a provider that truncates silently, as z.ai);
3. or, with ``context_window`` given, ``stopReason`` is ``length`` and the call used up the
   window: ``input + cacheRead + output >= 99%`` of it. The output was cut by the window, not
   by ``max_tokens``. (pi answers False for every ``length``; issue 3 asks for this case.)

Everything else is False, ``aborted`` included. Never raises.
"""

from __future__ import annotations

import re

from .types import AssistantMessage

__all__ = ["is_context_overflow", "get_overflow_patterns", "LENGTH_OVERFLOW_FRACTION"]

#: A ``length`` stop counts as an overflow when the call used this much of the window.
LENGTH_OVERFLOW_FRACTION = 0.99

_PATTERNS: list[re.Pattern[str]] = [re.compile(p, re.IGNORECASE) for p in (
    r"prompt is too long",                                  # Anthropic
    r"input is too long for requested model",               # Bedrock
    r"exceeds the context window",                          # OpenAI
    r"input token count.*exceeds the maximum",              # Google
    r"maximum prompt length is \d+",                        # xAI
    r"reduce the length of the messages",                   # Groq
    r"maximum context length is \d+ tokens",                # OpenRouter
    r"exceeds the limit of \d+",                            # Copilot
    r"exceeds the available context size",                  # llama.cpp
    r"greater than the context length",                     # LM Studio
    r"context window exceeds limit",                        # MiniMax
    r"exceeded model token limit",                          # Kimi
    r"too large for model with \d+ maximum context length",  # Mistral
    r"model_context_window_exceeded",                       # z.ai
    r"context[_ ]length[_ ]exceeded",                       # generic
    r"too many tokens",
    r"token limit exceeded",
)]
_NO_BODY = re.compile(r"^4(00|13)\s*(status code)?\s*\(no body\)", re.IGNORECASE)


def get_overflow_patterns() -> list[re.Pattern[str]]:
    """A copy of the error-text patterns (case 1)."""
    return list(_PATTERNS)


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    reason = message.stop_reason
    if reason == "error":
        text = message.error_message or ""
        return bool(text) and (any(p.search(text) for p in _PATTERNS) or bool(_NO_BODY.search(text)))
    if not context_window or context_window <= 0:
        return False
    usage = message.usage
    prompt = usage.input + usage.cache_read
    if reason == "stop":
        return prompt > context_window
    if reason == "length":
        return prompt + usage.output >= LENGTH_OVERFLOW_FRACTION * context_window
    return False
