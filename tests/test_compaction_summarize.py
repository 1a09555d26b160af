"""Compaction summaries: serialization, pi's prompts, compact() (spec §3.6), and the real
provider path against the scripted server."""

from __future__ import annotations

import pytest
import trio
from support.sessions import Branch, tool_session

from pi_actors import ai
from pi_actors.agent.testing import ScriptedStream, Text, Thinking, fake_model, reply
from pi_actors.coding.compaction import (
    NO_PRIOR_HISTORY,
    SUMMARIZATION_PROMPT,
    SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_SUMMARIZATION_PROMPT,
    UPDATE_SUMMARIZATION_PROMPT,
    CompactionCancelled,
    CompactionError,
    CompactionSettings,
    compact,
    prepare_compaction,
    serialize_conversation,
    to_llm,
)
from pi_actors.testing import Reply, ScriptedLLM

SKELETON = ["## Goal", "## Constraints & Preferences", "## Progress", "### Done", "### In Progress",
            "### Blocked", "## Key Decisions", "## Next Steps", "## Critical Context"]


def user_text(call) -> str:
    [message] = call.context.messages
    [block] = message.content
    return block.text


# --- serialization -----------------------------------------------------------------------------


def test_serialization_labels_each_role_and_joins_blocks_with_blank_lines():
    messages = [
        ai.UserMessage(content=[ai.TextContent(text="fix "), ai.TextContent(text="the bug")], timestamp=1),
        {"role": "assistant", "content": [
            {"type": "text", "text": "Looking."}, {"type": "thinking", "thinking": "hmm"},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.py", "limit": 10}},
            {"type": "text", "text": "Done."},
            {"type": "toolCall", "id": "c2", "name": "bash", "arguments": {"command": "ls \"x\""}}]},
        {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "isError": False,
         "content": [{"type": "text", "text": "line"}, {"type": "image", "data": "AA", "mimeType": "image/png"}]},
    ]
    assert serialize_conversation(messages) == (
        "[User]: fix the bug\n\n"
        "[Assistant thinking]: hmm\n\n"
        "[Assistant]: Looking.\nDone.\n\n"
        '[Assistant tool calls]: read(path="a.py", limit=10); bash(command="ls \\"x\\"")\n\n'
        "[Tool result]: line"
    )


def test_long_tool_results_are_cut_to_2000_characters():
    long = {"role": "toolResult", "content": [{"type": "text", "text": "x" * 5000}]}
    assert serialize_conversation([long]) == "[Tool result]: " + "x" * 2000 + "\n\n[... 3000 more characters truncated]"
    short = {"role": "toolResult", "content": [{"type": "text", "text": "y" * 1500}]}
    assert serialize_conversation([short]) == "[Tool result]: " + "y" * 1500


def test_long_user_and_assistant_texts_are_never_cut():
    text = "z" * 10000
    out = serialize_conversation([{"role": "user", "content": text},
                                  {"role": "assistant", "content": [{"type": "text", "text": text}]}])
    assert out == f"[User]: {text}\n\n[Assistant]: {text}"


def test_empty_messages_and_images_leave_no_trace():
    image = {"type": "image", "data": "AA", "mimeType": "image/png"}
    assert serialize_conversation([{"role": "user", "content": [image]}, {"role": "assistant", "content": []},
                                   {"role": "toolResult", "content": [image]}]) == ""


def test_app_messages_read_as_user_text_after_conversion():
    messages = to_llm([
        {"role": "bashExecution", "command": "ls", "output": "a", "exitCode": 0, "cancelled": False, "truncated": False, "timestamp": 1},
        {"role": "custom", "customType": "n", "content": "note", "display": True, "timestamp": 1},
        {"role": "compactionSummary", "summary": "S", "tokensBefore": 1, "timestamp": 1},
        {"role": "branchSummary", "summary": "B", "fromId": "x", "timestamp": 1},
    ])
    assert serialize_conversation(messages).split("\n\n[User]: ") == [
        "[User]: Ran `ls`\n```\na\n```",
        "note",
        "The conversation history before this point was compacted into the following summary:\n\n<summary>\nS\n</summary>",
        "The following is a summary of a branch that this conversation came back from:\n\n<summary>\nB</summary>",
    ]


