"""The ``ls`` tool (pi spec §1.10).

Lists a directory (default ``.``): every entry including dotfiles, sorted case-insensitively,
directories with a ``/`` suffix, entries that cannot be stat'ed (dangling symlinks) skipped.
At most ``limit`` entries (default 500) with the notice ``{N} entries limit reached. Use
limit={2N} for more``; the text is cut at 50KB (``50.0KB limit reached``). Errors: ``Path not
found: {abs}``, ``Not a directory: {abs}``, ``Cannot read directory: {msg}``.

Difference from pi: the order is the case-folded code-point order; pi uses ICU's
``localeCompare``, which differs only in how punctuation characters sort among themselves.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import trio

from .base import ToolError, ToolSpec, number_arg, string_arg
from .paths import resolve_to_cwd
from .truncate import DEFAULT_MAX_BYTES, MAX_SAFE_INTEGER, format_size, truncate_head

DEFAULT_LIMIT = 500

LS_SPEC = ToolSpec(
    name="ls",
    label="ls",
    description=(
        "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. "
        f"Includes dotfiles. Output is truncated to {DEFAULT_LIMIT} entries or {DEFAULT_MAX_BYTES // 1024}KB "
        "(whichever is hit first)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Directory to list (default: current directory)"},
            "limit": {"type": "number", "description": "Maximum number of entries to return (default: 500)"},
        },
    },
)


def finish_listing(lines: list[str], notices: list[str], details: dict[str, Any]) -> dict:
    """Join ``lines``, cut at 50KB, append the notices in one bracket; pi's result shape."""
    truncation = truncate_head("\n".join(lines), max_lines=MAX_SAFE_INTEGER)
    text = truncation.content
    if truncation.truncated:
        notices = [*notices, f"{format_size(DEFAULT_MAX_BYTES)} limit reached"]
        details["truncation"] = truncation.to_json()
    if notices:
        text += f"\n\n[{'. '.join(notices)}]"
    return {"content": [{"type": "text", "text": text}], "details": details or None}


def _ls_sync(path_arg: str, cwd: str, limit: int) -> dict:
    directory = resolve_to_cwd(path_arg, cwd)
    if not os.path.exists(directory):
        raise ToolError(f"Path not found: {directory}")
    if not os.path.isdir(directory):
        raise ToolError(f"Not a directory: {directory}")
    try:
        entries = os.listdir(directory)
    except OSError as exc:
        raise ToolError(f"Cannot read directory: {exc.strerror or exc}") from None
    entries.sort(key=str.lower)

    results: list[str] = []
    limit_reached = False
    for entry in entries:
        if len(results) >= limit:
            limit_reached = True
            break
        try:
            is_dir = stat.S_ISDIR(os.stat(os.path.join(directory, entry)).st_mode)
        except (OSError, ValueError):
            continue  # pi skips entries it cannot stat
        results.append(entry + ("/" if is_dir else ""))

    if not results:
        return {"content": [{"type": "text", "text": "(empty directory)"}], "details": None}
    notices: list[str] = []
    details: dict[str, Any] = {}
    if limit_reached:
        notices.append(f"{limit} entries limit reached. Use limit={limit * 2} for more")
        details["entryLimitReached"] = limit
    return finish_listing(results, notices, details)


async def run_ls(args: dict[str, Any], *, cwd: str, on_update: Any = None) -> dict:
    path_arg = string_arg(args, "ls", "path", required=False) or "."
    limit = number_arg(args, "ls", "limit")
    effective = DEFAULT_LIMIT if limit is None else int(limit)
    await trio.lowlevel.checkpoint_if_cancelled()
    return await trio.to_thread.run_sync(_ls_sync, path_arg, cwd, effective, abandon_on_cancel=True)
