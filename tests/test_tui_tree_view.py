"""The ``/tree`` view's logic (``pi_actors.cli.tui.tree``) and the TUI's small pure pieces
around it, without a terminal: rows, indentation, markers, filters, search, fold, labels;
hostile trees from hypothesis. The real CLI in tmux is in tests/test_tui_tree.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.cli.tui.commands import available_levels
from pi_actors.cli.tui.tree import FILTER_MODES, TreeView, entry_text
from pi_actors.cli.tui.widgets import TreeSelector, completion_view, session_message_view


def msg(eid: str, parent: str | None, role: str, text: str = "", ts: int = 0, **extra: Any) -> dict:
    content = [{"type": "text", "text": text}] if text else []
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": f"2026-01-01T00:00:{ts:02d}Z", "message": {"role": role, "content": content, **extra}}


def lines(view: TreeView) -> list[str]:
    return [r.plain().rstrip() for r in view.rows(100)]


def branch_at_first_message() -> list[dict]:
    """u1 → a1 → u2 → a2, and u1 → b1 → u3 → {c1, c2}: the branch point is the first message."""
    return [
        msg("u1", None, "user", "first", 1),
        msg("a1", "u1", "assistant", "answer A", 2),
        msg("u2", "a1", "user", "more", 3),
        msg("a2", "u2", "assistant", "more A", 4),
        msg("b1", "u1", "assistant", "answer B", 5),
        msg("u3", "b1", "user", "b more", 6),
        msg("c1", "u3", "assistant", "c one", 7),
        msg("c2", "u3", "assistant", "c two", 8),
    ]


def test_a_branch_at_the_first_message_indents_both_branches_with_connectors_and_marks_the_active_path():
    view = TreeView(branch_at_first_message(), "a2")
    assert lines(view) == [
        "  • user: first",
        "  ├⊟ • assistant: answer A",
        "  │     • user: more",
        "› │     • assistant: more A  ← active",
        "  └⊟ assistant: answer B",
        "        user: b more",
        "        ├─ assistant: c one",
        "        └─ assistant: c two",
    ]
    assert view.status() == "(4/8)"


def test_the_branch_holding_the_leaf_comes_first():
    view = TreeView(branch_at_first_message(), "c2")
    assert [r.entry_id for r in view.rows(100)] == ["u1", "b1", "u3", "c2", "c1", "a1", "u2", "a2"]
    assert [r.entry_id for r in view.rows(100) if r.on_path] == ["u1", "b1", "u3", "c2"]


def test_two_roots_hang_off_an_invisible_root_without_connectors():
    # A hidden first entry (the session's initial thinking level): re-asking the first
    # question makes two visible roots.
    entries = [
        {"type": "thinking_level_change", "id": "t", "parentId": None, "thinkingLevel": "off"},
        msg("u1", "t", "user", "first", 1),
        msg("a1", "u1", "assistant", "one", 2),
        msg("u1b", "t", "user", "first again", 3),
        msg("a1b", "u1b", "assistant", "two", 4),
    ]
    view = TreeView(entries, "a1b")
    assert lines(view) == ["  • user: first again", "›    • assistant: two  ← active", "  user: first", "     assistant: one"]
    view.set_filter("all")  # the thinking entry is shown: one root again, which branches
    assert lines(view)[0] == "  • [thinking: off]"
    assert lines(view)[1].startswith("  ├⊟ • user: first again")


def test_filters_hide_what_pi_hides_and_toggle_back_to_default():
    entries = [
        msg("u1", None, "user", "run it", 1),
        msg("a1", "u1", "assistant", "", 2, content=[{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls -la"}}]),
        {"type": "message", "id": "r1", "parentId": "a1", "message": {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": []}},
        msg("a2", "r1", "assistant", "done", 4),
        {"type": "model_change", "id": "m1", "parentId": "a2", "modelId": "big"},
        {"type": "label", "id": "l1", "parentId": "m1", "targetId": "u1", "label": "start"},
    ]
    view = TreeView(entries, "l1", {"u1": "start"})
    # default: no bookkeeping; the tool-call-only assistant message is hidden, its result shown as the call
    assert lines(view) == ["  • [start] user: run it", "  • [bash: ls -la]", "› • assistant: done  ← active"]
    view.set_filter("no-tools")
    assert [r.entry_id for r in view.rows(100)] == ["u1", "a2"] and view.status() == "(2/2) [no-tools]"
    view.set_filter("user-only")
    assert [r.entry_id for r in view.rows(100)] == ["u1"] and view.status() == "(1/1) [user]"
    view.set_filter("labeled-only")
    assert [r.entry_id for r in view.rows(100)] == ["u1"]
    view.set_filter("all")
    assert [r.entry_id for r in view.rows(100)] == ["u1", "r1", "a2", "m1", "l1"]
    assert lines(view)[-1] == "  • [label: start]  ← active"  # the leaf itself now shows (the cursor stays)
    view.set_filter("all")  # the same key again: back to default
    assert view.filter_mode == "default"
    seen = []
    for _ in FILTER_MODES:
        view.cycle_filter()
        seen.append(view.filter_mode)
    assert seen == [*FILTER_MODES[1:], "default"]
    with pytest.raises(ValueError, match="unknown tree filter mode 'none'"):
        view.set_filter("none")


def test_search_needs_every_word_and_the_cursor_stays_on_its_entry_or_moves_to_an_ancestor():
    view = TreeView(branch_at_first_message(), "a2", {"b1": "Plan B"})
    view.set_search("plan")  # labels are searched
    assert [r.entry_id for r in view.rows(100)] == ["b1"]
    view.set_search("MORE a")  # case-insensitive, every word
    assert [r.entry_id for r in view.rows(100)] == ["a2"] and view.status() == "(1/1)"
    view.set_search("nothing like this")
    assert view.rows(100) == [] and view.status() == "(0/0)" and view.selected is None
    view.set_search("")
    assert view.selected == "a2"


def test_fold_hides_a_branch_and_the_branch_keys_jump_between_segments():
    view = TreeView(branch_at_first_message(), "a2", selected_id="b1")
    view.fold_or_up()  # b1 starts a branch: it folds
    assert "b1" in view.folded and [r.entry_id for r in view.rows(100)] == ["u1", "a1", "u2", "a2", "b1"]
    assert lines(view)[-1] == "› └⊞ assistant: answer B"
    view.unfold_or_down()
    assert not view.folded and view.selected == "b1"
    view.unfold_or_down()  # down the chain to the next branch point's first child
    assert view.selected == "c1"
    view.fold_or_up()  # c1 has no children: up to the start of its segment... it is one: up again
    assert view.selected == "b1"
    view.move(-1)
    assert view.selected == "a2"
    view.move(5)  # wraps
    assert view.selected == "u1"


def test_a_label_set_shows_before_the_text_and_an_empty_one_clears_it():
    view = TreeView(branch_at_first_message(), "a2")
    view.set_label("a1", "checkpoint")
    assert "  ├⊟ • [checkpoint] assistant: answer A" in lines(view)
    view.set_label("a1", None)
    assert "  ├⊟ • assistant: answer A" in lines(view)


def test_going_to_the_leaf_or_past_bookkeeping_only_is_already_there():
    entries = [*branch_at_first_message(), {"type": "session_info", "id": "s", "parentId": "a2", "name": "x"}]
    view = TreeView(entries, "s")
    assert view.is_current("s") and view.is_current("a2")
    assert not view.is_current("u2") and not view.is_current("b1")
    assert view.active_id == "a2"


def test_rows_keep_the_cursor_in_the_middle_of_a_long_tree():
    entries = [msg(f"e{i}", f"e{i - 1}" if i else None, "user" if i % 2 == 0 else "assistant", f"m{i}", i % 60) for i in range(60)]
    view = TreeView(entries, "e59", selected_id="e30")
    shown = view.rows(10)
    assert len(shown) == 10 and shown[5].entry_id == "e30" and shown[5].selected
    view.page(1, 10)
    assert view.selected == "e40"


def test_entry_texts_follow_pi():
    assert entry_text({"type": "compaction", "tokensBefore": 12345}) == ("compaction", "[compaction: 12k tokens]")
    assert entry_text({"type": "custom_message", "customType": "note", "content": "hi\nthere"}) == ("custom", "[note]: hi there")
    assert entry_text(msg("x", None, "assistant", stopReason="aborted")) == ("assistant", "assistant: (aborted)")
    assert entry_text(msg("x", None, "assistant", stopReason="error", errorMessage="boom")) == ("error", "assistant: boom")
    assert entry_text({"type": "session_info"}) == ("dim", "[title: empty]")


def test_thinking_levels_are_the_models_own():
    assert available_levels({"id": "plain", "reasoning": False}) == ["off"]
    assert available_levels({"id": "claude-sonnet-4", "reasoning": True}) == ["off", "minimal", "low", "medium", "high"]
    assert available_levels({"id": "gpt-5.2", "reasoning": True})[-1] == "xhigh"


def test_session_messages_render_as_pi_shows_them():
    assert session_message_view({"role": "custom", "customType": "n", "content": "x", "display": False}, False) == []
    shown = session_message_view({"role": "custom", "customType": "note", "content": "hello", "display": True}, False)
    assert shown is not None and str(shown[0]) == "[note]"
    collapsed = session_message_view({"role": "compactionSummary", "summary": "S", "tokensBefore": 12345}, False)
    assert collapsed is not None and [str(p) for p in collapsed] == ["[compaction]", "Compacted from 12,345 tokens (ctrl+o to expand)"]
    assert session_message_view({"role": "user"}, False) is None


def test_the_completion_list_shows_five_rows_around_the_selection_and_a_counter():
    items = [SimpleNamespace(display_text=f"/c{i}", display_meta_text=f"does {i}") for i in range(12)]
    frags = completion_view(SimpleNamespace(completions=items, complete_index=8), 5, 80)
    text = "".join(t for _, t in frags)
    assert text.splitlines() == ["  /c6   does 6", "  /c7   does 7", "→ /c8   does 8", "  /c9   does 9", "  /c10  does 10", "  (9/12)"]
    assert completion_view(None, 5, 80) == []


class _Tui:
    """What a TreeSelector uses of the app: closing it, and the filter line."""

    def __init__(self) -> None:
        self.closed = 0
        self.screen = SimpleNamespace(selector_buffer=SimpleNamespace(text="x"))

    def close_selector(self) -> None:
        self.closed += 1


def test_the_tree_selector_turns_keys_into_view_changes_and_callbacks():
    tui, chosen, labelled = _Tui(), [], []
    sel = TreeSelector(tui, TreeView(branch_at_first_message(), "a2"), chosen.append, lambda e, cur: labelled.append((e, cur)))  # type: ignore[arg-type]
    text = "".join(t for _, t in sel.view(60, 40))
    assert text.startswith("Session tree\n") and "(4/8)" in text and "← active" in text
    sel.key("c-u")
    assert sel.tree.filter_mode == "user-only"
    assert sel.tree.selected == "u2"  # the nearest shown ancestor of a2
    sel.key("c-d")
    sel.key("up")
    sel.key("L")
    assert labelled == [("a1", None)] and tui.closed == 1
    sel.set_filter("b more")
    assert sel.filter == "b more" and sel.tree.selected == "u3"
    sel.key("escape")  # with a search: clears it through the filter line, stays open
    assert tui.screen.selector_buffer.text == "" and tui.closed == 1
    sel.key("enter")
    assert chosen == ["u3"]


_ids = st.sampled_from([f"e{i}" for i in range(12)])
_entry = st.builds(
    lambda eid, parent, kind, role, text, ts: (
        msg(eid, parent, role, text, ts) if kind == "message" else {"type": kind, "id": eid, "parentId": parent, "timestamp": ts, "label": text, "name": text}
    ),
    _ids,
    st.one_of(st.none(), _ids, st.text(max_size=3)),
    st.sampled_from(["message", "message", "label", "session_info", "branch_summary", "compaction", "custom_message", "weird"]),
    st.sampled_from(["user", "assistant", "toolResult", "bashExecution", "custom", "x"]),
    st.text(max_size=20),
    st.integers(0, 59),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_entry, max_size=14),
    st.one_of(st.none(), _ids),
    st.dictionaries(_ids, st.text(max_size=5), max_size=4),
    st.lists(st.sampled_from(["up", "down", "fold", "unfold", "filter", "search", "page"]), max_size=12),
    st.text(max_size=4),
)
def test_any_tree_even_with_cycles_duplicates_and_missing_parents_draws_every_reachable_entry_once(entries, leaf, labels, keys, query):
    view = TreeView(entries, leaf, labels)
    for k in keys:
        {
            "up": lambda: view.move(-1),
            "down": lambda: view.move(1),
            "fold": view.fold_or_up,
            "unfold": view.unfold_or_down,
            "filter": view.cycle_filter,
            "search": lambda: view.set_search(query),
            "page": lambda: view.page(1, 3),
        }[k]()
        shown = view.rows(1000)
        assert [r.entry_id for r in shown] == view.visible
        assert len(set(view.visible)) == len(view.visible)
        assert sum(r.selected for r in shown) == (1 if view.visible else 0)
        assert sum(r.active for r in shown) <= 1
        for row in shown:
            view.is_current(row.entry_id)


class _SettingsTui:
    def __init__(self, home) -> None:
        self.agent_dir, self.cwd = str(home), str(home)
        self.errors: list[str] = []

    def show_error(self, text: str) -> None:
        self.errors.append(text)


def _settings_commands(home):
    from pi_actors.cli.tui.settings_menu import SettingsCommands

    cmds = SettingsCommands()
    cmds.tui = _SettingsTui(home)  # type: ignore[assignment]
    return cmds


def test_a_setting_is_written_to_the_global_file_keeping_every_other_key(tmp_path):
    import json

    (tmp_path / "settings.json").write_text(json.dumps({"theme": "light", "branchSummary": {"reserveTokens": 9}}))
    cmds = _settings_commands(tmp_path)
    assert cmds.save_setting(("branchSummary", "skipPrompt"), True)
    assert cmds.save_setting(("treeFilterMode",), "all")
    assert json.loads((tmp_path / "settings.json").read_text()) == {
        "theme": "light",
        "branchSummary": {"reserveTokens": 9, "skipPrompt": True},
        "treeFilterMode": "all",
    }
    assert cmds.settings()["treeFilterMode"] == "all"
    assert cmds.save_setting(("treeFilterMode",), None)  # None removes the key
    assert "treeFilterMode" not in json.loads((tmp_path / "settings.json").read_text())


def test_a_settings_file_that_does_not_parse_is_never_overwritten(tmp_path):
    (tmp_path / "settings.json").write_text("{not json")
    cmds = _settings_commands(tmp_path)
    assert not cmds.save_setting(("treeFilterMode",), "all")
    assert (tmp_path / "settings.json").read_text() == "{not json"
    assert len(cmds.tui.errors) == 1 and "cannot be read" in cmds.tui.errors[0] and "left as it is" in cmds.tui.errors[0]
