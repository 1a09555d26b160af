"""Compaction: token accounting (spec §3.2) and the cut point / preparation (spec §3.5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.sessions import Branch, roles, tool_session

from pi_actors.ai import types as T
from pi_actors.coding.compaction import (
    ALREADY_COMPACTED,
    NOTHING_TO_COMPACT,
    CompactionSettings,
    calculate_context_tokens,
    compaction_unavailable_reason,
    estimate_context_tokens,
    estimate_tokens,
    find_cut_point,
    last_assistant_usage,
    prepare_compaction,
    should_compact,
)

# --- token accounting --------------------------------------------------------------------------


def test_context_tokens_sum_the_usage_parts_when_total_is_zero():
    assert calculate_context_tokens({"input": 1000, "output": 500, "cacheRead": 200, "cacheWrite": 100, "totalTokens": 0}) == 1800
    assert calculate_context_tokens({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}) == 0


def test_context_tokens_prefer_the_reported_total_and_read_usage_structs():
    assert calculate_context_tokens({"input": 1, "output": 1, "totalTokens": 777}) == 777
    assert calculate_context_tokens(T.Usage(input=1000, output=500, cache_read=200, cache_write=100)) == 1800


def test_estimate_counts_a_quarter_token_per_character_by_role():
    assert estimate_tokens({"role": "user", "content": "x" * 9}) == 3
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    assert estimate_tokens({"role": "user", "content": [{"type": "text", "text": "abcd"}, image]}) == 1
    assistant = {"role": "assistant", "content": [
        {"type": "text", "text": "ab"}, {"type": "thinking", "thinking": "cd"},
        {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "a"}}]}
    assert estimate_tokens(assistant) == -(-(2 + 2 + 4 + len('{"path":"a"}')) // 4)
    assert estimate_tokens({"role": "toolResult", "content": [image]}) == 1200
    assert estimate_tokens({"role": "custom", "content": "abcdefgh"}) == 2
    assert estimate_tokens({"role": "bashExecution", "command": "ls", "output": "a\nb"}) == 2
    assert estimate_tokens({"role": "compactionSummary", "summary": "s" * 40}) == 10
    assert estimate_tokens({"role": "branchSummary", "summary": "s" * 41}) == 11
    assert estimate_tokens({"role": "somethingElse", "content": "zzzz"}) == 0


def test_estimate_counts_characters_as_javascript_does():
    # An emoji is two UTF-16 code units, so pi counts 8 characters here, not 4.
    assert estimate_tokens({"role": "user", "content": "😀😀😀😀"}) == 2
    assert estimate_tokens(T.UserMessage(content="abcdefgh", timestamp=1)) == 2


def test_context_estimate_is_last_valid_usage_plus_later_messages():
    usage = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1000}
    messages = [
        {"role": "user", "content": "x" * 400},
        {"role": "assistant", "content": [], "usage": usage, "stopReason": "stop"},
        {"role": "user", "content": "y" * 40},
        {"role": "assistant", "content": [], "usage": {**usage, "totalTokens": 9999}, "stopReason": "error"},
        {"role": "assistant", "content": [], "usage": {**usage, "totalTokens": 9999}, "stopReason": "aborted"},
    ]
    estimate = estimate_context_tokens(messages)
    assert (estimate.tokens, estimate.usage_tokens, estimate.trailing_tokens, estimate.last_usage_index) == (1010, 1000, 10, 1)


def test_context_estimate_without_usage_sums_every_message():
    estimate = estimate_context_tokens([{"role": "user", "content": "x" * 40}, {"role": "user", "content": "y" * 4}])
    assert (estimate.tokens, estimate.last_usage_index) == (11, None)


def test_should_compact_when_context_passes_window_minus_reserve():
    s = CompactionSettings(reserve_tokens=10000)
    assert should_compact(95000, 100000, s)
    assert not should_compact(89000, 100000, s)
    assert not should_compact(95000, 100000, CompactionSettings(enabled=False, reserve_tokens=10000))


def test_settings_read_pi_settings_json_with_defaults():
    from pi_actors.cli import ConfigError, parse_settings
    from pi_actors.protocol.config import set_fields

    section = parse_settings({"compaction": {"reserveTokens": 100, "keepRecentTokens": 5}}).compaction
    assert CompactionSettings(**set_fields(section)) == CompactionSettings(True, 100, 5)
    assert CompactionSettings(**set_fields(parse_settings(None).compaction)) == CompactionSettings(True, 16384, 20000)
    with pytest.raises(ConfigError, match=r"compaction.enabled: Expected `bool"):
        parse_settings({"compaction": {"enabled": "yes"}})
    with pytest.raises(ConfigError, match=r"compaction.reserveTokens: Expected `int` >= 0"):
        parse_settings({"compaction": {"reserveTokens": -1}})


def test_last_assistant_usage_skips_aborted_and_errors():
    b = Branch()
    b.user("hi")
    b.assistant("ok", total=50)
    b.assistant("", total=99, stop="aborted")
    b.assistant("", error="boom")
    assert last_assistant_usage(b.entries)["totalTokens"] == 50
    assert last_assistant_usage(b.entries[:1]) is None


# --- cut point ---------------------------------------------------------------------------------




def test_cut_point_lands_on_a_user_or_assistant_never_a_tool_result():
    b = tool_session()
    cut = find_cut_point(b.entries, 0, len(b.entries), 1100)
    # The budget is reached at the tool result (index 2); the next valid point is the assistant.
    assert cut.first_kept_entry_index == 3
    assert b.entries[cut.first_kept_entry_index]["message"]["role"] == "assistant"


def test_cutting_at_an_assistant_with_tool_calls_keeps_its_results():
    b = tool_session()
    cut = find_cut_point(b.entries, 0, len(b.entries), 1350)
    assert cut.first_kept_entry_index == 1
    kept = [e["message"]["role"] for e in b.entries[cut.first_kept_entry_index:]]
    assert kept[:2] == ["assistant", "toolResult"]


def test_everything_fits_keeps_from_the_first_cut_point():
    b = Branch()
    b.add("model_change", provider="fake", modelId="m")
    b.user("hi")
    b.assistant("hello")
    cut = find_cut_point(b.entries, 0, 3, 20000)
    assert (cut.first_kept_entry_index, cut.is_split_turn) == (0, False)


def test_no_valid_cut_point_keeps_from_the_start():
    b = Branch()
    b.add("model_change", provider="fake", modelId="m")
    b.add("thinking_level_change", thinkingLevel="high")
    assert find_cut_point(b.entries, 0, 2, 10).first_kept_entry_index == 0


def test_cut_extends_back_over_settings_entries_but_not_past_a_message():
    b = Branch()
    b.user("a" * 400)
    b.assistant("b" * 400)
    b.add("model_change", provider="fake", modelId="m2")
    b.add("label", targetId="e000", label="start")
    b.user("c" * 400)
    b.assistant("d" * 400)
    cut = find_cut_point(b.entries, 0, len(b.entries), 200)
    assert cut.first_kept_entry_index == 2
    # The chosen cut point is the user message, so the turn is not split.
    assert not cut.is_split_turn


def test_cutting_mid_turn_marks_a_split_turn_with_its_start():
    b = tool_session()
    cut = find_cut_point(b.entries, 0, len(b.entries), 1100)
    assert cut.is_split_turn and cut.turn_start_index == 0


def test_cutting_at_a_user_message_is_not_a_split_turn():
    b = tool_session()
    cut = find_cut_point(b.entries, 0, len(b.entries), 200)
    assert cut.first_kept_entry_index == 4 and not cut.is_split_turn and cut.turn_start_index == -1


def test_custom_messages_and_branch_summaries_are_cut_points_that_start_turns():
    b = Branch()
    b.user("a" * 400)
    b.assistant("b" * 400)
    b.add("custom_message", customType="note", content="n" * 400, display=True)
    b.assistant("c" * 400)
    b.assistant("d" * 4000)
    cut = find_cut_point(b.entries, 0, len(b.entries), 1000)
    assert cut.first_kept_entry_index == 4
    assert cut.is_split_turn and cut.turn_start_index == 2


def test_a_cut_before_a_custom_message_keeps_the_whole_turn():
    b = Branch()
    b.user("a" * 400)
    b.assistant("b" * 400)
    b.add("custom_message", customType="note", content="n" * 400, display=True)
    b.assistant("c" * 4000)
    cut = find_cut_point(b.entries, 0, len(b.entries), 1000)
    # The cut at the assistant extends back onto the custom message that starts its turn.
    assert (cut.first_kept_entry_index, cut.is_split_turn) == (2, False)


# --- prepare_compaction ------------------------------------------------------------------------


def test_nothing_to_prepare_right_after_a_compaction():
    b = tool_session()
    b.compaction("sum", "e004")
    assert prepare_compaction(b.entries, CompactionSettings()) is None
    assert compaction_unavailable_reason(b.entries) == ALREADY_COMPACTED


def test_an_empty_branch_is_too_small_to_compact():
    assert prepare_compaction([], CompactionSettings()) is None
    assert compaction_unavailable_reason([]) == NOTHING_TO_COMPACT
    assert compaction_unavailable_reason(tool_session().entries) is None


def test_preparation_splits_history_from_kept_messages():
    b = tool_session()
    b.entries[-1]["message"]["usage"]["totalTokens"] = 5000
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=200))
    assert prep.first_kept_entry_id == "e004"
    assert roles(prep.messages_to_summarize) == ["user", "assistant", "toolResult", "assistant"]
    assert prep.turn_prefix_messages == [] and not prep.is_split_turn
    assert prep.previous_summary is None
    assert prep.file_ops.read == {"x.py"}
    assert prep.tokens_before == 5000


def test_tokens_before_estimates_from_the_previous_summary_when_no_usage_follows_it():
    b = tool_session()
    b.compaction("first summary", "e004")
    b.user("n" * 400)
    b.user("o" * 40)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=5))
    assert prep.tokens_before == estimate_tokens({"role": "compactionSummary", "summary": "first summary"}) + 110


def test_preparation_of_a_split_turn_separates_the_turn_prefix():
    b = tool_session()
    b.user("g" * 40)
    prep = prepare_compaction(b.entries[:6], CompactionSettings(keep_recent_tokens=1100))
    assert prep.is_split_turn and prep.first_kept_entry_id == "e003"
    assert prep.messages_to_summarize == []
    assert roles(prep.turn_prefix_messages) == ["user", "assistant", "toolResult"]
    assert prep.file_ops.read == {"x.py"}


def test_iterative_compaction_uses_the_previous_summary_and_merges_its_files():
    b = tool_session()
    b.compaction("first summary", "e004", details={"readFiles": ["old.txt"], "modifiedFiles": ["mod.txt"]})
    b.user("h" * 400)
    b.assistant("i" * 40, calls=[("c2", "write", {"path": "new.py", "content": "x"}), ("c3", "edit", {"path": "e.py"})])
    b.result("c2", "write", "ok")
    b.result("c3", "edit", "ok")
    b.user("j" * 400)
    b.assistant("k" * 400, total=7000)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=150))
    assert prep.previous_summary == "first summary"
    assert prep.first_kept_entry_id == "e011"
    # Only the window after the previous compaction is summarized; what it kept is dropped.
    assert roles(prep.messages_to_summarize) == ["user", "assistant", "toolResult", "toolResult"]
    assert prep.file_ops.read == {"old.txt"}
    assert prep.file_ops.edited == {"mod.txt", "e.py"} and prep.file_ops.written == {"new.py"}
    assert prep.tokens_before == 7000


def test_files_from_an_extension_made_compaction_are_not_merged():
    b = tool_session()
    b.compaction("by hook", "e004", details={"readFiles": ["hook.txt"], "modifiedFiles": []}, from_hook=True)
    b.user("l" * 40)
    b.assistant("m" * 40)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=5))
    assert "hook.txt" not in prep.file_ops.read


def test_custom_and_summary_entries_become_messages_to_summarize():
    b = Branch()
    b.user("a" * 400)
    b.add("branch_summary", fromId="e000", summary="went elsewhere")
    b.add("custom_message", customType="note", content="remember", display=False)
    b.assistant("ok")
    b.add("custom", customType="state", data={"x": 1})
    b.user("b" * 400)
    b.assistant("c" * 400)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=150))
    assert roles(prep.messages_to_summarize) == ["user", "branchSummary", "custom", "assistant"]
    assert prep.messages_to_summarize[2]["content"] == "remember"
    # The cut at the user message extends back over the custom (state) entry before it.
    assert prep.first_kept_entry_id == "e004"


# --- property: a tool call never loses its result ----------------------------------------------


turns = st.lists(
    st.tuples(st.integers(1, 600), st.integers(0, 3), st.integers(1, 3000), st.booleans()),
    min_size=1, max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(turns=turns, keep=st.integers(1, 6000))
def test_cut_never_separates_a_tool_call_from_its_result(turns, keep):
    b = Branch()
    n = 0
    for user_len, calls, result_len, switch_model in turns:
        if switch_model:
            b.add("model_change", provider="fake", modelId=f"m{n}")
        b.user("u" * user_len)
        ids = [f"c{n}_{i}" for i in range(calls)]
        n += 1
        b.assistant("a" * 10, calls=[(cid, "read", {"path": f"{cid}.txt"}) for cid in ids])
        for cid in ids:
            b.result(cid, "read", "r" * result_len)
        if calls:
            b.assistant("done")
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=keep))
    assert prep is not None
    index = prep.first_kept_entry_index
    kept = [e["message"] for e in b.entries[index:] if e["type"] == "message"]
    assert not kept or kept[0]["role"] != "toolResult"
    kept_calls = {c["id"] for m in kept if m["role"] == "assistant" for c in m["content"] if c["type"] == "toolCall"}
    kept_results = {m["toolCallId"] for m in kept if m["role"] == "toolResult"}
    assert kept_results <= kept_calls
    # Every message of the branch is summarized, in the turn prefix, or kept — once, in order.
    all_messages = [e["message"] for e in b.entries if e["type"] == "message"]
    assert prep.messages_to_summarize + prep.turn_prefix_messages + kept == all_messages
