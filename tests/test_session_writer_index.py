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
