"""Ctrl+V in the real TUI (tmux) pastes an image from the clipboard: a fake ``xclip`` on PATH
(there is no clipboard here) hands out a PNG, the editor shows the ``@<file>`` marker, and the
scripted model receives the image with the prompt; an empty clipboard and a missing clipboard
tool are one status line each. The same session shows the terminal.* settings as the user
sees them: an image a tool returns is pi's ``[Image: ...]`` line in tmux (no image protocol),
and /settings has "Clear on shrink" (saved) but no "Show images" (as pi, where no image is
drawn). The clipboard reader's choices are checked in-process."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import stat

import pytest
from conftest import CLI
from PIL import Image

from pi_actors.cli.tui.clipboard import ClipboardUnavailable, read_clipboard_image, save_clipboard_image
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

_FAKE = """#!/bin/sh
# A stand-in for xclip / wl-paste: answers from files next to it.
here=$(dirname "$0")
case "$*" in
  *TARGETS*|*--list-types*) cat "$here/types" ;;
  *image/png*) [ -s "$here/clip.png" ] && grep -q image/png "$here/types" && cat "$here/clip.png" || exit 1 ;;
  *) exit 1 ;;
esac
"""


def _png(size=(4, 3), color="red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def _fake_tool(bin_dir, name: str, png: bytes, types: str = "TARGETS\nimage/png\ntext/plain\n") -> None:
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "clip.png").write_bytes(png)
    (bin_dir / "types").write_text(types)
    tool = bin_dir / name
    tool.write_text(_FAKE)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
async def test_ctrl_v_pastes_the_clipboard_image_and_tool_images_and_terminal_settings_show_as_pi(scripted, env, pane):
    doc = json.loads((env.home / "models.json").read_text())
    doc["providers"]["scripted"]["models"].append({"id": "scripted-vision", "input": ["text", "image"]})
    (env.home / "models.json").write_text(json.dumps(doc))
    bin_dir = env.home / "bin"
    _fake_tool(bin_dir, "xclip", _png())
    (env.work / "shot.png").write_bytes(_png((4, 3)))
    scripted.script += [Reply(text="A red rectangle."),
                        Reply(tool_calls=[ScriptToolCall(name="read", arguments={"path": "shot.png"})]),
                        Reply(text="Seen it.")]
    await pane.start_argv([CLI, "--model", "scripted/scripted-vision", "--no-session"],
                          env_prefix=f"WAYLAND_DISPLAY= XDG_SESSION_TYPE= PATH={bin_dir}:$PATH ",
                          ready="(scripted) scripted-vision")
    await pane.type("what is this?")
    await pane.keys("C-v")
    screen = await pane.wait_for("pi-clipboard-")
    marker = next(w for w in screen.split() if "pi-clipboard-" in w)
    assert marker.startswith("@") and marker.endswith(".png")
    await pane.keys("Enter")
    await pane.wait_for_answer("A red rectangle.")
    user = [m for m in scripted.requests[0]["body"]["messages"] if m["role"] == "user"][-1]["content"]
    assert user[0]["type"] == "text" and user[0]["text"].startswith("what is this? @") and "pi-clipboard-" in user[0]["text"]
    url = user[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as sent:
        assert sent.size == (4, 3) and sent.convert("RGB").getpixel((0, 0)) == (255, 0, 0)

    (bin_dir / "types").write_text("TARGETS\ntext/plain\n")  # the user copied text, not an image
    await pane.keys("C-v")
    await pane.wait_for("No image in the clipboard")
    (bin_dir / "xclip").unlink()  # no clipboard tool at all
    await pane.keys("C-v")
    screen = await pane.wait_for("no clipboard tool found")
    assert "Traceback" not in screen
    assert "Cannot paste an image: no clipboard tool found (install wl-clipboard for Wayland or xclip for X11)" in \
        " ".join(screen.split())

    # terminal.showImages: tmux draws no images, so a tool's image is pi's placeholder line
    await pane.type("look at shot.png")
    await pane.keys("Enter")
    screen = await pane.wait_for_answer("Seen it.")
    assert "[Image: [image/png] 4x3]" in screen
    # terminal.clearOnShrink in /settings (no "Show images" row here, as pi)
    await pane.type("/settings")
    await pane.keys("Enter")
    await pane.wait_for("Settings", "(11 items")
    await pane.type("clear on")
    await pane.wait_for("→ Clear on shrink", "(1 items")
    await pane.keys("Enter")
    await pane.wait_for("false  ✓")
    await pane.type("true")
    await pane.keys("Enter")
    await pane.wait_for("Clear on shrink: true")
    assert json.loads((env.home / "settings.json").read_text())["terminal"] == {"clearOnShrink": True}
    await pane.type("/hotkeys")  # a tall output, then the live area shrinks back: the TUI keeps working
    await pane.keys("Enter")
    await pane.wait_for("paste an image from the clipboard")


def test_wayland_prefers_wl_paste_and_x11_prefers_xclip(tmp_path) -> None:
    _fake_tool(tmp_path / "a", "wl-paste", _png(color="blue"), types="image/png\n")
    _fake_tool(tmp_path / "b", "xclip", _png(color="red"))
    path = os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b"), "/usr/bin", "/bin"])
    wayland = read_clipboard_image({"PATH": path, "WAYLAND_DISPLAY": "wayland-0"})
    x11 = read_clipboard_image({"PATH": path})
    assert wayland is not None and x11 is not None and wayland.mime_type == x11.mime_type == "image/png"
    with Image.open(io.BytesIO(wayland.data)) as a, Image.open(io.BytesIO(x11.data)) as b:
        assert a.convert("RGB").getpixel((0, 0)) == (0, 0, 255) and b.convert("RGB").getpixel((0, 0)) == (255, 0, 0)
    saved = save_clipboard_image(x11, str(tmp_path))
    assert os.path.basename(saved).startswith("pi-clipboard-") and saved.endswith(".png")
    with open(saved, "rb") as f:
        assert f.read() == x11.data


def test_without_a_clipboard_tool_the_reader_says_what_to_install(tmp_path) -> None:
    with pytest.raises(ClipboardUnavailable) as info:
        read_clipboard_image({"PATH": str(tmp_path)})
    assert "\n" not in str(info.value) and "xclip" in str(info.value)
    broken = tmp_path / "xclip"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    assert read_clipboard_image({"PATH": f"{tmp_path}{os.pathsep}/usr/bin:/bin"}) is None  # a failing tool: no image
