"""The TUI's side of extensions, in process: key names, dialogs and their answers, status
lines, message renderers (host and TUI side) and the theme of the printed scrollback."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from pi_actors.cli.tui.extension_ui import BUILTIN_KEYS, ExtensionUi, key_sequence
from pi_actors.cli.tui.themes import parse_theme, rich_theme
from pi_actors.cli.tui.widgets import InputSelector
from pi_actors.extensions import ExtensionAPI, Extensions


class _Screen:
    def width(self) -> int:
        return 80


class _Tui:
    """The surface of TuiApp that ExtensionUi uses, recording what it was asked to do."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.printed: list[str] = []
        self.selector: Any = None
        self.expand_tools = False
        self.screen = _Screen()
        self.timers: list[tuple[float, Any]] = []
        self.answers: dict[str, Any] = {}
        self.posted: list[Any] = []

    def call(self, method: str, args: dict, then: Any = None, on_error: Any = None) -> None:
        self.calls.append((method, args))
        if then is not None and method in self.answers:
            then(self.answers[method])

    def print_text(self, *parts: Any) -> None:
        self.printed += [p.plain if isinstance(p, Text) else str(p) for p in parts]

    def print_item(self, parts: Any) -> None:
        self.print_text(*parts())

    def open_selector(self, selector: Any) -> None:
        self.selector = selector

    def close_selector(self) -> None:
        """As TuiApp's: the closed selector's ``on_close`` runs later (after the selection)."""
        closed, self.selector = self.selector, None
        if getattr(closed, "on_close", None) is not None:
            self.posted.append(closed.on_close)

    def drain(self) -> None:
        while self.posted:
            self.posted.pop(0)()

    def later(self, seconds: float, fn: Any) -> None:
        self.timers.append((seconds, fn))


def _responses(tui: _Tui) -> list[dict[str, Any]]:
    return [args for method, args in tui.calls if method == "extension_ui_response"]


def test_pi_key_names_become_terminal_keys_and_untellable_ones_are_refused_in_one_line():
    assert key_sequence("ctrl+x") == ("c-x",)
    assert key_sequence("Ctrl+X") == ("c-x",)
    assert key_sequence("alt+s") == ("escape", "s")
    assert key_sequence("shift+tab") == ("s-tab",)
    assert key_sequence("ctrl+up") == ("c-up",)
    assert key_sequence("f5") == ("f5",)
    assert key_sequence("alt+enter") == ("escape", "enter")
    for bad in ("x", "ctrl+shift+x", "hyper+x", "", "ctrl+", "shift+f5"):
        with pytest.raises(ValueError) as info:
            key_sequence(bad)
        assert "\n" not in str(info.value)
    # The TUI's own keys are recognised in pi's spelling.
    assert key_sequence("ctrl+t") in BUILTIN_KEYS and key_sequence("alt+up") in BUILTIN_KEYS


@given(st.text(max_size=30))
def test_any_key_name_is_a_sequence_or_a_one_line_error(name):
    try:
        seq = key_sequence(name)
    except ValueError as exc:
        assert "\n" not in str(exc)
    else:
        assert seq and all(isinstance(k, str) and k for k in seq)


def test_a_confirm_is_answered_by_the_choice_and_a_dismissed_one_is_cancelled_once():
    tui = _Tui()
    ui = ExtensionUi(tui)  # type: ignore[arg-type]
    ui.request({"type": "extension_ui_request", "id": "q1", "method": "confirm", "title": "Allow?", "message": "rm -rf x"})
    selector = tui.selector
    assert [label for label, _ in selector.items] == ["Yes", "No"] and "rm -rf x" in selector.title
    tui.close_selector()  # as Enter does: close, select, then on_close (no second answer)
    selector.on_select(selector.items[0][1])
    tui.drain()
    assert _responses(tui) == [{"id": "q1", "confirmed": True}]

    ui.request({"type": "extension_ui_request", "id": "q2", "method": "select", "title": "Pick", "options": ["a", "b"], "timeout": 500})
    assert tui.timers and tui.timers[0][0] == 0.5
    # Another dialog arriving dismisses the open one (cancelled), then opens.
    ui.request({"type": "extension_ui_request", "id": "q3", "method": "input", "title": "Name?", "placeholder": "a name"})
    tui.drain()
    assert _responses(tui)[1:] == [{"id": "q2", "cancelled": True}]
    assert isinstance(tui.selector, InputSelector) and "a name" in tui.selector.hint
    tui.selector.filter = "Ada"
    tui.selector.key("enter")
    tui.drain()
    assert _responses(tui)[2:] == [{"id": "q3", "value": "Ada"}]
    tui.timers[0][1]()  # q2's timeout, long closed: nothing happens
    assert len(_responses(tui)) == 3


def test_status_lines_follow_set_status_and_snapshots_and_notify_prints_a_line():
    tui = _Tui()
    ui = ExtensionUi(tui)  # type: ignore[arg-type]
    ui.set_status({"b": "second", "a": "first\nline"})
    assert ui.status_line() == "first line second"
    ui.request({"type": "extension_ui_request", "id": "1", "method": "setStatus", "statusKey": "b"})
    ui.request({"type": "extension_ui_request", "id": "2", "method": "setStatus", "statusKey": "c", "statusText": "third"})
    assert ui.status_line() == "first line third"
    ui.request({"type": "extension_ui_request", "id": "3", "method": "notify", "message": "saved", "notifyType": "warning"})
    ui.request({"type": "extension_ui_request", "id": "4", "method": "setWidget"})  # not shown, no answer
    assert tui.printed == ["saved"] and tui.calls == []


