"""Reading an image from the system clipboard for the TUI's Ctrl+V (pi's "paste image"), on
Linux through the clipboard tools pi uses there: ``wl-paste`` (Wayland) and ``xclip`` (X11).

Contract of ``read_clipboard_image(env)`` (blocking; the TUI calls it in a thread):
- Wayland (``WAYLAND_DISPLAY`` set or ``XDG_SESSION_TYPE=wayland``): ``wl-paste --list-types``,
  then ``wl-paste --type T --no-newline`` for the preferred image type; then ``xclip`` as a
  fallback. Otherwise ``xclip -selection clipboard -t TARGETS -o``, then ``-t T -o`` for the
  preferred type (or each supported type in turn); then ``wl-paste``.
- Preferred types, in order: PNG, JPEG, WebP, GIF (pi's); another ``image/*`` type only when
  it is the only one offered.
- Returns ``ClipboardImage(data, mime_type)``, or None when the clipboard holds no image.
- Raises ``ClipboardUnavailable`` (one line) when neither tool is on PATH.
- Each tool run is bounded (1 s to list, 3 s to read) and a failing or hanging tool counts as
  "no image from that tool", never an exception.

``save_clipboard_image(image)`` writes it to ``<tmp>/pi-clipboard-<uuid>.<ext>`` (as pi) and
returns the path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ClipboardImage", "ClipboardUnavailable", "read_clipboard_image", "save_clipboard_image"]

_SUPPORTED = ("image/png", "image/jpeg", "image/webp", "image/gif")
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
_LIST_TIMEOUT, _READ_TIMEOUT = 1.0, 3.0
_MAX_BYTES = 50 * 1024 * 1024


class ClipboardUnavailable(Exception):
    """No clipboard tool to read an image with (the message says which to install)."""


@dataclass(frozen=True)
class ClipboardImage:
    data: bytes
    mime_type: str


def _base(mime: str) -> str:
    return mime.split(";")[0].strip().lower()


def _preferred(types: list[str]) -> str | None:
    bases = {_base(t): t for t in types if t.strip()}
    for wanted in _SUPPORTED:
        if wanted in bases:
            return bases[wanted]
    return next((raw for base, raw in bases.items() if base.startswith("image/")), None)


def _run(argv: list[str], timeout: float, env: Mapping[str, str]) -> bytes | None:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, env=dict(env), check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or len(done.stdout) > _MAX_BYTES:
        return None
    return done.stdout


def _lines(data: bytes | None) -> list[str]:
    return [t.strip() for t in (data or b"").decode("utf-8", "replace").splitlines() if t.strip()]


def _via_wl_paste(env: Mapping[str, str]) -> ClipboardImage | None:
    chosen = _preferred(_lines(_run(["wl-paste", "--list-types"], _LIST_TIMEOUT, env)))
    if chosen is None:
        return None
    data = _run(["wl-paste", "--type", chosen, "--no-newline"], _READ_TIMEOUT, env)
    return ClipboardImage(data, _base(chosen)) if data else None


def _via_xclip(env: Mapping[str, str]) -> ClipboardImage | None:
    targets = _lines(_run(["xclip", "-selection", "clipboard", "-t", "TARGETS", "-o"], _LIST_TIMEOUT, env))
    chosen = _preferred(targets) if targets else None
    for mime in dict.fromkeys([chosen, *_SUPPORTED] if chosen else _SUPPORTED):
        data = _run(["xclip", "-selection", "clipboard", "-t", mime, "-o"], _READ_TIMEOUT, env)
        if data:
            return ClipboardImage(data, _base(mime))
    return None


def read_clipboard_image(env: Mapping[str, str] | None = None) -> ClipboardImage | None:
    """The clipboard's image, or None (module docstring). Raises ClipboardUnavailable."""
    env = os.environ if env is None else env
    path = env.get("PATH", os.defpath)
    wayland = bool(env.get("WAYLAND_DISPLAY")) or env.get("XDG_SESSION_TYPE") == "wayland"
    readers = [("wl-paste", _via_wl_paste), ("xclip", _via_xclip)]
    if not wayland:
        readers.reverse()
    found = [(name, reader) for name, reader in readers if shutil.which(name, path=path)]
    if not found:
        raise ClipboardUnavailable("Cannot paste an image: no clipboard tool found (install wl-clipboard for Wayland "
                                   "or xclip for X11)")
    for _name, reader in found:
        image = reader(env)
        if image is not None and _base(image.mime_type).startswith("image/"):
            return image
    return None


def save_clipboard_image(image: ClipboardImage, directory: str | None = None) -> str:
    """Write ``image`` to ``pi-clipboard-<uuid>.<ext>`` in ``directory`` (default: the
    temporary directory); returns its path."""
    ext = _EXTENSIONS.get(_base(image.mime_type), "png")
    path = os.path.join(directory or tempfile.gettempdir(), f"pi-clipboard-{uuid.uuid4()}.{ext}")
    with open(path, "wb") as f:
        f.write(image.data)
    return path
