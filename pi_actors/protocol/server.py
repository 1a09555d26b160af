"""The session server's contract: the methods it answers itself, who may call them, and
which session methods it forwards to a session's coordinator.

A connection to ``pi-actors serve`` has an identity (its bearer token, or the local unix
socket: an admin) with one role. :data:`ROLES` says which server methods each role may
call; a method outside its role's set is ``method_not_allowed`` (a method the server does not
declare at all: ``not_found``). :data:`SESSION_ROLES` are the roles that may call session
methods.

Server-scoped calls (``target`` ""): :data:`SERVER`, one :class:`Method` each below.

Session-scoped calls (``target`` = a session id): the arguments are the coordinator
method's own plus :class:`Attached` (``attachmentId``, the caller's current attachment to
that session). The server forwards exactly the methods of :data:`FORWARDED` — every method
of ``protocol.coordinator.COORDINATOR`` except :data:`NOT_FORWARDED` — after checking the
arguments against the coordinator method's argument Struct (a bad one is
``invalid_request`` naming the field, answered by the server; the coordinator never sees
the call). A method the coordinator does not declare is ``not_found``; one it declares but
the server keeps to itself is ``method_not_allowed``. The other answers of a session call are
in :data:`SESSION_CALL_ERRORS`.

Every server method may also answer ``internal`` (a bug; the connection goes on).

Schema evolution as everywhere (PROTOCOL §9): new fields get defaults, nothing changes type,
receivers ignore unknown keys.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from ..runtime import Empty, Interface, Method, WireStruct
from .coordinator import COORDINATOR

__all__ = [
    "ATTACH",
    "AttachArgs",
    "AttachResult",
    "Attached",
    "CREATE",
    "CreateArgs",
    "CreateResult",
    "DETACH",
    "FORWARDED",
    "LIST",
    "ListResult",
    "NOT_FORWARDED",
    "REGISTER_TOOL_HOST",
    "REMOVE",
    "ROLES",
    "RegisterToolHostArgs",
    "RemoveArgs",
    "SERVER",
    "SESSION_CALL_ERRORS",
    "SESSION_ROLES",
    "SessionInfo",
    "TOOL_PROXY",
    "ToolHostInfo",
    "WARM",
]


#: Every server method may answer this (the role of the caller's identity, see ROLES).
_ROLE_ERRORS = {"method_not_allowed": "the caller's role may not call this method (ROLES)"}


# -- list ----------------------------------------------------------------------------------


class SessionInfo(WireStruct):
    """One session a ``list`` shows."""

    id: str
    cwd: str
    #: The tool host running the session's tools; ``null`` (always sent) for a local pool.
    tool_host: str | None
    #: How many connections are attached to it now (0 for a session on disk only).
    attachments: int
    #: Running now (``false``: on disk only; ``attach`` reopens it).
    live: bool
    #: The identity that created it.
    owner: str


class ToolHostInfo(WireStruct):
    """One connected tool host."""

    name: str
    tools: list[str]


class ListResult(WireStruct):
    sessions: list[SessionInfo]
    tool_hosts: list[ToolHostInfo]


LIST: Method[Empty, None, ListResult] = Method(
    "list",
    args=Empty,
    result=ListResult,
    errors=_ROLE_ERRORS,
    doc=(
        "The caller's sessions (an admin: every session) — live ones, then (with a state "
        "directory) those on disk only, oldest first — and the connected tool hosts."
    ),
)


# -- create / remove -----------------------------------------------------------------------


class CreateArgs(WireStruct):
    #: The working directory, resolved against the server's root (default: the server's
    #: default directory).
    cwd: str | None = None
    #: Run the session's tools on this registered tool host instead of a local pool.
    tool_host: str | None = None


class CreateResult(WireStruct):
    session_id: str


_SESSION_START_ERRORS = {
    **_ROLE_ERRORS,
    "quota_exceeded": "the caller's identity already holds its quota of live sessions (admins have none)",
    "invalid_request": "the working directory is outside the server's root, not a directory, or around the "
    "server's private paths; or the server cannot configure a session there",
    "startup_failed": "the session's processes did not start",
    "server_draining": "the server is shutting down",
}

CREATE: Method[CreateArgs, None, CreateResult] = Method(
    "create",
    args=CreateArgs,
    result=CreateResult,
    errors=_SESSION_START_ERRORS,
    doc=(
        "Start a new session owned by the caller: its coordinator, store, provider and (unless "
        "`toolHost` names a remote tool host) a sandboxed tool pool. With a state directory the "
        "session id is its session file's id, and the session outlives the server."
    ),
)


class RemoveArgs(WireStruct):
    session_id: str


REMOVE: Method[RemoveArgs, None, Empty] = Method(
    "remove",
    args=RemoveArgs,
    result=Empty,
    errors={
        **_ROLE_ERRORS,
        "session_not_found": "no live or stored session has this id",
        "forbidden": "the session belongs to another identity",
    },
    doc="End every attachment to the session, stop its processes and delete its directory.",
)


# -- attach / detach -----------------------------------------------------------------------


class AttachArgs(WireStruct):
    session_id: str


class AttachResult(WireStruct):
    session_id: str
    #: Passed as ``attachmentId`` in every session-scoped call.
    attachment_id: str


ATTACH: Method[AttachArgs, None, AttachResult] = Method(
    "attach",
    args=AttachArgs,
    result=AttachResult,
    errors={
        "session_not_found": "no live or stored session has this id",
        "forbidden": "the session belongs to another identity",
        "session_terminated": "the session has ended and is not stored on disk",
        **_SESSION_START_ERRORS,
    },
    doc=(
        "Attach this connection to a session (replacing its previous attachment) and return a "
        "fresh attachment id; re-attaching the session already held keeps the id. A session on "
        "disk but not running is reopened from its file, whole history included."
    ),
)

DETACH: Method[Empty, None, Empty] = Method(
    "detach",
    args=Empty,
    result=Empty,
    errors=_ROLE_ERRORS,
    doc="Drop this connection's attachment; its attachment id is refused from then on.",
)


# -- tool hosts ----------------------------------------------------------------------------


class RegisterToolHostArgs(WireStruct):
    #: The names of the tools the host runs (shown by ``list``).
    tools: list[str] = []


REGISTER_TOOL_HOST: Method[RegisterToolHostArgs, None, Empty] = Method(
    "register_tool_host",
    args=RegisterToolHostArgs,
    result=Empty,
    errors={
        **_ROLE_ERRORS,
        "forbidden": "the credential names another tool host, or a live connection of another identity holds the name",
        "invalid_request": "an admin connection whose hello role is not 'tool-host'",
    },
    doc=(
        "Register this connection as the tool host its credential names (an admin connection: "
        "its hello `name`); the server then sends it the `run_tool` calls of the sessions "
        "created with `toolHost` = that name. The same identity reconnecting replaces its old "
        "connection."
    ),
)


SERVER = Interface(
    "server",
    [LIST, CREATE, REMOVE, ATTACH, DETACH, REGISTER_TOOL_HOST],
    doc="The session server (`pi-actors serve`): the calls it answers itself (`target` \"\").",
)


# -- the tool proxy ---------------------------------------------------------------------------

WARM: Method[Empty, None, Empty] = Method(
    "warm",
    args=Empty,
    result=Empty,
    doc=(
        "Answered by the server's tool proxy — the tool-pool end of a session whose tools run on "
        "a remote tool host — at once: the tool host keeps its own workers warm."
    ),
)

TOOL_PROXY = Interface(
    "tool-proxy",
    [WARM],
    doc=(
        "What the server serves on a remote-tools session's tool link, in place of a local "
        "pool: `warm`, and `run_tool` relayed verbatim (chunks, result, cancel) to the tool host "
        "named at create, which checks it against the pool's declaration. Its own answers: "
        "`tool_host_unavailable` (the host is not connected), `tool_host_lost` (it disconnected "
        "during the call; the outcome is unknown)."
    ),
)


# -- roles ---------------------------------------------------------------------------------

_CLIENT = frozenset({LIST.name, CREATE.name, REMOVE.name, ATTACH.name, DETACH.name})

ROLES: MappingProxyType[str, frozenset[str]] = MappingProxyType(
    {
        # every server method, every session
        "admin": _CLIENT | {REGISTER_TOOL_HOST.name},
        # its own sessions
        "client": _CLIENT,
        # only registering as the one tool host its credential names
        "tool-host": frozenset({REGISTER_TOOL_HOST.name}),
    }
)
"""Role -> the server methods a connection of that role may call."""

SESSION_ROLES = frozenset({"admin", "client"})
"""The roles that may call session methods (a client: only on its own sessions)."""


# -- session-scoped calls --------------------------------------------------------------------


class Attached(WireStruct):
    """The server's part of a session-scoped call's arguments (removed before forwarding)."""

    attachment_id: str | None = None


NOT_FORWARDED = MappingProxyType(
    {
        "new_session": "it would point the hosted session at a new, caller-chosen file; use create",
        "switch_session": "it would point the hosted session at a caller-named file; use attach",
    }
)
"""Coordinator methods the server refuses (``method_not_allowed``), and why."""

FORWARDED: MappingProxyType[str, Method[Any, Any, Any]] = MappingProxyType(
    {method.name: method for method in COORDINATOR if method.name not in NOT_FORWARDED}
)
"""The session methods a remote client may call: the coordinator's, less NOT_FORWARDED."""

SESSION_CALL_ERRORS = MappingProxyType(
    {
        "not_found": "the coordinator declares no such method",
        "method_not_allowed": "a method of NOT_FORWARDED, or the caller's role calls no session methods",
        "invalid_request": "the arguments do not match the coordinator method's (the field is named)",
        "session_not_attached": "`attachmentId` is not this connection's current attachment to the session",
        "session_terminated": "the session (this run of it) has ended; attach again",
        "invalid_args": "`export_html` with an `outputPath`: a remote client cannot choose where the file goes",
        "overflow": "the connection fell behind its send queue and is being disconnected",
    }
)
"""What the server itself may answer to a session-scoped call (besides the coordinator's
own answers, which are relayed)."""
