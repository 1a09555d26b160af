"""The ``read`` tool (pi spec §1.4).

Reads a text file (optionally a window of it: 1-based ``offset``, ``limit`` lines) or an
image. Text is decoded as UTF-8 with U+FFFD for invalid bytes, cut by :func:`truncate_head`
to 2000 lines / 50KB, and followed by pi's continuation notices. Images are recognised by
their magic bytes only (JPEG, PNG, GIF, WebP — the extension does not matter) and returned
as a base64 attachment.

Differences from pi, deliberately:

- Images are returned as they are, never resized or re-encoded (pi shrinks them to fit
  2000x2000 and 4.5 MiB when an image library is present; we carry no PIL). So there is no
  ``[Image: original WxH, displayed at ...]`` note either.
- Non-integer ``offset``/``limit`` are truncated to integers before use.
- A negative ``offset`` or ``limit`` is an error (pi reads from the top for a negative
  offset and returns nothing for a negative limit).
"""

from __future__ import annotations

import base64
import os
from typing import Any

import trio

from .base import ToolError, ToolSpec, node_style_os_error
from .paths import resolve_read_path
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head

READ_SPEC = ToolSpec(
    name="read",
    label="read",
    description=(
        "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). "
        "Images are sent as attachments. For text files, output is truncated to "
        f"{DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). "
        "Use offset/limit for large files. When you need the full file, continue with offset "
        "until complete."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
            "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
            "limit": {"type": "number", "description": "Maximum number of lines to read"},
        },
        "required": ["path"],
    },
)

# How many leading bytes are inspected for a signature (the same window as npm file-type).
_SNIFF_BYTES = 4100


def detect_image_mime(head: bytes) -> str | None:
    """The MIME type of a supported image from its first bytes, or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _optional_int(args: dict, key: str) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolError(f'Validation failed for tool "read":\n  - {key}: must be number')
    if value != value or value in (float("inf"), float("-inf")):
        raise ToolError(f'Validation failed for tool "read":\n  - {key}: must be a finite number')
    return int(value)


def _read_file(absolute: str) -> bytes:
    # pi checks readability with access(R_OK) first and reports that call's error.
    if not os.access(absolute, os.R_OK):
        try:
            os.stat(absolute)
        except OSError as exc:
            raise ToolError(node_style_os_error(exc, "access", absolute)) from None
        raise ToolError(node_style_os_error(PermissionError(13, "Permission denied"), "access", absolute))
    try:
        with open(absolute, "rb") as handle:
            return handle.read()
    except IsADirectoryError:
        raise ToolError("EISDIR: illegal operation on a directory, read") from None
    except OSError as exc:
        raise ToolError(node_style_os_error(exc, "open", absolute)) from None


def _text_result(data: bytes, path_arg: str, offset: int | None, limit: int | None) -> dict:
    all_lines = data.decode("utf-8", "replace").split("\n")
    total = len(all_lines)

    start = max(0, offset - 1) if offset else 0
    if start >= total:
        raise ToolError(f"Offset {offset} is beyond end of file ({total} lines total)")

    if limit is not None:
        end = min(start + limit, total)
        selected = "\n".join(all_lines[start:end])
        limited_count: int | None = end - start
    else:
        selected = "\n".join(all_lines[start:])
        limited_count = None

    truncation = truncate_head(selected)
    first_display = start + 1
    details: dict | None = None

    if truncation.first_line_exceeds_limit:
        line_size = format_size(len(all_lines[start].encode("utf-8", "surrogatepass")))
        text = (
            f"[Line {first_display} is {line_size}, exceeds {format_size(DEFAULT_MAX_BYTES)} limit. "
            f"Use bash: sed -n '{first_display}p' {path_arg} | head -c {DEFAULT_MAX_BYTES}]"
        )
        details = {"truncation": truncation.to_json()}
    elif truncation.truncated:
        last_display = first_display + truncation.output_lines - 1
        next_offset = last_display + 1
        if truncation.truncated_by == "lines":
            notice = f"[Showing lines {first_display}-{last_display} of {total}. Use offset={next_offset} to continue.]"
        else:
            notice = (
                f"[Showing lines {first_display}-{last_display} of {total} "
                f"({format_size(DEFAULT_MAX_BYTES)} limit). Use offset={next_offset} to continue.]"
            )
        text = truncation.content + "\n\n" + notice
        details = {"truncation": truncation.to_json()}
    elif limited_count is not None and start + limited_count < total:
        remaining = total - (start + limited_count)
        text = (
            truncation.content
            + f"\n\n[{remaining} more lines in file. Use offset={start + limited_count + 1} to continue.]"
        )
    else:
        text = truncation.content

    return {"content": [{"type": "text", "text": text}], "details": details}


def _read_sync(path_arg: str, cwd: str, offset: int | None, limit: int | None) -> dict:
    absolute = resolve_read_path(path_arg, cwd)
    data = _read_file(absolute)
    mime = detect_image_mime(data[:_SNIFF_BYTES])
    if mime is not None:
        return {
            "content": [
                {"type": "text", "text": f"Read image file [{mime}]"},
                {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime},
            ],
            "details": None,
        }
    return _text_result(data, path_arg, offset, limit)


async def run_read(args: dict[str, Any], *, cwd: str, on_update: Any = None) -> dict:
    path_arg = args.get("path")
    if not isinstance(path_arg, str):
        raise ToolError('Validation failed for tool "read":\n  - path: must be string')
    offset = _optional_int(args, "offset")
    limit = _optional_int(args, "limit")
    if offset is not None and offset < 0:
        raise ToolError(f"Offset must be a line number of 1 or more (0 reads from the top), got {offset}")
    if limit is not None and limit < 0:
        raise ToolError(f"Limit must be a number of lines of 0 or more, got {limit}")
    await trio.lowlevel.checkpoint_if_cancelled()
    # File I/O runs in a thread so a slow disk (or a FIFO) does not stall the worker's loop;
    # on cancellation the thread is abandoned and the call ends at once.
    return await trio.to_thread.run_sync(_read_sync, path_arg, cwd, offset, limit, abandon_on_cancel=True)
