"""The ``read`` tool (pi spec §1.4).

Reads a text file (optionally a window of it: 1-based ``offset``, ``limit`` lines) or an
image. Text is decoded as UTF-8 with U+FFFD for invalid bytes, cut as :func:`truncate_head`
cuts it to 2000 lines / 50KB, and followed by pi's continuation notices. Images are
recognised by their magic bytes only (JPEG, PNG, GIF, WebP — the extension does not matter)
and returned as a base64 attachment after :func:`pi_actors.coding.images.resize_image` brought
it within pi's limits (2000x2000, 4.5 MiB of base64; a resized image gets pi's ``[Image:
original WxH, displayed at ...]`` note, one that cannot be brought under them pi's ``[Image
omitted: ...]`` note instead). ``auto_resize_images=False`` (setting ``images.autoResize``)
sends the file's bytes as they are, as pi does.

The file is streamed: it is read once, in 1 MiB chunks, keeping only the lines it returns
(at most 50KB of them) and counting the others (pi's "of N lines" needs the total), so a
file of any size costs a bounded amount of memory; a cancelled call stops the reading
thread at its next chunk. Only regular files are read: a directory gets pi's ``EISDIR``
text, and a character or block device (``/dev/zero``), a FIFO (never opened, so a FIFO
without a writer cannot hang the call) or a socket gets ``<path> is a character device,
not a regular file; ...``. An image over :data:`IMAGE_MAX_BYTES` (10 MiB) is refused with
its size.

Differences from pi, deliberately:

- An image file that cannot be decoded is an error result (``Cannot read image {path}: the
  image cannot be decoded (...)``); pi drops it with its "could not be resized" note.
- Images over :data:`IMAGE_MAX_BYTES` are refused before decoding (pi reads any size).
- Non-integer ``offset``/``limit`` are truncated to integers before use.
- A negative ``offset`` or ``limit`` is an error (pi reads from the top for a negative
  offset and returns nothing for a negative limit).
"""

from __future__ import annotations

import base64
import codecs
import math
import os
import stat
import threading
from collections.abc import Iterator
from typing import Any, Literal

import trio

from ..images import OMITTED_TOO_LARGE, ImageDecodeError, detect_image_mime, dimension_note, resize_image
from .base import ToolError, ToolSpec, node_style_os_error
from .paths import resolve_read_path
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, TruncationResult, format_size

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


def _optional_int(args: dict, key: str) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolError(f'Validation failed for tool "read":\n  - {key}: must be number')
    if value != value or value in (float("inf"), float("-inf")):
        raise ToolError(f'Validation failed for tool "read":\n  - {key}: must be a finite number')
    return int(value)


_CHUNK = 1 << 20
#: The largest image returned (its base64 must fit in one 16 MiB frame with room to spare;
#: providers refuse far smaller images anyway).
IMAGE_MAX_BYTES = 10 * 1024 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


class _Stopped(Exception):
    """The caller went away: the reading thread stops between two chunks."""


def _not_regular(mode: int, path_arg: str) -> ToolError:
    if stat.S_ISDIR(mode):  # pi's text for a directory
        return ToolError("EISDIR: illegal operation on a directory, read")
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return ToolError(f"{path_arg} is {kind}, not a regular file; read only reads regular files")


