"""The TUI's settings commands: ``/settings`` (pi's settings menu, for the keys that apply
here) and ``/scoped-models`` (the models ``/model`` offers, settings ``enabledModels``), and
the settings file they read and write.

:class:`SettingsCommands` is a base of :class:`~.commands.SlashCommands` (it needs its
``tui`` and ``cmd_thinking``). Settings are read when they are used (global
``<agentDir>/settings.json``, then the project's; see ``cli._settings``); a change is written
to the global file only, keeping every other key, and never over a file that does not parse.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...choices import THINKING_LEVELS
from .tree import FILTER_MODES
from .widgets import ChoiceSelector, Selector

if TYPE_CHECKING:
    from .app import TuiApp

__all__ = ["SettingsCommands", "SETTINGS_MENU"]


def _get_path(doc: dict[str, Any], key: tuple[str, ...]) -> Any:
    for part in key:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)  # type: ignore[assignment]
    return doc


def _set_path(doc: dict[str, Any], key: tuple[str, ...], value: Any) -> None:
    for part in key[:-1]:
        inner = doc.get(part)
        if not isinstance(inner, dict):
            inner = doc[part] = {}
        doc = inner
    if value is None:
        doc.pop(key[-1], None)
    else:
        doc[key[-1]] = value


def _apply_queue(queue: str) -> Callable[[SettingsCommands, Any], None]:
    return lambda cmds, mode: cmds.tui.call("set_queue_mode", {"queue": queue, "mode": mode})


def _apply_thinking(cmds: SettingsCommands, level: Any) -> None:
    cmds.cmd_thinking(level)


def _apply_hide_thinking(cmds: SettingsCommands, hide: Any) -> None:
    cmds.tui.show_thinking = not hide


def _apply_auto_compact(cmds: SettingsCommands, enabled: Any) -> None:
    cmds.tui.auto_compaction = bool(enabled)
    cmds.tui.call("set_auto", {"what": "compaction", "enabled": bool(enabled)})


def _apply_terminal(name: str) -> Callable[[SettingsCommands, Any], None]:
    """terminal.showImages / clearOnShrink for the running TUI: images reprint at once (what is
    on screen is drawn again, as Ctrl+O does); the live area follows clearOnShrink from its
    next redraw."""

    def apply(cmds: SettingsCommands, value: Any) -> None:
        cmds.tui._terminal[name] = bool(value)
        if name == "showImages":
            cmds.tui.reprint()

    return apply


def _terminal_draws_images() -> bool:
    from .terminal_images import image_protocol

    return image_protocol() is not None


def _apply_autocomplete(cmds: SettingsCommands, rows: Any) -> None:
    cmds._autocomplete_rows = None


def _theme_names(cmds: SettingsCommands) -> list[Any]:
    from .themes import available_themes

    return sorted(available_themes(cmds.tui.agent_dir, cmds.tui.cwd))


def _apply_theme(cmds: SettingsCommands, name: Any) -> None:
    """Switch the running TUI's colours now (the live area at once, what is printed next too)."""
    from .themes import ThemeError, set_theme

    try:
        set_theme(str(name), agent_dir=cmds.tui.agent_dir, cwd=cmds.tui.cwd, app=cmds.tui.app)
    except ThemeError as exc:
        cmds.tui.show_error(str(exc))


_Values = list[Any] | Callable[["SettingsCommands"], list[Any]]

#: /settings: (key path, title, values (or how to find them), how it applies to the running
#: session or None).
SETTINGS_MENU: list[tuple[tuple[str, ...], str, _Values, Callable[[SettingsCommands, Any], None] | None]] = [
    (("theme",), "Theme", _theme_names, _apply_theme),
    (("compaction", "enabled"), "Auto-compact", [True, False], _apply_auto_compact),
    (("steeringMode",), "Steering mode", ["one-at-a-time", "all"], _apply_queue("steering")),
    (("followUpMode",), "Follow-up mode", ["one-at-a-time", "all"], _apply_queue("followUp")),
    (("hideThinkingBlock",), "Hide thinking", [False, True], _apply_hide_thinking),
    (("defaultThinkingLevel",), "Thinking level", list(THINKING_LEVELS), _apply_thinking),
    (("doubleEscapeAction",), "Double-escape action", ["tree", "fork", "none"], None),
    (("treeFilterMode",), "Tree filter mode", list(FILTER_MODES), None),
    (("branchSummary", "skipPrompt"), "Skip branch summary prompt", [False, True], None),
    (("autocompleteMaxVisible",), "Autocomplete max visible", [3, 5, 7, 10, 15, 20], _apply_autocomplete),
    (("terminal", "clearOnShrink"), "Clear on shrink", [False, True], _apply_terminal("clearOnShrink")),
    # pi offers "Show images" only in a terminal that draws them (``_rows`` drops it elsewhere).
    (("terminal", "showImages"), "Show images", [True, False], _apply_terminal("showImages")),
]
_DEFAULTS: dict[tuple[str, ...], Any] = {
    ("theme",): "dark",
    ("compaction", "enabled"): True,
    ("steeringMode",): "one-at-a-time",
    ("followUpMode",): "one-at-a-time",
    ("hideThinkingBlock",): False,
    ("defaultThinkingLevel",): "off",
    ("doubleEscapeAction",): "tree",
    ("treeFilterMode",): "default",
    ("branchSummary", "skipPrompt"): False,
    ("autocompleteMaxVisible",): 5,
    ("terminal", "clearOnShrink"): False,
    ("terminal", "showImages"): True,
}