# --- prompts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("prompt", [SUMMARIZATION_PROMPT, UPDATE_SUMMARIZATION_PROMPT])
def test_summary_instructions_carry_pi_section_skeleton_in_order(prompt):
    positions = [prompt.index(f"\n{heading}\n") for heading in SKELETON]
    assert positions == sorted(positions)
    assert prompt.endswith("Keep each section concise. Preserve exact file paths, function names, and error messages.")


def test_system_prompt_forbids_continuing_the_conversation():
    assert SUMMARIZATION_SYSTEM_PROMPT.startswith("You are a context summarization assistant.")
    assert "Do NOT continue the conversation." in SUMMARIZATION_SYSTEM_PROMPT
    assert SUMMARIZATION_SYSTEM_PROMPT.endswith("ONLY output the structured summary.")


# --- compact() with a scripted stream ----------------------------------------------------------


def small_preparation(**settings):
    b = tool_session()
    b.assistant("", calls=[("c9", "edit", {"path": "x.py"}), ("c8", "write", {"path": "b.py"})])
    b.result("c9", "edit", "ok")
    b.result("c8", "write", "ok")
    b.user("p" * 400)
    b.assistant("q" * 400)
    return prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=150, **settings))


async def test_compact_sends_pi_prompts_and_appends_the_file_lists():
    prep = small_preparation(reserve_tokens=10000)
    stream = ScriptedStream(reply(Text("## Goal"), Text("Fix it")))
    result = await compact(prep, fake_model(), stream, api_key="k")
    [call] = stream.calls
    assert call.context.system_prompt == SUMMARIZATION_SYSTEM_PROMPT
    text = user_text(call)
    assert text.startswith("<conversation>\n[User]: aaaa")
    assert "\n</conversation>\n\n" + SUMMARIZATION_PROMPT == text[text.index("\n</conversation>"):]
    assert (call.options.max_tokens, call.options.api_key, call.options.reasoning) == (8000, "k", None)
    assert result.summary == "## Goal\nFix it\n\n<modified-files>\nb.py\nx.py\n</modified-files>"
    assert result.details == {"readFiles": [], "modifiedFiles": ["b.py", "x.py"]}
    assert (result.first_kept_entry_id, result.tokens_before) == (prep.first_kept_entry_id, prep.tokens_before)
    assert result.entry_fields()["fromHook"] is False


async def test_read_only_files_are_listed_apart_from_modified_ones():
    prep = prepare_compaction(tool_session().entries, CompactionSettings(keep_recent_tokens=200))
    result = await compact(prep, fake_model(), ScriptedStream(reply(Text("S"))), api_key="k")
    assert result.summary == "S\n\n<read-files>\nx.py\n</read-files>"


async def test_reasoning_models_summarize_with_high_reasoning():
    model = ai.Model(id="r", api="openai-completions", provider="fake", reasoning=True)
    stream = ScriptedStream(reply(Thinking("..."), Text("S")))
    result = await compact(small_preparation(), model, stream, api_key="k")
    assert stream.calls[0].options.reasoning == "high"
    assert result.summary.startswith("S\n\n")


async def test_iterative_compaction_updates_the_previous_summary():
    b = tool_session()
    b.compaction("OLD SUMMARY", "e004")
    b.user("n" * 400)
    b.assistant("o" * 400)
    b.user("p" * 400)
    b.assistant("r" * 400)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=150))
    stream = ScriptedStream(reply(Text("NEW")))
    await compact(prep, fake_model(), stream, api_key="k", custom_instructions="focus on tests")
    text = user_text(stream.calls[0])
    assert "\n</conversation>\n\n<previous-summary>\nOLD SUMMARY\n</previous-summary>\n\n" in text
    assert text.endswith(UPDATE_SUMMARIZATION_PROMPT + "\n\nAdditional focus: focus on tests")


async def test_a_failed_summary_raises_with_pi_wording():
    stream = ScriptedStream(reply(stop_reason="error", error_message="503 overloaded"))
    with pytest.raises(CompactionError, match=r"^Summarization failed: 503 overloaded$"):
        await compact(small_preparation(), fake_model(), stream, api_key="k")


async def test_an_aborted_summary_is_a_cancelled_compaction():
    signal = ai.AbortSignal()
    signal.abort()
    stream = ScriptedStream(reply(Text("part"), stop_reason="aborted"))
    with pytest.raises(CompactionCancelled, match="^Compaction cancelled$"):
        await compact(small_preparation(), fake_model(), stream, api_key="k", signal=signal)
    assert stream.calls[0].options.signal is signal


