"""Auto-retry of transient provider errors (pi spec §4.5), as a state machine on trio.

A reply is *retryable* (:func:`is_retryable_error`) when its stopReason is ``error``, it has
an ``errorMessage``, it is not a context overflow (that goes to compaction), and the message
matches, case-insensitively, pi's list :data:`RETRYABLE_ERROR_PATTERN` — the spec's snapshot
list (overloaded, rate limits / 429, 500/502/503/504, service unavailable, server/internal/
connection errors, refused connections, closed sockets, fetch failures, retry delays) with
the entries later pi added (network errors, lost connections, WebSocket closes, socket hang
ups, streams ended without data, HTTP/2 no-response, ``timed out`` / ``timeout``).
Our providers report transport failures as ``Connection error: …``, timeouts as
``Request timed out`` and a provider that stopped sending (first-byte or idle timeout) as
``Provider stalled: no data for N s …``, all covered.

Attempt n (1-based) waits :func:`delay_for_attempt` = ``base_delay_ms × 2^(n-1)`` (2 s, 4 s,
8 s with the defaults); as in pi it is not capped by ``max_delay_ms``, which is the limit on a
*server-requested* delay (pi's ``maxRetryDelayMs``). When the server asked for a delay
(``Retry-After`` / ``retry-after-ms``, carried in the error message by the provider layer, see
:mod:`pi_actors.ai.retry_after`), the retry waits exactly that long instead. A request whose
server asked for more than ``max_delay_ms`` (0: no maximum) is not retried: the provider
reports it as ``Server requested a N s retry delay, above the maximum …`` and that error
ends the run (pi fails such a request rather than wait; pi would still retry it on its own
back-off, which only asks again too early).

Driving :class:`AutoRetry` from a coordinator (the order pi uses):

1. at every assistant ``message_end``: ``event = retry.on_assistant_end(message)``; emit it if
   not None (``auto_retry_end {success: true, attempt}`` after a retried request succeeded);
2. at ``agent_end`` with the last assistant: ``step = retry.plan(message, context_window=…)``;
   emit ``step.event`` if not None. If ``step.action == "retry"``: drop the trailing error
   assistant from the in-memory context (it stays in the session file), then
   ``event = await retry.wait(step.delay_ms, signal)``; None → continue the run
   (``agent.continue()``); otherwise emit it (``auto_retry_end {success: false, attempt,
   finalError: "Retry cancelled"}``) and stop. If ``step.action == "stop"``: go on to the
   compaction check;
3. ``retry.cancel()`` (pi's ``abortRetry``: Esc, RPC ``abort_retry``, ``abort``) ends a wait
   early — also one that has not begun yet, once a retry is planned.

:func:`run_with_retry` does all of this around any ``async call() -> AssistantMessage``.

Event payloads are plain dicts in pi's JSON names: ``{"type": "auto_retry_start", "attempt",
"maxAttempts", "delayMs", "errorMessage"}`` and ``{"type": "auto_retry_end", "success",
"attempt", "finalError"?}``. Waits use ``trio.sleep`` semantics, so trio's ``MockClock`` runs
them in virtual time.

Decision where pi is silent: a retried request that ends with a *non-retryable* error or is
aborted closes the retry with ``auto_retry_end {success: false, attempt, finalError}`` (pi
would leave the attempt counter running or report success).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import trio

from ..ai.abort import AbortSignal
from ..ai.retry_after import DEFAULT_MAX_RETRY_DELAY_MS, delay_exceeds_maximum, requested_delay_ms
from ..ai.types import AssistantMessage
from .compaction.auto import OverflowDetector, is_overflow_error
from .compaction.messages import as_plain

__all__ = [
    "RETRYABLE_ERROR_PATTERN",
    "RETRY_CANCELLED",
    "RetrySettings",
    "RetryStep",
    "AutoRetry",
    "is_retryable_error",
    "delay_for_attempt",
    "retry_start_event",
    "retry_end_event",
    "run_with_retry",
]

RETRYABLE_ERROR_PATTERN = re.compile(
    r"overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504"
    r"|service.?unavailable|server.?error|internal.?error|network.?error|connection.?error"
    r"|connection.?refused|connection.?lost|websocket.?closed|websocket.?error|other side closed"
    r"|fetch failed|upstream.?connect|reset before headers|socket hang up|ended without"
    r"|http2 request did not get a response|timed? out|timeout|terminated|retry delay|stalled",
    re.IGNORECASE,
)
RETRY_CANCELLED = "Retry cancelled"


@dataclass(frozen=True)
class RetrySettings:
    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: int = 2000
    max_delay_ms: int = DEFAULT_MAX_RETRY_DELAY_MS


def _stop_reason(message: Any) -> Any:
    if isinstance(message, AssistantMessage):
        return message.stop_reason
    return as_plain(message).get("stopReason")


def _error_message(message: Any) -> Any:
    if isinstance(message, AssistantMessage):
        return message.error_message
    return as_plain(message).get("errorMessage")


def is_retryable_error(message: Any, context_window: int = 0, *, is_overflow: OverflowDetector | None = None) -> bool:
    """Whether the assistant ``message`` (Struct or dict) failed transiently (module doc)."""
    if _stop_reason(message) != "error":
        return False
    error = _error_message(message)
    if not isinstance(error, str) or not error:
        return False
    if not RETRYABLE_ERROR_PATTERN.search(error) or delay_exceeds_maximum(error):
        return False
    return not is_overflow_error(message, context_window, is_overflow)


def delay_for_attempt(attempt: int, settings: RetrySettings | None = None) -> int:
    """Milliseconds to wait before retry ``attempt`` (1-based): ``base × 2^(attempt-1)``."""
    settings = settings or RetrySettings()
    return settings.base_delay_ms * 2 ** max(attempt - 1, 0)


def retry_start_event(attempt: int, max_attempts: int, delay_ms: int, error_message: str) -> dict:
    return {
        "type": "auto_retry_start",
        "attempt": attempt,
        "maxAttempts": max_attempts,
        "delayMs": delay_ms,
        "errorMessage": error_message,
    }


def retry_end_event(success: bool, attempt: int, final_error: str | None = None) -> dict:
    event: dict = {"type": "auto_retry_end", "success": success, "attempt": attempt}
    if final_error is not None:
        event["finalError"] = final_error
    return event


@dataclass(frozen=True)
class RetryStep:
    """``retry``: emit ``event`` (auto_retry_start), wait ``delay_ms``, continue the run.
    ``stop``: emit ``event`` if any, do not retry (go on to the compaction check)."""

    action: Literal["retry", "stop"]
    event: dict | None = None
    delay_ms: int = 0


class AutoRetry:
    """The retry state of one session: the attempt counter and a cancellable wait."""

    def __init__(self, settings: RetrySettings | None = None, *, is_overflow: OverflowDetector | None = None) -> None:
        self.settings = settings or RetrySettings()
        self.is_overflow = is_overflow
        #: The current attempt (0 when no retry is in progress).
        self.attempt = 0
        self._cancel: trio.Event | None = None
        self._cancel_requested = False

    @property
    def in_progress(self) -> bool:
        return self.attempt > 0

    def _reset(self) -> None:
        self.attempt = 0
        self._cancel_requested = False

    def on_assistant_end(self, message: Any) -> dict | None:
        """At an assistant ``message_end``: the success event when a retried request got a
        reply (stopReason stop, length or toolUse); None otherwise."""
        if self.attempt == 0 or _stop_reason(message) in ("error", "aborted"):
            return None
        event = retry_end_event(True, self.attempt)
        self._reset()
        return event

    def plan(self, message: Any, *, context_window: int = 0) -> RetryStep:
        """At ``agent_end``, given the run's last assistant message: retry or not (class doc).

        Counts the attempt when retrying; a retry beyond ``max_retries`` stops with
        ``auto_retry_end {success: false, attempt: max_retries, finalError}``.
        """
        if not is_retryable_error(message, context_window, is_overflow=self.is_overflow):
            if self.attempt == 0:
                return RetryStep("stop")
            stop_reason = _stop_reason(message)
            if stop_reason in ("error", "aborted"):
                fallback = "Request was aborted" if stop_reason == "aborted" else "Unknown error"
                final = _error_message(message) or fallback
                event = retry_end_event(False, self.attempt, final)
            else:
                event = retry_end_event(True, self.attempt)
            self._reset()
            return RetryStep("stop", event)
        if not self.settings.enabled:
            return RetryStep("stop")
        self.attempt += 1
        error = _error_message(message) or "Unknown error"
        if self.attempt > self.settings.max_retries:
            event = retry_end_event(False, self.attempt - 1, error)
            self._reset()
            return RetryStep("stop", event)
        delay = delay_for_attempt(self.attempt, self.settings)
        asked = requested_delay_ms(error)
        if asked is not None:
            if 0 < self.settings.max_delay_ms < asked:  # (the provider's maximum was larger)
                attempt = self.attempt - 1
                self._reset()
                final = f"Server requested a retry delay above retry.maxDelayMs ({self.settings.max_delay_ms} ms): {error}"
                return RetryStep("stop", retry_end_event(False, attempt, final) if attempt else None)
            delay = asked
        return RetryStep("retry", retry_start_event(self.attempt, self.settings.max_retries, delay, error), delay)

    async def wait(self, delay_ms: int, signal: AbortSignal | None = None) -> dict | None:
        """Wait before the planned retry. None: the delay passed, continue the run. A dict:
        the wait was cancelled (``signal`` aborted or :meth:`cancel`); emit that
        ``auto_retry_end`` payload and do not retry. The attempt counter is then reset."""
        cancelled = self._cancel_requested or (signal is not None and signal.aborted)
        if not cancelled:
            self._cancel = trio.Event()
            try:
                async with trio.open_nursery() as nursery:
                    if signal is not None:
                        nursery.start_soon(_relay, signal, self._cancel)
                    with trio.move_on_after(max(delay_ms, 0) / 1000):
                        await self._cancel.wait()
                        cancelled = True
                    nursery.cancel_scope.cancel()
            finally:
                self._cancel = None
        if not cancelled:
            return None
        event = retry_end_event(False, self.attempt, RETRY_CANCELLED)
        self._reset()
        return event

    def cancel(self) -> None:
        """pi's ``abortRetry``: end the current or next wait of a planned retry; no-op otherwise."""
        if self._cancel is not None:
            self._cancel.set()
        elif self.attempt > 0:
            self._cancel_requested = True


