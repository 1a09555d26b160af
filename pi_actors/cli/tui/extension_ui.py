"""What the TUI does for extensions: their ``ctx.ui`` requests, key bindings, status lines
and message renderers (docs/extensions.md).

:class:`ExtensionUi` is a part that :class:`~.app.TuiApp` holds (``tui.extensions``); it runs
on the UI loop only. The same code serves the local TUI and ``pi-actors attach``: requests
arrive as pi's ``extension_ui_request`` events (protocol/extension_host.py ``UiArgs`` field
names) and are answered with the coordinator's ``extension_ui_response``, whichever link the
TUI's calls go over.

* ``notify``: one line above the live area (error red, warning yellow, else the accent);
* ``setStatus``: a line under the footer (every key's text, sorted by key, as pi's footer);
* ``confirm`` (Yes / No), ``select`` (the options), ``input`` (one line): a dialog in the
  live area; Enter answers, Esc answers ``cancelled`` (pi's answer for a dismissed dialog);
  a request's ``timeout`` (ms) closes it unanswered — the coordinator answered it already;
* key bindings (``pi.register_shortcut``): :func:`key_sequence` turns pi's key names into
  prompt_toolkit's; a key the TUI itself binds stays built-in (one line, pi's warning);
  pressing a bound key runs its handler in the extension host (``extension_shortcut``);
* renderers (``pi.register_message_renderer``): a custom message of a rendered type is
  printed as the lines its renderer returns (``extension_render``), else as pi's default.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prompt_toolkit.key_binding import KeyBindings
from rich.text import Text

from .widgets import InputSelector, Selector

if TYPE_CHECKING:
    from .app import TuiApp

__all__ = ["ExtensionUi", "key_sequence", "BUILTIN_KEYS"]

#: The key sequences the TUI binds itself (screen.py), as prompt_toolkit names them, and the
#: editor keys pi reserves: an extension's binding of one of them is skipped.
BUILTIN_KEYS: frozenset[tuple[str, ...]] = frozenset(
    {
        ("enter",), ("escape",), ("tab",), ("s-tab",), ("up",), ("down",), ("c-c",), ("c-d",), ("c-t",), ("c-o",),
        ("c-l",), ("c-g",), ("c-j",), ("c-k",), ("c-v",), ("c-z",), ("escape", "enter"), ("escape", "up"),
    }
)  # fmt: skip

_NAMED = {
    "enter": "enter", "return": "enter", "escape": "escape", "esc": "escape", "tab": "tab", "space": " ",
    "up": "up", "down": "down", "left": "left", "right": "right", "home": "home", "end": "end",
    "pageup": "pageup", "pagedown": "pagedown", "delete": "delete", "backspace": "c-h", "insert": "insert",
}  # fmt: skip


def key_sequence(key: str) -> tuple[str, ...]:
    """pi's key name (``ctrl+x``, ``alt+s``, ``shift+tab``, ``ctrl+up``, ``f5``; case does
    not matter) as prompt_toolkit's key sequence. Raises ValueError (one line) for a key a
    terminal cannot tell apart (``ctrl+shift+x``, a bare letter) or an unknown name."""
    parts = [p.strip() for p in str(key).lower().split("+")]
    name, mods = parts[-1], frozenset(parts[:-1])
    if not name:
        raise ValueError(f"cannot read the key {key!r}")
    unknown = mods - {"ctrl", "alt", "shift"}
    if unknown:
        raise ValueError(f"unknown modifier {sorted(unknown)[0]!r} in the key {key!r}")
    seq = _char_key(name, mods) if len(name) == 1 else _named_key(name, mods)
    if seq is None:
        raise ValueError(f"the key {key!r} cannot be bound in a terminal (use ctrl+<letter>, alt+<key> or a function key)")
    return seq


def _char_key(name: str, mods: frozenset[str]) -> tuple[str, ...] | None:
    if mods == {"ctrl"} and (name.isalpha() or name in "@\\]^_"):
        return (f"c-{name}",)
    if mods == {"alt"} and name.isprintable():
        return ("escape", name)
    return None  # a bare character is typing; ctrl+shift+x is ctrl+x to a terminal


def _named_key(name: str, mods: frozenset[str]) -> tuple[str, ...] | None:
    if name.startswith("f") and name[1:].isdigit() and 1 <= int(name[1:]) <= 24:
        prefix = {frozenset(): "", frozenset({"ctrl"}): "c-"}.get(mods)
        return (prefix + name,) if prefix is not None else None
    base = _NAMED.get(name)
    if base is None:
        return None
    if not mods:
        return (base,)
    if mods == {"alt"}:
        return ("escape", base)
    movement = base in ("up", "down", "left", "right", "home", "end")
    if mods == {"ctrl"} and (movement or base == "delete"):
        return (f"c-{base}",)
    if mods == {"shift"} and (movement or base in ("delete", "tab")):
        return (f"s-{base}",)
    if mods == {"ctrl", "shift"} and movement:
        return (f"c-s-{base}",)
    return None


class ExtensionUi:
    """See the module docstring. ``key_bindings`` is merged into the application's (after
    its own): extension keys are added to it once the registry is known."""

    def __init__(self, tui: TuiApp) -> None:
        self.tui = tui
        #: ``ctx.ui.set_status`` lines by key.
        self.status: dict[str, str] = {}
        #: Custom message types an extension renders.
        self.renderers: set[str] = set()
        self.key_bindings = KeyBindings()
        self.shortcuts: dict[tuple[str, ...], str] = {}
        self._descriptions: dict[str, str] = {}
        self._known = False

    # -- start-up: what the extensions registered ---------------------------------------------

    def load_registry(self) -> None:
        """Ask the session what its extensions registered (keys, renderers), once."""
        if self._known:
            return
        self._known = True
        self.tui.call("extension_commands", {}, then=self.registered, on_error=lambda _exc: None)

    def registered(self, registry: Any) -> None:
        """Bind the extensions' keys and note their renderers (``extension_commands``'s answer)."""
        self._known = True
        registry = registry or {}
        self.renderers = {str(t) for t in registry.get("renderers") or []}
        for spec in registry.get("shortcuts") or []:
            key, path = str(spec.get("key")), str(spec.get("extension") or "")
            try:
                seq = key_sequence(key)
            except ValueError as exc:
                self.tui.print_text(Text(f"Extension shortcut from {path}: {exc}. Skipping.", style="theme.warning"))
                continue
            if seq in BUILTIN_KEYS:
                self.tui.print_text(Text(f"Extension shortcut '{key}' from {path} conflicts with built-in shortcut. Skipping.", style="theme.warning"))
                continue
            if seq not in self.shortcuts:
                try:
                    self.key_bindings.add(*seq)(lambda _event, k=key: self.press(k))
                except ValueError:  # a name prompt_toolkit does not know (e.g. shift+f5)
                    self.tui.print_text(Text(f"Extension shortcut from {path}: the key {key!r} cannot be bound in a terminal. Skipping.", style="theme.warning"))
                    continue
            self.shortcuts[seq] = key
            self._descriptions[key] = str(spec.get("description") or "") or f"(extension {os.path.basename(path)})"

    def hotkeys(self) -> list[tuple[str, str]]:
        """The extensions' bound keys and what they do, for ``/hotkeys``."""
        return [(key, self._descriptions.get(key, "")) for key in dict.fromkeys(self.shortcuts.values())]

    def press(self, key: str) -> None:
        """A bound key: its handler runs in the extension host; an error is one red line."""

        def done(result: Any) -> None:
            error = (result or {}).get("error")
            if error:
                self.tui.print_text(Text(f"Extension error (shortcut {key}): {error}", style="theme.error"))

        self.tui.call("extension_shortcut", {"key": key}, then=done)

    # -- status lines -------------------------------------------------------------------------

    def set_status(self, status: dict[str, str]) -> None:
        """All status lines at once (a subscription's snapshot)."""
        self.status = {str(k): str(v) for k, v in (status or {}).items()}

    def status_line(self) -> str:
        """The status texts, sorted by key, each on one line with spaces collapsed, joined by
        a space (pi's footer; empty: none)."""
        return " ".join(" ".join(self.status[k].split()) for k in sorted(self.status) if self.status[k])

    # -- ctx.ui requests ---------------------------------------------------------------------

    def request(self, event: dict[str, Any]) -> None:
        """One ``extension_ui_request`` (module docstring). Methods the TUI does not show
        (``setWidget``, ``setTitle``, ...) are ignored, as fire-and-forget requests."""
        method, request_id = event.get("method"), event.get("id")
        if method == "notify":
            style = {"error": "theme.error", "warning": "theme.warning"}.get(str(event.get("notifyType")), "theme.accent")
            self.tui.print_text(Text(str(event.get("message", "")), style=style))
            return
        if method == "setStatus":
            key = str(event.get("statusKey") or "")
            if event.get("statusText") is None:
                self.status.pop(key, None)
            else:
                self.status[key] = str(event["statusText"])
            return
        if method not in ("confirm", "select", "input"):
            return
        answered = False

        def answer(reply: dict[str, Any]) -> None:
            nonlocal answered
            if not answered:
                answered = True
                self.tui.call("extension_ui_response", {"id": request_id, **reply}, on_error=lambda _exc: None)

        title = str(event.get("title") or "")
        selector: Selector
        if method == "input":
            placeholder = event.get("placeholder")
            hint = f"{placeholder} · enter submit, esc cancel" if placeholder else "enter submit, esc cancel"
            selector = InputSelector(self.tui, title, lambda text: answer({"value": text}), lambda: answer({"cancelled": True}), hint=hint)
        else:
            if method == "confirm":
                items: list[tuple[str, Any]] = [("Yes", {"confirmed": True}), ("No", {"confirmed": False})]
                message = str(event.get("message") or "")
                title = f"{title}\n{message}" if message else title
            else:
                items = [(str(option), {"value": str(option)}) for option in event.get("options") or []]
            selector = Selector(title, items, answer)
        # Whatever closes the dialog without an answer (Esc, Ctrl+C, another dialog) cancels.
        selector.on_close = lambda: answer({"cancelled": True})  # type: ignore[attr-defined]
        if self.tui.selector is not None:
            self.tui.close_selector()  # a dialog open before is dismissed (its on_close runs)
        self.tui.open_selector(selector)
        timeout = event.get("timeout")
        if isinstance(timeout, (int, float)) and timeout > 0:
            self.tui.later(timeout / 1000, lambda: self._expire(selector))

    def _expire(self, selector: Selector) -> None:
        """The request's timeout passed (the coordinator gave it its default answer)."""
        if self.tui.selector is selector:
            self.tui.close_selector()

    # -- custom messages ---------------------------------------------------------------------

    def print_custom(self, message: dict[str, Any], default: Callable[[], list[Any]]) -> None:
        """Print a custom message: through its type's renderer when an extension registered
        one (the lines it returns; ``default()`` when it returns None or fails, the failure
        in one red line), else ``default()``."""
        if not message.get("display"):
            return
        if str(message.get("customType")) not in self.renderers:
            self.tui.print_item(default)
            return
        if isinstance(message.get("renderedLines"), list):  # rendered before the TUI opened
            text = Text.from_ansi("\n".join(str(line) for line in message["renderedLines"]))
            self.tui.print_item(lambda: [text])
            return
        args = {"message": message, "expanded": self.tui.expand_tools, "width": self.tui.screen.width()}

        def rendered(result: Any) -> None:
            result = result or {}
            if result.get("error"):
                self.tui.print_text(Text(f"Extension error (renderer {message.get('customType')}): {result['error']}", style="theme.error"))
            lines = result.get("lines")
            if lines is None:
                self.tui.print_item(default)
            else:
                text = Text.from_ansi("\n".join(str(line) for line in lines))
                self.tui.print_item(lambda: [text])

        self.tui.call("extension_render", args, then=rendered, on_error=lambda _exc: self.tui.print_item(default))
