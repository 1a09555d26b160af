"""Group commit in the session writer: ``append_entries`` writes several entries with one
write and one fsync, each a child of the one before, all or nothing."""

from __future__ import annotations

import os

import pytest

from pi_actors.coding.session import SessionWriter, load_session


def _writer(tmp_path) -> SessionWriter:
    writer = SessionWriter.create(str(tmp_path), str(tmp_path), lazy=False)
    writer.append_message({"role": "user", "content": "go", "timestamp": 1})  # creates the file
    return writer


def _result(i: int) -> dict:
    return {"type": "message", "message": {
        "role": "toolResult", "toolCallId": f"c{i}", "toolName": "bash", "content": [{"type": "text", "text": str(i)}],
        "isError": False, "timestamp": i,
    }}


def test_several_tool_results_are_saved_with_one_fsync_in_order(tmp_path, monkeypatch):
    writer = _writer(tmp_path)
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    stored = writer.append_entries([_result(i) for i in range(5)])
    monkeypatch.undo()
    assert len(synced) == 1
    writer.close()
    loaded = load_session(writer.path)
    entries = loaded.entries
    assert [e["message"].get("toolCallId") for e in entries] == [None, "c0", "c1", "c2", "c3", "c4"]
    # Each a child of the one before; the leaf is the last; the ids are what was answered.
    assert [e["parentId"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]
    assert [e["id"] for e in entries[1:]] == [s["id"] for s in stored]
    assert loaded.leaf_id == stored[-1]["id"]


def test_a_batch_with_a_bad_entry_writes_none_of_it_and_the_next_append_works(tmp_path):
    writer = _writer(tmp_path)
    leaf, size = writer.leaf_id, os.path.getsize(writer.path)
    bad = {"type": "message", "message": {"role": "toolResult", "content": float("nan")}}
    with pytest.raises(ValueError):
        writer.append_entries([_result(0), bad, _result(2)])
    assert writer.leaf_id == leaf and os.path.getsize(writer.path) == size and writer.entry_count == 1
    with pytest.raises(ValueError, match="Duplicate entry id"):
        writer.append_entries([{**_result(0), "id": "abcd0001"}, {**_result(1), "id": "abcd0001"}])
    writer.append_entries([_result(3), _result(4)])
    writer.close()
    assert [e["message"].get("toolCallId") for e in load_session(writer.path).entries] == [None, "c3", "c4"]
