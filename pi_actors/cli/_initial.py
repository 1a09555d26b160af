"""The first user message of a command line, as pi 0.73.1 builds it.

``pi-actors [@file...] [messages...]`` with text piped on stdin sends, as ONE user message,
the piped text (stripped), then the attached files, then the first message argument, joined
with nothing in between (pi's ``buildInitialMessage``); the other message arguments follow as
their own turns. Each ``@path`` argument becomes ``<file name="/abs/path">\\ncontent\\n</file>\\n``
(pi's ``processFileArguments``); an empty file is skipped, as pi does.

An image file (JPEG, PNG, GIF, WebP, recognised by its bytes) is attached as an image part
of that message, brought within pi's limits (:func:`pi_actors.coding.images.resize_image`),
and named in the text as ``<file name="/abs/path"></file>`` (with pi's dimension note when it
was resized). The first message is then a :class:`PromptText`: a ``str`` that also carries
its ``images`` (pi's ``{type: "image", data, mimeType}``), so callers that handle prompts as
text keep working and the ones that send them pass the images on.

A file that is neither an image nor UTF-8 text (a binary), or an image that cannot be
decoded, is refused with one line rather than sent mangled.

:func:`images_in_prompt` finds the ``@path`` words of a prompt typed in the TUI that name
image files, so that they are attached too (the text is sent as typed).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "AttachError",
    "PromptText",
    "attach_file_arguments",
    "attach_files",
    "file_block",
    "images_in_prompt",
    "initial_messages",
    "prompt_images",
]


class AttachError(Exception):
    """An ``@file`` argument that cannot be attached (missing, unreadable, not text, a broken
    image): one line."""


class PromptText(str):
    """A prompt's text with the image parts attached to it (``images``, pi's shape)."""

    images: tuple[dict[str, Any], ...] = ()

    def __new__(cls, text: str, images: Sequence[dict[str, Any]] = ()) -> PromptText:
        self = super().__new__(cls, text)
        self.images = tuple(images)
        return self


def prompt_images(text: str) -> dict[str, Any]:
    """The keyword a coordinator ``prompt``/``steer``/``follow_up`` call takes for the images
    of ``text`` (a :class:`PromptText`): ``{"images": [...]}``, or ``{}`` when it has none.
    (Send the text itself as ``str(text)``: the wire encoder takes plain strings only.)"""
    images = getattr(text, "images", ())
    return {"images": list(images)} if images else {}


def _image_part(path: str, data: bytes, mime: str, auto_resize: bool) -> tuple[str, dict[str, Any] | None]:
    """``(text block, image part or None)`` for the image file at ``path``."""
    from ..coding.images import OMITTED_TOO_LARGE, ImageDecodeError, dimension_note, resize_image

    if not auto_resize:
        return f'<file name="{path}"></file>\n', {
            "type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime}  # fmt: skip
    try:
        resized = resize_image(data, mime)
    except ImageDecodeError as exc:
        raise AttachError(f"Cannot attach {path}: {exc}") from None
    if resized is None:
        return f'<file name="{path}">{OMITTED_TOO_LARGE}</file>\n', None
    note = dimension_note(resized) or ""
    return f'<file name="{path}">{note}</file>\n', {"type": "image", "data": resized.data, "mimeType": resized.mime_type}


def file_block(path: str, content: str) -> str:
    """The text that attaches ``content`` of the file at absolute ``path`` (pi's shape)."""
    return f'<file name="{path}">\n{content}\n</file>\n'


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise AttachError(f"File not found: {path}") from None
    except OSError as exc:
        raise AttachError(f"Could not read file {path}: {exc.strerror or exc}") from None


def attach_files(paths: Sequence[str], cwd: str, *, auto_resize: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """``(text, images)`` for the files ``paths`` (as given after ``@``: relative to ``cwd``,
    ``~`` expanded), in order. Raises AttachError naming the first file that cannot be attached."""
    from ..coding.images import detect_image_mime

    text = ""
    images: list[dict[str, Any]] = []
    for given in paths:
        path = os.path.abspath(os.path.join(cwd, os.path.expanduser(given)))
        data = _read(path)
        if not data:
            continue
        mime = detect_image_mime(data[:16])
        if mime is not None:
            block, image = _image_part(path, data, mime, auto_resize)
            text += block
            if image is not None:
                images.append(image)
            continue
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise AttachError(f"Cannot attach {path}: not a UTF-8 text file or an image") from None
        text += file_block(path, content)
    return text, images


def attach_file_arguments(paths: Sequence[str], cwd: str) -> str:
    """The text blocks of :func:`attach_files` (the images left out)."""
    return attach_files(paths, cwd)[0]


_AT_WORD = re.compile(r"(?:^|(?<=\s))@(\S+)")


def images_in_prompt(text: str, cwd: str, *, auto_resize: bool = True) -> list[dict[str, Any]]:
    """The image parts for the ``@path`` words of ``text`` that name image files (relative
    to ``cwd``, ``~`` expanded; trailing punctuation ``.,;:!?)`` ignored). Other words,
    missing files and files that are not images are left alone (they stay plain text).
    Raises AttachError for an image file that cannot be read or decoded."""
    from ..coding.images import detect_image_mime

    images: list[dict[str, Any]] = []
    for word in _AT_WORD.findall(text):
        for candidate in dict.fromkeys((word, word.rstrip(".,;:!?)"))):
            path = os.path.abspath(os.path.join(cwd, os.path.expanduser(candidate)))
            if not os.path.isfile(path):
                continue
            try:
                with open(path, "rb") as f:
                    head = f.read(16)
            except OSError:
                continue
            mime = detect_image_mime(head)
            if mime is not None:
                _, image = _image_part(path, _read(path), mime, auto_resize)
                if image is not None:
                    images.append(image)
            break
    return images


def initial_messages(arguments: Sequence[str], piped: str | None, cwd: str, *, auto_resize: bool = True) -> list[str]:
    """The user messages to send, in order: ``arguments`` are the command line's positional
    arguments (``@path`` ones name files), ``piped`` the text read from stdin (None: none).
    Returns [] when there is nothing to send; the first is a :class:`PromptText` carrying the
    attached images when there are some; ``auto_resize`` (setting ``images.autoResize``):
    bring images within pi's limits. Raises AttachError."""
    files = [a[1:] for a in arguments if a.startswith("@")]
    messages = [a for a in arguments if not a.startswith("@")]
    parts = []
    piped = piped.strip() if piped is not None else ""
    if piped:
        parts.append(piped)
    attached, images = attach_files(files, cwd, auto_resize=auto_resize)
    if attached:
        parts.append(attached)
    if messages:
        parts.append(messages.pop(0))
    if not parts:
        return messages
    first = "".join(parts)
    return [PromptText(first, images) if images else first, *messages]
