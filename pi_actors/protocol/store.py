"""The session store's contract (``STORE``): the single writer of one session file.

The coordinator is the only caller. Entries and messages are pi's JSONL v3 objects (free
JSON objects here: the session format has more entry types and custom message roles than the
LLM's :data:`~pi_actors.ai.types.Message`); the store answers ``write_failed`` when a line
could not be written and fsynced, and acknowledges an append only once it is durable.

Every method but ``open``, ``append`` and ``append_entry`` needs an open session
(``not_open`` otherwise).
"""

from __future__ import annotations

from typing import Any

from ..runtime import Empty, Interface, Method, WireStruct

__all__ = [
    "OpenArgs",
    "AppendArgs",
    "AppendEntryArgs",
    "EntryRef",
    "LabelArgs",
    "EntryId",
    "SessionModel",
    "SessionContext",
    "SessionInfo",
    "SessionTree",
    "OPEN",
    "APPEND",
    "APPEND_ENTRY",
    "APPEND_MESSAGES",
    "CONTEXT",
    "ENTRIES",
    "BRANCH",
    "FORK",
    "LABEL",
    "STORE",
]

_WRITE = {"write_failed": "the file could not be written (the message says why)"}
_OPEN = {"not_open": "no session is open"}
#: Reading entries back from the session file failed (the message names the file).
_READ = {"invalid_session": "the session file cannot be read back (the message names it)"}


class OpenArgs(WireStruct):
    """Which session to open: ``resume`` an existing file, ``forkFrom`` a file into a new one,
    else a new session in ``sessionDir`` (default: derived from ``agentDir`` and ``cwd``).
    ``noSession``: keep the tree in memory only."""

    cwd: str | None = None
    agent_dir: str | None = None
    session_dir: str | None = None
    no_session: bool = False
    resume: str | None = None
    fork_from: str | None = None


class AppendArgs(WireStruct):
    """A ``message`` entry's message (pi's JSON shape)."""

    message: dict[str, Any]


class AppendMessagesArgs(WireStruct):
    """Several ``message`` entries' messages, in order."""

    messages: list[dict[str, Any]]


class EntryIds(WireStruct):
    """The ids of the entries just written, in order."""

    ids: list[str]


class AppendEntryArgs(WireStruct):
    """Any other entry (``model_change``, ``compaction``, ``label``, ...), without id/parent."""

    entry: dict[str, Any]


class EntryRef(WireStruct):
    """An entry of the tree; null: before the first entry."""

    entry_id: str | None = None


class LabelArgs(WireStruct):
    """Label ``targetId`` (a null ``label`` clears it)."""

    target_id: str
    label: str | None = None


class EntryId(WireStruct):
    """The id of the entry just written."""

    id: str


class SessionModel(WireStruct):
    """The model last chosen along the branch."""

    provider: str | None
    model_id: str | None


class SessionContext(WireStruct):
    """The LLM context along the current branch."""

    messages: list[dict[str, Any]]
    thinking_level: str
    model: SessionModel | None


class SessionInfo(WireStruct):
    """The open session: its header, file (null for ``--no-session``), context, and one-line
    warnings for the user (damaged lines left out, a torn last line dropped)."""

    header: dict[str, Any] | None
    path: str | None
    context: SessionContext
    warnings: list[str]


class SessionTree(WireStruct):
    """Every entry of the session, the current leaf, and each labelled entry's label."""

    entries: list[dict[str, Any]]
    leaf_id: str | None
    labels: dict[str, str]


OPEN: Method[OpenArgs, None, SessionInfo] = Method(
    "open",
    args=OpenArgs,
    result=SessionInfo,
    errors={
        "session_locked": "another writer holds the file (the message names its pid)",
        "invalid_session": "the file to resume or fork is not a session",
        "not_found": "the file to resume or fork does not exist",
        **_WRITE,
    },
    doc="Open a session (new, resumed or forked); the session open before is closed once "
    "the new one is open.",
)
APPEND: Method[AppendArgs, None, EntryId] = Method(
    "append",
    args=AppendArgs,
    result=EntryId,
    errors={**_OPEN, **_WRITE, "invalid_args": "the message cannot be written (not JSON, duplicate id)"},
    doc="Append a message entry as a child of the leaf; answered once it is on disk.",
)
APPEND_ENTRY: Method[AppendEntryArgs, None, EntryId] = Method(
    "append_entry",
    args=AppendEntryArgs,
    result=EntryId,
    errors={**_OPEN, **_WRITE, "invalid_args": "the entry cannot be written (not JSON, duplicate id)"},
    doc="Append another entry type as a child of the leaf; answered once it is on disk.",
)
CONTEXT: Method[Empty, None, SessionInfo] = Method(
    "context", args=Empty, result=SessionInfo, errors={**_OPEN, **_READ}, doc="The session along the current branch."
)
ENTRIES: Method[Empty, None, SessionTree] = Method(
    "entries", args=Empty, result=SessionTree, errors={**_OPEN, **_READ}, doc="The whole tree, for navigation."
)
BRANCH: Method[EntryRef, None, SessionInfo] = Method(
    "branch",
    args=EntryRef,
    result=SessionInfo,
    errors={**_OPEN, **_READ, "not_found": "no such entry"},
    doc="Move the leaf to an entry (null: the next entry is a new root); nothing is written "
    "until the next append.",
)
FORK: Method[EntryRef, None, SessionInfo] = Method(
    "fork",
    args=EntryRef,
    result=SessionInfo,
    errors={**_OPEN, **_WRITE, **_READ, "not_found": "no such entry", "not_supported": "the session is not saved (--no-session)"},
    doc="The path root→entry becomes a new session file naming this one as its parent, "
    "which the store writes from then on.",
)
LABEL: Method[LabelArgs, None, EntryId] = Method(
    "label",
    args=LabelArgs,
    result=EntryId,
    errors={**_OPEN, **_WRITE, "not_found": "no such entry"},
    doc="Label an entry (a null label clears it); returns the label entry's id.",
)

APPEND_MESSAGES: Method[AppendMessagesArgs, None, EntryIds] = Method(
    "append_messages",
    args=AppendMessagesArgs,
    result=EntryIds,
    errors={**_OPEN, **_WRITE, "invalid_args": "a message cannot be written (not JSON, duplicate id)"},
    doc="Append message entries, each a child of the one before, with one fsync (a group commit); "
    "answered once all are on disk; all or nothing once the file exists.",
)

STORE = Interface(
    "session-store",
    [OPEN, APPEND, APPEND_ENTRY, APPEND_MESSAGES, CONTEXT, ENTRIES, BRANCH, FORK, LABEL],
    doc="The session store: one session file, one writer.",
)
