"""Which files a conversation read and modified, as compaction and branch summaries list them.

- :class:`FileOperations` — three sets: ``read``, ``written``, ``edited``.
- :func:`add_file_ops` — record the string ``path`` argument of every ``read`` / ``write`` /
  ``edit`` tool call of an assistant message (other messages and tools are ignored).
- :func:`add_details` — merge a previous summary entry's ``details`` (``readFiles`` → read,
  ``modifiedFiles`` → edited); non-list fields are ignored.
- :func:`compute_file_lists` — ``(read_files, modified_files)``: modified = edited ∪ written,
  read = read-only files (read but never modified); both sorted.
- :func:`format_file_operations` — ``\\n\\n<read-files>\\n…\\n</read-files>`` and/or
  ``\\n\\n<modified-files>\\n…\\n</modified-files>`` (each only when non-empty), or "".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .messages import as_plain

__all__ = ["FileOperations", "add_file_ops", "add_details", "compute_file_lists", "format_file_operations"]


@dataclass
class FileOperations:
    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)


def add_file_ops(message: Any, ops: FileOperations) -> None:
    plain = as_plain(message)
    if plain.get("role") != "assistant":
        return
    for block in plain.get("content") or []:
        if not isinstance(block, dict) or block.get("type") != "toolCall":
            continue
        arguments = block.get("arguments")
        path = arguments.get("path") if isinstance(arguments, dict) else None
        if not isinstance(path, str) or not path:
            continue
        name = block.get("name")
        if name == "read":
            ops.read.add(path)
        elif name == "write":
            ops.written.add(path)
        elif name == "edit":
            ops.edited.add(path)


def add_details(details: Any, ops: FileOperations) -> None:
    if not isinstance(details, dict):
        return
    read_files = details.get("readFiles")
    if isinstance(read_files, list):
        ops.read.update(f for f in read_files if isinstance(f, str))
    modified = details.get("modifiedFiles")
    if isinstance(modified, list):
        ops.edited.update(f for f in modified if isinstance(f, str))


def compute_file_lists(ops: FileOperations) -> tuple[list[str], list[str]]:
    modified = ops.edited | ops.written
    return sorted(ops.read - modified), sorted(modified)


def format_file_operations(read_files: list[str], modified_files: list[str]) -> str:
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""
