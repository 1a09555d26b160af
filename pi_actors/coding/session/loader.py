"""Reading pi session files (pi spec §2.6): damage is reported, never silently skipped.

:func:`load_session` reads the whole file and splits it on ``\\n``:

- blank lines are skipped;
- a line that cannot be used — not UTF-8, not JSON, not an object, or an entry whose known
  fields have the wrong types (see :mod:`._validate`) — is *damaged*: it is left out of the
  entries and listed in :attr:`LoadedSession.damaged` (line number and reason), and one
  warning names them all. The file is not changed: the damaged lines stay in it for the
  user to repair (a migration rewrite keeps them too, byte for byte, in place);
- a last line without its terminating newline that does not parse is a write torn by a
  crash: it is dropped with a warning (:attr:`LoadedSession.torn_tail_bytes` says how many
  bytes, so a writer can cut them off before appending);
- the first record must be a header ``{"type": "session", "id": <string>, ...}``, else
  :class:`SessionLoadError`; later header lines (pi can leave a duplicate) are ignored;
- files older than version 3 are migrated in memory, as pi does (v1: ids and a linear
  parent chain, compaction ``firstKeptEntryIndex`` → ``firstKeptEntryId``; v2: message role
  ``hookMessage`` → ``custom``); :attr:`LoadedSession.migrated_from` names the old version.
  The file itself is not touched here.

Keeping the tree whole around a damaged line: an entry whose ``parentId`` names no loaded
entry, when damaged lines come before it, is re-attached (in memory only) to its nearest
surviving ancestor — through the damaged line's own ``parentId`` when that can still be read
from it, else to the entry just before the nearest damaged line — so one bad line costs the
context that line and nothing after it. An entry that was an orphan already (no damage
before it) stays one, as in pi.

The leaf is the last entry in file order. :class:`SessionLoadError` is the only exception.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from ._validate import entry_problem, header_problem, parse_line
from .format import CURRENT_VERSION, new_entry_id

__all__ = ["DamagedLine", "LoadedSession", "SessionLoadError", "load_session"]

_LISTED = 10  # damaged lines named in the warning; the rest are counted


class SessionLoadError(Exception):
    """The file cannot be read or is not a pi session file."""


@dataclass(frozen=True)
class DamagedLine:
    number: int  # 1-based line number in the file
    reason: str
    raw: bytes  # the line as it is in the file (without its newline)


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
    # Lines left out because they cannot be used (they are still in the file).
    damaged: list[DamagedLine] = field(default_factory=list)
    # The line number of the header and of each entry, in order (for a rewrite that keeps
    # the damaged lines where they were).
    record_lines: list[int] = field(default_factory=list)
    # Entries re-attached around damaged lines: index in ``entries`` -> the parentId in the file.
    reattached: dict[int, str] = field(default_factory=dict)


def _version(header: dict) -> int:
    version = header.get("version")
    return version if isinstance(version, int) else 1  # absent (or null) means version 1


def _migrate(records: list[dict]) -> int | None:
    """Bring header + entries (file order, header first) to version 3 in place."""
    header = records[0]
    version = _version(header)
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
            if record.get("type") == "compaction" and type(record.get("firstKeptEntryIndex")) is int:
                index = record.pop("firstKeptEntryIndex")
                if 0 <= index < len(records) and records[index].get("type") != "session":
                    record["firstKeptEntryId"] = records[index].get("id")
    for record in records[1:]:
        message = record.get("message")
        if record.get("type") == "message" and isinstance(message, dict) and message.get("role") == "hookMessage":
            message["role"] = "custom"
    header["version"] = CURRENT_VERSION
    return version


# pi (and we) write "type", "id", "parentId" first: enough to read them from a broken line.
_LINKS = re.compile(
    rb'^\s*\{\s*"type"\s*:\s*"[^"\\]{0,64}"\s*,\s*"id"\s*:\s*"([^"\\]{1,64})"\s*,\s*"parentId"\s*:\s*(?:null|"([^"\\]{1,64})")'
)


def _links_of(damaged: DamagedLine, parsed: dict | None) -> tuple[str, str | None] | None:
    """``(id, parentId)`` of a damaged line when they can still be read from it."""
    if parsed is not None:
        entry_id, parent = parsed.get("id"), parsed.get("parentId")
        if isinstance(entry_id, str) and (parent is None or isinstance(parent, str)):
            return entry_id, parent
        return None
    match = _LINKS.match(damaged.raw)
    if match is None:
        return None
    parent = match.group(2)
    return match.group(1).decode("utf-8", "replace"), parent.decode("utf-8", "replace") if parent is not None else None


def _reattach(
    entries: list[dict], lines: list[int], damaged: list[DamagedLine], links: dict[str, str | None]
) -> dict[int, str]:
    """Re-attach entries orphaned by damaged lines (see the module docstring); returns the
    ``parentId`` each re-attached entry has in the file, by its index in ``entries``."""
    original: dict[int, str] = {}
    if not damaged:
        return original
    known = {e["id"] for e in entries}
    damaged_numbers = sorted(d.number for d in damaged)
    # For each damaged line: the id of the last surviving entry before it.
    before: dict[int, str | None] = {}
    position = 0
    last: str | None = None
    for number in damaged_numbers:
        while position < len(entries) and lines[position] < number:
            last = entries[position]["id"]
            position += 1
        before[number] = last
    for index, (entry, number) in enumerate(zip(entries, lines, strict=False)):
        parent = entry.get("parentId")
        if not isinstance(parent, str) or parent in known:
            continue
        nearest = bisect.bisect_left(damaged_numbers, number) - 1
        if nearest < 0:
            continue  # no damage before it: an orphan of its own making, left as pi leaves it
        original[index] = parent
        seen: set[str] = set()
        while isinstance(parent, str) and parent in links and parent not in known and parent not in seen:
            seen.add(parent)
            parent = links[parent]
        if parent is None or (isinstance(parent, str) and parent in known):
            entry["parentId"] = parent
        else:
            entry["parentId"] = before[damaged_numbers[nearest]]
    return original


def _damage_warning(path: str, damaged: list[DamagedLine]) -> str:
    listed = ", ".join(f"line {d.number} ({d.reason})" for d in damaged[:_LISTED])
    more = f" and {len(damaged) - _LISTED} more" if len(damaged) > _LISTED else ""
    count = f"{len(damaged)} damaged line{'s' if len(damaged) > 1 else ''}"
    return (
        f"{path}: {count} left out of the conversation: {listed}{more}; "
        f"{'they are' if len(damaged) > 1 else 'it is'} kept in the file for you to repair"
    )


@dataclass
class _Scan:
    """What reading a session file's lines has found so far (see :func:`load_session`)."""

    path: str
    warnings: list[str] = field(default_factory=list)
    torn_tail_bytes: int = 0
    ends_with_newline: bool = True
    header: dict | None = None
    records: list[dict] = field(default_factory=list)
    record_lines: list[int] = field(default_factory=list)
    damaged: list[DamagedLine] = field(default_factory=list)
    links: dict[str, str | None] = field(default_factory=dict)

    def line(self, number: int, raw: bytes, is_tail: bool) -> None:
        """Line ``number`` (``is_tail``: after the last newline, so unterminated): the
        header, an entry, an ignored extra header, a damaged line or a torn tail."""
        record, reason = parse_line(raw)
        if record is None and is_tail:
            self.torn_tail_bytes = len(raw)
            self.warnings.append(
                f"{self.path}: the last line was incomplete (a crash during a write?) and was dropped ({len(raw)} bytes)"
            )
            return
        if record is not None and self.header is None:
            problem = header_problem(record, raw)
            if problem is not None:
                raise SessionLoadError(f"Not a pi session file ({problem}): {self.path}")
            self.header = record
            self._keep(record, number, is_tail)
            return
        if record is not None and record.get("type") == "session":
            self.warnings.append(f"{self.path}: ignored an extra session header on line {number}")
            return
        if record is not None:
            reason = entry_problem(record, raw, with_ids=self.header is not None and _version(self.header) >= 2)
        if reason is not None:
            self._damaged(DamagedLine(number, reason, raw), record)
            return
        assert record is not None  # parse_line gives a record or a reason
        self._keep(record, number, is_tail)

    def _keep(self, record: dict, number: int, is_tail: bool) -> None:
        if is_tail:
            self.ends_with_newline = False
        self.records.append(record)
        self.record_lines.append(number)

    def _damaged(self, line: DamagedLine, record: dict | None) -> None:
        self.damaged.append(line)
        found = _links_of(line, record)
        if found is not None:
            self.links.setdefault(found[0], found[1])


