"""TUI themes: ``--theme`` and ``/settings`` change the colours a person sees (the real CLI in tmux), theme
files in pi's format load with their ``vars``, and a bad theme is one clear line."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from pi_actors.cli.tui.themes import KEYS, ThemeError, available_themes, load_theme, prompt_toolkit_style

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def _footer_style(colored: str) -> str:
    """The SGR escapes right before the footer's model name."""
    line = next(ln for ln in colored.splitlines() if "(scripted) scripted-model" in ln)
    before = line[: line.index("(scripted) scripted-model")]
    return "".join(re.findall(r"\x1b\[[0-9;]*m", before)[-2:])


@needs_tmux
async def test_theme_light_changes_the_footer_colour_and_a_custom_theme_file_sets_its_own(scripted, env, pane):
    (env.home / "themes").mkdir()
    (env.home / "themes" / "loud.json").write_text(json.dumps({"name": "loud", "vars": {"r": 196}, "colors": {"dim": "r"}}))
    await pane.start("--theme", "light")
    light = _footer_style(await pane.screen(escapes=True))
    loud_pane = type(pane)(env)
    try:
        await loud_pane.start("--theme", "loud")
        loud = _footer_style(await loud_pane.screen(escapes=True))
    finally:
        await loud_pane.close()
    # The dark theme (default) draws the footer in the terminal's bright black (SGR 90).
    bright_black = re.compile(r"\x1b\[(?:[0-9;]*;)?90(?:;[0-9;]*)?m")
    assert not bright_black.search(light) and not bright_black.search(loud) and loud != light
    assert "196" in loud or "255;0;0" in loud
    # /settings switches the running TUI's theme at once and keeps it in settings.json.
    await pane.type("/settings")
    await pane.keys("Enter")
    await pane.wait_for("Settings", "Theme")
    await pane.type("theme")
    await pane.keys("Enter")
    await pane.wait_for("loud", "light  ✓")
    await pane.type("dark")
    await pane.keys("Enter")
    await pane.wait_for("Theme: dark")
    # (The footer is redrawn in the new colours; wait for the whole line, not a half-drawn screen.)
    await pane.wait_until(lambda s: "(scripted) scripted-model" in s and bool(bright_black.search(_footer_style(s))), escapes=True)
    assert json.loads((env.home / "settings.json").read_text())["theme"] == "dark"


async def test_an_unknown_theme_is_one_line_naming_the_available_ones(env):
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--theme", "nope")
    assert done.returncode == 1
    assert done.stderr.decode() == "Error: unknown theme 'nope' (available: dark, light)\n"


def test_builtin_themes_define_every_key_and_a_pi_theme_file_loads_with_its_vars(tmp_path):
    agent, work = tmp_path / "agent", tmp_path / "work"
    work.mkdir()
    assert set(available_themes(str(agent), str(work))) == {"dark", "light"}
    for name in ("dark", "light"):
        assert set(load_theme(name, agent_dir=str(agent), cwd=str(work)).colors) == set(KEYS)
    pi_theme = {
        "$schema": "https://example.invalid/theme-schema.json",
        "name": "mine",
        "vars": {"teal": "#0aa", "base": "teal"},
        "colors": {"accent": "base", "error": 160, "muted": "", "mdHeading": "#ffffff"},
        "export": {"pageBg": "#000000"},
    }
    (work / "mine.json").write_text(json.dumps(pi_theme))
    theme = load_theme("./mine.json", agent_dir=str(agent), cwd=str(work))
    assert theme.colors["accent"] == "#00aaaa" and theme.colors["error"] == "#d70000" and theme.colors["muted"] == ""
    assert theme.colors["border"] == load_theme("dark", agent_dir=str(agent), cwd=str(work)).colors["border"]
    assert prompt_toolkit_style(theme).style_rules  # usable by prompt_toolkit


@pytest.mark.parametrize(
    ("colors", "message"),
    [
        ({"accent": "chartreuse-ish"}, "colors.accent: 'chartreuse-ish' is not a colour"),
        ({"error": 300}, "colors.error: 300 is not an xterm-256 index (0-255)"),
        ({"dim": True}, "colors.dim: True is not a colour"),
    ],
)
def test_a_bad_colour_names_its_key(tmp_path, colors, message):
    (tmp_path / "bad.json").write_text(json.dumps({"colors": colors}))
    with pytest.raises(ThemeError, match=re.escape(message)):
        load_theme(str(tmp_path / "bad.json"), agent_dir=str(tmp_path), cwd=str(tmp_path))
