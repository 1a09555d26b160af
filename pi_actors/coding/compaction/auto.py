"""Whether to compact after a run or before a prompt (pi spec §3.3, ``_checkCompaction``).

:func:`decide_auto_compaction` is pure: it reads the last assistant message, the current model,
the current branch and the "overflow recovery already attempted" flag, and returns a
:class:`CompactionDecision`; the caller acts on it:

- ``none`` — nothing to do;
- ``threshold`` — run auto-compaction with reason ``threshold``, ``willRetry`` false;
- ``overflow`` with ``will_retry`` — set the flag, drop the trailing failed assistant from
  the in-memory context (it stays in the session file), run auto-compaction with reason
  ``overflow`` and ``willRetry`` true, then continue the run once;
- ``overflow`` without ``will_retry`` (a ``stop`` reply whose prompt silently exceeded the
  window) — keep the reply, run auto-compaction with reason ``overflow``, ``willRetry`` false;
- ``overflow_failed`` — emit ``auto_compaction_end {result: None, aborted: false, willRetry:
  false, errorMessage}`` with :data:`OVERFLOW_RECOVERY_FAILED`; the run ends with the error.

Rules, in order: compaction disabled → none; after a run (``after_run=True``) an ``aborted``
assistant → none; a ``compaction`` entry on the branch stamped at or after the assistant →
none (its usage predates the compaction); **overflow** when the assistant came from the
current provider and model and the overflow detector says so (a second one while the flag is
set is ``overflow_failed``; a ``stop`` reply never retries, as in later pi); **threshold** when
``should_compact`` holds for the context size: for an ``error`` assistant the estimate over
the context messages (none when no assistant there has usage, or when that assistant predates
the latest compaction), otherwise the assistant's own usage.

Deliberate difference from pi: a model whose context window is not positive never triggers
threshold compaction (pi would compact on every run).

The flag resets on every user ``message_start`` and every assistant ``message_end`` that is
neither ``error`` nor ``length`` (:func:`resets_overflow_flag`; pi resets on ``length`` too,
which could compact-and-retry forever now that ``is_context_overflow`` counts a ``length``
stop that filled the window). The overflow detector may be injected
(``is_overflow(message, context_window) -> bool``); the default is
``pi_actors.ai.is_context_overflow`` (:func:`overflow_detector`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ...ai.types import AssistantMessage, Model, message_from_plain
from .messages import as_plain, entry_ms
from .tokens import CompactionSettings, calculate_context_tokens, estimate_context_tokens, should_compact

__all__ = [
    "OVERFLOW_RECOVERY_FAILED",
    "OverflowDetector",
    "CompactionDecision",
    "overflow_detector",
    "is_overflow_error",
    "decide_auto_compaction",
    "resets_overflow_flag",
    "auto_compaction_error_message",
]

OVERFLOW_RECOVERY_FAILED = (
    "Context overflow recovery failed after one compact-and-retry attempt. "
    "Try reducing context or switching to a larger-context model."
)

OverflowDetector = Callable[[AssistantMessage, int], bool]


def overflow_detector() -> OverflowDetector:
    """The default overflow detector: ``pi_actors.ai.is_context_overflow``."""
    from ...ai import is_context_overflow

    return is_context_overflow


def _struct(message: Any) -> AssistantMessage | None:
    if isinstance(message, AssistantMessage):
        return message
    try:
        parsed = message_from_plain(as_plain(message))
    except Exception:
        return None
    return parsed if isinstance(parsed, AssistantMessage) else None


def is_overflow_error(message: Any, context_window: int, is_overflow: OverflowDetector | None = None) -> bool:
    """Whether ``message`` (Struct or dict) is a context overflow for ``context_window``."""
    struct = _struct(message)
    if struct is None:
        return False
    return bool((is_overflow or overflow_detector())(struct, context_window))


@dataclass(frozen=True)
class CompactionDecision:
    action: Literal["none", "threshold", "overflow", "overflow_failed"]
    #: The context size that crossed the threshold (``threshold`` only).
    context_tokens: int | None = None
    #: ``overflow`` only: drop the failed reply, compact, continue the run. False for a reply
    #: that completed (``stop``) but silently overflowed: it is kept, compaction just follows.
    will_retry: bool = False

    @property
    def reason(self) -> str | None:
        """``auto_compaction_start.reason``: ``threshold`` / ``overflow``, or None."""
        return self.action if self.action in ("threshold", "overflow") else None

    @property
    def error_message(self) -> str | None:
        return OVERFLOW_RECOVERY_FAILED if self.action == "overflow_failed" else None


_NONE = CompactionDecision("none")


def _latest_compaction_ms(entries: list[dict]) -> int | None:
    for entry in reversed(entries):
        if entry.get("type") == "compaction":
            return entry_ms(entry)
    return None


def decide_auto_compaction(
    assistant: Any,
    *,
    model: Model | None,
    branch_entries: list[dict],
    overflow_attempted: bool,
    settings: CompactionSettings | None = None,
    messages: list[Any] | None = None,
    after_run: bool = True,
    is_overflow: OverflowDetector | None = None,
) -> CompactionDecision:
    """What to do about compaction given the last ``assistant`` message (see module docstring).

    ``branch_entries``: the current branch, root → leaf. It is read only for its latest
    ``compaction`` entry, which can only turn a decision into ``none``: with ``messages``
    given, a ``none`` decided with ``branch_entries=[]`` is ``none`` for every branch, so a
    caller may decide without the branch first and read it only for a decision to compact.
    ``messages``: the in-memory context, used to estimate the size after an error reply;
    default: the context built from ``branch_entries``. ``after_run``: False for the check at the start of a prompt, which
    also considers aborted replies.
    """
    settings = settings or CompactionSettings()
    plain = as_plain(assistant)
    if not settings.enabled or model is None or plain.get("role") != "assistant":
        return _NONE
    stop_reason = plain.get("stopReason")
    if after_run and stop_reason == "aborted":
        return _NONE
    window = model.context_window or 0
    stamp = plain.get("timestamp")
    compacted_at = _latest_compaction_ms(branch_entries)
    if compacted_at is not None and isinstance(stamp, int) and compacted_at >= stamp:
        return _NONE

    same_model = plain.get("provider") == model.provider and plain.get("model") == model.id
    if same_model and is_overflow_error(assistant, window, is_overflow):
        if stop_reason == "stop":
            return CompactionDecision("overflow")
        if overflow_attempted:
            return CompactionDecision("overflow_failed")
        return CompactionDecision("overflow", will_retry=True)

    if window <= 0:
        return _NONE
    if stop_reason == "error":
        if messages is None:
            from ..session.context import build_session_context

            messages = build_session_context(branch_entries)
        estimate = estimate_context_tokens(messages)
        if estimate.last_usage_index is None:
            return _NONE
        anchor = as_plain(messages[estimate.last_usage_index]).get("timestamp")
        if compacted_at is not None and isinstance(anchor, int) and anchor <= compacted_at:
            return _NONE
        tokens = estimate.tokens
    else:
        usage = plain.get("usage")
        tokens = calculate_context_tokens(usage) if usage else 0
    if should_compact(tokens, window, settings):
        return CompactionDecision("threshold", tokens)
    return _NONE


def resets_overflow_flag(event_type: str, message: Any) -> bool:
    """True for a user ``message_start`` and an assistant ``message_end`` that is neither an
    error nor cut by ``length`` (a ``length`` reply may itself be an overflow)."""
    plain = as_plain(message)
    role = plain.get("role")
    if event_type == "message_start":
        return role == "user"
    if event_type == "message_end":
        return role == "assistant" and plain.get("stopReason") not in ("error", "length")
    return False


def auto_compaction_error_message(reason: str, error: BaseException | str) -> str:
    """``auto_compaction_end.errorMessage`` for a failed auto-compaction (spec §3.4)."""
    text = str(error) or "compaction failed"
    if reason == "overflow":
        return f"Context overflow recovery failed: {text}"
    return f"Auto-compaction failed: {text}"
