"""The ``write`` tool (pi spec §1.5).

Creates the parent directories, then writes ``content`` as UTF-8 (creating or truncating the
file). The result is ``Successfully wrote {n} bytes to {path}`` where ``n`` is the JavaScript
string length of ``content`` (UTF-16 code units, pi's quirk) and ``path`` is the argument as
given; ``details`` is None.

Failures are pi's: the OS error in Node's wording (``EROFS: read-only file system, open
'/abs/path'``). One addition: content larger than the process's file-size limit
(``RLIMIT_FSIZE``, set by the sandbox) is refused before the file is opened, so a refused
write leaves the file as it was instead of cut at the limit.
"""

from __future__ import annotations

import os
import resource
from typing import Any

import trio

from .base import ToolError, ToolSpec, js_length, node_style_os_error, string_arg
from .paths import resolve_to_cwd
from .truncate import format_size

WRITE_SPEC = ToolSpec(
    name="write",
    label="write",
    description=(
        "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. "
        "Automatically creates parent directories."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
            "content": {"type": "string", "description": "Content to write to the file"},
        },
        "required": ["path", "content"],
    },
)


def file_size_limit() -> int | None:
    """The soft ``RLIMIT_FSIZE`` in bytes, or None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def check_file_size(data: bytes, absolute: str) -> None:
    """Refuse ``data`` that the kernel would cut at the file-size limit."""
    limit = file_size_limit()
    if limit is not None and len(data) > limit:
        raise ToolError(
            f"EFBIG: file too large, write '{absolute}' "
            f"({format_size(len(data))} exceeds the sandbox file-size limit of {format_size(limit)})"
        )


def write_bytes(absolute: str, data: bytes) -> None:
    """Write ``data`` to ``absolute`` (truncating), reporting errors in Node's wording."""
    check_file_size(data, absolute)
    try:
        with open(absolute, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise ToolError(node_style_os_error(exc, "open", absolute)) from None


def _write_sync(path_arg: str, content: str, cwd: str) -> dict:
    absolute = resolve_to_cwd(path_arg, cwd)
    parent = os.path.dirname(absolute)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise ToolError(node_style_os_error(exc, "mkdir", parent)) from None
    write_bytes(absolute, content.encode("utf-8", "surrogatepass"))
    return {
        "content": [{"type": "text", "text": f"Successfully wrote {js_length(content)} bytes to {path_arg}"}],
        "details": None,
    }


async def run_write(args: dict[str, Any], *, cwd: str, on_update: Any = None) -> dict:
    path_arg = string_arg(args, "write", "path")
    content = string_arg(args, "write", "content")
    await trio.lowlevel.checkpoint_if_cancelled()
    # Not abandoned on cancellation: a mutation either completes or fails before the call ends.
    return await trio.to_thread.run_sync(_write_sync, path_arg, content, cwd)
