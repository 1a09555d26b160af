"""The compaction check that runs around every prompt does not read the session tree.

The check is decided from the last reply first; only a decision to compact reads the branch
(for its latest compaction entry, which can only say "none"). The property test holds the
pure decision to that contract; the actor tests watch the coordinator's log for the tree
read (``session_tree_read``).
"""

from __future__ import annotations

import json

import msgspec
from conftest import actor_config
from hypothesis import given, settings
from hypothesis import strategies as st
from support.prompts import send_prompt
from support.sessions import Branch

from pi_actors import ai
from pi_actors.actors import open_local_runtime
from pi_actors.coding.compaction import CompactionSettings, decide_auto_compaction
from pi_actors.coding.messages import from_session_messages
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall, ScriptUsage

MODEL = ai.Model(id="fake-model", api="openai-completions", provider="fake", context_window=10_000)


def _overflow(message, window) -> bool:
    return message.stop_reason == "error" and "too long" in (message.error_message or "")


_step = st.one_of(
    st.tuples(st.just("user"), st.just(0), st.just("stop")),
    st.tuples(st.just("assistant"), st.integers(0, 20_000), st.sampled_from(["stop", "error", "aborted", "length", "toolUse"])),
    st.tuples(st.just("compaction"), st.just(0), st.just("")),
)


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(_step, min_size=1, max_size=12), attempted=st.booleans(), after_run=st.booleans(),
       error_text=st.sampled_from(["prompt is too long", "rate limited"]))
def test_a_check_that_says_none_without_the_branch_says_none_with_it(steps, attempted, after_run, error_text):
    b = Branch()
    for kind, total, stop in steps:
        if kind == "user":
            b.user("hi")
        elif kind == "compaction":
            b.compaction("summary", b.entries[0]["id"] if b.entries else "e000")
        else:
            b.assistant("x", total=total, stop=stop, error=error_text if stop == "error" else None)
    replies = [e["message"] for e in b.entries if e["type"] == "message" and e["message"]["role"] == "assistant"]
    if not replies:
        return
    messages = from_session_messages([e["message"] for e in b.entries if e["type"] == "message"])
    kw = dict(model=MODEL, overflow_attempted=attempted, settings=CompactionSettings(), messages=messages,
              after_run=after_run, is_overflow=_overflow)
    without = decide_auto_compaction(replies[-1], branch_entries=[], **kw)
    with_branch = decide_auto_compaction(replies[-1], branch_entries=b.entries, **kw)
    if without.action == "none":
        assert with_branch.action == "none"
    assert with_branch.action in (without.action, "none")


def _tree_reads(log_file) -> list[dict]:
    lines = [json.loads(line) for line in log_file.read_text().splitlines()] if log_file.exists() else []
    return [r for r in lines if r["event"] == "session_tree_read"]


def _with_log(config, log_file):
    return msgspec.structs.replace(config, coordinator=msgspec.structs.replace(config.coordinator, log_file=str(log_file)))


class _Quiet:
    def event(self, event: dict) -> None:
        pass


async def test_prompts_with_tool_calls_never_read_the_session_tree_for_the_compaction_check(scripted, tmp_path):
    for i in range(12):
        scripted.script += [
            Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"echo {i}"}, id=f"c{i}")]),
            Reply(text=f"done {i}"),
        ]
    log_file = tmp_path / "log.jsonl"
    async with open_local_runtime(_with_log(actor_config(scripted, tmp_path), log_file)) as coordinator:
        for i in range(12):
            await send_prompt(coordinator, f"prompt {i}", _Quiet())
        messages = (await coordinator.call("get_messages"))["messages"]
    assert len(messages) == 12 * 4
    assert _tree_reads(log_file) == []


async def test_a_reply_over_the_threshold_still_reads_the_tree_once_and_compacts(scripted, tmp_path):
    summary = "## Goal\nShip it\n\n## Progress\n- [x] talked\n"
    scripted.script += [Reply(text="small"), Reply(text="big", usage=ScriptUsage(input=19000)), Reply(text=summary)]
    config = actor_config(scripted, tmp_path, context_window=20000)
    log_file = tmp_path / "log.jsonl"
    async with open_local_runtime(_with_log(config, log_file)) as coordinator:
        await send_prompt(coordinator, "first", _Quiet())
        assert _tree_reads(log_file) == []
        await send_prompt(coordinator, "fill the window", _Quiet())
        messages = (await coordinator.call("get_messages"))["messages"]
    assert messages[0]["role"] == "compactionSummary"
    (read,) = _tree_reads(log_file)
    assert read["why"] == "compaction" and read["entries"] == 2 + 4  # pi's initial entries, 4 messages
