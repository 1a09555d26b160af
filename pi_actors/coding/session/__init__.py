"""pi-compatible session files (JSONL v3): durable writing, tolerant loading, LLM context.

- :class:`SessionWriter` — one writer per file; pi's lazy creation; every append fsynced.
- :func:`load_session` — header, entries, leaf, warnings; torn last line recovered.
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
from .loader import LoadedSession, SessionLoadError, load_session
from .writer import SessionWriteError, SessionWriter

__all__ = [
    "CURRENT_VERSION",
    "SessionInfo",
    "SessionNotFound",
    "find_session",
    "list_sessions",
    "most_recent_session",
    "session_info",
    "LoadedSession",
    "SessionContext",
    "SessionLoadError",
    "SessionWriteError",
    "SessionWriter",
    "build_session_context",
    "default_session_dir",
    "iso_timestamp",
    "load_session",
    "new_entry_id",
    "session_context",
    "session_file_name",
    "timestamp_ms",
]
