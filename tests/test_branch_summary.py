"""Branch summaries for /tree (spec §3.9): abandoned entries, the budget, the summary."""

from __future__ import annotations

import pytest
from support.sessions import Branch

from pi_actors import ai
from pi_actors.agent.testing import ScriptedStream, Text, fake_model, reply
from pi_actors.coding.compaction import (
    BRANCH_SUMMARY_PREAMBLE,
    BRANCH_SUMMARY_PROMPT,
    NO_CONTENT_TO_SUMMARIZE,
    SUMMARIZATION_SYSTEM_PROMPT,
    collect_branch_entries,
    estimate_tokens,
    prepare_branch_entries,
    summarize_branch,
)


def tree() -> Branch:
    """e000 user → e001 assistant → (A) e002 user → e003 assistant(read a.py) → e004 result
                                   → (B) e005 user → e006 assistant"""
    b = Branch()
    b.user("root question")
    b.assistant("root answer")
    b.user("try A")
    b.assistant("reading", calls=[("c1", "read", {"path": "a.py"})])
    b.result("c1", "read", "contents")
    b.user("try B")["parentId"] = "e001"
    b.assistant("B answer")
    return b


def ids(entries) -> list[str]:
    return [e["id"] for e in entries]


# --- collecting the abandoned path --------------------------------------------------------------


def test_abandoned_entries_run_from_the_old_leaf_back_to_the_common_ancestor():
    collected = collect_branch_entries(tree().entries, "e004", "e006")
    assert ids(collected.entries) == ["e002", "e003", "e004"]
    assert collected.common_ancestor_id == "e001"


def test_moving_to_an_ancestor_abandons_what_lies_below_it():
    collected = collect_branch_entries(tree().entries, "e004", "e001")
    assert (ids(collected.entries), collected.common_ancestor_id) == (["e002", "e003", "e004"], "e001")


def test_a_reset_leaf_abandons_nothing_and_an_unknown_target_is_an_error():
    assert collect_branch_entries(tree().entries, None, "e001").entries == []
    with pytest.raises(ValueError, match="^Entry nope not found$"):
        collect_branch_entries(tree().entries, "e004", "nope")


def test_without_a_common_ancestor_the_whole_old_path_is_abandoned():
    b = tree()
    b.user("another root")["parentId"] = None
    collected = collect_branch_entries(b.entries, "e004", "e007")
    assert (ids(collected.entries), collected.common_ancestor_id) == (["e000", "e001", "e002", "e003", "e004"], None)


def test_the_walk_does_not_stop_at_a_compaction():
    b = tree()
    b.compaction("compacted", "e002")["parentId"] = "e004"
    b.user("after")
    collected = collect_branch_entries(b.entries, "e008", "e006")
    assert ids(collected.entries) == ["e002", "e003", "e004", "e007", "e008"]


# --- budget --------------------------------------------------------------------------------------


def test_tool_results_and_settings_entries_are_left_out():
    b = tree()
    b.add("model_change", provider="fake", modelId="m")["parentId"] = "e004"
    prep = prepare_branch_entries(collect_branch_entries(b.entries, "e007", "e006").entries)
    assert [m["role"] for m in prep.messages] == ["user", "assistant"]
    assert prep.file_ops.read == {"a.py"}


def test_the_newest_messages_fill_the_budget():
    b = Branch()
    b.user("a" * 400)
    b.assistant("b" * 400, calls=[("c1", "edit", {"path": "old.py"})])
    b.user("c" * 400)
    b.assistant("d" * 400)
    prep = prepare_branch_entries(b.entries, token_budget=250)
    assert [m["content"] if m["role"] == "user" else m["content"][0]["text"][0] for m in prep.messages] == ["c" * 400, "d"]
    assert prep.total_tokens == 200
    # The edit lies outside the budget, so its file is not listed.
    assert prep.file_ops.edited == set()


def test_an_overflowing_summary_entry_still_fits_below_90_percent_of_the_budget():
    b = Branch()
    b.add("branch_summary", fromId="root", summary="s" * 2000)
    b.user("u" * 400)
    prep = prepare_branch_entries(b.entries, token_budget=500)
    assert [m["role"] for m in prep.messages] == ["branchSummary", "user"]
    assert prep.total_tokens == 600

    b = Branch()
    b.add("compaction", summary="s" * 2000, firstKeptEntryId="x", tokensBefore=1)
    b.user("u" * 1800)
    prep = prepare_branch_entries(b.entries, token_budget=500)
    assert [m["role"] for m in prep.messages] == ["user"]


