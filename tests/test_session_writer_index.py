"""The session writer's compact index (ids, places and parents in arrays) answers every tree
question exactly as the entries themselves do: property tests against a plain model of the
tree, for a writer that keeps its lines in memory and for one that writes them to its file."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_actors.coding.session import SessionWriter

#: one step: append (parent: the leaf, an earlier entry, nobody, or an id not there yet),
#: branch to an earlier entry, or start a new root
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from(["leaf", "earlier", "none", "unknown"]), st.integers(0, 50), st.text(max_size=30)),
        st.tuples(st.just("branch"), st.integers(0, 50)),
        st.tuples(st.just("reset")),
    ),
    max_size=14,
)


def _model_path(entries: list[dict], entry_id: str | None) -> list[dict]:
    """Root → ``entry_id`` by following ``parentId`` through the entries (the latest entry
    of an id wins; an unknown parent or a cycle ends the path)."""
    by_id = {e["id"]: e for e in entries}
    path: list[dict] = []
    current = by_id.get(entry_id) if entry_id is not None else None
    seen: set[str] = set()
    while current is not None and current["id"] not in seen:
        seen.add(current["id"])
        path.append(current)
        current = by_id.get(current["parentId"]) if current["parentId"] is not None else None
    return path[::-1]


def _play(writer: SessionWriter, steps: list, salt: str) -> list[dict]:
    stored: list[dict] = []
    late = 0
    for step in steps:
        if step[0] == "append":
            _, parent, pick, text = step
            entry: dict = {"type": "custom", "customType": "note", "data": {"text": text}}
            if parent == "earlier" and stored:
                entry["parentId"] = stored[pick % len(stored)]["id"]
            elif parent == "none":
                entry["parentId"] = None
            elif parent == "unknown":
                # A parent named before it exists; a later entry takes that id.
                entry["parentId"] = f"late{salt}{late}"
                late += 1
            stored.append(writer.append_entry(entry))
            if late and not any(e["id"] == f"late{salt}{late - 1}" for e in stored) and len(stored) % 3 == 0:
                stored.append(writer.append_entry({"type": "custom", "customType": "note", "id": f"late{salt}{late - 1}"}))
        elif step[0] == "branch" and stored:
            writer.branch(stored[step[1] % len(stored)]["id"])
        elif step[0] == "reset":
            writer.reset_leaf()
    return stored


def _check(writer: SessionWriter, stored: list[dict]) -> None:
    expected = json.loads(json.dumps(stored))  # as the file holds them
    assert writer.entry_count == len(stored)
    assert writer.entries == expected
    for entry in expected:
        assert writer.get_entry(entry["id"]) == entry
        assert writer.path_to(entry["id"]) == _model_path(expected, entry["id"])
    assert writer.get_entry("not-an-id") is None
    assert writer.path_to("not-an-id") == [] and writer.path_to(None) == []
    assert writer.path_to(writer.leaf_id) == _model_path(expected, writer.leaf_id)


@settings(max_examples=60, deadline=None)
@given(steps=_steps)
def test_a_session_kept_in_memory_answers_like_its_entries(steps):
    writer = SessionWriter.create("", "/work", in_memory=True)
    _check(writer, _play(writer, steps, "m"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_steps)
def test_a_session_written_to_its_file_answers_like_its_entries_and_its_branches_copy_them(steps, tmp_path_factory):
    directory = tmp_path_factory.mktemp("sessions")
    with SessionWriter.create(str(directory), "/work", lazy=False) as writer:
        stored = _play(writer, steps, "f")
        _check(writer, stored)
        if stored:
            # A branch into a new file copies the path, read back through the index.
            leaf = stored[-1]["id"]
            with writer.create_branched_session(leaf, str(directory)) as branched:
                copied = [e for e in branched.entries if e["type"] != "label"]
                assert copied == _model_path(json.loads(json.dumps(stored)), leaf)
    if stored:
        # Reopened from its file, the same answers.
        with SessionWriter.resume(writer.path) as reopened:
            _check(reopened, stored)


#: ids as a loaded file may hold them: pi's short form (8 lowercase hex digits), near misses
#: of it (upper case, 7 or 9 digits), other strings — few enough that they repeat
_ids = st.sampled_from(["0000000a", "0000000b", "ffffffff", "00000000", "0000000A", "000000a", "000000000", "root", "é-x", "x" * 40])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.tuples(_ids, st.one_of(st.none(), _ids)), max_size=24), leaf=_ids)
def test_a_loaded_file_with_repeated_and_unusual_ids_answers_like_its_entries(records, leaf, tmp_path_factory):
    # A file written by hand (or by another program): any string ids, repeated ones, parents
    # named before or without their entry. The latest entry of an id is the one found, and
    # the one its children follow.
    directory = tmp_path_factory.mktemp("sessions")
    with SessionWriter.create(str(directory), "/work") as writer:
        path, header = writer.path, writer.header
    entries = [
        {"type": "custom", "customType": "note", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z"}
        for entry_id, parent in records
    ]
    with open(path, "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in [header, *entries])
    with SessionWriter.resume(path) as reopened:
        assert reopened.load_warnings == []
        assert reopened.entry_count == len(entries)
        assert reopened.entries == entries
        for entry_id in {e["id"] for e in entries} | {leaf}:
            latest = [e for e in entries if e["id"] == entry_id]
            assert reopened.get_entry(entry_id) == (latest[-1] if latest else None)
            assert reopened.path_to(entry_id) == _model_path(entries, entry_id)
        # Appending goes on from there with fresh ids (never one already present).
        added = [reopened.append_entry({"type": "custom", "customType": "note"}) for _ in range(30)]
        assert len({e["id"] for e in added} | {e["id"] for e in entries}) == len({e["id"] for e in entries}) + 30
        assert reopened.path_to(added[-1]["id"])[-30:] == json.loads(json.dumps(added))


def test_a_long_session_costs_its_writer_a_few_bytes_per_entry(tmp_path):
    # What a long session costs the writer per entry written (its index): places, ids and
    # parent links in arrays, not an id string, an int and a dict slot per entry (~110
    # bytes per entry before).
    import tracemalloc

    note = {"type": "custom", "customType": "note"}
    with SessionWriter.create(str(tmp_path), "/work", lazy=False) as writer:
        writer.append_entries([note] * 200)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(50):
                writer.append_entries([note] * 100)  # one write and fsync per 100 entries
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert writer.entry_count == 5_200
        path = writer.path_to(writer.leaf_id)
        assert len(path) == 5_200 and path[0]["parentId"] is None
    assert kept / 5_000 < 48, f"{kept / 5_000:.0f} B per entry"
