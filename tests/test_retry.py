"""Auto-retry of transient provider errors (spec §4.5), in virtual time (trio MockClock)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from pi_actors import ai
from pi_actors.coding.retry import (
    RETRY_CANCELLED,
    AutoRetry,
    RetrySettings,
    delay_for_attempt,
    is_retryable_error,
    run_with_retry,
)


def failed(text: str, *, stop_reason: str = "error") -> ai.AssistantMessage:
    return ai.AssistantMessage(content=[], api="openai-completions", provider="fake", model="m", usage=ai.Usage(),
                               stop_reason=stop_reason, timestamp=1, error_message=text)


def ok(text: str = "done") -> ai.AssistantMessage:
    return ai.AssistantMessage(content=[ai.TextContent(text=text)], api="openai-completions", provider="fake",
                               model="m", usage=ai.Usage(), stop_reason="stop", timestamp=1)


@pytest.mark.parametrize("text", [
    "overloaded_error: Overloaded", "Rate limit exceeded", "rate_limit_error", "429 Too Many Requests",
    "500 Internal Server Error", "502 Bad Gateway", "503 Service Unavailable", "504 Gateway Timeout",
    "server_error", "Connection error: [Errno 104] Connection reset by peer", "connect ECONNREFUSED: connection refused",
    "Request timed out", "socket hang up", "fetch failed", "terminated", "other side closed",
    "upstream connect error or disconnect/reset before headers", "network error", "connection lost",
])
def test_transient_errors_are_retryable(text):
    assert is_retryable_error(failed(text))
    assert is_retryable_error(ai.to_plain(failed(text)))


@pytest.mark.parametrize("text", ["401 invalid x-api-key", "400 Bad Request: messages: field required", ""])
def test_other_errors_are_not_retryable(text):
    assert not is_retryable_error(failed(text))


def test_a_context_overflow_is_not_retryable_even_when_it_looks_transient():
    text = "500: prompt is too long: 250000 tokens > 200000 maximum"
    assert not is_retryable_error(failed(text))
    assert is_retryable_error(failed(text), is_overflow=lambda message, window: False)


def test_only_error_replies_are_retried():
    assert not is_retryable_error(failed("overloaded", stop_reason="aborted"))
    assert not is_retryable_error(ok("503 service unavailable"))


def test_backoff_doubles_from_the_base_delay():
    assert [delay_for_attempt(n) for n in (1, 2, 3)] == [2000, 4000, 8000]
    assert delay_for_attempt(4, RetrySettings(base_delay_ms=100)) == 800


def test_settings_read_pi_settings_json_with_defaults():
    from pi_actors.cli import ConfigError, parse_settings
    from pi_actors.protocol.config import set_fields

    section = parse_settings({"retry": {"enabled": False, "maxRetries": 5, "baseDelayMs": 10}}).retry
    assert RetrySettings(**set_fields(section)) == RetrySettings(False, 5, 10, 60000)
    assert RetrySettings(**set_fields(parse_settings({}).retry)) == RetrySettings() == RetrySettings(True, 3, 2000, 60000)
    with pytest.raises(ConfigError, match=r"retry.maxRetries: Expected `int \| null`, got `str`"):
        parse_settings({"retry": {"maxRetries": "3"}})


async def test_a_retry_waits_its_delay_then_succeeds(autojump_clock):
    retry = AutoRetry()
    step = retry.plan(failed("529 overloaded"))
    assert step.action == "retry" and step.delay_ms == 2000
    assert step.event == {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000,
                          "errorMessage": "529 overloaded"}
    start = trio.current_time()
    assert await retry.wait(step.delay_ms) is None
    assert trio.current_time() - start == pytest.approx(2.0)
    assert retry.on_assistant_end(ok()) == {"type": "auto_retry_end", "success": True, "attempt": 1}
    assert not retry.in_progress and retry.on_assistant_end(ok()) is None


async def test_retries_stop_after_max_retries(autojump_clock):
    retry = AutoRetry(RetrySettings(max_retries=3))
    delays = []
    for _ in range(3):
        step = retry.plan(failed("503"))
        assert step.action == "retry"
        delays.append(step.delay_ms)
        assert await retry.wait(step.delay_ms) is None
    step = retry.plan(failed("503 again"))
    assert delays == [2000, 4000, 8000]
    assert (step.action, step.event) == ("stop", {"type": "auto_retry_end", "success": False, "attempt": 3,
                                                  "finalError": "503 again"})
    assert retry.attempt == 0


def test_disabled_retry_and_non_retryable_errors_just_stop():
    assert AutoRetry(RetrySettings(enabled=False)).plan(failed("overloaded")) == AutoRetry().plan(ok())
    assert AutoRetry().plan(failed("401 unauthorized")).event is None


async def test_a_retried_request_failing_otherwise_closes_the_retry(autojump_clock):
    retry = AutoRetry()
    await retry.wait(retry.plan(failed("overloaded")).delay_ms)
    assert retry.on_assistant_end(failed("401 unauthorized")) is None
    step = retry.plan(failed("401 unauthorized"))
    assert step.event == {"type": "auto_retry_end", "success": False, "attempt": 1, "finalError": "401 unauthorized"}


async def test_an_abort_signal_ends_the_wait_and_the_retries(mock_clock):
    retry = AutoRetry()
    signal = ai.AbortSignal()
    step = retry.plan(failed("overloaded"))
    assert step.delay_ms > 500
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        async def abort_later():
            await trio.testing.wait_all_tasks_blocked()  # the retry is waiting out its delay
            mock_clock.jump(0.5)
            signal.abort()
            # A wait the abort did not end runs out its delay now (a failure, not a hang).
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(step.delay_ms / 1000)

        nursery.start_soon(abort_later)
        event = await retry.wait(step.delay_ms, signal)
        elapsed = trio.current_time() - start
    assert event == {"type": "auto_retry_end", "success": False, "attempt": 1, "finalError": RETRY_CANCELLED}
    assert elapsed == pytest.approx(0.5)
    assert retry.attempt == 0


async def test_cancel_ends_a_running_or_upcoming_wait(autojump_clock):
    retry = AutoRetry()
    step = retry.plan(failed("overloaded"))
    async with trio.open_nursery() as nursery:
        async def cancel_later():
            await trio.testing.wait_all_tasks_blocked()  # the retry is waiting out its delay
            retry.cancel()

        nursery.start_soon(cancel_later)
        assert (await retry.wait(step.delay_ms))["finalError"] == RETRY_CANCELLED

    step = retry.plan(failed("overloaded"))
    retry.cancel()  # before the wait begins (the caller was busy emitting the start event)
    start = trio.current_time()
    assert (await retry.wait(step.delay_ms))["finalError"] == RETRY_CANCELLED
    assert trio.current_time() == start

    idle = AutoRetry()
    idle.cancel()  # nothing planned: no effect on a later retry
    assert await idle.wait(idle.plan(failed("overloaded")).delay_ms) is None


async def test_an_already_aborted_signal_does_not_wait(autojump_clock):
    signal = ai.AbortSignal()
    signal.abort()
    retry = AutoRetry()
    start = trio.current_time()
    assert await retry.wait(retry.plan(failed("overloaded")).delay_ms, signal) is not None
    assert trio.current_time() == start


def scripted(*replies):
    calls = []

    async def call():
        calls.append(trio.current_time())
        return replies[len(calls) - 1]

    call.calls = calls
    return call


async def test_run_with_retry_retries_until_success(autojump_clock):
    call = scripted(failed("overloaded_error"), failed("503"), ok())
    events, dropped = [], []
    result = await run_with_retry(call, emit=events.append, before_retry=dropped.append)
    assert result.stop_reason == "stop"
    assert [(e["type"], e.get("attempt"), e.get("delayMs")) for e in events] == [
        ("auto_retry_start", 1, 2000), ("auto_retry_start", 2, 4000), ("auto_retry_end", 2, None)]
    assert events[-1]["success"] is True
    assert [m.error_message for m in dropped] == ["overloaded_error", "503"]
    t0, t1, t2 = call.calls
    assert (t1 - t0, t2 - t1) == (pytest.approx(2.0), pytest.approx(4.0))


async def test_run_with_retry_gives_up_after_max_retries(autojump_clock):
    call = scripted(*[failed("overloaded")] * 3)
    events = []

    async def emit(event):
        events.append(event)

    result = await run_with_retry(call, settings=RetrySettings(max_retries=2), emit=emit)
    assert len(call.calls) == 3 and result.error_message == "overloaded"
    assert [(e["type"], e["attempt"]) for e in events] == [
        ("auto_retry_start", 1), ("auto_retry_start", 2), ("auto_retry_end", 2)]
    assert events[-1] == {"type": "auto_retry_end", "success": False, "attempt": 2, "finalError": "overloaded"}


async def test_run_with_retry_stops_when_aborted_during_the_wait(autojump_clock):
    call = scripted(failed("overloaded"), ok())
    signal = ai.AbortSignal()
    events = []

    def emit(event):
        events.append(event)
        if event["type"] == "auto_retry_start":
            signal.abort()

    result = await run_with_retry(call, emit=emit, signal=signal)
    assert len(call.calls) == 1 and result.error_message == "overloaded"
    assert events[-1] == {"type": "auto_retry_end", "success": False, "attempt": 1, "finalError": RETRY_CANCELLED}


async def test_run_with_retry_returns_a_first_success_without_events(autojump_clock):
    events = []
    assert (await run_with_retry(scripted(ok()), emit=events.append)).stop_reason == "stop"
    assert events == []
