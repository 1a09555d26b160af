"""Damaged session files: lines that cannot be used are reported (which, and why), left out of
the conversation and kept in the file for repair; everything else goes on as before."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_actors.coding.session import SessionLoadError, SessionWriter, build_session_context, load_session
from pi_actors.runtime.protocol import Result, encode_message
from pi_actors.testing.scripted_server import Reply

SID = "11111111-2222-4333-8444-555555555555"
HEADER = {"type": "session", "version": 3, "id": SID, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
USAGE = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def _user(entry_id: str, parent: str | None, text: str) -> dict:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1}}  # fmt: skip


def _assistant(entry_id: str, parent: str | None, text: str) -> dict:
    return {
        "type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:02.000Z",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "api": "openai-completions",
                    "provider": "scripted", "model": "scripted-model", "usage": USAGE, "stopReason": "stop", "timestamp": 2},
    }  # fmt: skip


def _line(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


# Line 4: not JSON at all (a control character inside a string), and nothing can be read from
# it. Line 7: JSON, but its message is not an object. Both had children.
BROKEN_4 = b'{"type":"message","id":"cccc0004","parentId":"aaaa0003","message":{"role":"user","content":"lost \x01"}}\n'
BROKEN_7 = b'{"type":"message","id":"cccc0007","parentId":"aaaa0006","timestamp":"2026-01-01T00:00:01.000Z","message":"oops"}\n'


def _damaged_session(cwd: str = "/p") -> bytes:
    """A session with two damaged lines, saved in ``cwd`` (where the CLI runs it, as pi does:
    the tests that open it with the real CLI give their work directory)."""
    return b"".join(
        [
            _line({**HEADER, "cwd": cwd}),
            _line(_user("aaaa0002", None, "one")),
            _line(_assistant("aaaa0003", "aaaa0002", "First.")),
            BROKEN_4,
            _line(_user("aaaa0005", "cccc0004", "two")),
            _line(_assistant("aaaa0006", "aaaa0005", "Second.")),
            BROKEN_7,
            _line(_user("aaaa0008", "cccc0007", "three")),
            _line(_assistant("aaaa0009", "aaaa0008", "Third.")),
        ]
    )


def _sent(scripted, index: int) -> list[tuple[str, str]]:
    def text(content) -> str:  # user content as pi sends it is an array of parts
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content if p.get("type") == "text")
        return content if isinstance(content, str) else ""

    return [(m["role"], text(m["content"])) for m in scripted.requests[index]["body"]["messages"]]


# -- the real CLI -------------------------------------------------------------------------------


async def test_damaged_lines_in_a_session_are_named_on_stderr_and_the_rest_reaches_the_model(scripted, env):
    path = env.work / "damaged.jsonl"
    original = _damaged_session(str(env.work))
    path.write_bytes(original)
    scripted.script.append(Reply(text="Fourth."))

    done = await env.run("--session", str(path), "-p", "four")

    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "Fourth.\n"
    (warning,) = done.stderr.decode().splitlines()
    assert warning.startswith(f"Warning: {path}: 2 damaged lines left out of the conversation: ")
    assert "line 4 (not valid JSON)" in warning and "line 7 (message entry: 'message' is not an object)" in warning
    assert warning.endswith("they are kept in the file for you to repair")
    # Every other message is in the model's request, in order.
    assert _sent(scripted, 0)[1:] == [
        ("user", "one"), ("assistant", "First."), ("user", "two"), ("assistant", "Second."),
        ("user", "three"), ("assistant", "Third."), ("user", "four"),
    ]  # fmt: skip
    # The damaged lines are still there, untouched; the new entries follow the last good one.
    data = path.read_bytes()
    assert data.startswith(original)
    new = [json.loads(line) for line in data[len(original) :].splitlines()]
    # pi's thinking_level_change first (the branch had none), then the new exchange.
    assert [e.get("message", {}).get("role") or e["type"] for e in new] == ["thinking_level_change", "user", "assistant"]
    assert new[0]["parentId"] == "aaaa0009"


async def test_a_torn_last_line_is_reported_once_and_repaired(scripted, env):
    path = env.work / "torn.jsonl"
    good = _line({**HEADER, "cwd": str(env.work)}) + _line(_user("aaaa0002", None, "one")) + _line(_assistant("aaaa0003", "aaaa0002", "First."))
    path.write_bytes(good + b'{"type":"message","id":"aaaa00')
    scripted.script += [Reply(text="Second."), Reply(text="Third.")]

    first = await env.run("--session", str(path), "--mode", "json", "two")

    assert first.returncode == 0, first.stderr.decode()
    assert first.stderr.decode() == (
        f"Warning: {path}: the last line was incomplete (a crash during a write?) and was dropped (30 bytes)\n"
    )
    assert all(json.loads(line) for line in first.stdout.splitlines())  # stdout stays pure JSON lines
    assert path.read_bytes().startswith(good) and b"aaaa00\n" not in path.read_bytes()

    again = await env.run("--session", str(path), "-p", "three")
    assert again.returncode == 0 and again.stderr == b""  # repaired: nothing more to say


async def test_switching_to_a_damaged_session_over_rpc_answers_with_its_warnings(scripted, env):
    from support.rpc import open_rpc

    path = env.work / "damaged.jsonl"
    path.write_bytes(_damaged_session(str(env.work)))
    rpc = await open_rpc(env, "--no-session")
    response = await rpc.request({"id": "sw", "type": "switch_session", "sessionPath": str(path)})
    assert await rpc.close() == 0
    assert response["success"] is True
    (warning,) = response["data"]["warnings"]
    assert "line 4 (not valid JSON)" in warning and "line 7 (message entry:" in warning


async def test_the_terminal_ui_shows_the_damaged_lines_above_the_session(scripted, env, pane):
    path = env.work / "damaged.jsonl"
    path.write_bytes(_damaged_session(str(env.work)))
    await pane.start("--session", str(path), session=True)
    # (the warning is printed before the TUI starts, so it stays above the transcript)
    screen = await pane.wait_until(lambda s: "Third." in s and "2 damaged lines left out" in s.replace("\n", ""))
    unwrapped = screen.replace("\n", "")
    assert unwrapped.index("line 4 (not valid JSON), line 7") < unwrapped.index("Session with 6 messages")


# -- the loader -----------------------------------------------------------------------------


def test_damaged_lines_are_listed_and_the_tree_is_rejoined_around_them(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(_damaged_session())
    loaded = load_session(str(path))
    assert [(d.number, d.reason) for d in loaded.damaged] == [
        (4, "not valid JSON"), (7, "message entry: 'message' is not an object")
    ]  # fmt: skip
    assert loaded.damaged[0].raw + b"\n" == BROKEN_4
    # Line 5's parent (line 4) could not be read: it joins the last good entry before line 4.
    # Line 8's parent (line 7) could: it joins line 7's own parent.
    parents = {e["id"]: e["parentId"] for e in loaded.entries}
    assert parents["aaaa0005"] == "aaaa0003" and parents["aaaa0008"] == "aaaa0006"
    texts = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in build_session_context(loaded.entries)]
    assert texts == ["one", "First.", "two", "Second.", "three", "Third."]


def test_an_orphan_with_no_damage_before_it_stays_an_orphan(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(_line(HEADER) + _line(_user("aaaa0002", None, "one")) + _line(_user("aaaa0003", "gone0000", "two")))
    loaded = load_session(str(path))
    assert loaded.warnings == [] and loaded.entries[1]["parentId"] == "gone0000"


def test_many_damaged_lines_are_counted_after_the_first_ten(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(_line(HEADER) + b"garbage\n" * 25 + _line(_user("aaaa0002", None, "one")))
    (warning,) = load_session(str(path)).warnings
    assert "25 damaged lines" in warning and "line 11 (not valid JSON) and 15 more;" in warning


def test_migrating_an_old_file_keeps_its_damaged_lines_where_they_were(tmp_path):
    path = tmp_path / "s.jsonl"
    v2 = {**HEADER, "version": 2}
    hook = {"type": "message", "id": "aaaa0004", "parentId": "cccc0003", "timestamp": "t", "message": {"role": "hookMessage", "content": "x"}}
    path.write_bytes(_line(v2) + _line(_user("aaaa0002", None, "one")) + b"not json\n" + _line(hook))
    with SessionWriter.resume(str(path)) as writer:
        assert "line 3 (not valid JSON)" in writer.load_warnings[0]
        writer.append_message({"role": "user", "content": "after", "timestamp": 3})
    lines = path.read_bytes().split(b"\n")
    assert json.loads(lines[0])["version"] == 3
    assert lines[2] == b"not json"
    migrated = json.loads(lines[3])
    assert migrated["message"]["role"] == "custom" and migrated["parentId"] == "cccc0003"  # as in the file


def test_a_file_whose_header_is_unusable_is_a_clear_error(tmp_path):
    path = tmp_path / "s.jsonl"
    for header in ({**HEADER, "version": "3"}, {**HEADER, "cwd": 5}, {"type": "session"}):
        path.write_bytes(_line(header))
        with pytest.raises(SessionLoadError, match="Not a pi session file"):
            load_session(str(path))


# -- hostile lines ----------------------------------------------------------------------------

_ids = st.integers(0, 2**32 - 1).map(lambda n: f"{n:08x}")
_json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)
)
_json = st.recursive(_json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)


@st.composite
def _valid_entry(draw, entry_id: str, parent: str | None) -> dict:
    kind = draw(st.sampled_from(["user", "assistant", "model_change", "thinking_level_change", "custom", "label", "session_info", "custom_message"]))
    base = {"id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z"}
    text = draw(st.text(max_size=40))
    if kind == "user":
        return {"type": "message", **base, "message": {"role": "user", "content": text, "timestamp": draw(st.integers(0, 2**53))}}
    if kind == "assistant":
        return _assistant(entry_id, parent, text)
    if kind == "model_change":
        return {"type": "model_change", **base, "provider": text, "modelId": draw(st.text(max_size=10))}
    if kind == "thinking_level_change":
        return {"type": kind, **base, "thinkingLevel": draw(st.sampled_from(["off", "low", "high"]))}
    if kind == "custom":
        return {"type": "custom", **base, "customType": text, "data": draw(_json)}
    if kind == "label":
        return {"type": "label", **base, "targetId": draw(_ids), "label": draw(st.none() | st.text(max_size=10))}
    if kind == "session_info":
        return {"type": "session_info", **base, "name": text}
    return {"type": "custom_message", **base, "customType": "x", "content": text, "display": draw(st.booleans())}


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@st.composite
def _hostile_line(draw, entry_id: str, parent: str | None) -> bytes:
    """One line that must be reported: raw garbage, or JSON that is not a usable entry."""
    base = {"id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z"}
    user = {"type": "message", **base, "message": {"role": "user", "content": "hi", "timestamp": 1}}
    choice = draw(st.integers(0, 13))
    no_newline = st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" "))
    if choice == 0:  # random bytes that are not UTF-8
        return b"\xff" + draw(no_newline)
    if choice == 1:  # random bytes that cannot start JSON
        return b"#" + draw(no_newline)
    if choice == 2:  # JSON, but not an object
        return json.dumps(draw(st.one_of(st.integers(), st.text(max_size=10), st.lists(st.integers(), max_size=3)))).encode()
    if choice == 3:  # a good entry cut short
        text = json.dumps(user)
        return text[: draw(st.integers(1, len(text) - 1))].encode()
    if choice == 4:  # no usable type
        return json.dumps({**user, "type": draw(st.one_of(st.none(), st.integers(), st.lists(st.text(max_size=3))))}).encode()
    if choice == 5:  # ids of the wrong type
        field = draw(st.sampled_from(["id", "parentId"]))
        return json.dumps({**user, field: draw(st.one_of(st.integers(), st.lists(st.integers(), max_size=2), st.just({})))}).encode()
    if choice == 6:  # a message that is not an object, or without a role
        return json.dumps({**user, "message": draw(st.one_of(st.integers(), st.text(max_size=5), st.just({"content": "x"})))}).encode()
    if choice == 7:  # a user message of the wrong shape
        bad = draw(st.sampled_from([{"content": 42}, {"timestamp": "yesterday"}, {"timestamp": 10**30}, {"content": [{"type": "text"}]}]))
        return json.dumps({**user, "message": {**user["message"], **bad}}).encode()
    if choice == 8:  # known fields of other entry types with the wrong type
        kind, bad = draw(st.sampled_from([
            ("label", {"targetId": 5}), ("label", {}), ("model_change", {"provider": ["x"]}),
            ("custom_message", {"display": "yes"}), ("compaction", {"tokensBefore": "many"}),
            ("thinking_level_change", {"thinkingLevel": 3}), ("session_info", {"name": {}}),
        ]))  # fmt: skip
        return json.dumps({"type": kind, **base, **bad}).encode()
    if choice == 9:  # a timestamp of the wrong type
        return json.dumps({**user, "timestamp": draw(st.one_of(st.lists(st.integers(), max_size=2), st.just({}), st.booleans()))}).encode()
    if choice == 10:  # numbers no actor can carry
        big = draw(st.one_of(st.integers(2**64, 10**60), st.integers(-(10**60), -(2**64) - 1)))
        literal = draw(st.sampled_from([str(big), "1e400", "-1e999", "NaN", "Infinity", "9" * 5000]))
        return json.dumps({"type": "custom", **base, "customType": "x"}).encode()[:-1] + b',"data":' + literal.encode() + b"}"
    if choice == 11:  # nested deeper than anything can carry (or than Python can parse)
        depth = draw(st.sampled_from([57, 60, 200, 100_000]))
        return json.dumps({"type": "custom", **base, "customType": "x"}).encode()[:-1] + b',"data":' + _nested(depth).encode() + b"}"
    if choice == 12:  # a lone surrogate
        return json.dumps({"type": "custom", **base, "customType": "x"}).encode()[:-1] + b',"data":"a\\udc80b"}'
    return json.dumps({**user, "message": {**user["message"], "role": draw(st.one_of(st.integers(), st.none()))}}).encode()


@st.composite
def _file(draw):
    """A session file of valid entries and hostile lines in a linear chain, as pi writes them:
    every line's parentId is the line before it. Returns the bytes, the valid entries and the
    line numbers of the hostile lines."""
    lines = [_line(HEADER)]
    valid: list[dict] = []
    hostile: list[int] = []
    parent: str | None = None
    for index in range(draw(st.integers(0, 12))):
        entry_id = f"{index:08x}"
        if draw(st.booleans()):
            line = draw(_hostile_line(f"z{index:07d}", parent))
            lines.append(line + b"\n")
            hostile.append(len(lines))
            parent = f"z{index:07d}"
        else:
            entry = draw(_valid_entry(entry_id, parent))
            lines.append(_line(entry))
            valid.append(entry)
            parent = entry_id
    return b"".join(lines), valid, hostile


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_file())
def test_hostile_lines_are_reported_and_every_valid_line_is_kept(tmp_path_factory, case):
    data, valid, hostile = case
    path = tmp_path_factory.mktemp("hostile") / "s.jsonl"
    path.write_bytes(data)
    loaded = load_session(str(path))
    assert [e["id"] for e in loaded.entries] == [e["id"] for e in valid]
    assert [{k: v for k, v in e.items() if k != "parentId"} for e in loaded.entries] == [
        {k: v for k, v in e.items() if k != "parentId"} for e in valid
    ]
    assert [d.number for d in loaded.damaged] == hostile
    assert len(loaded.warnings) == (1 if hostile else 0)
    # The chain is rejoined: the context holds every valid message, in order.
    messages = [e["message"] for e in valid if e["type"] == "message"]
    context = build_session_context(loaded.entries)
    assert [m for m in context if m.get("role") in ("user", "assistant")] == messages
    # And whatever was kept can travel between the actors.
    encode_message(Result(id=1, ok=True, value={"entries": loaded.entries, "context": {"messages": context}, "header": loaded.header}))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.booleans())
def test_any_bytes_load_or_fail_with_one_clear_error(tmp_path_factory, junk, with_header):
    path = tmp_path_factory.mktemp("junk") / "s.jsonl"
    path.write_bytes((_line(HEADER) if with_header else b"") + junk)
    try:
        loaded = load_session(str(path))
    except SessionLoadError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    build_session_context(loaded.entries)
    encode_message(Result(id=1, ok=True, value={"entries": loaded.entries, "header": loaded.header}))
    assert all(isinstance(w, str) and "\n" not in w for w in loaded.warnings)
    if os.path.getsize(path) and with_header:
        assert loaded.header["id"] == SID
