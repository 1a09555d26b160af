"""The server actor: session registry, attachments, routing, bounded fan-out, tool hosts.

Transport: any ``trio.abc.Stream`` (``serve_stream(stream, identity)``); ``serve_websocket``
authenticates the bearer token of the upgrade against the server's :class:`Credentials`
(401 before any frame) and hands the connection its :class:`Identity`; ``serve_unix``
listens on a 0600 socket in a 0700 directory, refuses peers of another uid or namespace
(``runtime._listen``) and treats the rest as the local owner (``LOCAL_ADMIN``). Both accept
through ``runtime._accept`` with the caps and handshake deadline of ``limits``
(``self.admission``). Every connection opens with our hello (``open_peer``, side "server"); a
bad hello gets ``hello_error`` and the connection closes, the server keeps serving.

Roles (the identity's, not the hello's): ``tool-host`` connections may only call
``register_tool_host`` (under the one name their credential names); ``client`` and
``admin`` connections call the methods below. A client sees and uses only the sessions it
created (its identity owns them); an admin sees and uses all. Anything else is refused:
``method_not_allowed`` (a method this role may not call), ``forbidden`` (another identity's
session or tool host).

Server-scoped calls (``target`` ""):

``list {}``                    → ``{sessions: [{id, cwd, toolHost, attachments, live, owner}],
                                 toolHosts: [{name, tools}]}``: the caller's sessions, live
                                 ones and (with a state directory) those on disk.
``create {cwd?, toolHost?}``   → ``{sessionId}``: ``cwd`` (default: the server's default)
                                 must resolve inside the server's root (``_confine``), else
                                 ``invalid_request``; more than ``max_sessions`` live sessions
                                 of one (non-admin) identity: ``quota_exceeded``. Spawns the
                                 session's actors (coordinator, store, provider, and a tool
                                 pool unless ``toolHost`` names a remote tool host). With a
                                 state directory the session's id is its session file's id
                                 (``_registry``).
``remove {sessionId}``         → ``{}``: ends every attachment on it, stops its processes,
                                 deletes its directory.
``attach {sessionId}``         → ``{sessionId, attachmentId}``: a fresh id (re-attaching the
                                 session already held keeps the id); replaces this
                                 connection's previous attachment. A session that is on disk
                                 but not running (the server restarted, or its coordinator
                                 died) is reopened from its file, whole history included.
``detach {}``                  → ``{}``.
``register_tool_host {tools}`` → ``{}``: under the credential's tool host name (an admin
                                 connection: its hello ``name``). A name held by a live
                                 connection of another identity is ``forbidden``; the same
                                 identity reconnecting replaces its old connection.

While the server shuts down, ``create`` and ``attach`` are refused with ``server_draining``.

Session-scoped calls: ``target`` = the session id, ``args.attachmentId`` = this connection's
current attachment to it, else ``session_not_attached``. Only ``SESSION_METHODS`` are
forwarded to the session's coordinator (``attachmentId`` removed), anything else is
``method_not_allowed``; ``export_html`` takes no ``outputPath`` from a remote client
(``invalid_args``): the coordinator writes it, exclusively, in the session's directory.
Chunks are relayed, the result returned; a cancel is relayed to the coordinator.
``subscribe`` gives the coordinator's snapshot (sequence N) and then every update N+1, N+2,
… A session whose processes die (or that is removed) fails its attachments' calls and
subscriptions with ``session_terminated``.

Containment: every session's sandbox hides the server's private paths (``hidden_paths``:
the state directory with its credentials and session directories, every unix socket's
directory, token files, the agent directory).

Fan-out and slow clients: every chunk to a client goes through that connection's bounded send
queue (``send_queue`` items), drained by one writer task; a client whose queue overflows is
disconnected at once, so it never slows the session or other clients. A call's result is sent
only after its chunks have left the queue.

Errors: any unexpected failure in a handler becomes ``internal`` for that call; a connection's
failure never ends the server.

Modules: ``_auth`` (identities, credentials), ``_confine`` (working directories),
``_registry`` (sessions on disk), ``_hosting`` (starting/reopening sessions, the tool proxy),
``_fanout`` (a connection's bounded send queue); this one routes calls.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..protocol.config import RuntimeConfig
from ..runtime import ConnectionLost, IncomingCall, Peer, RemoteError, open_peer
from ..runtime._accept import Admission, ConnectionLimits
from ..runtime._websocket import WebSocketStream
from ._auth import LOCAL_ADMIN, Credentials, Identity, bearer_token
from ._confine import check_root
from ._fanout import _Client
from ._hosting import SessionHosting, _Session
from ._registry import SessionIndex

__all__ = ["Server", "SESSION_METHODS"]

log = logging.getLogger("pi_actors.server")

SESSION_METHODS = frozenset(
    {
        "prompt", "continue", "steer", "follow_up", "abort", "abort_retry", "compact", "set_model",
        "set_thinking_level", "get_state", "get_messages", "subscribe", "session", "tree", "navigate",
        "label", "fork", "fork_messages", "get_available_models", "get_session_stats", "get_last_assistant_text",
        "set_session_name", "set_queue_mode", "set_auto", "bash", "export_html",
    }
)
"""The coordinator methods a remote client may call on its session. Not in it, for example:
``new_session``/``switch_session`` (they would point the session at another, caller-named
file; use ``create``/``attach``)."""

SERVER_METHODS = {
    "admin": frozenset({"list", "create", "remove", "attach", "detach", "register_tool_host"}),
    "client": frozenset({"list", "create", "remove", "attach", "detach"}),
    "tool-host": frozenset({"register_tool_host"}),
}
_KNOWN_SERVER_METHODS = frozenset().union(*SERVER_METHODS.values())


class Server(SessionHosting):
    """Hosts sessions; ``make_config(cwd)`` gives the actor configuration of a new session.

    ``root``: sessions work inside it (default: ``default_cwd``, else the current directory);
    ``/`` is refused (``CwdRefused``). ``credentials``: the tokens WebSocket clients present
    (None: only the token given to ``serve_websocket``). ``state_dir``: where sessions are kept
    (``<state_dir>/sessions``) so that they outlive the server; None keeps them as
    ``make_config`` says (in memory in tests). ``agent_dir`` and ``hidden``: more paths no
    session may work in or see. ``max_sessions``: live sessions per non-admin identity.
    """

    def __init__(
        self,
        make_config: Callable[[str], RuntimeConfig],
        *,
        name: str = "pi-actors-server",
        send_queue: int = 1024,
        default_cwd: str | None = None,
        shutdown_grace: float = 3.0,
        root: str | None = None,
        credentials: Credentials | None = None,
        state_dir: str | None = None,
        agent_dir: str | None = None,
        hidden: tuple[str, ...] | list[str] = (),
        max_sessions: int = 16,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.make_config = make_config
        self.name = name
        self.send_queue = send_queue
        self.root = check_root(root or default_cwd or os.getcwd())
        self.default_cwd = default_cwd or self.root
        self.shutdown_grace = shutdown_grace
        self.credentials = credentials
        self.max_sessions = max_sessions
        #: Paths hidden from every session's sandbox and refused as (or around) a session cwd.
        self.hidden_paths: set[str] = {os.path.abspath(p) for p in hidden}
        for path in (state_dir, agent_dir, credentials.path if credentials else None):
            if path:
                self.hidden_paths.add(os.path.abspath(path))
        self.index = SessionIndex(state_dir) if state_dir else None
        for warning in self.index.warnings if self.index else ():
            log.warning("server: %s", warning)
        self.sessions: dict[str, _Session] = {}
        self._opening: dict[str, trio.Event] = {}
        self._starting: dict[str, int] = {}
        self.tool_hosts: dict[str, Peer] = {}
        self.tool_host_owner: dict[str, Identity] = {}
        self.tool_host_tools: dict[str, list[str]] = {}
        self.draining = False
        self.tool_host_changed = trio.Event()
        self.stats = {"connections": 0, "overflow_disconnects": 0}
        self._nursery: trio.Nursery | None = None
        self._clients: set[_Client] = set()
        #: Sessions start a few at a time: many at once on a small machine would starve each
        #: other's start-up (each is four Python processes) past the 5 s handshake limit.
        self._start_limiter = trio.CapacityLimiter(2)
        #: Connection caps and the handshake deadline, shared by every listener (runtime._accept).
        self.admission = Admission(limits)

    # -- lifetime ----------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Server]:
        """Own the sessions' processes for the duration of the block."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield self
            finally:
                self.draining = True
                for session in list(self.sessions.values()):
                    session.end_reason = "server shutting down"
                    session.scope.cancel()
                nursery.cancel_scope.cancel()

    async def serve_websocket(
        self, host: str, port: int, token: str | None, *, ssl_context: Any = None, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve WebSocket clients on ``host:port`` (``port`` 0 picks one; TLS with
        ``ssl_context``); ``task_status`` gets an object with the bound ``.port``. A request's
        bearer token is looked up in the server's credentials; ``token`` (if given) is one
        more token, an admin's."""
        from ..runtime._websocket import serve_websocket_admitted

        identify = self._authenticator(token)

        async def on_request(request: Any) -> None:
            identity = identify(request.headers)
            if identity is None:
                await request.reject(401, body=b"missing or wrong bearer token\n")
                return
            ws = await request.accept()
            await self.serve_stream(WebSocketStream(ws), identity)

        await serve_websocket_admitted(on_request, host, port, self.admission, ssl_context=ssl_context, task_status=task_status)

    async def serve_unix(self, path: str, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Serve a 0600 unix socket; peers of another uid or namespace are refused."""
        from ..runtime._listen import serve_unix_admitted

        self.hidden_paths.add(os.path.dirname(os.path.abspath(path)))
        await serve_unix_admitted(path, self.serve_stream, self.admission, task_status=task_status)

    # -- one connection ----------------------------------------------------------------------

    def _authenticator(self, token: str | None) -> Callable[[Any], Identity | None]:
        """Headers → identity: the server's credentials, or ``token`` (the one shared token
        of a server without a credentials file, an admin token). No credentials at all: every
        request is refused."""
        extra = Credentials(extra_admin_tokens=(token,)) if token else None

        def identify(headers: Any) -> Identity | None:
            presented = bearer_token(headers)
            for source in (self.credentials, extra):
                if source is not None:
                    identity = source.authenticate(presented)
                    if identity is not None:
                        return identity
            return None

        return identify

    async def serve_stream(self, stream: trio.abc.Stream, identity: Identity = LOCAL_ADMIN) -> None:
        client = _Client(self, self.send_queue, identity)
        self.stats["connections"] += 1
        self._clients.add(client)

        async def handle(call: IncomingCall) -> Any:
            try:
                return await self._handle(client, call)
            except RemoteError:
                raise
            except Exception as exc:  # a bug in one call must not end the server
                log.exception("server: %s failed", call.method)
                raise RemoteError("internal", f"internal server error: {type(exc).__name__}") from None

        try:
            with client.scope:
                async with open_peer(
                    stream, side="server", role="server", name=self.name, handler=handle,
                    handshake_timeout=self.admission.limits.handshake_timeout,
                ) as peer:
                    client.peer = peer
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(client.run_writer)
                        await peer.closed_event.wait()
                        nursery.cancel_scope.cancel()
        except ConnectionLost:
            pass  # the handshake failed: hello_error was sent (or the peer vanished)
        except Exception:
            log.exception("server: connection failed")
        finally:
            self._clients.discard(client)
            self._drop_client(client)
            await trio.aclose_forcefully(stream)

    def disconnect_clients(self) -> None:
        """Drop every client connection (operator action; tests use it as a network cut)."""
        for client in list(self._clients):
            client.scope.cancel()

    def _drop_client(self, client: _Client) -> None:
        if client.attachment is not None:
            session = self.sessions.get(client.attachment[0])
            if session is not None:
                session.attachments.pop(client.attachment[1], None)
            client.attachment = None
        for name, peer in list(self.tool_hosts.items()):
            if peer is client.peer:
                del self.tool_hosts[name]
                self.tool_host_owner.pop(name, None)

    async def _handle(self, client: _Client, call: IncomingCall) -> Any:
        args = call.args if isinstance(call.args, dict) else {}
        identity = client.identity
        if call.target:
            if identity.role == "tool-host":
                raise RemoteError("method_not_allowed", "a tool host's credential cannot call session methods")
            return await self._session_call(client, call, args)
        method = call.method
        if method not in _KNOWN_SERVER_METHODS:
            raise RemoteError("not_found", f"server: unknown method {method!r}")
        if method not in SERVER_METHODS.get(identity.role, frozenset()):
            raise RemoteError("method_not_allowed", f"server: {method!r} is not allowed for the {identity.role} role of {identity.name!r}")
        if method == "list":
            return self._list(identity)
        if method in ("create", "attach") and self.draining:
            raise RemoteError("server_draining", "the server is shutting down")
        if method == "create":
            return await self._create(args, identity)
        if method == "remove":
            await self._remove(args.get("sessionId"), identity)
            return {}
        if method == "attach":
            session = await self._live_session(args.get("sessionId"), identity)
            if client.attachment is not None and session.attachments.get(client.attachment[1]) is client:
                return {"sessionId": session.id, "attachmentId": client.attachment[1]}
            self._detach(client)
            attachment_id = str(uuid.uuid4())
            client.attachment = (session.id, attachment_id)
            session.attachments[attachment_id] = client
            return {"sessionId": session.id, "attachmentId": attachment_id}
        if method == "detach":
            self._detach(client)
            return {}
        assert method == "register_tool_host"
        return self._register_tool_host(client, args)

    # -- ownership ---------------------------------------------------------------------------

    @staticmethod
    def _may_use(identity: Identity, owner: str) -> bool:
        return identity.admin or identity.name == owner

    def _list(self, identity: Identity) -> dict:
        sessions = [s.info() for s in self.sessions.values() if self._may_use(identity, s.owner)]
        if self.index is not None:
            live = {s["id"] for s in sessions} | set(self.sessions)
            for record in sorted(self.index.records.values(), key=lambda r: r.created):
                if record.id not in live and self._may_use(identity, record.owner):
                    sessions.append(
                        {"id": record.id, "cwd": record.cwd, "toolHost": record.toolHost, "attachments": 0, "live": False, "owner": record.owner}
                    )
        return {
            "sessions": sessions,
            "toolHosts": [{"name": n, "tools": self.tool_host_tools.get(n, [])} for n in self.tool_hosts],
        }

    def _check_owner(self, identity: Identity, owner: str, session_id: str) -> None:
        if not self._may_use(identity, owner):
            raise RemoteError("forbidden", f"session {session_id} belongs to another identity")

    async def _live_session(self, session_id: Any, identity: Identity) -> _Session:
        """The running session ``session_id``, reopened from its file if it is on disk only."""
        while True:
            session = self.sessions.get(session_id) if isinstance(session_id, str) else None
            record = self.index.get(session_id) if self.index is not None else None
            if session is not None:
                self._check_owner(identity, session.owner, session.id)
                if session.end_reason is None:
                    return session
                if record is None:
                    raise RemoteError("session_terminated", f"session {session.id} has ended: {session.end_reason}")
                await session.ended.wait()  # it is going down; reopen it from its file
                continue
            if record is None:
                raise RemoteError("session_not_found", f"no session {session_id!r}")
            self._check_owner(identity, record.owner, record.id)
            opening = self._opening.get(record.id)
            if opening is not None:
                await opening.wait()
                continue
            return await self._reopen(record, identity)

    async def _remove(self, session_id: Any, identity: Identity) -> None:
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        record = self.index.get(session_id) if self.index is not None else None
        if session is None and record is None:
            raise RemoteError("session_not_found", f"no session {session_id!r}")
        self._check_owner(identity, session.owner if session is not None else record.owner, session_id)
        if session is not None:
            await self._end_session(session, "session removed")
        if record is not None and self.index is not None:
            await trio.to_thread.run_sync(self.index.delete, record)

    def _register_tool_host(self, client: _Client, args: dict) -> dict:
        assert client.peer is not None
        identity = client.identity
        if identity.role == "tool-host":
            name = identity.tool_host or identity.name
            if client.peer.peer_name != name:
                raise RemoteError("forbidden", f"this credential may register tool host {name!r} only, not {client.peer.peer_name!r}")
        else:  # admin
            if client.peer.peer_role != "tool-host":
                raise RemoteError("invalid_request", "register_tool_host needs hello role 'tool-host'")
            name = client.peer.peer_name
        held = self.tool_hosts.get(name)
        if held is not None and held is not client.peer and not held.closed_event.is_set():
            if self.tool_host_owner.get(name) != identity:
                raise RemoteError("forbidden", f"tool host {name!r} is registered by another identity's connection")
        self.tool_hosts[name] = client.peer
        self.tool_host_owner[name] = identity
        tools = args.get("tools")
        self.tool_host_tools[name] = [t for t in tools if isinstance(t, str)] if isinstance(tools, list) else []
        self.tool_host_changed.set()
        self.tool_host_changed = trio.Event()
        return {}

    def _detach(self, client: _Client) -> None:
        if client.attachment is not None:
            old = self.sessions.get(client.attachment[0])
            if old is not None:
                old.attachments.pop(client.attachment[1], None)
            client.attachment = None

    # -- sessions ----------------------------------------------------------------------------

    async def _session_call(self, client: _Client, call: IncomingCall, args: dict) -> Any:
        session = self.sessions.get(call.target)
        attachment = args.get("attachmentId")
        if client.attachment != (call.target, attachment):
            raise RemoteError("session_not_attached", f"this connection holds no attachment {attachment!r} to session {call.target!r}")
        if session is None or session.peer is None or session.attachments.get(attachment) is not client:
            # (also an attachment to a run of the session that ended, if it was reopened since)
            raise RemoteError("session_terminated", f"session {call.target} has ended; attach again")
        if call.method not in SESSION_METHODS:
            raise RemoteError("method_not_allowed", f"{call.method!r} is not a session method a remote client may call")
        forward = {k: v for k, v in args.items() if k != "attachmentId"}
        if call.method == "export_html" and forward.get("outputPath") is not None:
            raise RemoteError(
                "invalid_args", "export_html: a remote client cannot choose the output path; the file is written in the session's directory"
            )
        if call.method == "subscribe":
            forward["maxQueue"] = 1 << 20  # the bound that matters is this client's send queue
        call.cooperative = True
        try:
            async with session.peer.open_call(call.method, forward) as up:
                async with up.cancel_when(call.cancel_requested.wait):
                    async for item in up:
                        await client.chunk(call, item)
                value = await up.result()
        except ConnectionLost:
            raise RemoteError("session_terminated", f"session {session.id} ended: {session.end_reason or 'its coordinator process exited'}") from None
        except RemoteError as exc:
            if session.end_reason is not None and exc.code in ("connection_lost", "cancelled"):
                raise RemoteError("session_terminated", f"session {session.id} ended: {session.end_reason}") from None
            await client.flushed(call)
            raise
        if call.method == "fork" and session.record is not None and self.index is not None:
            await self._follow_fork(session)
        await client.flushed(call)
        return value
