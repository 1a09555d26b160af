"""settings ``terminal.showImages`` and ``terminal.clearOnShrink`` (pi's): an image a tool
returns is drawn inline where the terminal has an image protocol and is pi's ``[Image: ...]``
line otherwise (tmux, or showImages false); clearOnShrink erases the live area when it
shrinks. What the user sees in the real TUI (the placeholder under a ``read`` of an image in
tmux, /settings' "Clear on shrink" row, no "Show images" row where no image is drawn) is
checked in ``test_tui_paste_image.py``'s tmux session, which already runs that TUI."""

from __future__ import annotations

import base64
import io
from types import SimpleNamespace

import pytest
from PIL import Image
from rich.console import Console
from rich.text import Text

from pi_actors.cli.tui.screen import ScreenLayout
from pi_actors.cli.tui.terminal_images import InlineImage, image_protocol, image_renderables, image_size


def _png(size=(4, 3), color="red", kind="PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, kind)
    return out.getvalue()


def _block(data: bytes, mime: str = "image/png") -> dict:
    return {"type": "image", "data": base64.b64encode(data).decode(), "mimeType": mime}


@pytest.mark.parametrize(("env", "protocol"), [
    ({"TERM_PROGRAM": "kitty"}, "kitty"), ({"KITTY_WINDOW_ID": "1"}, "kitty"), ({"TERM_PROGRAM": "ghostty"}, "kitty"),
    ({"WEZTERM_PANE": "3"}, "kitty"), ({"ITERM_SESSION_ID": "x"}, "iterm2"), ({"TERM_PROGRAM": "iTerm.app"}, "iterm2"),
    ({"TERM_PROGRAM": "kitty", "TMUX": "/tmp/tmux-0/default,1,0"}, None), ({"TERM": "screen-256color"}, None),
    ({"TERM": "xterm-256color"}, None), ({"TERM_PROGRAM": "vscode"}, None),
])
def test_the_image_protocol_is_pi_s_detection(env, protocol):
    assert image_protocol(env) == protocol


def test_images_are_inline_where_the_terminal_draws_them_and_pi_s_placeholder_otherwise():
    png, jpeg = _block(_png()), _block(_png(kind="JPEG"), "image/jpeg")
    kitty = image_renderables([png], True, "kitty")
    assert isinstance(kitty[0], InlineImage) and kitty[0].sequence.startswith("\x1b_Ga=T,f=100")
    iterm = image_renderables([jpeg], True, "iterm2")
    assert isinstance(iterm[0], InlineImage) and iterm[0].sequence.startswith("\x1b]1337;File=inline=1")
    # kitty is given PNG only; showImages false, or no protocol: the placeholder line
    for shown in (image_renderables([jpeg], True, "kitty"), image_renderables([png], False, "kitty"),
                  image_renderables([png], True, None)):
        assert isinstance(shown[0], Text) and shown[0].plain.strip().startswith("[Image: [image/")
    assert image_renderables([png], False, None)[0].plain == "  [Image: [image/png] 4x3]"
    assert image_renderables([{"type": "image", "data": "%%%", "mimeType": "image/png"}], True, "kitty")[0].plain == \
        "  [Image: [image/png]]"
    big = _block(_png((300, 200)))  # more than one kitty chunk of base64
    sequence = image_renderables([big], True, "kitty")[0].sequence
    assert image_size(big["data"]) == (300, 200) and sequence.count("\x1b_G") >= 1 and sequence.endswith("\x1b\\")
    # the escape reaches the terminal unchanged through rich
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=80).print(kitty[0])
    assert kitty[0].sequence in out.getvalue()


class _Renderer:
    def __init__(self, height: int) -> None:
        self._last_screen = SimpleNamespace(height=height)
        self.erased = 0

    def erase(self, leave_alternate_screen: bool = True) -> None:
        self.erased += 1


def _app(last: int, wanted: int) -> SimpleNamespace:
    return SimpleNamespace(renderer=_Renderer(last),
                           output=SimpleNamespace(get_size=lambda: SimpleNamespace(columns=80, rows=40)),
                           layout=SimpleNamespace(container=SimpleNamespace(
                               preferred_height=lambda w, h: SimpleNamespace(preferred=wanted))))


@pytest.mark.parametrize(("setting", "last", "wanted", "erased"), [
    (True, 12, 5, 1), (True, 5, 5, 0), (True, 5, 9, 0), (False, 12, 5, 0)])
def test_clear_on_shrink_erases_the_live_area_only_when_set_and_it_shrinks(setting, last, wanted, erased):
    layout = ScreenLayout.__new__(ScreenLayout)
    layout.tui = SimpleNamespace(terminal_setting=lambda name: setting if name == "clearOnShrink" else True)
    app = _app(last, wanted)
    layout.clear_on_shrink(app)
    assert app.renderer.erased == erased