def test_earlier_branch_summary_files_count_whatever_the_budget():
    b = Branch()
    b.add("branch_summary", fromId="root", summary="x", details={"readFiles": ["r.md"], "modifiedFiles": ["m.py"]})
    b.add("branch_summary", fromId="root", summary="y", details={"readFiles": ["hook.md"]}, fromHook=True)
    b.user("u" * 4000)
    prep = prepare_branch_entries(b.entries, token_budget=10)
    assert prep.messages == []
    assert (prep.file_ops.read, prep.file_ops.edited) == ({"r.md"}, {"m.py"})


# --- summarize_branch ------------------------------------------------------------------------


async def test_branch_summary_has_the_preamble_and_file_lists():
    entries = collect_branch_entries(tree().entries, "e004", "e006").entries
    stream = ScriptedStream(reply(Text("## Goal\nA")))
    result = await summarize_branch(entries, fake_model(), stream, api_key="k")
    assert result.summary == BRANCH_SUMMARY_PREAMBLE + "## Goal\nA\n\n<read-files>\na.py\n</read-files>"
    assert result.summary.startswith("The user explored a different conversation branch before returning here.\n")
    assert result.details == {"readFiles": ["a.py"], "modifiedFiles": []}
    [call] = stream.calls
    assert call.context.system_prompt == SUMMARIZATION_SYSTEM_PROMPT
    text = call.context.messages[0].content[0].text
    assert text == ("<conversation>\n[User]: try A\n\n[Assistant]: reading\n\n"
                    '[Assistant tool calls]: read(path="a.py")\n</conversation>\n\n' + BRANCH_SUMMARY_PROMPT)
    assert (call.options.max_tokens, call.options.reasoning, call.options.api_key) == (2048, None, "k")
    assert "## Critical Context" not in BRANCH_SUMMARY_PROMPT


async def test_nothing_to_summarize_makes_no_llm_call():
    b = Branch()
    b.add("model_change", provider="fake", modelId="m")
    b.add("label", targetId="e000", label="x")
    stream = ScriptedStream()
    result = await summarize_branch(b.entries, fake_model(), stream, api_key="k")
    assert (result.summary, stream.calls) == (NO_CONTENT_TO_SUMMARIZE, [])


async def test_custom_instructions_add_focus_or_replace_the_instructions():
    entries = collect_branch_entries(tree().entries, "e004", "e006").entries
    stream = ScriptedStream(reply(Text("x")), reply(Text("y")))
    await summarize_branch(entries, fake_model(), stream, api_key="k", custom_instructions="the bug")
    await summarize_branch(entries, fake_model(), stream, api_key="k", custom_instructions="Only list files.",
                           replace_instructions=True)
    first, second = (c.context.messages[0].content[0].text for c in stream.calls)
    assert first.endswith(BRANCH_SUMMARY_PROMPT + "\n\nAdditional focus: the bug")
    assert second.endswith("</conversation>\n\nOnly list files.")


async def test_aborted_and_failed_summaries_are_reported_not_raised():
    entries = collect_branch_entries(tree().entries, "e004", "e006").entries
    aborted = await summarize_branch(entries, fake_model(), ScriptedStream(reply(stop_reason="aborted")), api_key="k")
    assert (aborted.aborted, aborted.summary) == (True, None)
    failed = await summarize_branch(
        entries, fake_model(), ScriptedStream(reply(stop_reason="error", error_message="429 rate limit")), api_key="k")
    assert (failed.error, failed.summary, failed.aborted) == ("429 rate limit", None, False)


async def test_the_budget_is_the_context_window_minus_the_reserve():
    b = Branch()
    b.user("old " * 1000)
    b.user("new " * 100)
    model = ai.Model(id="small", api="openai-completions", provider="fake", context_window=1200)
    stream = ScriptedStream(reply(Text("S")))
    await summarize_branch(b.entries, model, stream, api_key="k", reserve_tokens=1000)
    text = stream.calls[0].context.messages[0].content[0].text
    # Budget 1200 - 1000 = 200 tokens: the newer message (100) fits, the older (1000) does not.
    assert (estimate_tokens(b.entries[1]["message"]), estimate_tokens(b.entries[0]["message"])) == (100, 1000)
    assert "new new" in text and "old old" not in text