def load_session(path: str) -> LoadedSession:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise SessionLoadError(f"Cannot read session file {path}: {exc.strerror or exc}") from None

    scan = _Scan(path)
    raw_lines = data.split(b"\n")
    for number, raw in enumerate(raw_lines, start=1):
        if raw.strip():
            scan.line(number, raw, is_tail=number == len(raw_lines))
    header, records, record_lines, damaged, warnings = scan.header, scan.records, scan.record_lines, scan.damaged, scan.warnings

    if header is None:
        raise SessionLoadError(f"Not a pi session file (the first record is not a session header): {path}")
    # Damaged lines before the header are reported like any other.
    if damaged:
        warnings.insert(0, _damage_warning(path, damaged))

    migrated_from = _migrate(records)
    entries = records[1:]
    reattached: dict[int, str] = {}
    if migrated_from is None or migrated_from >= 2:
        reattached = _reattach(entries, record_lines[1:], damaged, scan.links)
    leaf_id = entries[-1].get("id") if entries else None
    return LoadedSession(
        path=path,
        header=header,
        entries=entries,
        leaf_id=leaf_id,
        warnings=warnings,
        migrated_from=migrated_from,
        torn_tail_bytes=scan.torn_tail_bytes,
        ends_with_newline=scan.ends_with_newline,
        damaged=damaged,
        record_lines=record_lines,
        reattached=reattached,
    )