def _rows() -> list[tuple[tuple[str, ...], str, Any, Any]]:
    """The /settings rows for this terminal."""
    draws = _terminal_draws_images()
    return [row for row in SETTINGS_MENU if row[0] != ("terminal", "showImages") or draws]



class SettingsCommands:
    """``/settings``, ``/scoped-models`` and the settings they use (see the module docstring)."""

    tui: TuiApp
    _autocomplete_rows: int | None = None

    def cmd_thinking(self, rest: str) -> None:
        raise NotImplementedError

    def cmd_scoped_models(self, rest: str, index: int = 0) -> None:
        """The models ``/model`` offers and Ctrl+P cycles among (settings ``enabledModels``,
        as pi's scoped models): Enter turns the chosen one on or off, saves, and makes the
        checked ones this session's scope; none on means all. The checked ones are the
        session's scope as it is (``--models`` or ``enabledModels``, patterns resolved)."""
        models = [f"{m.provider}/{m.id}" for m in self.tui.models()]
        scope = {f"{s.provider}/{s.model_id}": s for s in self.tui.scoped_models}
        enabled = list(scope)

        def toggle(name: str) -> None:
            from ...protocol.config import ScopedModel

            now = [e for e in enabled if e != name] if name in enabled else [*enabled, name]
            # Ctrl+P cycles among them from now on (pi's scoped models), saved or not; a
            # model kept keeps its :level.
            self.tui.scoped_models = [
                scope.get(n) or ScopedModel(provider=n.split("/", 1)[0], model_id=n.split("/", 1)[1]) for n in now
            ]
            if self.save_setting(("enabledModels",), now or None):
                self.tui.show_status(f"{name} {'enabled' if name in now else 'disabled'}" + ("" if now else " (no model chosen: all are offered)"))
            self.cmd_scoped_models("", models.index(name))

        items = [(("[x] " if name in enabled else "[ ] ") + name, name) for name in models]
        self.tui.open_selector(Selector("Scoped models (enter toggles; none checked = all)", items, toggle, index=index))

    def cmd_settings(self, rest: str) -> None:
        """pi's /settings for the keys that apply here: pick one, then its value; the value is
        written to the global settings.json and applied to this session where it can be."""
        doc = self.settings()
        items = []
        for key, title, _values, _ in _rows():
            shown = self._shown(doc, key)
            items.append((f"{title:<28} {json.dumps(shown) if isinstance(shown, bool) else shown}", key))

        def pick(key: tuple[str, ...]) -> None:
            _, title, values, apply = next(row for row in SETTINGS_MENU if row[0] == key)

            def set_value(value: Any) -> None:
                if self.save_setting(key, value):
                    if apply is not None:
                        apply(self, value)
                    self.tui.show_status(f"{title}: {json.dumps(value) if isinstance(value, bool) else value}")

            shown = self._shown(self.settings(), key)
            options = values(self) if callable(values) else values
            choices = [((json.dumps(v) if isinstance(v, bool) else str(v)) + ("  ✓" if v == shown else ""), v) for v in options]
            self.tui.open_selector(ChoiceSelector(self.tui, title, choices, set_value, lambda: self.cmd_settings("")))

        self.tui.open_selector(Selector("Settings", items, pick))

    def _shown(self, doc: dict[str, Any], key: tuple[str, ...]) -> Any:
        """The value /settings shows as current: the theme in use (``--theme`` may differ from
        the file), else the file's value, else the default."""
        if key == ("theme",):
            from .themes import current_theme

            return current_theme(self.tui.agent_dir, self.tui.cwd).name
        current = _get_path(doc, key)
        return _DEFAULTS.get(key) if current is None else current

    def settings(self, report: bool = False) -> dict[str, Any]:
        """The effective settings.json (global, then project), read now; {} when unreadable
        (with ``report``: its warnings and errors are shown)."""
        from .._settings import load_settings

        try:
            doc, warnings = load_settings(self.tui.agent_dir, self.tui.cwd)
        except Exception as exc:  # noqa: BLE001 - a bad file is reported by whoever needs it
            if report:
                self.tui.show_error(str(exc))
            return {}
        if report:
            for warning in warnings:
                self.tui.show_error(warning)
        return doc

    def save_setting(self, key: tuple[str, ...], value: Any) -> bool:
        """Write ``key`` (a path into nested objects) = ``value`` (None removes it) into the
        global settings.json, keeping every other key; False (and the error shown) when the
        file cannot be read as JSON or written."""
        path = os.path.join(self.tui.agent_dir, "settings.json")
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            doc = {}
        except (OSError, ValueError) as exc:
            self.tui.show_error(f"Cannot save settings: {path} cannot be read ({exc}); it was left as it is")
            return False
        if not isinstance(doc, dict):
            self.tui.show_error(f"Cannot save settings: {path} does not hold a JSON object; it was left as it is")
            return False
        _set_path(doc, key, value)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(self.tui.agent_dir, exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
            os.replace(tmp, path)
        except OSError as exc:
            self.tui.show_error(f"Cannot save settings to {path}: {exc.strerror or exc}")
            return False
        return True

    def autocomplete_rows(self) -> int:
        """How many completions show at once: settings ``autocompleteMaxVisible`` (pi: 5,
        from 3 to 20)."""
        value = self._autocomplete_rows
        if value is None:
            raw = self.settings().get("autocompleteMaxVisible")
            value = max(3, min(20, raw)) if isinstance(raw, int) and not isinstance(raw, bool) else 5
            self._autocomplete_rows = value
        return value
