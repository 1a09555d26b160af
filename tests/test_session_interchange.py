"""Interchange with pi: a session written in pi's format (branches, labels, a branch summary,
a compaction, a custom message) loads, builds pi's context, and round-trips byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

from pi_actors.coding.messages import convert_to_llm, from_session_messages
from pi_actors.coding.session import SessionWriter, load_session, session_context

FIXTURE = Path(__file__).parent / "fixtures" / "pi_session_v3.jsonl"


def test_a_pi_session_with_branches_and_a_compaction_builds_pis_context():
    loaded = load_session(str(FIXTURE))
    assert not loaded.warnings and loaded.migrated_from is None
    assert loaded.leaf_id == "a0000011"
    ctx = session_context(loaded.entries, loaded.leaf_id)
    roles = [m["role"] for m in ctx.messages]
    # compaction summary, then the kept entries from firstKeptEntryId, then what followed;
    # the abandoned Rust branch and the summary before the cut are not in the context.
    assert roles == ["compactionSummary", "user", "assistant", "custom", "user", "assistant"]
    assert ctx.messages[1]["content"] == "Add a test"
    assert ctx.model == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    assert ctx.thinking_level == "medium"
    llm = convert_to_llm(from_session_messages(ctx.messages))
    assert llm[0].content[0].text.startswith("The conversation history before this point was compacted")
    assert llm[3].content[0].text == "Remember the style guide"


def test_the_abandoned_branch_builds_its_own_context():
    loaded = load_session(str(FIXTURE))
    ctx = session_context(loaded.entries, "a0000009")
    assert [m["content"] if m["role"] == "user" else m["role"] for m in ctx.messages] == [
        "Look at main.py", "assistant", "toolResult", "assistant", "Rewrite it in Rust", "assistant",
    ]  # fmt: skip


def test_entries_written_by_pi_actors_are_byte_identical_to_pis(tmp_path):
    source_lines = FIXTURE.read_text().splitlines()
    loaded = load_session(str(FIXTURE))
    writer = SessionWriter.create(str(tmp_path), "/home/u/proj", lazy=False)
    for entry in loaded.entries:
        writer.append_entry(dict(entry))
    writer.close()
    written = Path(writer.path).read_text().splitlines()
    assert written[1:] == source_lines[1:]
    header = json.loads(written[0])
    assert list(header) == ["type", "version", "id", "timestamp", "cwd"] and header["version"] == 3


def test_a_fork_of_a_pi_session_keeps_every_branch_and_the_same_context(tmp_path):
    forked = SessionWriter.fork_from(str(FIXTURE), str(tmp_path), "/elsewhere")
    forked.close()
    again = load_session(forked.path)
    assert again.header["parentSession"] == str(FIXTURE) and again.header["cwd"] == "/elsewhere"
    assert again.entries == load_session(str(FIXTURE)).entries
    assert session_context(again.entries).messages == session_context(load_session(str(FIXTURE)).entries).messages
