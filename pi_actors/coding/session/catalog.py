"""Finding session files: list a directory, the most recent one, an id prefix (pi spec §2.7).

- :func:`list_sessions` — every valid ``*.jsonl`` session in a directory as
  :class:`SessionInfo`, most recently modified first (``modified`` = the newest user/assistant
  message time, else the header time, else the file's mtime).
- :func:`most_recent_session` — the path ``-c/--continue`` opens, or None.
- :func:`find_session` — ``--session <arg>``: a path when the argument looks like one
  (contains a separator or ends with ``.jsonl``), else an id prefix searched in the
  project's directory first, then in every project's directory under ``sessions_root``.

Validity is judged from the first line only (as pi does for listings); a file whose first
line is not a session header is skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .format import timestamp_ms
from .loader import SessionLoadError, load_session

__all__ = ["SessionInfo", "list_sessions", "most_recent_session", "find_session", "SessionNotFound"]


class SessionNotFound(Exception):
    """No session matches what the user asked for."""


@dataclass
class SessionInfo:
    path: str
    id: str
    cwd: str
    created: str
    modified_ms: int
    message_count: int
    first_message: str
    name: str | None = None


def _read_header(path: str) -> dict | None:
    try:
        with open(path, "rb") as f:
            first = f.readline(64 * 1024)
        header = json.loads(first)
    except (OSError, ValueError):
        return None
    if isinstance(header, dict) and header.get("type") == "session" and isinstance(header.get("id"), str):
        return header
    return None


def _text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def session_info(path: str) -> SessionInfo | None:
    """Details of one session file, or None when it is not a valid session."""
    if _read_header(path) is None:
        return None
    try:
        loaded = load_session(path)
    except SessionLoadError:
        return None
    header = loaded.header
    modified: int | None = None
    count = 0
    first = ""
    name = None
    for entry in loaded.entries:
        if entry.get("type") == "session_info" and isinstance(entry.get("name"), str) and entry["name"].strip():
            name = entry["name"].strip()
        if entry.get("type") != "message" or not isinstance(entry.get("message"), dict):
            continue
        count += 1
        message = entry["message"]
        if message.get("role") == "user" and not first:
            first = _text_of(message)
        if message.get("role") in ("user", "assistant"):
            stamp = message.get("timestamp")
            if isinstance(stamp, (int, float)):
                modified = max(modified or 0, int(stamp))
    if modified is None:
        try:
            modified = timestamp_ms(header.get("timestamp", ""))
        except ValueError:
            modified = int(os.path.getmtime(path) * 1000)
    return SessionInfo(
        path=path,
        id=header["id"],
        cwd=header.get("cwd") or "",
        created=header.get("timestamp") or "",
        modified_ms=modified,
        message_count=count,
        first_message=first or "(no messages)",
        name=name,
    )


def list_sessions(directory: str) -> list[SessionInfo]:
    """The valid sessions in ``directory``, newest first; a missing directory is empty."""
    try:
        names = [n for n in os.listdir(directory) if n.endswith(".jsonl")]
    except FileNotFoundError:
        return []
    infos = [info for info in (session_info(os.path.join(directory, n)) for n in names) if info is not None]
    return sorted(infos, key=lambda i: i.modified_ms, reverse=True)


def most_recent_session(directory: str) -> str | None:
    """The session ``-c`` continues: the most recently modified valid file (mtime), or None."""
    try:
        paths = [os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".jsonl")]
    except FileNotFoundError:
        return None
    valid = [p for p in paths if _read_header(p) is not None]
    if not valid:
        return None
    return max(valid, key=os.path.getmtime)


def find_session(arg: str, project_dir: str, sessions_root: str | None = None) -> str:
    """Resolve ``--session <path|id prefix>`` to a file path; raises SessionNotFound."""
    if os.sep in arg or "/" in arg or arg.endswith(".jsonl"):
        path = os.path.abspath(os.path.expanduser(arg))
        if not os.path.exists(path):
            raise SessionNotFound(f"Session file not found: {path}")
        return path
    for info in list_sessions(project_dir):
        if info.id.startswith(arg):
            return info.path
    if sessions_root and os.path.isdir(sessions_root):
        for sub in sorted(os.listdir(sessions_root)):
            for info in list_sessions(os.path.join(sessions_root, sub)):
                if info.id.startswith(arg):
                    return info.path
    raise SessionNotFound(f"No session found matching '{arg}'")
