"""Output truncation shared by the coding tools (pi spec §1.3).

Contract:

- Lines are the pieces of ``content.split("\\n")``; a trailing newline therefore yields a
  trailing empty line, and it is counted.
- Byte limits are true UTF-8 byte counts; line limits count lines.
- :func:`truncate_head` keeps the beginning and never returns a partial line;
  :func:`truncate_tail` keeps the end and returns a partial line only when the very last
  line alone is larger than the byte limit (``last_line_partial``).
- :class:`TruncationResult` carries pi's fields; :meth:`TruncationResult.to_json` gives them
  with pi's camelCase names, which is the shape stored in tool ``details``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
GREP_MAX_LINE_LENGTH = 500
# JavaScript's Number.MAX_SAFE_INTEGER: pi's "no line limit" for grep, find and ls.
MAX_SAFE_INTEGER = 2**53 - 1

TruncatedBy = Literal["lines", "bytes"]


@dataclass(frozen=True)
class TruncationResult:
    content: str
    truncated: bool
    truncated_by: TruncatedBy | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool
    first_line_exceeds_limit: bool
    max_lines: int
    max_bytes: int

    def to_json(self) -> dict:
        """pi's ``TruncationResult`` object (camelCase keys), as it appears in ``details``."""
        return {
            "content": self.content,
            "truncated": self.truncated,
            "truncatedBy": self.truncated_by,
            "totalLines": self.total_lines,
            "totalBytes": self.total_bytes,
            "outputLines": self.output_lines,
            "outputBytes": self.output_bytes,
            "lastLinePartial": self.last_line_partial,
            "firstLineExceedsLimit": self.first_line_exceeds_limit,
            "maxLines": self.max_lines,
            "maxBytes": self.max_bytes,
        }


class TruncatedLine(NamedTuple):
    text: str
    was_truncated: bool


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def format_size(num_bytes: int) -> str:
    """``512B``, ``50.0KB``, ``1.5MB`` (binary units, one decimal)."""
    if num_bytes < 1024:
        return f"{num_bytes}B"
    if num_bytes < 1024 * 1024:
        return f"{num_bytes / 1024:.1f}KB"
    return f"{num_bytes / (1024 * 1024):.1f}MB"


def _untouched(content: str, lines: int, size: int, max_lines: int, max_bytes: int) -> TruncationResult:
    return TruncationResult(
        content=content,
        truncated=False,
        truncated_by=None,
        total_lines=lines,
        total_bytes=size,
        output_lines=lines,
        output_bytes=size,
        last_line_partial=False,
        first_line_exceeds_limit=False,
        max_lines=max_lines,
        max_bytes=max_bytes,
    )


def _cut(kept: list[str], truncated_by: TruncatedBy, total_lines: int, total_bytes: int, max_lines: int,
         max_bytes: int, last_line_partial: bool = False) -> TruncationResult:
    """The result of a truncation that kept the lines ``kept`` (in order) of a longer text."""
    out = "\n".join(kept)
    return TruncationResult(
        content=out,
        truncated=True,
        truncated_by=truncated_by,
        total_lines=total_lines,
        total_bytes=total_bytes,
        output_lines=len(kept),
        output_bytes=_utf8_len(out),
        last_line_partial=last_line_partial,
        first_line_exceeds_limit=False,
        max_lines=max_lines,
        max_bytes=max_bytes,
    )


def truncate_head(
    content: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> TruncationResult:
    """Keep whole lines from the start until either limit would be exceeded."""
    total_bytes = _utf8_len(content)
    lines = content.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untouched(content, total_lines, total_bytes, max_lines, max_bytes)

    if _utf8_len(lines[0]) > max_bytes:
        return TruncationResult(
            content="",
            truncated=True,
            truncated_by="bytes",
            total_lines=total_lines,
            total_bytes=total_bytes,
            output_lines=0,
            output_bytes=0,
            last_line_partial=False,
            first_line_exceeds_limit=True,
            max_lines=max_lines,
            max_bytes=max_bytes,
        )

    kept: list[str] = []
    used = 0
    truncated_by: TruncatedBy = "lines"
    for index, line in enumerate(lines):
        if index >= max_lines:
            break
        cost = _utf8_len(line) + (1 if index > 0 else 0)
        if used + cost > max_bytes:
            truncated_by = "bytes"
            break
        kept.append(line)
        used += cost
    if len(kept) >= max_lines and used <= max_bytes:
        truncated_by = "lines"

    return _cut(kept, truncated_by, total_lines, total_bytes, max_lines, max_bytes)


def _tail_bytes(text: str, max_bytes: int) -> str:
    """The last ``max_bytes`` UTF-8 bytes of ``text``, advanced to a character boundary."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    start = len(raw) - max_bytes
    while start < len(raw) and (raw[start] & 0xC0) == 0x80:
        start += 1
    return raw[start:].decode("utf-8", "replace")


def truncate_tail(
    content: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> TruncationResult:
    """Keep whole lines from the end until either limit would be exceeded.

    If the last line alone is over ``max_bytes``, its last ``max_bytes`` bytes are kept and
    ``last_line_partial`` is set.
    """
    total_bytes = _utf8_len(content)
    lines = content.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untouched(content, total_lines, total_bytes, max_lines, max_bytes)

    kept_reversed: list[str] = []
    used = 0
    truncated_by: TruncatedBy = "lines"
    last_line_partial = False
    for line in reversed(lines):
        if len(kept_reversed) >= max_lines:
            break
        cost = _utf8_len(line) + (1 if kept_reversed else 0)
        if used + cost > max_bytes:
            truncated_by = "bytes"
            if not kept_reversed:
                partial = _tail_bytes(line, max_bytes)
                kept_reversed.append(partial)
                used = _utf8_len(partial)
                last_line_partial = True
            break
        kept_reversed.append(line)
        used += cost
    if len(kept_reversed) >= max_lines and used <= max_bytes:
        truncated_by = "lines"

    kept_reversed.reverse()
    return _cut(kept_reversed, truncated_by, total_lines, total_bytes, max_lines, max_bytes, last_line_partial)


def truncate_line(line: str, max_chars: int = GREP_MAX_LINE_LENGTH) -> TruncatedLine:
    """Cut a single line to ``max_chars`` characters, marking the cut with ``... [truncated]``."""
    if len(line) <= max_chars:
        return TruncatedLine(line, False)
    return TruncatedLine(line[:max_chars] + "... [truncated]", True)