def test_extension_keys_are_bound_except_built_in_and_untellable_ones_and_run_in_the_host():
    tui = _Tui()
    ui = ExtensionUi(tui)  # type: ignore[arg-type]
    ui.registered({"shortcuts": [
        {"key": "ctrl+x", "extension": "/e/a.py", "description": "Greet"}, {"key": "ctrl+o", "extension": "/e/b.py"},
        {"key": "ctrl+shift+q", "extension": "/e/c.py"},
    ], "renderers": ["note"]})  # fmt: skip
    assert [b.keys for b in ui.key_bindings.bindings] == [("c-x",)]
    assert ui.hotkeys() == [("ctrl+x", "Greet")]
    assert tui.printed == [
        "Extension shortcut 'ctrl+o' from /e/b.py conflicts with built-in shortcut. Skipping.",
        "Extension shortcut from /e/c.py: the key 'ctrl+shift+q' cannot be bound in a terminal (use ctrl+<letter>, alt+<key> or a function key). Skipping.",
    ]
    tui.answers["extension_shortcut"] = {"error": "boom"}
    ui.press("ctrl+x")
    assert tui.calls[-1] == ("extension_shortcut", {"key": "ctrl+x"})
    assert tui.printed[-1] == "Extension error (shortcut ctrl+x): boom"
    assert ui.renderers == {"note"}


def test_a_custom_message_is_printed_through_its_renderer_else_as_pi_shows_it():
    tui = _Tui()
    ui = ExtensionUi(tui)  # type: ignore[arg-type]
    ui.registered({"renderers": ["note"]})
    tui.answers["extension_render"] = {"lines": ["\x1b[31mNOTE\x1b[0m hi", "second"]}
    ui.print_custom({"role": "custom", "customType": "note", "content": "hi", "display": True}, lambda: [Text("[note]")])
    assert tui.printed == ["NOTE hi\nsecond"]
    assert tui.calls[-1][1]["width"] == 80 and tui.calls[-1][1]["expanded"] is False
    tui.answers["extension_render"] = {"lines": None, "error": "bad renderer"}
    ui.print_custom({"role": "custom", "customType": "note", "content": "x", "display": True}, lambda: [Text("[note] default")])
    assert tui.printed[-2:] == ["Extension error (renderer note): bad renderer", "[note] default"]
    ui.print_custom({"role": "custom", "customType": "other", "content": "y", "display": True}, lambda: [Text("[other]")])
    ui.print_custom({"role": "custom", "customType": "note", "content": "z", "display": False}, lambda: [Text("hidden")])
    assert tui.printed[-1] == "[other]" and len([c for c in tui.calls if c[0] == "extension_render"]) == 2


async def test_the_host_runs_renderers_and_key_handlers_and_reports_their_failures_in_one_line(tmp_path):
    extensions = Extensions(str(tmp_path))
    api = ExtensionAPI("/e/x.py", extensions.registry)
    pressed: list[bool] = []

    async def on_key(ctx):
        pressed.append(ctx.has_ui)

    def broken(ctx):
        raise RuntimeError("no\nway")

    api.register_shortcut("ctrl+x", on_key)
    api.register_shortcut("alt+b", broken)
    api.register_message_renderer("note", lambda m, o: f"note: {m['content']} at {o['width']}\nmore")
    api.register_message_renderer("list", lambda m, o: ["a", "b"])
    api.register_message_renderer("none", lambda m, o: None)
    api.register_message_renderer("bad", lambda m, o: 42)
    api.register_message_renderer("raises", lambda m, o: 1 / 0)
    assert await extensions.run_shortcut("ctrl+x", has_ui=True) is None and pressed == [True]
    error = await extensions.run_shortcut("alt+b")
    assert error is not None and "no" in error and "\n" not in error
    options = {"expanded": False, "width": 72}
    assert await extensions.render_message({"customType": "note", "content": "hi"}, options) == (["note: hi at 72", "more"], None)
    assert await extensions.render_message({"customType": "list"}, options) == (["a", "b"], None)
    assert await extensions.render_message({"customType": "none"}, options) == (None, None)
    assert await extensions.render_message({"customType": "unknown"}, options) == (None, None)
    lines, error = await extensions.render_message({"customType": "bad"}, options)
    assert lines is None and error == "a message renderer must return a string, a list of strings or None, not int"
    lines, error = await extensions.render_message({"customType": "raises"}, options)
    assert lines is None and error and "division" in error


def test_the_printed_scrollback_takes_the_themes_colours():
    theme = parse_theme({"colors": {"error": "#ff0000", "userMessageBg": "#0000ff", "dim": "ansibrightblack"}}, "mine.json",
                        base=parse_theme(__import__("json").load(open(_dark_path())), "dark.json"))  # fmt: skip
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system="truecolor", width=40, theme=rich_theme(theme))
    console.print(Text("failed", style="theme.error"), Text("› hi", style="theme.user"), Text("quiet", style="theme.dim"))
    printed = out.getvalue()
    assert "\x1b[38;2;255;0;0mfailed" in printed
    assert "\x1b[1;48;2;0;0;255m› hi" in printed
    assert "\x1b[90mquiet" in printed


def _dark_path() -> str:
    import os

    import pi_actors.cli.tui.themes as themes

    return os.path.join(os.path.dirname(themes.__file__), "dark.json")
