"""A session writer keeps its entries as the lines it wrote, with an index for the tree.

What it answers (entries, the path to an entry, one entry, the labels) must be what the file
says; and what it keeps for a long session is about the file's size, not a multiple of it.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.coding.session import SessionWriter


def _file_entries(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f.read().split("\n")[1:] if line]


def _naive_path(entries: list[dict], leaf: str | None) -> list[dict]:
    by_id = {e["id"]: e for e in entries}
    path, current = [], by_id.get(leaf) if leaf else None
    while current is not None:
        path.append(current)
        current = by_id.get(current.get("parentId"))
    return path[::-1]


def _naive_labels(entries: list[dict]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in entries:
        if e["type"] == "label":
            if e.get("label"):
                out[e["targetId"]] = e["label"]
            else:
                out.pop(e["targetId"], None)
    return out


_USAGE = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
          "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}}

_op = st.one_of(
    st.tuples(st.just("user"), st.text(max_size=20)),
    st.tuples(st.just("assistant"), st.text(max_size=20)),
    st.tuples(st.just("label"), st.sampled_from(["", "keep", "todo"])),
    st.tuples(st.just("branch"), st.integers(0, 50)),
    st.tuples(st.just("root"), st.just("")),
)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(_op, min_size=1, max_size=40), pick=st.integers(0, 1000))
def test_the_writer_answers_what_its_file_says_after_appends_labels_and_branches(tmp_path_factory, ops, pick):
    directory = tmp_path_factory.mktemp("s")
    writer = SessionWriter.create(str(directory), "/w", lazy=False)
    ids: list[str] = []
    try:
        for kind, value in ops:
            if kind == "user":
                ids.append(writer.append_message({"role": "user", "content": value, "timestamp": 1})["id"])
            elif kind == "assistant":
                message = {"role": "assistant", "content": [{"type": "text", "text": value}], "api": "openai-completions",
                           "provider": "p", "model": "m", "usage": _USAGE, "stopReason": "stop", "timestamp": 2}
                ids.append(writer.append_message(message)["id"])
            elif kind == "label" and ids:
                ids.append(writer.append_label(ids[len(ids) // 2], value or None)["id"])
            elif kind == "branch" and ids:
                writer.branch(ids[value % len(ids)])
            elif kind == "root":
                writer.reset_leaf()
        if not ids:
            assert writer.entries == [] and writer.path_to(writer.leaf_id) == []
            return
        on_disk = _file_entries(writer.path)
        assert writer.entries == on_disk
        assert writer.entry_count == len(on_disk)
        assert writer.labels() == _naive_labels(on_disk)
        assert writer.path_to(writer.leaf_id) == _naive_path(on_disk, writer.leaf_id)
        if ids:
            target = ids[pick % len(ids)]
            assert writer.get_entry(target) == next(e for e in on_disk if e["id"] == target)
            assert writer.path_to(target) == _naive_path(on_disk, target)
        assert writer.get_entry("missing") is None and writer.path_to("missing") == []
        # What a reader gets is its own: changing it changes nothing in the writer.
        if on_disk:
            writer.entries[0]["type"] = "changed"
            assert writer.entries == on_disk
    finally:
        writer.close()
    resumed = SessionWriter.resume(writer.path)
    try:
        assert resumed.entries == on_disk and resumed.labels() == _naive_labels(on_disk)
    finally:
        resumed.close()


def test_a_writer_with_300_prompts_keeps_a_fraction_of_its_file_in_memory(tmp_path):
    usage = _USAGE

    def prompt(writer: SessionWriter, i: int) -> None:
        call = {"type": "toolCall", "id": f"call_{i}", "name": "bash", "arguments": {"command": "echo x"}}
        writer.append_message({"role": "user", "content": f"prompt {i}", "timestamp": 1})
        writer.append_message({"role": "assistant", "content": [call], "api": "openai-completions", "provider": "p",
                               "model": "m", "usage": dict(usage), "stopReason": "toolUse", "timestamp": 2})
        writer.append_message({"role": "toolResult", "toolCallId": f"call_{i}", "toolName": "bash",
                               "content": [{"type": "text", "text": f"{i:05d}" + "x" * 995}], "isError": False, "timestamp": 3})
        writer.append_message({"role": "assistant", "content": [{"type": "text", "text": "done"}], "api": "openai-completions",
                               "provider": "p", "model": "m", "usage": dict(usage), "stopReason": "stop", "timestamp": 4})

    writer = SessionWriter.create(str(tmp_path), "/w", lazy=False)
    try:
        prompt(writer, 0)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        size_before = len(open(writer.path, "rb").read())
        for i in range(1, 301):
            prompt(writer, i)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        written = len(open(writer.path, "rb").read()) - size_before
    finally:
        writer.close()
    assert kept < written // 2, f"the writer keeps {kept} bytes for {written} bytes written"


def test_reading_the_tree_of_a_session_whose_file_vanished_names_the_file(tmp_path):
    import pytest

    from pi_actors.coding.session import SessionLoadError

    writer = SessionWriter.create(str(tmp_path), "/w", lazy=False)
    try:
        writer.append_message({"role": "user", "content": "hi", "timestamp": 1})
        (tmp_path / writer.path.rsplit("/", 1)[1]).unlink()
        with pytest.raises(SessionLoadError, match="Cannot read session file .*No such file"):
            _ = writer.entries
    finally:
        writer.close()
