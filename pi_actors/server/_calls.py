"""One connection's calls: the role check, the server's own methods, forwarding to sessions.

:class:`ConnectionCalls` is the ``handler`` of one client connection's ``Peer``. Its contract
is ``protocol.server``:

* ``target`` "" — a method of ``SERVER``: one the caller's role may not call
  (``ROLES``) is ``method_not_allowed``, an undeclared one ``not_found``; the rest go through
  a typed ``Router`` (arguments checked there: ``invalid_request`` naming the field) to the
  ``@implements`` handlers below.
* ``target`` = a session id — a session method: refused unless the caller's role is in
  ``SESSION_ROLES`` and the method is in ``FORWARDED`` (``not_found`` for a method the
  coordinator does not declare, ``method_not_allowed`` for ``NOT_FORWARDED``); its
  arguments are checked against the coordinator method's Struct *here*, so a bad one never
  reaches the coordinator; then the attachment is checked and the call relayed (chunks
  through the connection's bounded send queue, the result after them, a cancel passed on).

Every refusal is a ``RemoteError``; an exception group made only of refusals is answered as
its first (``runtime.remote_error_of``); any other failure is logged and answered
``internal`` — one call's bug never ends the connection or the server.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol.server import (
    ATTACH,
    CREATE,
    DETACH,
    FORWARDED,
    LIST,
    NOT_FORWARDED,
    REGISTER_TOOL_HOST,
    REMOVE,
    ROLES,
    SERVER,
    SESSION_ROLES,
    AttachArgs,
    Attached,
    AttachResult,
    CreateArgs,
    CreateResult,
    ListResult,
    RegisterToolHostArgs,
    RemoveArgs,
)
from ..runtime import ActorDied, ConnectionLost, Empty, IncomingCall, RemoteError, Router, TypedCall, implements, remote_error_of
from ._fanout import _Client

if TYPE_CHECKING:
    from ._server import Server

__all__ = ["ConnectionCalls"]

log = logging.getLogger("pi_actors.server")

#: The coordinator's own bound on a forwarded subscription: the bound that matters is this
#: connection's send queue (``_fanout``), which disconnects a client that falls behind.
_FORWARDED_SUBSCRIBE_QUEUE = 1 << 20


class ConnectionCalls:
    """The calls of one connection (``client``) to ``server``; see the module docstring."""

    def __init__(self, server: Server, client: _Client) -> None:
        self.server = server
        self.client = client
        self._router = Router.serving(self, SERVER, name="server")

    async def __call__(self, call: IncomingCall) -> Any:
        try:
            if call.target:
                return await self._session_call(call)
            self._check_role(call.method)
            return await self._router(call)
        except RemoteError:
            raise
        except Exception as exc:  # a bug in one call must not end the server
            remote = remote_error_of(exc) if isinstance(exc, BaseExceptionGroup) else None
            if remote is not None:
                raise remote from None
            log.exception("server: %s failed", call.method)
            raise RemoteError("internal", f"internal server error: {type(exc).__name__}") from None

    def _check_role(self, method: str) -> None:
        identity = self.client.identity
        if method not in SERVER:
            raise RemoteError("not_found", f"server: unknown method {method!r}")
        if method not in ROLES.get(identity.role, frozenset()):
            raise RemoteError("method_not_allowed", f"server: {method!r} is not allowed for the {identity.role} role of {identity.name!r}")

    def _refuse_while_draining(self) -> None:
        if self.server.draining:
            raise RemoteError("server_draining", "the server is shutting down")

    # -- the server's own methods ----------------------------------------------------------------

    @implements(LIST)
    async def list_sessions(self, args: Empty, call: TypedCall[Empty, None]) -> ListResult:
        return self.server.listing(self.client.identity)

    @implements(CREATE)
    async def create(self, args: CreateArgs, call: TypedCall[CreateArgs, None]) -> CreateResult:
        self._refuse_while_draining()
        return CreateResult(session_id=await self.server.create_session(args, self.client.identity))

    @implements(REMOVE)
    async def remove(self, args: RemoveArgs, call: TypedCall[RemoveArgs, None]) -> None:
        await self.server.remove_session(args.session_id, self.client.identity)

    @implements(ATTACH)
    async def attach(self, args: AttachArgs, call: TypedCall[AttachArgs, None]) -> AttachResult:
        self._refuse_while_draining()
        client = self.client
        session = await self.server.live_session(args.session_id, client.identity)
        if client.attachment is not None and session.attachments.get(client.attachment[1]) is client:
            return AttachResult(session_id=session.id, attachment_id=client.attachment[1])
        self.server.detach(client)
        attachment_id = str(uuid.uuid4())
        client.attachment = (session.id, attachment_id)
        session.attachments[attachment_id] = client
        return AttachResult(session_id=session.id, attachment_id=attachment_id)

    @implements(DETACH)
    async def detach(self, args: Empty, call: TypedCall[Empty, None]) -> None:
        self.server.detach(self.client)

    @implements(REGISTER_TOOL_HOST)
    async def register_tool_host(self, args: RegisterToolHostArgs, call: TypedCall[RegisterToolHostArgs, None]) -> None:
        self.server.register_tool_host(self.client, args.tools)

    # -- session methods ---------------------------------------------------------------------------

    async def _session_call(self, call: IncomingCall) -> Any:
        """Check a session-scoped call (module docstring) and relay it to the coordinator."""
        client, server = self.client, self.server
        if client.identity.role not in SESSION_ROLES:
            raise RemoteError("method_not_allowed", f"a {client.identity.role}'s credential cannot call session methods")
        method = FORWARDED.get(call.method)
        if method is None:
            if call.method in NOT_FORWARDED:
                raise RemoteError(
                    "method_not_allowed",
                    f"{call.method!r} is not a session method a remote client may call: {NOT_FORWARDED[call.method]}",
                )
            raise RemoteError("not_found", f"server: a session has no method {call.method!r}")
        tree = {} if call.args is None else call.args
        try:
            attached = msgspec.convert(tree, Attached, strict=True)
        except msgspec.ValidationError as exc:
            raise RemoteError("invalid_request", f"{call.method}: {exc}") from None
        forward = {k: v for k, v in tree.items() if k != "attachmentId"}
        method.decode_args(forward)  # the coordinator's argument Struct: invalid_request naming the field
        attachment = attached.attachment_id
        session = server.sessions.get(call.target)
        if client.attachment != (call.target, attachment):
            raise RemoteError("session_not_attached", f"this connection holds no attachment {attachment!r} to session {call.target!r}")
        if session is None or session.peer is None or attachment is None or session.attachments.get(attachment) is not client:
            # (also an attachment to a run of the session that ended, if it was reopened since)
            raise RemoteError("session_terminated", f"session {call.target} has ended; attach again")
        if call.method == "export_html" and forward.get("outputPath") is not None:
            raise RemoteError(
                "invalid_args", "export_html: a remote client cannot choose the output path; the file is written in the session's directory"
            )
        if call.method == "subscribe":
            forward["maxQueue"] = _FORWARDED_SUBSCRIBE_QUEUE
        call.cooperative = True
        try:
            async with session.peer.open_call(call.method, forward) as up:
                async with up.cancel_when(call.cancel_requested):
                    async for item in up:
                        await client.chunk(call, item)
                value = await up.result()
        except ConnectionLost as exc:
            raise _lost(session, exc) from None
        except RemoteError as exc:
            if session.end_reason is not None and exc.code in ("connection_lost", "cancelled"):
                raise RemoteError("session_terminated", f"session {session.id} ended: {session.end_reason}") from None
            await client.flushed(call)
            raise
        if call.method == "fork":
            await server.follow_fork(session)
        await client.flushed(call)
        return value


def _lost(session: Any, exc: ConnectionLost) -> RemoteError:
    """The error of a call whose session's coordinator went away under it: ``actor_died``
    when the runtime died and the session is being reopened (its link is restartable: a
    placed session whose node was lost) — the attachment stays, the outcome of the call is
    unknown —, else ``session_terminated``."""
    if isinstance(exc, ActorDied) and getattr(session.peer, "restartable", False):
        return RemoteError("actor_died", exc.message)
    return RemoteError("session_terminated", f"session {session.id} ended: {session.end_reason or 'its coordinator process exited'}")
