"""The TUI's colour themes: JSON files in pi's theme format, ``dark`` and ``light`` built in.

A theme file is ``{"name": ..., "vars": {...}, "colors": {...}}`` (pi's ``$schema`` and
``export`` keys are ignored). A colour is ``"#rrggbb"``, ``"#rgb"``, an xterm-256 index
(0-255), a prompt_toolkit ANSI name (``"ansicyan"``: follows the terminal's palette), ``""``
(the terminal's default) or the name of a ``vars`` entry. ``colors`` uses pi's keys where the
TUI has the same part (:data:`KEYS`); a key a theme leaves out keeps the ``dark`` value, so a
pi theme works unchanged and a small file can change a few colours.

Where themes are found, first wins on a name: ``<cwd>/.pi-actors/themes/*.json``,
``<agentDir>/themes/*.json``, ``~/.pi/agent/themes/*.json``, installed packages' theme
directories, then the built-in ones. Chosen by ``--theme NAME|PATH``, else settings.json's
``theme`` (pi's key), else ``dark``.

For other parts of the TUI (``/settings``): :func:`available_themes` lists the names and
:func:`set_theme` switches the running TUI's colours at once (it does not write settings).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KEYS",
    "Theme",
    "ThemeError",
    "available_themes",
    "load_theme",
    "parse_theme",
    "request_theme",
    "choose_theme",
    "current_theme",
    "set_theme",
    "prompt_toolkit_style",
    "rich_theme",
    "style",
]

#: The colour keys the TUI uses (pi's names; ``menu*`` are ours, for the completion menu).
KEYS = (
    "accent", "border", "borderAccent", "borderMuted", "success", "error", "warning", "muted", "dim", "text",
    "thinkingText", "selectedBg", "menuBg", "menuText", "menuSelectedText", "toolTitle", "toolOutput",
    "thinkingOff", "thinkingMinimal", "thinkingLow", "thinkingMedium", "thinkingHigh", "thinkingXhigh", "bashMode",
    "userMessageBg", "customMessageLabel",
)  # fmt: skip

_BUILTIN_DIR = os.path.dirname(os.path.abspath(__file__))


class ThemeError(Exception):
    """A theme that cannot be found or read (one line, naming it)."""


@dataclass(frozen=True)
class Theme:
    """A resolved theme: ``colors`` maps every key of :data:`KEYS` to a prompt_toolkit colour
    (``#rrggbb``, an ANSI name, or ``""`` for the terminal's default)."""

    name: str
    colors: dict[str, str]
    path: str = ""


def _ansi_names() -> frozenset[str]:
    from prompt_toolkit.styles.named_colors import NAMED_COLORS  # noqa: F401 - loads the table
    from prompt_toolkit.styles.style import ANSI_COLOR_NAMES

    return frozenset(ANSI_COLOR_NAMES)


def _xterm(index: int) -> str:
    """The ``#rrggbb`` of xterm-256 colour ``index``."""
    base16 = [
        "000000", "800000", "008000", "808000", "000080", "800080", "008080", "c0c0c0",
        "808080", "ff0000", "00ff00", "ffff00", "0000ff", "ff00ff", "00ffff", "ffffff",
    ]  # fmt: skip
    if index < 16:
        return "#" + base16[index]
    if index < 232:
        index -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return f"#{steps[index // 36]:02x}{steps[(index // 6) % 6]:02x}{steps[index % 6]:02x}"
    level = 8 + (index - 232) * 10
    return f"#{level:02x}{level:02x}{level:02x}"


def _colour(value: Any, variables: dict[str, Any], where: str, key: str, depth: int = 0) -> str:
    if isinstance(value, bool):
        raise ThemeError(f"{where}: colors.{key}: {value!r} is not a colour")
    if isinstance(value, int):
        if 0 <= value <= 255:
            return _xterm(value)
        raise ThemeError(f"{where}: colors.{key}: {value} is not an xterm-256 index (0-255)")
    if not isinstance(value, str):
        raise ThemeError(f"{where}: colors.{key}: {value!r} is not a colour")
    if value == "" or value in _ansi_names():
        return value
    if value.startswith("#") and len(value) in (4, 7) and all(c in "0123456789abcdefABCDEF" for c in value[1:]):
        return value.lower() if len(value) == 7 else "#" + "".join(c * 2 for c in value[1:]).lower()
    if value in variables and depth < 8:
        return _colour(variables[value], variables, where, key, depth + 1)
    raise ThemeError(f'{where}: colors.{key}: {value!r} is not a colour ("#rrggbb", 0-255, an ANSI name or a vars entry)')


def parse_theme(doc: Any, where: str, base: Theme | None = None) -> Theme:
    """The theme of the JSON document ``doc`` read from ``where``; keys it leaves out come
    from ``base`` (default: the built-in dark theme). Raises ThemeError (one line)."""
    if not isinstance(doc, dict):
        raise ThemeError(f"{where}: a theme is a JSON object")
    variables = doc.get("vars") or {}
    colors = doc.get("colors") or {}
    if not isinstance(variables, dict) or not isinstance(colors, dict):
        raise ThemeError(f"{where}: vars and colors must be objects")
    resolved = dict(base.colors) if base is not None else {}
    for key, value in colors.items():
        if key in KEYS:
            resolved[key] = _colour(value, variables, where, key)
    missing = [k for k in KEYS if k not in resolved]
    if missing:
        raise ThemeError(f"{where}: colors.{missing[0]} is missing")
    name = doc.get("name")
    return Theme(name=name if isinstance(name, str) and name else os.path.basename(where)[:-5], colors=resolved, path=where)


def _read(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise ThemeError(f"cannot read theme {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ThemeError(f"theme {path} is not valid JSON: {exc}") from None


def _dark() -> Theme:
    return parse_theme(_read(os.path.join(_BUILTIN_DIR, "dark.json")), os.path.join(_BUILTIN_DIR, "dark.json"))


def _theme_dirs(agent_dir: str, cwd: str) -> list[str]:
    dirs = [os.path.join(cwd, ".pi-actors", "themes"), os.path.join(agent_dir, "themes"), os.path.expanduser("~/.pi/agent/themes")]
    from ..._config import ConfigError
    from ...packages import installed_packages

    try:
        packages, _warnings = installed_packages(agent_dir, cwd)  # (its warnings were shown at start)
    except ConfigError:
        packages = []
    for pkg in packages:
        dirs += pkg.themes
    return dirs + [_BUILTIN_DIR]


def available_themes(agent_dir: str, cwd: str) -> dict[str, str]:
    """Theme name → file, for every theme found (module docstring), first found wins."""
    out: dict[str, str] = {}
    for directory in _theme_dirs(agent_dir, cwd):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if name.endswith(".json") and name[:-5] not in out:
                out[name[:-5]] = os.path.join(directory, name)
    return out


def load_theme(name_or_path: str, *, agent_dir: str, cwd: str) -> Theme:
    """The theme called ``name_or_path``, or in the JSON file it names. Raises ThemeError
    (one line, listing the available names for an unknown one)."""
    if name_or_path.endswith(".json") or os.sep in name_or_path:
        path = os.path.abspath(os.path.join(cwd, os.path.expanduser(name_or_path)))
        return parse_theme(_read(path), path, _dark())
    found = available_themes(agent_dir, cwd)
    if name_or_path not in found:
        raise ThemeError(f"unknown theme {name_or_path!r} (available: {', '.join(sorted(found))})")
    return parse_theme(_read(found[name_or_path]), found[name_or_path], _dark())


# -- the running TUI's theme -----------------------------------------------------------------------

_requested: str | None = None
_current: Theme | None = None


def request_theme(name_or_path: str | None) -> None:
    """Remember ``--theme`` for the TUI about to start (None: the settings decide)."""
    global _requested, _current
    _requested, _current = name_or_path, None


def choose_theme(flag: str | None, *, agent_dir: str, cwd: str, settings: dict[str, Any]) -> list[str]:
    """Load the TUI's theme before it starts: ``flag`` (``--theme``) must load (else
    ThemeError); a bad settings.json ``theme`` gives a warning (returned, for stderr) and
    the dark theme."""
    global _requested, _current
    _requested, _current = flag, None
    if flag:
        current_theme(agent_dir, cwd, settings)
        return []
    try:
        current_theme(agent_dir, cwd, settings)
    except ThemeError as exc:
        _requested = "dark"
        current_theme(agent_dir, cwd, settings)
        return [f"Warning (settings): theme: {exc}; using dark"]
    return []


def current_theme(agent_dir: str, cwd: str, settings: dict[str, Any] | None = None) -> Theme:
    """The theme in use: the one set last, else ``--theme``, else settings.json's ``theme``,
    else dark. Raises ThemeError for a named theme that cannot be loaded."""
    global _current
    if _current is None:
        if settings is None:
            from ..._settings import load_settings

            settings, _warnings = load_settings(agent_dir, cwd)
        chosen = _requested or settings.get("theme") or "dark"
        _current = load_theme(str(chosen), agent_dir=agent_dir, cwd=cwd)
    return _current


def set_theme(name_or_path: str, *, agent_dir: str, cwd: str, app: Any = None) -> Theme:
    """Switch to the theme ``name_or_path`` now: with ``app`` (the TUI's prompt_toolkit
    Application) its colours change at the next redraw, which is requested. Raises
    ThemeError and leaves the current theme as it was when the theme cannot be loaded."""
    global _current
    theme = load_theme(name_or_path, agent_dir=agent_dir, cwd=cwd)
    _current = theme
    if app is not None:
        app.style = prompt_toolkit_style(theme)
        app.invalidate()
    return theme


def style(key: str) -> str:
    """The prompt_toolkit style of fragments in colour ``key`` (a class name, lowercased as
    prompt_toolkit wants, so that a
    theme switch recolours what is already on the live screen)."""
    return f"class:theme.{key.lower()}"


def prompt_toolkit_style(theme: Theme) -> Any:
    """A prompt_toolkit ``Style`` with a class ``theme.<key, lowercased>`` per colour (background keys
    ``*Bg`` set the background) and the completion menu's colours."""
    from prompt_toolkit.styles import Style

    c = theme.colors
    rules = {}
    for key, colour in c.items():
        if colour:
            rules[f"theme.{key.lower()}"] = f"bg:{colour}" if key.endswith("Bg") else f"fg:{colour}"
    menu = " ".join(p for p in (f"bg:{c['menuBg']}" if c["menuBg"] else "", c["menuText"]) if p)
    current = " ".join(p for p in (f"bg:{c['selectedBg']}" if c["selectedBg"] else "", c["menuSelectedText"]) if p)
    rules["completion-menu"] = menu
    rules["completion-menu.completion.current"] = current
    return Style.from_dict(rules)


def _rich_colour(colour: str) -> str:
    """A theme colour (``#rrggbb`` or a prompt_toolkit ANSI name) as rich names it."""
    if not colour.startswith("ansi"):
        return colour
    name = colour[4:]
    if name == "gray":
        return "white"  # ANSI 7
    if name == "white":
        return "bright_white"  # ANSI 15
    return "bright_" + name[6:] if name.startswith("bright") else name


_rich_cache: dict[int, Any] = {}


def rich_theme(theme: Theme) -> Any:
    """A rich ``Theme`` for what is printed above the live area (the scrollback), so that it
    follows the theme as the live area does: a style ``theme.<key, lowercased>`` per colour
    (``*Bg`` keys as backgrounds), and ``theme.user`` (a user message: bold on
    ``userMessageBg``), ``theme.label`` (a custom message's label) and ``theme.thinking``."""
    cached = _rich_cache.get(id(theme))
    if cached is not None and cached[0] is theme:
        return cached[1]
    from rich.theme import Theme as RichTheme

    styles: dict[str, str] = {}
    for key, colour in theme.colors.items():
        value = _rich_colour(colour) if colour else ""
        styles[f"theme.{key.lower()}"] = (f"on {value}" if key.endswith("Bg") else value) if value else "none"
    bg = _rich_colour(theme.colors["userMessageBg"]) if theme.colors["userMessageBg"] else ""
    styles["theme.user"] = "bold" + (f" on {bg}" if bg else "")
    label = theme.colors["customMessageLabel"]
    styles["theme.label"] = "bold" + (f" {_rich_colour(label)}" if label else "")
    thinking = theme.colors["thinkingText"]
    styles["theme.thinking"] = "italic" + (f" {_rich_colour(thinking)}" if thinking else "")
    built = RichTheme(styles, inherit=True)
    _rich_cache[id(theme)] = (theme, built)
    return built
