"""When to compact automatically (spec §3.3): threshold, overflow once, stale usage."""

from __future__ import annotations

from support.sessions import Branch

from pi_actors import ai
from pi_actors.coding.compaction import (
    OVERFLOW_RECOVERY_FAILED,
    CompactionSettings,
    auto_compaction_error_message,
    decide_auto_compaction,
    resets_overflow_flag,
)

MODEL = ai.Model(id="fake-model", api="openai-completions", provider="fake", context_window=200_000)


def overflow(message, window) -> bool:
    return message.stop_reason == "error" and "prompt is too long" in (message.error_message or "")


def decide(branch: Branch, *, attempted=False, model=MODEL, **kw):
    last = next(e["message"] for e in reversed(branch.entries) if e["type"] == "message")
    return decide_auto_compaction(last, model=model, branch_entries=branch.entries, overflow_attempted=attempted,
                                  is_overflow=overflow, **kw)


def conversation(total: int) -> Branch:
    b = Branch()
    b.user("hi")
    b.assistant("hello", total=total)
    return b


def test_context_past_window_minus_reserve_compacts_for_threshold():
    decision = decide(conversation(190_000))
    assert (decision.action, decision.reason, decision.will_retry, decision.context_tokens) == (
        "threshold", "threshold", False, 190_000)
    assert decide(conversation(180_000)).action == "none"


def test_disabled_compaction_never_triggers():
    assert decide(conversation(199_000), settings=CompactionSettings(enabled=False)).action == "none"


def test_an_aborted_reply_triggers_only_the_check_before_a_prompt():
    b = conversation(190_000)
    b.entries[-1]["message"]["stopReason"] = "aborted"
    assert decide(b).action == "none"
    assert decide(b, after_run=False).action == "threshold"


def test_usage_older_than_the_latest_compaction_does_not_retrigger():
    b = conversation(610_000)
    b.compaction("summary", "e000")
    stale = b.entries[1]["message"]
    decision = decide_auto_compaction(stale, model=MODEL, branch_entries=b.entries, overflow_attempted=False,
                                      after_run=False, is_overflow=overflow)
    assert decision.action == "none"


def test_an_overflow_compacts_and_retries_once_then_reports_failure():
    b = Branch()
    b.user("hi")
    b.assistant("", error="prompt is too long: 250000 tokens > 200000 maximum")
    first = decide(b)
    assert (first.action, first.reason, first.will_retry, first.error_message) == ("overflow", "overflow", True, None)
    second = decide(b, attempted=True)
    assert (second.action, second.reason, second.will_retry) == ("overflow_failed", None, False)
    assert second.error_message == OVERFLOW_RECOVERY_FAILED == (
        "Context overflow recovery failed after one compact-and-retry attempt. "
        "Try reducing context or switching to a larger-context model.")


def test_a_completed_reply_that_silently_overflowed_is_kept_and_compacted_without_retry():
    b = conversation(0)
    b.entries[-1]["message"]["usage"]["input"] = 250_000
    decision = decide_auto_compaction(b.entries[-1]["message"], model=MODEL, branch_entries=b.entries,
                                      overflow_attempted=True)
    assert (decision.action, decision.will_retry) == ("overflow", False)


def test_a_reply_cut_by_a_full_window_is_an_overflow_to_retry():
    b = conversation(0)
    b.entries[-1]["message"].update(stopReason="length")
    b.entries[-1]["message"]["usage"].update(input=190_000, output=9_000)
    decision = decide_auto_compaction(b.entries[-1]["message"], model=MODEL, branch_entries=b.entries,
                                      overflow_attempted=False)
    assert (decision.action, decision.will_retry) == ("overflow", True)


def test_an_overflow_from_another_model_is_not_recovered():
    b = Branch()
    b.user("hi")
    b.assistant("", error="prompt is too long")
    other = ai.Model(id="bigger-model", api="openai-completions", provider="fake", context_window=1_000_000)
    assert decide(b, model=other).action == "none"


def test_an_error_after_a_large_successful_reply_compacts_for_threshold():
    b = conversation(190_000)
    b.user("more")
    b.assistant("", error="529 overloaded")
    decision = decide(b)
    assert decision.action == "threshold"
    assert decision.context_tokens == 190_000 + 1  # the usage plus the estimate of "more"


def test_an_error_without_any_usage_does_not_compact():
    b = Branch()
    b.user("x" * 1_000_000)
    b.assistant("", error="529 overloaded")
    assert decide(b).action == "none"


def test_an_error_whose_only_usage_predates_the_compaction_does_not_compact():
    b = conversation(190_000)
    b.compaction("summary", "e000")  # keeps the 190k reply
    b.user("more")
    b.assistant("", error="529 overloaded")
    assert decide(b).action == "none"


def test_in_memory_messages_can_be_given_for_the_error_estimate():
    b = Branch()
    b.user("hi")
    b.assistant("", error="529 overloaded")
    usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 199_000}
    messages = [{"role": "assistant", "content": [], "usage": usage, "stopReason": "stop", "timestamp": 1}]
    assert decide(b, messages=messages).action == "threshold"


def test_a_model_without_a_context_window_never_compacts_for_threshold():
    model = ai.Model(id="fake-model", api="openai-completions", provider="fake", context_window=0)
    assert decide(conversation(1_000_000), model=model).action == "none"


def test_struct_messages_are_accepted():
    message = ai.AssistantMessage(content=[], api="x", provider="fake", model="fake-model",
                                  usage=ai.Usage(total_tokens=190_000), stop_reason="stop", timestamp=2_000_000_000_000)
    decision = decide_auto_compaction(message, model=MODEL, branch_entries=[], overflow_attempted=False,
                                      is_overflow=overflow)
    assert decision.action == "threshold"


def test_the_overflow_flag_resets_on_user_start_and_good_assistant_end():
    user = {"role": "user", "content": "x"}
    good = {"role": "assistant", "stopReason": "stop"}
    bad = {"role": "assistant", "stopReason": "error"}
    assert resets_overflow_flag("message_start", user)
    assert resets_overflow_flag("message_end", good)
    assert not resets_overflow_flag("message_end", bad)
    assert not resets_overflow_flag("message_end", {"role": "assistant", "stopReason": "length"})
    assert not resets_overflow_flag("message_end", user)
    assert not resets_overflow_flag("message_start", good)


def test_failed_auto_compaction_messages_name_the_reason():
    assert auto_compaction_error_message("overflow", RuntimeError("x")) == "Context overflow recovery failed: x"
    assert auto_compaction_error_message("threshold", "y") == "Auto-compaction failed: y"


def test_the_default_overflow_detector_is_the_ai_layers():
    b = Branch()
    b.user("hi")
    b.assistant("", error="prompt is too long: 250000 tokens > 200000 maximum")
    last = b.entries[-1]["message"]
    assert decide_auto_compaction(last, model=MODEL, branch_entries=b.entries, overflow_attempted=False).action == "overflow"
