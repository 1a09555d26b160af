"""Which session a CLI run opens: ``-c``, ``-r``, ``--session``, ``--fork``, ``--no-session``.

``choose_session`` returns a ``SessionChoice`` (the ``session`` part of the coordinator's
configuration plus what to restore), or raises ``ConfigError`` for a user mistake. ``-r``
shows a numbered list on the terminal; choosing nothing is ``NoSessionSelected`` (exit 0,
as pi does).

A session that another pi-actors process has open for writing is refused, whichever way it
was chosen (``-c``, ``-r``, ``--session``): "session <id> is open in another pi-actors process
(pid N); close it or use --fork <id>". ``-c`` does not quietly pick an older session or fork
instead — it promises the most recent one, and continuing something else would be the very
surprise the lock exists to prevent; ``--fork`` (which only reads the file) is the way to go
on from it in parallel. This check runs before any actor starts, for a clean message in
every mode; the session store's lock is what actually guarantees one writer.

``print_session_warnings`` shows what opening the session reported (damaged lines left out
of the context, a torn last line dropped) on stderr, one line each.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from msgspec.structs import replace

from ..protocol.config import SessionConfig
from ._config import ConfigError

__all__ = ["SessionChoice", "NoSessionSelected", "choose_session", "print_session_warnings"]


class NoSessionSelected(Exception):
    pass


@dataclass
class SessionChoice:
    config: SessionConfig = field(default_factory=SessionConfig)
    # {"provider", "modelId"} and thinking level saved in the session, to restore.
    model: dict | None = None
    thinking: str | None = None
    #: The working directory a session opened by ``--session`` or ``-r`` was saved in (its
    #: header's ``cwd``, when absolute): pi 0.73 runs the session there, not in the
    #: directory the command was started from. None: the current directory.
    cwd: str | None = None


def _saved_state(path: str) -> tuple[dict | None, str | None, str, str | None]:
    """The model and thinking level to restore, the session id, and the header's ``cwd``
    (None unless absolute: a server under ``--root`` keeps it relative)."""
    from ..coding.session import SessionLoadError, load_session, session_context

    if _is_empty(path):
        # pi's rule: an empty file becomes a new session in that file (the store writes its
        # header); nothing is saved in it yet.
        return None, None, os.path.basename(path), None
    try:
        loaded = load_session(path)
    except SessionLoadError as exc:
        raise ConfigError(f"Cannot open session {path}: {exc}") from None
    ctx = session_context(loaded.entries, loaded.leaf_id)
    has_level = any(e.get("type") == "thinking_level_change" for e in loaded.entries)
    cwd = loaded.header.get("cwd")
    return ctx.model, (ctx.thinking_level if has_level else None), loaded.header["id"], (
        cwd if isinstance(cwd, str) and os.path.isabs(cwd) else None
    )


def _is_empty(path: str) -> bool:
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return False


def _refuse_if_open_elsewhere(path: str, session_id: str) -> None:
    from ..coding.session import SessionLocked, lock_holder

    pid = lock_holder(path)
    if pid is not None:
        raise ConfigError(str(SessionLocked(path, session_id, pid)))


def print_session_warnings(session: dict | None, file: Any = None) -> None:
    """Print the ``warnings`` of a coordinator's ``session`` description, one line each."""
    for warning in (session or {}).get("warnings") or []:
        print(f"Warning: {warning}", file=file or sys.stderr)


def _pick(session_dir: str) -> str:
    from ..coding.session import list_sessions

    sessions = list_sessions(session_dir)
    if not sessions:
        raise ConfigError(f"No sessions to resume in {session_dir}")
    if not sys.stdin.isatty():
        raise ConfigError("--resume needs a terminal to choose a session; use --session <id> or -c instead")
    for i, info in enumerate(sessions[:30], 1):
        when = datetime.fromtimestamp(info.modified_ms / 1000).strftime("%Y-%m-%d %H:%M")
        title = info.name or info.first_message.replace("\n", " ")
        print(f"{i:>3}. {when}  {info.id[:8]}  {info.message_count:>3} msgs  {title[:70]}")
    answer = input("Resume which session? (number, empty to cancel) ").strip()
    if not answer:
        raise NoSessionSelected()
    if not answer.isdigit() or not 1 <= int(answer) <= min(len(sessions), 30):
        raise ConfigError(f"No session numbered {answer!r}")
    return sessions[int(answer) - 1].path


def choose_session(
    *,
    agent_dir: str,
    cwd: str,
    session_dir: str | None,
    no_session: bool,
    continue_: bool,
    resume: bool,
    session: str | None,
    fork: str | None,
) -> SessionChoice:
    from ..coding.session import SessionNotFound, default_session_dir, find_session, most_recent_session

    chosen = [name for name, on in (("--no-session", no_session), ("-c", continue_), ("-r", resume), ("--session", session), ("--fork", fork)) if on]
    if len(chosen) > 1:
        raise ConfigError(f"Choose one of {', '.join(chosen)}")
    base = SessionConfig(no_session=no_session, session_dir=session_dir, agent_dir=agent_dir)
    if no_session:
        return SessionChoice(config=base)
    directory = session_dir or default_session_dir(agent_dir, cwd)
    path: str | None = None
    try:
        if continue_:
            path = most_recent_session(directory)
        elif resume:
            path = _pick(directory)
        elif session or fork:
            path = find_session(session or fork or "", directory, os.path.join(agent_dir, "sessions"))
    except SessionNotFound as exc:
        raise ConfigError(str(exc)) from None
    if path is None:
        return SessionChoice(config=base)
    model, thinking, session_id, saved_cwd = _saved_state(path)
    if not fork:
        _refuse_if_open_elsewhere(path, session_id)
    if fork:
        return SessionChoice(config=replace(base, fork_from=path), model=model, thinking=thinking)
    if session and os.path.dirname(os.path.abspath(path)) != os.path.abspath(directory) and os.sep not in session:
        raise ConfigError(
            f"Session {os.path.basename(path)} belongs to another project; use --fork {session} to copy it here"
        )
    # Opened by name (``--session``, ``-r``): it runs where it was saved, as in pi. ``-c``
    # takes the current directory's most recent session, which was saved here.
    return SessionChoice(config=replace(base, resume=path), model=model, thinking=thinking,
                         cwd=saved_cwd if (session or resume) else None)