async def _relay(signal: AbortSignal, event: trio.Event) -> None:
    await signal.wait()
    event.set()


async def _maybe_await(fn: Callable[..., Any] | None, *args: Any) -> None:
    if fn is None:
        return
    result = fn(*args)
    if inspect.isawaitable(result):
        await result


async def run_with_retry(
    call: Callable[[], Awaitable[AssistantMessage]],
    *,
    settings: RetrySettings | None = None,
    emit: Callable[[dict], Any] | None = None,
    signal: AbortSignal | None = None,
    context_window: int = 0,
    is_overflow: OverflowDetector | None = None,
    before_retry: Callable[[AssistantMessage], Any] | None = None,
    retry: AutoRetry | None = None,
) -> AssistantMessage:
    """Run ``call`` and retry it on transient errors; returns the last reply.

    ``emit`` (sync or async) receives the auto_retry_* payloads; ``before_retry(failed)`` runs
    after ``auto_retry_start`` and before the wait (drop the failed reply from the context
    there). ``signal`` or ``retry.cancel()`` ends a wait, and the last reply is returned.
    """
    retry = retry or AutoRetry(settings, is_overflow=is_overflow)
    while True:
        message = await call()
        succeeded = retry.on_assistant_end(message)
        if succeeded is not None:
            await _maybe_await(emit, succeeded)
        step = retry.plan(message, context_window=context_window)
        if step.event is not None:
            await _maybe_await(emit, step.event)
        if step.action != "retry":
            return message
        await _maybe_await(before_retry, message)
        cancelled = await retry.wait(step.delay_ms, signal)
        if cancelled is not None:
            await _maybe_await(emit, cancelled)
            return message
