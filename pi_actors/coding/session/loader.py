"""Reading pi session files (pi spec §2.6), tolerant of damage.

:func:`load_session` reads the whole file and splits it on ``\\n``:

- blank lines are skipped; a line that is not a JSON object is skipped with a warning;
- a last line without its terminating newline that does not parse is a write torn by a
  crash: it is dropped with a warning (:attr:`LoadedSession.torn_tail_bytes` says how many
  bytes, so a writer can cut them off before appending);
- the first record must be a header ``{"type": "session", "id": <string>, ...}``, else
  :class:`SessionLoadError`; later header lines (pi can leave a duplicate) are ignored;
- files older than version 3 are migrated in memory, as pi does (v1: ids and a linear
  parent chain, compaction ``firstKeptEntryIndex`` → ``firstKeptEntryId``; v2: message role
  ``hookMessage`` → ``custom``); :attr:`LoadedSession.migrated_from` names the old version.
  The file itself is not touched here.

The leaf is the last entry in file order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .format import CURRENT_VERSION, new_entry_id


class SessionLoadError(Exception):
    """The file cannot be read or is not a pi session file."""


@dataclass
class LoadedSession:
    path: str
    header: dict
    entries: list[dict]
    leaf_id: str | None
    warnings: list[str] = field(default_factory=list)
    migrated_from: int | None = None
    # Bytes at the end of the file that belong to a dropped torn line (0 if none).
    torn_tail_bytes: int = 0
    # Whether the kept part of the file ends with a newline (false for a hand-edited file
    # whose complete last line lacks one).
    ends_with_newline: bool = True


def _migrate(records: list[dict]) -> int | None:
    """Bring header + entries (file order, header first) to version 3 in place."""
    header = records[0]
    version = header.get("version")
    if not isinstance(version, int):
        version = 1
    if version >= CURRENT_VERSION:
        return None
    if version < 2:
        ids: set[str] = set()
        previous: str | None = None
        for record in records[1:]:
            record["id"] = new_entry_id(ids)
            ids.add(record["id"])
            record["parentId"] = previous
            previous = record["id"]
            if record.get("type") == "compaction" and isinstance(record.get("firstKeptEntryIndex"), int):
                index = record.pop("firstKeptEntryIndex")
                if 0 <= index < len(records) and records[index].get("type") != "session":
                    record["firstKeptEntryId"] = records[index].get("id")
    for record in records[1:]:
        message = record.get("message")
        if record.get("type") == "message" and isinstance(message, dict) and message.get("role") == "hookMessage":
            message["role"] = "custom"
    header["version"] = CURRENT_VERSION
    return version


def load_session(path: str) -> LoadedSession:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise SessionLoadError(f"Cannot read session file {path}: {exc.strerror or exc}") from None

    warnings: list[str] = []
    raw_lines = data.split(b"\n")
    # After the last "\n" comes an unterminated remainder (empty if the file ends cleanly).
    unterminated = raw_lines[-1]
    torn_tail_bytes = 0
    ends_with_newline = True
    parsed: list[tuple[int, dict]] = []
    for number, raw in enumerate(raw_lines, start=1):
        is_tail = number == len(raw_lines)
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            if is_tail:
                torn_tail_bytes = len(unterminated)
                warnings.append(
                    f"{path}: dropped an incomplete last line ({len(unterminated)} bytes, no newline) "
                    "left by an interrupted write"
                )
            else:
                warnings.append(f"{path}: skipped line {number}: not valid JSON")
            continue
        if not isinstance(record, dict):
            warnings.append(f"{path}: skipped line {number}: not a JSON object")
            continue
        if is_tail:
            ends_with_newline = False
        parsed.append((number, record))

    if not parsed or parsed[0][1].get("type") != "session" or not isinstance(parsed[0][1].get("id"), str):
        raise SessionLoadError(f"Not a pi session file (the first record is not a session header): {path}")
    records = [parsed[0][1]]
    for number, record in parsed[1:]:
        if record.get("type") == "session":
            warnings.append(f"{path}: ignored an extra session header on line {number}")
            continue
        records.append(record)

    migrated_from = _migrate(records)
    header, entries = records[0], records[1:]
    leaf_id = entries[-1].get("id") if entries else None
    return LoadedSession(
        path=path,
        header=header,
        entries=entries,
        leaf_id=leaf_id,
        warnings=warnings,
        migrated_from=migrated_from,
        torn_tail_bytes=torn_tail_bytes,
        ends_with_newline=ends_with_newline,
    )
