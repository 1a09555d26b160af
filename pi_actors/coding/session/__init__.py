"""pi-compatible session files (JSONL v3): durable writing, tolerant loading, LLM context.

- :class:`SessionWriter` — one writer per file (locked: :class:`SessionLocked` names the
  holder); pi's lazy creation; every append fsynced.
- :func:`load_session` — header, entries, leaf, warnings; damaged lines reported and kept
  in the file, a torn last line dropped.
- :func:`lock_holder` — who has a session file open for writing, without taking the lock.
- :func:`build_session_context` / :func:`session_context` — messages along a path (§2.4).
- :func:`list_sessions`, :func:`most_recent_session`, :func:`find_session` — which file to open.
- :func:`default_session_dir`, :func:`new_entry_id` and the format helpers.
"""

from .catalog import SessionInfo, SessionNotFound, find_session, list_sessions, most_recent_session, session_info
from .context import SessionContext, build_session_context, session_context
from .format import (
    CURRENT_VERSION,
    default_session_dir,
    iso_timestamp,
    new_entry_id,
    session_file_name,
    timestamp_ms,
)
from .loader import DamagedLine, LoadedSession, SessionLoadError, load_session
from .lock import SessionLocked, lock_holder
from .writer import SessionWriteError, SessionWriter

__all__ = [
    "CURRENT_VERSION",
    "SessionInfo",
    "SessionNotFound",
    "find_session",
    "list_sessions",
    "most_recent_session",
    "session_info",
    "DamagedLine",
    "LoadedSession",
    "SessionLocked",
    "SessionContext",
    "SessionLoadError",
    "SessionWriteError",
    "SessionWriter",
    "build_session_context",
    "default_session_dir",
    "iso_timestamp",
    "load_session",
    "lock_holder",
    "new_entry_id",
    "session_context",
    "session_file_name",
    "timestamp_ms",
]
