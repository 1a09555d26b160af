"""Images in the TUI's output (settings ``terminal.showImages``, as pi): shown inline where the
terminal has an image protocol, else as pi's one-line text placeholder.

Contract:
- ``image_protocol(env)``: ``"kitty"`` (kitty, Ghostty, WezTerm), ``"iterm2"`` (iTerm2) or None
  — pi's detection, None inside tmux or screen (they do not pass the escapes through) and for
  any terminal not known to draw images;
- ``image_size(data_b64)``: ``(width, height)`` in pixels from the image's header (PNG, GIF,
  JPEG, WebP through Pillow when the header is not PNG/GIF), or None;
- ``placeholder(mime, size)``: ``[Image: [image/png] 4x3]`` (pi's ``imageFallback``);
- ``image_renderables(blocks, show, protocol)``: what a tool result's image blocks print as:
  an ``InlineImage`` (the escape sequence, written as it is) when ``show`` and ``protocol``,
  else placeholder lines. Kitty's protocol is given PNG only (as pi); other types fall back.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import os
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from rich.control import ControlType
from rich.segment import Segment
from rich.text import Text

__all__ = ["image_protocol", "image_size", "placeholder", "image_renderables", "InlineImage"]

_KITTY_CHUNK = 4096
_WIDTH_CELLS = 60
_CELL = (9, 18)  # pixels per cell, pi's default guess


def image_protocol(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    program = (env.get("TERM_PROGRAM") or "").lower()
    term = (env.get("TERM") or "").lower()
    if env.get("TMUX") or term.startswith(("tmux", "screen")):
        return None
    if env.get("KITTY_WINDOW_ID") or program == "kitty":
        return "kitty"
    if program == "ghostty" or "ghostty" in term or env.get("GHOSTTY_RESOURCES_DIR"):
        return "kitty"
    if env.get("WEZTERM_PANE") or program == "wezterm":
        return "kitty"
    if env.get("ITERM_SESSION_ID") or program == "iterm.app":
        return "iterm2"
    return None


def image_size(data_b64: str) -> tuple[int, int] | None:
    try:
        raw = base64.b64decode(data_b64[:4096] if len(data_b64) > 4096 else data_b64, validate=False)
    except (binascii.Error, ValueError):
        return None
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return width, height
    if raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        width, height = struct.unpack("<HH", raw[6:10])
        return width, height
    try:
        from PIL import Image

        with Image.open(io.BytesIO(base64.b64decode(data_b64))) as img:
            return img.size
    except Exception:  # noqa: BLE001 - any undecodable image has no known size
        return None


def placeholder(mime: str | None, size: tuple[int, int] | None) -> str:
    parts = [f"[{mime or 'image/unknown'}]"]
    if size:
        parts.append(f"{size[0]}x{size[1]}")
    return f"[Image: {' '.join(parts)}]"


class InlineImage:
    """A rich renderable that writes an image escape sequence unchanged, then a new line."""

    def __init__(self, sequence: str) -> None:
        self.sequence = sequence

    def __rich_console__(self, console: Any, options: Any) -> Iterable[Segment]:
        # A control segment: rich writes its text as it is, never wraps or crops it (a plain
        # segment would be cut at the console's width).
        yield Segment(self.sequence, None, [(ControlType.BELL,)])
        yield Segment.line()


def _rows(size: tuple[int, int] | None, cells: int) -> int:
    if not size or size[0] <= 0:
        return 1
    scale = cells * _CELL[0] / size[0]
    return max(1, math.ceil(size[1] * scale / _CELL[1]))


def _kitty(data: str, cells: int, rows: int) -> str:
    params = f"a=T,f=100,q=2,c={cells},r={rows}"
    if len(data) <= _KITTY_CHUNK:
        return f"\x1b_G{params};{data}\x1b\\"
    chunks = [data[i:i + _KITTY_CHUNK] for i in range(0, len(data), _KITTY_CHUNK)]
    out = [f"\x1b_G{params},m=1;{chunks[0]}\x1b\\"]
    out += [f"\x1b_Gm=1;{c}\x1b\\" for c in chunks[1:-1]]
    out.append(f"\x1b_Gm=0;{chunks[-1]}\x1b\\")
    return "".join(out)


def _iterm2(data: str, cells: int) -> str:
    return f"\x1b]1337;File=inline=1;width={cells};height=auto:{data}\x07"


def image_renderables(blocks: Iterable[Mapping[str, Any]], show: bool, protocol: str | None,
                      style: str = "theme.tooloutput") -> list[Any]:
    out: list[Any] = []
    for block in blocks:
        data, mime = block.get("data"), block.get("mimeType")
        size = image_size(data) if isinstance(data, str) and data else None
        cells = min(_WIDTH_CELLS, size[0] // _CELL[0] + 1) if size else _WIDTH_CELLS
        if show and protocol and isinstance(data, str) and data and size:
            if protocol == "iterm2":
                out.append(InlineImage(_iterm2(data, cells)))
                continue
            if protocol == "kitty" and mime == "image/png":
                out.append(InlineImage(_kitty(data, cells, _rows(size, cells))))
                continue
        out.append(Text("  " + placeholder(mime if isinstance(mime, str) else None, size), style=style))
    return out
