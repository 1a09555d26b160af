"""Types shared by every coding tool: the error the model sees, and a tool's description.

A tool is a stateless async function ``(args, *, cwd, on_update) -> result`` where the result
is ``{"content": [text or image blocks], "details": json or None}``. Every failure the model
should see is raised as :class:`ToolError`; its message is the exact text of the error result.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, overload


class ToolError(Exception):
    """A tool failure; ``message`` is the text the model sees as the error result."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool: pi's name, label, description, JSON schema, and
    ``prepare_arguments`` (pi's ``prepareArguments``): adapts the model's raw arguments before
    they are validated against ``parameters`` (None: used as sent)."""

    name: str
    label: str
    description: str
    parameters: dict
    prepare_arguments: Callable[[Any], Any] | None = None


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
    errno.EROFS: "read-only file system",
    errno.EFBIG: "file too large",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "quota exceeded",
    errno.EEXIST: "file already exists",
    errno.ENOTEMPTY: "directory not empty",
    errno.ETXTBSY: "text file is busy",
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


def validation_error(tool: str, key: str, expected: str) -> ToolError:
    """pi's argument validation failure text for one bad field."""
    return ToolError(f'Validation failed for tool "{tool}":\n  - {key}: must be {expected}')


@overload
def string_arg(args: dict, tool: str, key: str, *, required: Literal[True] = ...) -> str: ...
@overload
def string_arg(args: dict, tool: str, key: str, *, required: bool) -> str | None: ...
def string_arg(args: dict, tool: str, key: str, *, required: bool = True) -> str | None:
    """``args[key]`` as a string (None when optional and absent); else a validation error."""
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise validation_error(tool, key, "string")
    return value


def number_arg(args: dict, tool: str, key: str) -> float | None:
    """An optional finite number (bools are not numbers); None when absent."""
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (
        float("inf"),
        float("-inf"),
    ):
        raise validation_error(tool, key, "number")
    return value


def bool_arg(args: dict, tool: str, key: str) -> bool:
    """An optional boolean, False when absent."""
    value = args.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise validation_error(tool, key, "boolean")
    return value


def js_length(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript's ``String.length`` counts."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2
