"""pi JSONL v3 session files: lazy creation, durable appends, tolerant loading, context (§2)."""

from __future__ import annotations

import errno
import json
import os
import re
import stat

import pytest

from pi_actors.coding import session as session_pkg
from pi_actors.coding.session import (
    SessionLoadError,
    SessionWriteError,
    SessionWriter,
    build_session_context,
    default_session_dir,
    load_session,
    new_entry_id,
    session_context,
)

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
HEX8 = re.compile(r"^[0-9a-f]{8}$")


def user(text, ts=1):
    return {"role": "user", "content": text, "timestamp": ts}


def assistant(text, ts=2, model="claude-x"):
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": model,
        "usage": {
            "input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "stop",
        "timestamp": ts,
    }


def file_lines(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_default_session_dir_encodes_the_cwd_and_is_created(tmp_path):
    path = default_session_dir(str(tmp_path), "/home/u/proj")
    assert path == os.path.join(str(tmp_path), "sessions", "--home-u-proj--")
    assert os.path.isdir(path)
    windows = default_session_dir(str(tmp_path), "C:\\Users\\me")
    assert os.path.basename(windows) == "--C--Users-me--"


def test_new_entry_ids_are_8_hex_and_redrawn_on_collision(monkeypatch):
    assert HEX8.match(new_entry_id(set()))
    draws = iter(["aaaaaaaa0000", "aaaaaaaa1111", "bbbbbbbb2222"])

    class FakeUUID:
        def __init__(self):
            self.hex = next(draws)

    monkeypatch.setattr(session_pkg.format.uuid, "uuid4", FakeUUID)
    assert new_entry_id({"aaaaaaaa"}) == "bbbbbbbb"


def test_nothing_is_written_before_the_first_assistant_message(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/work/proj")
    writer.append_entry({"type": "thinking_level_change", "thinkingLevel": "medium"})
    writer.append_entry({"type": "model_change", "provider": "anthropic", "modelId": "claude-x"})
    writer.append_message(user("hi"))
    assert not os.path.exists(writer.path) and os.listdir(tmp_path) == []
    assert not writer.is_persisted

    writer.append_message(assistant("hello"))
    lines = file_lines(writer.path)
    assert [line["type"] for line in lines] == [
        "session", "thinking_level_change", "model_change", "message", "message",
    ]
    assert lines[1:] == writer.entries
    writer.close()


def test_header_shape_and_file_name_follow_pi(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/work/proj")
    header = writer.header
    assert list(header) == ["type", "version", "id", "timestamp", "cwd"]
    assert header["type"] == "session" and header["version"] == 3 and header["cwd"] == "/work/proj"
    # A UUIDv7, as pi 0.73 makes session ids.
    assert re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", header["id"])
    assert ISO.match(header["timestamp"])
    file_stamp = header["timestamp"].replace(":", "-").replace(".", "-")
    assert os.path.basename(writer.path) == f"{file_stamp}_{writer.session_id}.jsonl"

    forked = SessionWriter.create(str(tmp_path), "/w", session_id="fixed-id", parent_session="/s/old.jsonl")
    assert forked.session_id == "fixed-id" and forked.header["id"] == "fixed-id"
    assert forked.header["parentSession"] == "/s/old.jsonl"
    assert forked.path.endswith("_fixed-id.jsonl")


def test_entries_chain_through_parent_ids_and_the_leaf_follows(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/p")
    entries = [
        writer.append_message(user("one")),
        writer.append_message(assistant("two")),
        writer.append_entry({"type": "session_info", "name": "named"}),
        writer.append_message(user("three")),
    ]
    assert entries[0]["parentId"] is None
    for previous, entry in zip(entries, entries[1:], strict=False):
        assert entry["parentId"] == previous["id"]
    assert all(HEX8.match(e["id"]) for e in entries) and len({e["id"] for e in entries}) == 4
    assert all(ISO.match(e["timestamp"]) for e in entries)
    assert writer.leaf_id == entries[-1]["id"]
    assert list(entries[0]) == ["type", "id", "parentId", "timestamp", "message"]
    writer.close()


def test_append_entry_keeps_custom_fields_and_honours_an_explicit_parent(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/p")
    first = writer.append_message(user("a"))
    custom = writer.append_entry({"type": "custom", "customType": "ext", "data": {"k": [1, 2]}})
    assert custom["customType"] == "ext" and custom["data"] == {"k": [1, 2]}
    assert list(custom)[:4] == ["type", "id", "parentId", "timestamp"]
    summary = writer.append_entry({"type": "branch_summary", "parentId": first["id"], "fromId": first["id"], "summary": "s"})
    assert summary["parentId"] == first["id"] and writer.leaf_id == summary["id"]
    with pytest.raises(ValueError, match="Duplicate entry id"):
        writer.append_entry({"type": "custom", "id": first["id"], "customType": "x"})
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        writer.append_message({"role": "user", "content": float("nan"), "timestamp": 1})
    assert writer.leaf_id == summary["id"]


def test_every_append_is_on_disk_and_fsynced_before_it_returns(tmp_path, monkeypatch):
    synced: list[tuple[str, int]] = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        real_fsync(fd)
        info = os.fstat(fd)
        synced.append(("dir" if stat.S_ISDIR(info.st_mode) else "file", info.st_ino))

    monkeypatch.setattr(os, "fsync", recording_fsync)
    session_dir = tmp_path / "sessions"
    writer = SessionWriter.create(str(session_dir), "/p")
    writer.append_message(user("q"))
    assert synced == []

    writer.append_message(assistant("a"))
    file_inode = os.stat(writer.path).st_ino
    assert ("file", file_inode) in synced
    assert ("dir", os.stat(session_dir).st_ino) in synced
    assert len(file_lines(writer.path)) == 3

    for n in range(3):
        synced.clear()
        entry = writer.append_message(user(f"more {n}"))
        assert synced == [("file", file_inode)]
        lines = file_lines(writer.path)
        assert len(lines) == 4 + n and lines[-1] == entry
    writer.close()


def test_torn_last_line_is_dropped_with_a_warning_and_repaired_on_resume(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/p")
    writer.append_message(user("q"))
    last = writer.append_message(assistant("a"))
    writer.close()
    with open(writer.path, "ab") as f:
        f.write(b'{"type":"message","id":"deadbeef","parentId":"')

    loaded = load_session(writer.path)
    assert len(loaded.entries) == 2 and loaded.leaf_id == last["id"]
    assert len(loaded.warnings) == 1 and "the last line was incomplete (a crash during a write?) and was dropped" in loaded.warnings[0]

    resumed = SessionWriter.resume(writer.path)
    follow = resumed.append_message(user("after the crash"))
    resumed.close()
    assert follow["parentId"] == last["id"]
    reloaded = load_session(writer.path)
    assert reloaded.warnings == []
    assert [e["id"] for e in reloaded.entries][-1] == follow["id"] and len(reloaded.entries) == 3


def test_resume_adds_a_missing_final_newline_before_appending(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"sid","timestamp":"2026-03-15T22:40:18.123Z","cwd":"/p"}\n'
        '{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-03-15T22:40:19.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1}}'
    )
    assert load_session(str(path)).warnings == []
    with SessionWriter.resume(str(path)) as writer:
        writer.append_message(assistant("there"))
    loaded = load_session(str(path))
    assert loaded.warnings == [] and len(loaded.entries) == 2
    assert loaded.entries[1]["parentId"] == "aaaaaaaa"


def test_unparseable_lines_in_the_middle_are_reported_in_one_warning(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"sid","timestamp":"2026-03-15T22:40:18.123Z","cwd":"/p"}\n'
        "\n"
        "this is not json\n"
        "[1, 2]\n"
        '{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2026-03-15T22:40:19.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1}}\n'
    )
    loaded = load_session(str(path))
    assert [e["id"] for e in loaded.entries] == ["aaaaaaaa"]
    assert len(loaded.warnings) == 1
    assert "2 damaged lines" in loaded.warnings[0]
    assert "line 3 (not valid JSON)" in loaded.warnings[0] and "line 4 (not a JSON object)" in loaded.warnings[0]
    assert [(d.number, d.reason) for d in loaded.damaged] == [(3, "not valid JSON"), (4, "not a JSON object")]


@pytest.mark.parametrize(
    "content",
    [
        "",
        "\n\n",
        '{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"t","message":{}}\n',
        '{"type":"session","version":3,"timestamp":"t","cwd":"/"}\n',
        "garbage\n",
    ],
    ids=["empty", "blank", "entry-first", "header-without-id", "garbage"],
)
def test_a_file_without_a_valid_header_is_rejected(tmp_path, content):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(SessionLoadError, match="Not a pi session file"):
        load_session(str(path))


def test_a_missing_file_is_a_load_error_naming_it(tmp_path):
    with pytest.raises(SessionLoadError, match="Cannot read session file .*missing.jsonl"):
        load_session(str(tmp_path / "missing.jsonl"))


PI_FIXTURE = "\n".join(
    [
        '{"type":"session","version":3,"id":"8d1c7a52-3f0e-4b8e-9a55-2f1d8f3e6b10","timestamp":"2026-03-15T22:40:18.123Z","cwd":"/home/u/proj"}',
        '{"type":"thinking_level_change","id":"a1b2c3d4","parentId":null,"timestamp":"2026-03-15T22:40:18.200Z","thinkingLevel":"high"}',
        '{"type":"model_change","id":"b2c3d4e5","parentId":"a1b2c3d4","timestamp":"2026-03-15T22:40:18.300Z","provider":"anthropic","modelId":"claude-sonnet-4-5"}',
        '{"type":"message","id":"c3d4e5f6","parentId":"b2c3d4e5","timestamp":"2026-03-15T22:40:20.000Z","message":{"role":"user","content":[{"type":"text","text":"list files"}],"timestamp":1773614420000}}',
        '{"type":"message","id":"d4e5f6a7","parentId":"c3d4e5f6","timestamp":"2026-03-15T22:40:22.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"use ls","thinkingSignature":"sig"},{"type":"toolCall","id":"toolu_01","name":"bash","arguments":{"command":"ls"}}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3}},"stopReason":"toolUse","timestamp":1773614422000}}',
        '{"type":"message","id":"e5f6a7b8","parentId":"d4e5f6a7","timestamp":"2026-03-15T22:40:22.500Z","message":{"role":"toolResult","toolCallId":"toolu_01","toolName":"bash","content":[{"type":"text","text":"README.md\\n"}],"isError":false,"timestamp":1773614422500}}',
        '{"type":"message","id":"f6a7b8c9","parentId":"e5f6a7b8","timestamp":"2026-03-15T22:40:24.000Z","message":{"role":"assistant","content":[{"type":"text","text":"There is a README.md."}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":20,"output":6,"cacheRead":0,"cacheWrite":0,"totalTokens":26,"cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3}},"stopReason":"stop","timestamp":1773614424000}}',
        '{"type":"label","id":"0a1b2c3d","parentId":"f6a7b8c9","timestamp":"2026-03-15T22:41:00.000Z","targetId":"c3d4e5f6","label":"start"}',
        '{"type":"session_info","id":"1b2c3d4e","parentId":"0a1b2c3d","timestamp":"2026-03-15T22:41:01.000Z","name":"files"}',
        "",
    ]
)


def test_loads_a_hand_written_pi_session_and_builds_its_context(tmp_path):
    path = tmp_path / "2026-03-15T22-40-18-123Z_8d1c7a52-3f0e-4b8e-9a55-2f1d8f3e6b10.jsonl"
    path.write_text(PI_FIXTURE)
    loaded = load_session(str(path))
    assert loaded.warnings == [] and loaded.migrated_from is None
    assert loaded.header["cwd"] == "/home/u/proj"
    assert len(loaded.entries) == 8 and loaded.leaf_id == "1b2c3d4e"

    context = session_context(loaded.entries)
    assert [m["role"] for m in context.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert context.messages[1]["content"][1]["arguments"] == {"command": "ls"}
    assert context.thinking_level == "high"
    assert context.model == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    assert build_session_context(loaded.entries, loaded.leaf_id) == context.messages


def test_context_of_a_linear_session_is_its_messages_in_order(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/p")
    sent = [user("1", 1), assistant("2", 2), user("3", 3), assistant("4", 4)]
    writer.append_entry({"type": "model_change", "provider": "openai", "modelId": "gpt"})
    for message in sent:
        writer.append_message(message)
    writer.close()
    loaded = load_session(writer.path)
    assert build_session_context(loaded.entries) == sent
    assert build_session_context(loaded.entries, None) == []
    assert build_session_context([]) == []
    # An unknown leaf falls back to the last entry.
    assert build_session_context(loaded.entries, "nope") == sent


def test_context_follows_the_chosen_branch_and_honours_compaction():
    def entry(kind, eid, parent, ts="2026-03-15T22:40:18.000Z", **fields):
        return {"type": kind, "id": eid, "parentId": parent, "timestamp": ts, **fields}

    entries = [
        entry("message", "u1", None, message=user("u1")),
        entry("message", "a1", "u1", message=assistant("a1")),
        entry("message", "u2", "a1", message=user("u2")),
        entry("message", "a2", "u2", message=assistant("a2")),
        entry("compaction", "c1", "a2", summary="earlier", firstKeptEntryId="u2", tokensBefore=500),
        entry("message", "u3", "c1", message=user("u3")),
        # A second branch from a1, with a summary of the abandoned one and an extension message.
        entry("branch_summary", "b1", "a1", fromId="a1", summary="tried u2"),
        entry("custom_message", "m1", "b1", ts="2026-03-15T22:40:19.500Z", customType="note", content="fyi", display=True),
    ]
    main = build_session_context(entries, "u3")
    assert main[0] == {
        "role": "compactionSummary", "summary": "earlier", "tokensBefore": 500, "timestamp": 1773614418000,
    }
    assert [m.get("content") for m in main[1:]] == ["u2", assistant("a2")["content"], "u3"]

    side = build_session_context(entries, "m1")
    assert [m["role"] for m in side] == ["user", "assistant", "branchSummary", "custom"]
    assert side[2] == {"role": "branchSummary", "summary": "tried u2", "fromId": "a1", "timestamp": 1773614418000}
    assert side[3] == {
        "role": "custom", "customType": "note", "content": "fyi", "display": True, "timestamp": 1773614419500,
    }


def test_version_1_files_are_migrated_in_memory_and_on_resume(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text(
        "\n".join(
            [
                '{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}',
                '{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}',
                '{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"hookMessage","customType":"h","content":"x","display":false,"timestamp":2}}',
                '{"type":"compaction","timestamp":"2025-01-01T00:00:03.000Z","summary":"s","firstKeptEntryIndex":2,"tokensBefore":9}',
                "",
            ]
        )
    )
    loaded = load_session(str(path))
    assert loaded.migrated_from == 1 and loaded.header["version"] == 3
    first, hook, compaction = loaded.entries
    assert first["parentId"] is None and hook["parentId"] == first["id"] and compaction["parentId"] == hook["id"]
    assert hook["message"]["role"] == "custom"
    assert compaction["firstKeptEntryId"] == hook["id"] and "firstKeptEntryIndex" not in compaction

    # Resuming rewrites the file as version 3 (ids are drawn afresh by that migration).
    with SessionWriter.resume(str(path)) as writer:
        migrated = writer.entries
        added = writer.append_message(user("new"))
    again = load_session(str(path))
    assert again.migrated_from is None and again.warnings == []
    assert again.header["version"] == 3
    assert again.entries == [*migrated, added] and added["parentId"] == migrated[-1]["id"]


def test_a_write_error_is_reported_and_the_append_can_be_retried(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file")
    session_dir = blocker / "sessions"
    writer = SessionWriter.create(str(session_dir), "/p")
    question = writer.append_message(user("q"))

    with pytest.raises(SessionWriteError) as info:
        writer.append_message(assistant("a"))
    message = str(info.value)
    assert message.startswith(f"Cannot create session file {writer.path}: ")
    assert "Not a directory (ENOTDIR)" in message
    # Nothing was half-done: the assistant entry was not added, the leaf did not move.
    assert writer.leaf_id == question["id"] and len(writer.entries) == 1

    blocker.unlink()
    answer = writer.append_message(assistant("a"))
    lines = file_lines(writer.path)
    assert [line["type"] for line in lines] == ["session", "message", "message"]
    assert lines[2] == answer and answer["parentId"] == question["id"]
    writer.close()


def test_a_failed_append_is_cut_off_so_the_file_stays_valid(tmp_path, monkeypatch):
    writer = SessionWriter.create(str(tmp_path), "/p")
    writer.append_message(user("q"))
    answer = writer.append_message(assistant("a"))
    real_write = os.write

    def half_then_disk_full(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_disk_full)
    with pytest.raises(SessionWriteError, match=r"Cannot append to session file .*No space left on device \(ENOSPC\)"):
        writer.append_message(user("lost?"))
    monkeypatch.setattr(os, "write", real_write)

    assert writer.leaf_id == answer["id"]
    loaded = load_session(writer.path)
    assert loaded.warnings == [] and len(loaded.entries) == 2
    retried = writer.append_message(user("lost?"))
    assert load_session(writer.path).entries[-1] == retried
    writer.close()


def test_closed_writer_refuses_appends(tmp_path):
    writer = SessionWriter.create(str(tmp_path), "/p")
    writer.close()
    with pytest.raises(SessionWriteError, match="closed"):
        writer.append_message(user("late"))


def test_resuming_an_empty_file_starts_a_session_there_and_a_reopen_finds_the_same_id(tmp_path):
    path = tmp_path / "given.jsonl"
    path.write_bytes(b"")
    writer = SessionWriter.resume(str(path), cwd="/work/project")
    writer.append_message({"role": "user", "content": "hi", "timestamp": 1})
    writer.close()
    loaded = load_session(str(path))
    assert loaded.header["id"] == writer.session_id and loaded.header["cwd"] == "/work/project"
    again = SessionWriter.resume(str(path))
    assert again.session_id == writer.session_id and len(again.entries) == 1
    again.close()


def test_resuming_a_file_that_is_not_a_session_is_refused_and_leaves_it_untouched(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text("my notes\n")
    with pytest.raises(SessionLoadError, match="Not a pi session file"):
        SessionWriter.resume(str(path))
    assert path.read_text() == "my notes\n"
