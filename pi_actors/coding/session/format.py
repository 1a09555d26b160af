"""Small pieces of pi's session file format (JSONL v3, pi spec §2.1–§2.2).

- :func:`default_session_dir`: ``<agent_dir>/sessions/--<encoded cwd>--`` (created 0700).
- :func:`iso_timestamp`: ``2026-03-15T22:40:18.123Z`` (UTC, milliseconds), like JS
  ``Date.toISOString``; :func:`timestamp_ms` turns one back into epoch milliseconds.
- :func:`session_file_name`: ``<timestamp with ':' and '.' as '-'>_<session id>.jsonl``.
- :func:`new_entry_id`: 8 lowercase hex characters (a random UUID's first 8), drawn again on
  collision up to 100 times, then a full UUID.
- :func:`encode_line`: one entry as compact JSON plus ``\\n``, UTF-8, as ``JSON.stringify``.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Container
from datetime import UTC, datetime

CURRENT_VERSION = 3

_CWD_SEPARATORS = re.compile(r"[/\\:]")


def default_session_dir(agent_dir: str, cwd: str) -> str:
    """The per-working-directory session folder under ``agent_dir``, created if missing."""
    encoded = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    encoded = _CWD_SEPARATORS.sub("-", encoded)
    path = os.path.join(agent_dir, "sessions", f"--{encoded}--")
    make_private_dirs(path)
    return path


def make_private_dirs(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``, but every directory it creates is 0700 (session
    files are transcripts: other local users must not list or read them). Existing
    directories are left as they are."""
    if os.path.lexists(path):
        return  # a directory, or something else that the caller's next step reports
    parent = os.path.dirname(os.path.abspath(path))
    if parent != path:
        make_private_dirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return  # created meanwhile
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask


def iso_timestamp(moment: datetime | None = None) -> str:
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def timestamp_ms(iso: str) -> int:
    """Epoch milliseconds of an ISO timestamp such as ``2026-03-15T22:40:18.123Z``."""
    text = iso[:-1] + "+00:00" if iso.endswith("Z") else iso
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(round(moment.timestamp() * 1000))


def session_file_name(timestamp: str, session_id: str) -> str:
    return f"{timestamp.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"


def new_session_id(now_ms: int | None = None) -> str:
    """A new session id, a UUID version 7 as pi 0.73 makes them (RFC 9562): 48 bits of
    Unix time in milliseconds, then random bits; ids made later sort later."""
    ms = (time.time_ns() // 1_000_000 if now_ms is None else now_ms) & ((1 << 48) - 1)
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # variant 10
    return str(uuid.UUID(int=value))


def new_entry_id(existing: Container[str]) -> str:
    for _ in range(100):
        candidate = uuid.uuid4().hex[:8]
        if candidate not in existing:
            return candidate
    return str(uuid.uuid4())


def encode_line(record: dict) -> bytes:
    """``JSON.stringify(record) + "\\n"`` as UTF-8; ValueError if it is not plain JSON."""
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Session entry is not JSON-serialisable: {exc}") from None
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: escape them (and everything non-ASCII) the way JSON allows.
        return (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")