def _open_regular(absolute: str, path_arg: str) -> int:
    """An fd open for reading on ``absolute``, which must be a regular file.

    pi checks readability with access(R_OK) first and reports that call's error. The type is
    checked before opening (opening a FIFO would wait for a writer; a socket cannot be
    opened) and again on the fd (the path may have changed in between); the open never
    blocks (O_NONBLOCK), and never makes a terminal ours (O_NOCTTY)."""
    if not os.access(absolute, os.R_OK):
        try:
            os.stat(absolute)
        except OSError as exc:
            raise ToolError(node_style_os_error(exc, "access", absolute)) from None
        raise ToolError(node_style_os_error(PermissionError(13, "Permission denied"), "access", absolute))
    try:
        mode = os.stat(absolute).st_mode
    except OSError as exc:
        raise ToolError(node_style_os_error(exc, "stat", absolute)) from None
    if not stat.S_ISREG(mode):
        raise _not_regular(mode, path_arg)
    try:
        fd = os.open(absolute, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except IsADirectoryError:
        raise ToolError("EISDIR: illegal operation on a directory, read") from None
    except OSError as exc:
        raise ToolError(node_style_os_error(exc, "open", absolute)) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(mode, path_arg)
    return fd


def _chunks(fd: int, first: bytes, stop: threading.Event | None) -> Iterator[bytes]:
    """``first``, then the rest of the file in chunks of ``_CHUNK`` bytes."""
    if first:
        yield first
    while True:
        if stop is not None and stop.is_set():
            raise _Stopped()
        try:
            chunk = os.read(fd, _CHUNK)
        except OSError as exc:
            raise ToolError(node_style_os_error(exc, "read")) from None
        if not chunk:
            return
        yield chunk


class _Window:
    """The lines ``[start, end)`` of a file, read as a stream: keeps what ``truncate_head``
    would keep of them (2000 lines / 50KB, whole lines) and counts the rest.

    Splitting the bytes on ``\\n`` and decoding each line alone gives the same text as decoding
    the whole file and splitting it (a newline byte is never part of a UTF-8 sequence, so an
    invalid sequence never spans one). Every line of the window is measured decoded, as pi
    measures it (an invalid byte counts as the 3 bytes of its U+FFFD); ASCII pieces, the
    common case, are measured without decoding."""

    def __init__(self, start: int, end: float) -> None:
        self.start, self.end = start, end
        self.kept: list[str] = []
        self.used = 0  # UTF-8 bytes of "\\n".join(kept)
        self.collecting = True
        self.window_lines = 0
        self.window_bytes = 0  # including the newlines between the window's lines
        self.first_line_bytes = 0
        self._line: list[bytes] | None = []  # the current line's bytes, while it may still be kept
        self._line_len = 0  # raw bytes of the current line
        self._line_size = 0  # its UTF-8 size once decoded
        self._decoder: Any = None  # for a line with non-ASCII bytes

    def _budget(self) -> int:
        return DEFAULT_MAX_BYTES - self.used - (1 if self.kept else 0)

    def piece(self, index: int, data: bytes) -> None:
        """Bytes of line ``index`` (more may follow)."""
        if not (self.start <= index < self.end):
            return
        self._line_len += len(data)
        if self._decoder is None and data.isascii():
            self._line_size += len(data)
        else:
            if self._decoder is None:
                self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
            self._line_size += len(self._decoder.decode(data).encode("utf-8", "surrogatepass"))
        # Decoding never makes a line smaller, so one whose raw bytes exceed the budget
        # cannot fit.
        if self.collecting and self._line is not None:
            if self._line_len > self._budget():
                self._line = None  # does not fit: no need to keep its bytes
            else:
                self._line.append(data)

    def line_end(self, index: int) -> None:
        """Line ``index`` is complete (a newline or the end of the file came)."""
        if not (self.start <= index < self.end):
            return
        size = self._line_size
        if self._decoder is not None:
            size += len(self._decoder.decode(b"", final=True).encode("utf-8", "surrogatepass"))
            self._decoder = None
        if index == self.start:
            self.first_line_bytes = size
        self.window_bytes += size + (1 if self.window_lines else 0)
        self.window_lines += 1
        if self.collecting:
            if self._line is None or len(self.kept) >= DEFAULT_MAX_LINES:
                self.collecting = False
            else:
                text = b"".join(self._line).decode("utf-8", "replace")
                cost = len(text.encode("utf-8", "surrogatepass")) + (1 if self.kept else 0)
                if self.used + cost > DEFAULT_MAX_BYTES:
                    self.collecting = False
                else:
                    self.kept.append(text)
                    self.used += cost
        self._line, self._line_len, self._line_size = ([] if self.collecting else None), 0, 0

    def truncation(self) -> TruncationResult:
        """What ``truncate_head`` gives for the window's text."""
        content = "\n".join(self.kept)
        untouched = self.collecting
        by: Literal["lines", "bytes"] | None
        if untouched:
            by = None
        elif not self.kept:
            by = "bytes"
        else:
            by = "lines" if len(self.kept) >= DEFAULT_MAX_LINES else "bytes"
        return TruncationResult(
            content=content,
            truncated=not untouched,
            truncated_by=by,
            total_lines=self.window_lines,
            total_bytes=self.used if untouched else self.window_bytes,
            output_lines=len(self.kept),
            output_bytes=self.used,
            last_line_partial=False,
            first_line_exceeds_limit=not untouched and not self.kept,
            max_lines=DEFAULT_MAX_LINES,
            max_bytes=DEFAULT_MAX_BYTES,
        )


def _scan(chunks: Iterator[bytes], window: _Window) -> int:
    """Feed every line of the stream to ``window``; returns the number of lines (pi's
    ``split("\\n")`` count: the newlines plus one)."""
    index = 0
    for chunk in chunks:
        pos = 0
        while True:
            newline = chunk.find(b"\n", pos)
            if newline < 0:
                if pos < len(chunk):
                    window.piece(index, chunk[pos:] if pos else chunk)
                break
            if newline > pos:
                window.piece(index, chunk[pos:newline])
            window.line_end(index)
            index += 1
            pos = newline + 1
            if index >= window.end:  # past the window: only count the newlines left
                index += chunk.count(b"\n", pos)
                for rest in chunks:
                    index += rest.count(b"\n")
                return index + 1
    window.line_end(index)
    return index + 1


def _text_result(chunks: Iterator[bytes], path_arg: str, offset: int | None, limit: int | None) -> dict:
    start = max(0, offset - 1) if offset else 0
    window = _Window(start, start + limit if limit is not None else math.inf)
    total = _scan(chunks, window)
    if start >= total:
        raise ToolError(f"Offset {offset} is beyond end of file ({total} lines total)")
    limited_count = min(start + limit, total) - start if limit is not None else None

    truncation = window.truncation()
    first_display = start + 1
    details: dict | None = None

    if truncation.first_line_exceeds_limit:
        line_size = format_size(window.first_line_bytes)
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


def _read_head(fd: int, size: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < size:
        try:
            chunk = os.read(fd, size - got)
        except OSError as exc:
            raise ToolError(node_style_os_error(exc, "read")) from None
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _image_result(data: bytes, mime: str, path_arg: str, auto_resize: bool) -> dict:
    if not auto_resize:
        text = f"Read image file [{mime}]"
        return {"content": [{"type": "text", "text": text},
                            {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime}],
                "details": None}  # fmt: skip
    try:
        resized = resize_image(data, mime)
    except ImageDecodeError as exc:
        raise ToolError(f"Cannot read image {path_arg}: {exc}") from None
    if resized is None:
        return {"content": [{"type": "text", "text": f"Read image file [{mime}]\n{OMITTED_TOO_LARGE}"}], "details": None}
    text = f"Read image file [{resized.mime_type}]"
    note = dimension_note(resized)
    if note:
        text += f"\n{note}"
    return {"content": [{"type": "text", "text": text},
                        {"type": "image", "data": resized.data, "mimeType": resized.mime_type}],
            "details": None}  # fmt: skip


def _read_sync(path_arg: str, cwd: str, offset: int | None, limit: int | None,
               stop: threading.Event | None = None, auto_resize: bool = True) -> dict:
    absolute = resolve_read_path(path_arg, cwd)
    fd = _open_regular(absolute, path_arg)
    try:
        head = _read_head(fd, _SNIFF_BYTES)
        mime = detect_image_mime(head)
        if mime is None:
            return _text_result(_chunks(fd, head, stop), path_arg, offset, limit)
        size = os.fstat(fd).st_size
        if size > IMAGE_MAX_BYTES:
            raise ToolError(
                f"{path_arg} is an image of {format_size(size)}, over the "
                f"{format_size(IMAGE_MAX_BYTES)} limit for images"
            )
        data = head + _read_head(fd, IMAGE_MAX_BYTES + 1 - len(head))
        if len(data) > IMAGE_MAX_BYTES:  # it grew since fstat
            raise ToolError(f"{path_arg} is an image over the {format_size(IMAGE_MAX_BYTES)} limit for images")
        return _image_result(data, mime, path_arg, auto_resize)
    finally:
        os.close(fd)


async def run_read(args: dict[str, Any], *, cwd: str, on_update: Any = None, auto_resize_images: bool = True) -> dict:
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
    # File I/O runs in a thread so a slow disk does not stall the worker's loop; on
    # cancellation the call ends at once and the thread stops at its next chunk.
    stop = threading.Event()
    try:
        return await trio.to_thread.run_sync(
            _read_sync, path_arg, cwd, offset, limit, stop, auto_resize_images, abandon_on_cancel=True
        )
    finally:
        stop.set()
