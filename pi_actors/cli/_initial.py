"""The first user message of a command line, as pi 0.73.1 builds it.

``pi-actors [@file...] [messages...]`` with text piped on stdin sends, as ONE user message,
the piped text (stripped), then the attached files, then the first message argument, joined
with nothing in between (pi's ``buildInitialMessage``); the other message arguments follow as
their own turns. Each ``@path`` argument becomes ``<file name="/abs/path">\\ncontent\\n</file>\\n``
(pi's ``processFileArguments``); an empty file is skipped, as pi does.

Only text files can be attached: a prompt here carries text, not images, so a file that is
not UTF-8 text (an image, a binary) is refused with one line rather than sent mangled.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["AttachError", "file_block", "attach_file_arguments", "initial_messages"]


class AttachError(Exception):
    """An ``@file`` argument that cannot be attached (missing, unreadable, not text): one line."""


def file_block(path: str, content: str) -> str:
    """The text that attaches ``content`` of the file at absolute ``path`` (pi's shape)."""
    return f'<file name="{path}">\n{content}\n</file>\n'


def attach_file_arguments(paths: Sequence[str], cwd: str) -> str:
    """The blocks of the files ``paths`` (as given after ``@``: relative to ``cwd``, ``~``
    expanded), in order. Raises AttachError naming the first file that cannot be read."""
    text = ""
    for given in paths:
        path = os.path.abspath(os.path.join(cwd, os.path.expanduser(given)))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise AttachError(f"File not found: {path}") from None
        except OSError as exc:
            raise AttachError(f"Could not read file {path}: {exc.strerror or exc}") from None
        if not data:
            continue
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise AttachError(f"Cannot attach {path}: not a UTF-8 text file (only text files can be attached)") from None
        text += file_block(path, content)
    return text


def initial_messages(arguments: Sequence[str], piped: str | None, cwd: str) -> list[str]:
    """The user messages to send, in order: ``arguments`` are the command line's positional
    arguments (``@path`` ones name files), ``piped`` the text read from stdin (None: none).
    Returns [] when there is nothing to send. Raises AttachError."""
    files = [a[1:] for a in arguments if a.startswith("@")]
    messages = [a for a in arguments if not a.startswith("@")]
    parts = []
    piped = piped.strip() if piped is not None else ""
    if piped:
        parts.append(piped)
    attached = attach_file_arguments(files, cwd)
    if attached:
        parts.append(attached)
    if messages:
        parts.append(messages.pop(0))
    return (["".join(parts)] if parts else []) + messages