async def test_a_raising_stream_function_becomes_a_compaction_error():
    async def broken(model, context, options, emit):
        raise RuntimeError("socket gone")

    with pytest.raises(CompactionError, match="Summarization failed: socket gone"):
        await compact(small_preparation(), fake_model(), broken, api_key="k")


def by_kind(history: str = "HISTORY", prefix: str = "PREFIX", *, prefix_error: str | None = None):
    """A stream answering the history and the turn-prefix requests apart (they run concurrently)."""
    calls = []

    async def stream(model, context, options, emit):
        calls.append((context, options))
        if context.system_prompt:
            return await reply(Text(history))(model, context, options, emit)
        if prefix_error:
            return await reply(stop_reason="error", error_message=prefix_error)(model, context, options, emit)
        return await reply(Text(prefix))(model, context, options, emit)

    stream.calls = calls
    return stream


def split_preparation():
    b = Branch()
    b.user("old question")
    b.assistant("old answer")
    b.user("big task")
    b.assistant("step 1", calls=[("c1", "read", {"path": "big.txt"})])
    b.result("c1", "read", "r" * 8000)
    b.assistant("s" * 400)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=100, reserve_tokens=1000))
    assert prep.is_split_turn
    return prep


async def test_a_split_turn_summarizes_history_and_turn_prefix_together():
    stream = by_kind()
    result = await compact(split_preparation(), fake_model(), stream, api_key="k")
    assert result.summary == ("HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
                              "\n\n<read-files>\nbig.txt\n</read-files>")
    prefix_context, prefix_options = next(c for c in stream.calls if not c[0].system_prompt)
    assert [m.role for m in prefix_context.messages] == ["user", "assistant", "toolResult", "user"]
    assert prefix_context.messages[-1].content[0].text == TURN_PREFIX_SUMMARIZATION_PROMPT
    assert (prefix_options.max_tokens, prefix_options.reasoning) == (500, None)
    history_context, history_options = next(c for c in stream.calls if c[0].system_prompt)
    assert history_options.max_tokens == 800
    assert "[User]: old question" in history_context.messages[0].content[0].text


async def test_a_split_first_turn_has_no_prior_history():
    b = Branch()
    b.user("task")
    b.assistant("a" * 4000)
    b.assistant("b" * 400)
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=100))
    stream = by_kind()
    result = await compact(prep, fake_model(), stream, api_key="k")
    assert len(stream.calls) == 1
    assert result.summary == f"{NO_PRIOR_HISTORY}\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"


async def test_a_failed_turn_prefix_summary_raises():
    with pytest.raises(CompactionError, match="^Turn prefix summarization failed: too big$"):
        await compact(split_preparation(), fake_model(), by_kind(prefix_error="too big"), api_key="k")


# --- the real provider path --------------------------------------------------------------------


@pytest.mark.parametrize("api", ["openai-completions", "anthropic-messages"])
async def test_summary_through_a_real_provider_sends_pi_prompts_on_the_wire(api, nursery):
    server = ScriptedLLM([Reply(text="## Goal\nShip it")])
    await nursery.start(server.serve)
    base_url = server.base_url_openai if api == "openai-completions" else server.base_url_anthropic
    provider = "openai" if api == "openai-completions" else "anthropic"
    model = ai.Model(id="test-model", api=api, provider=provider, base_url=base_url, max_tokens=32000)
    prep = small_preparation(reserve_tokens=4000)
    with trio.fail_after(20):
        result = await compact(prep, model, ai.stream_simple, api_key="sk-test")
    assert result.summary.startswith("## Goal\nShip it\n\n<modified-files>")
    [request] = server.requests
    body = request["body"]
    if api == "openai-completions":
        system, user = body["messages"]
        assert system["role"] == "system" and system["content"] == SUMMARIZATION_SYSTEM_PROMPT
        text = user["content"] if isinstance(user["content"], str) else user["content"][0]["text"]
        assert body.get("max_completion_tokens", body.get("max_tokens")) == 3200
    else:
        assert [b["text"] for b in body["system"]] == [SUMMARIZATION_SYSTEM_PROMPT]
        [user] = body["messages"]
        text = user["content"] if isinstance(user["content"], str) else user["content"][0]["text"]
        assert body["max_tokens"] == 3200
    assert text.startswith("<conversation>\n[User]: ")
    assert text.endswith("</conversation>\n\n" + SUMMARIZATION_PROMPT)
