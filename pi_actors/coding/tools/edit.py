"""The ``edit`` tool (pi spec §1.6): replace one unique occurrence of ``oldText``.

Algorithm (pi's): strip and remember a BOM, remember the line ending (CRLF if the first line
break is CRLF), normalize file, ``oldText`` and ``newText`` to LF, find ``oldText`` exactly,
else in the fuzzy-normalized texts (see :mod:`.edit_diff`); it must occur exactly once in the
fuzzy-normalized file; replace the first match in the base content (the fuzzy-normalized file
when the fuzzy match was used); refuse a no-op; write BOM + content with the original line
endings. The result is ``Successfully replaced text in {path}.`` with
``details = {"diff", "firstChangedLine"}`` computed between base and new content.

Error texts are pi's (``File not found: {path}``, ``Could not find the exact text in ...``,
``Found N occurrences ...``, ``No changes made to ...``). Deliberate additions, each leaving
the file untouched:

- a binary file (one containing a NUL byte) → ``Cannot edit {path}: it is a binary file``;
- a file that is not valid UTF-8 → ``Cannot edit {path}: it is not valid UTF-8 text (...)``
  (pi would decode with U+FFFD and write the replacement characters back, corrupting it);
- a read-only file system (for instance the read-only sandbox) is reported as such
  (``EROFS: read-only file system, open '...'``) rather than as ``File not found``.
"""

from __future__ import annotations

import errno
import os
from typing import Any

import trio

from .base import ToolError, ToolSpec, string_arg
from .edit_diff import (
    count_occurrences,
    detect_line_ending,
    fuzzy_find_text,
    generate_diff_string,
    normalize_for_fuzzy_match,
    normalize_to_lf,
    restore_line_endings,
    strip_bom,
)
from .paths import resolve_to_cwd
from .write import write_bytes

EDIT_SPEC = ToolSpec(
    name="edit",
    label="edit",
    description=(
        "Edit a file by replacing exact text. The oldText must match exactly (including whitespace). "
        "Use this for precise, surgical edits."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
            "oldText": {"type": "string", "description": "Exact text to find and replace (must match exactly)"},
            "newText": {"type": "string", "description": "New text to replace the old text with"},
        },
        "required": ["path", "oldText", "newText"],
    },
)


def _check_access(absolute: str, path_arg: str) -> None:
    if os.access(absolute, os.R_OK | os.W_OK):
        return
    # access() says EROFS for a writable-looking file on a read-only mount.
    if os.access(absolute, os.R_OK) and not os.path.isdir(absolute):
        try:
            fd = os.open(absolute, os.O_WRONLY)
        except OSError as exc:
            if exc.errno == errno.EROFS:
                raise ToolError(f"EROFS: read-only file system, open '{absolute}'") from None
        else:
            os.close(fd)
    raise ToolError(f"File not found: {path_arg}")


def _decode(data: bytes, path_arg: str) -> str:
    if b"\0" in data:
        raise ToolError(f"Cannot edit {path_arg}: it is a binary file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"Cannot edit {path_arg}: it is not valid UTF-8 text "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start}); editing it would corrupt it"
        ) from None


def _edit_sync(path_arg: str, old_text: str, new_text: str, cwd: str) -> dict:
    absolute = resolve_to_cwd(path_arg, cwd)
    _check_access(absolute, path_arg)
    try:
        with open(absolute, "rb") as handle:
            data = handle.read()
    except IsADirectoryError:
        raise ToolError("EISDIR: illegal operation on a directory, read") from None
    except OSError:
        raise ToolError(f"File not found: {path_arg}") from None

    bom, content = strip_bom(_decode(data, path_arg))
    ending = detect_line_ending(content)
    content = normalize_to_lf(content)
    old_lf = normalize_to_lf(old_text)
    new_lf = normalize_to_lf(new_text)

    match = fuzzy_find_text(content, old_lf)
    if not match.found:
        raise ToolError(
            f"Could not find the exact text in {path_arg}. The old text must match exactly "
            "including all whitespace and newlines."
        )
    occurrences = count_occurrences(normalize_for_fuzzy_match(content), normalize_for_fuzzy_match(old_lf))
    if occurrences > 1:
        raise ToolError(
            f"Found {occurrences} occurrences of the text in {path_arg}. The text must be unique. "
            "Please provide more context to make it unique."
        )
    base = match.base
    updated = base[: match.index] + new_lf + base[match.index + match.length :]
    if updated == base:
        raise ToolError(
            f"No changes made to {path_arg}. The replacement produced identical content. This might "
            "indicate an issue with special characters or the text not existing as expected."
        )
    write_bytes(absolute, (bom + restore_line_endings(updated, ending)).encode("utf-8", "surrogatepass"))
    diff, first_changed = generate_diff_string(base, updated)
    details: dict[str, Any] = {"diff": diff}
    if first_changed is not None:
        details["firstChangedLine"] = first_changed
    return {"content": [{"type": "text", "text": f"Successfully replaced text in {path_arg}."}], "details": details}


async def run_edit(args: dict[str, Any], *, cwd: str, on_update: Any = None) -> dict:
    path_arg = string_arg(args, "edit", "path")
    old_text = string_arg(args, "edit", "oldText")
    new_text = string_arg(args, "edit", "newText")
    await trio.lowlevel.checkpoint_if_cancelled()
    # Not abandoned on cancellation: a mutation either completes or fails before the call ends.
    return await trio.to_thread.run_sync(_edit_sync, path_arg, old_text, new_text, cwd)
