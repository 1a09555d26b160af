"""Types shared by every coding tool: the error the model sees, and a tool's description.

A tool is a stateless async function ``(args, *, cwd, on_update) -> result`` where the result
is ``{"content": [text or image blocks], "details": json or None}``. Every failure the model
should see is raised as :class:`ToolError`; its message is the exact text of the error result.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass


class ToolError(Exception):
    """A tool failure; ``message`` is the text the model sees as the error result."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool: pi's name, label, description, JSON schema."""

    name: str
    label: str
    description: str
    parameters: dict


# libuv's wording for the errors a file tool is likely to meet, so messages read like pi's
# (``ENOENT: no such file or directory, access '/abs/path'``).
_UV_MESSAGES = {
    errno.ENOENT: "no such file or directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "not a directory",
    errno.EISDIR: "illegal operation on a directory",
    errno.ELOOP: "too many symbolic links encountered",
    errno.ENAMETOOLONG: "name too long",
    errno.EMFILE: "too many open files",
    errno.EIO: "i/o error",
}


def node_style_os_error(exc: OSError, syscall: str, path: str | None = None) -> str:
    """Format an OSError the way Node reports fs errors: ``CODE: message, syscall 'path'``."""
    code = errno.errorcode.get(exc.errno or 0, "EUNKNOWN")
    message = _UV_MESSAGES.get(exc.errno or 0)
    if message is None:
        text = exc.strerror or os.strerror(exc.errno or 0)
        message = text[:1].lower() + text[1:]
    suffix = f" '{path}'" if path is not None else ""
    return f"{code}: {message}, {syscall}{suffix}"
