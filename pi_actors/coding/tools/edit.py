"""The ``edit`` tool (pi 0.73, spec §1.6): exact-text replacements in one file, all or none.

Arguments are pi 0.73's ``{path, edits: [{oldText, newText}, ...]}``. :func:`prepare_edit_arguments`
(run before schema validation, as pi's ``prepareArguments``) keeps the older single form
working: a top-level ``oldText``/``newText`` pair is appended to ``edits``, and ``edits`` sent as a
JSON string holding an array (some models do) is parsed.

Algorithm (pi's): strip and remember a BOM, remember the line ending (CRLF if the first line
break is CRLF), normalize the file to LF, then :func:`.edit_diff.apply_edits`: every
``oldText`` is matched against the original file (exactly, else in the fuzzy-normalized texts),
must occur once and not overlap another; the replacements are applied together or not at
all; a no-op is refused. The file is written as BOM + content with the original line endings.
The result is ``Successfully replaced {n} block(s) in {path}.`` with
``details = {"diff", "firstChangedLine"}`` computed between base and new content.

Error texts are pi's (``Could not find the exact text in ...`` / ``Could not find edits[i] in
...``, ``Found N occurrences ...``, ``... overlap in ...``, ``No changes made to ...``,
``Edit tool input is invalid. edits must contain at least one replacement.``). Deliberate
differences, each leaving the file untouched:

- a missing or unreadable file is ``File not found: {path}`` (pi 0.73: ``Could not edit file:
  {path}. Error code: ENOENT.``), and a read-only file system (for instance the read-only
  sandbox) is reported as such (``EROFS: read-only file system, open '...'``);
- a binary file (one containing a NUL byte) → ``Cannot edit {path}: it is a binary file``;
- a file that is not valid UTF-8 → ``Cannot edit {path}: it is not valid UTF-8 text (...)``
  (pi would decode with U+FFFD and write the replacement characters back, corrupting it).
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any

import trio

from .base import ToolError, ToolSpec, string_arg, validation_error
from .edit_diff import (
    Replacement,
    apply_edits,
    detect_line_ending,
    generate_diff_string,
    normalize_to_lf,
    restore_line_endings,
    strip_bom,
)
from .paths import resolve_to_cwd
from .write import write_bytes


def prepare_edit_arguments(raw: Any) -> Any:
    """pi's ``prepareArguments`` for ``edit``: a JSON-string ``edits`` holding an array is
    parsed, and a legacy top-level ``oldText``/``newText`` pair becomes the last entry of
    ``edits``. Anything else is returned as it came (validation reports it)."""
    if not isinstance(raw, dict):
        return raw
    args = dict(raw)
    if isinstance(args.get("edits"), str):
        try:
            parsed = json.loads(args["edits"])
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            args["edits"] = parsed
    old_text, new_text = args.get("oldText"), args.get("newText")
    if not isinstance(old_text, str) or not isinstance(new_text, str):
        return args
    edits = list(args["edits"]) if isinstance(args.get("edits"), list) else []
    edits.append({"oldText": old_text, "newText": new_text})
    del args["oldText"], args["newText"]
    args["edits"] = edits
    return args


EDIT_SPEC = ToolSpec(
    name="edit",
    label="edit",
    description=(
        "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, "
        "non-overlapping region of the original file. If two changes affect the same block or nearby lines, "
        "merge them into one edit instead of emitting overlapping edits. Do not include large unchanged "
        "regions just to connect distant changes."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "oldText": {
                            "type": "string",
                            "description": "Exact text for one targeted replacement. It must be unique in the "
                            "original file and must not overlap with any other edits[].oldText in the same call.",
                        },
                        "newText": {"type": "string", "description": "Replacement text for this targeted edit."},
                    },
                    "required": ["oldText", "newText"],
                    "additionalProperties": False,
                },
                "description": "One or more targeted replacements. Each edit is matched against the original "
                "file, not incrementally. Do not include overlapping or nested edits. If two changes touch the "
                "same block or nearby lines, merge them into one edit instead.",
            },
        },
        "required": ["path", "edits"],
        "additionalProperties": False,
    },
    prepare_arguments=prepare_edit_arguments,
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


def _edit_sync(path_arg: str, edits: list[Replacement], cwd: str) -> dict:
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
    base, updated = apply_edits(normalize_to_lf(content), edits, path_arg)
    write_bytes(absolute, (bom + restore_line_endings(updated, ending)).encode("utf-8", "surrogatepass"))
    diff, first_changed = generate_diff_string(base, updated)
    details: dict[str, Any] = {"diff": diff}
    if first_changed is not None:
        details["firstChangedLine"] = first_changed
    text = f"Successfully replaced {len(edits)} block(s) in {path_arg}."
    return {"content": [{"type": "text", "text": text}], "details": details}


def _edits_arg(args: dict[str, Any]) -> list[Replacement]:
    edits = args.get("edits")
    if not isinstance(edits, list) or not edits:
        raise ToolError("Edit tool input is invalid. edits must contain at least one replacement.")
    out: list[Replacement] = []
    for i, edit in enumerate(edits):
        if not isinstance(edit, dict):
            raise validation_error("edit", f"edits/{i}", "object")
        texts = []
        for key in ("oldText", "newText"):
            if not isinstance(edit.get(key), str):
                raise validation_error("edit", f"edits/{i}/{key}", "string")
            texts.append(edit[key])
        out.append(Replacement(*texts))
    return out


async def run_edit(args: dict[str, Any], *, cwd: str, on_update: Any = None) -> dict:
    """Run one ``edit`` call; ``args`` may be in either form (it is prepared again here, so a
    caller that skipped :func:`prepare_edit_arguments` gets the same result)."""
    args = prepare_edit_arguments(args)
    path_arg = string_arg(args, "edit", "path")
    edits = _edits_arg(args)
    await trio.lowlevel.checkpoint_if_cancelled()
    # Not abandoned on cancellation: a mutation either completes or fails before the call ends.
    return await trio.to_thread.run_sync(_edit_sync, path_arg, edits, cwd)
