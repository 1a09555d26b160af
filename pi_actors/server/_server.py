"""The server actor: session registry, attachments, routing, bounded fan-out, tool hosts.

Transport: any ``trio.abc.Stream`` (``serve_stream(stream, identity)``); ``serve_websocket``
authenticates the bearer token of the upgrade against the server's :class:`Credentials`
(401 before any frame) and hands the connection its :class:`Identity`; with ``web=True``
it also serves the browser client on the same port (``web``: the page, sign-in, and
upgrades authenticated by the sign-in cookie from the server's own origin only). An upgrade
offering the ``pi-actors.json`` subprotocol speaks the JSON codec, one message per text
WebSocket message (PROTOCOL.md §3a); any other speaks CBOR frames in binary messages; ``serve_unix``
listens on a 0600 socket in a 0700 directory, refuses peers of another uid or namespace
(``runtime._listen``) and treats the rest as the local owner (``LOCAL_ADMIN``). Both accept
through ``runtime._accept`` with the caps and handshake deadline of ``limits``
(``self.admission``). Every connection opens with our hello (``open_peer``, side "server"); a
bad hello gets ``hello_error`` and the connection closes, the server keeps serving.

The contract — every method the server answers, its argument and result Structs and error
codes, which role may call what (``ROLES``), which session methods are forwarded
(``FORWARDED``: the coordinator's, less ``NOT_FORWARDED``) — is ``pi_actors.protocol.server``;
``_calls`` checks each call against it and routes it. Roles are the identity's, not the
hello's: ``tool-host`` connections may only call ``register_tool_host`` (under the one name
their credential names); ``client`` and ``admin`` connections call the others. A client sees
and uses only the sessions it created (its identity owns them); an admin sees and uses all.
Anything else is refused: ``method_not_allowed`` (a method this role may not call),
``forbidden`` (another identity's session or tool host), ``not_found`` (a method nobody
declares), ``invalid_request`` naming the field (an argument of the wrong shape).

Server-scoped calls (``target`` ""), in short:

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
current attachment to it, else ``session_not_attached``. Only ``FORWARDED`` methods are
forwarded to the session's coordinator (``attachmentId`` removed), after their arguments
passed the coordinator method's Struct in the server (``invalid_request`` naming the field,
the coordinator never sees the call); a method the coordinator does not declare is
``not_found``, ``new_session``/``switch_session`` are ``method_not_allowed``; ``export_html``
takes no ``outputPath`` from a remote client (``invalid_args``): the coordinator writes it,
exclusively, in the session's directory.
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
``_fanout`` (a connection's bounded send queue), ``_calls`` (one connection's calls: checks
and routing); this one holds the server's state, its listeners and what each method does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..placement import LocalPlacement, SessionHost
from ..protocol.config import RuntimeConfig
from ..protocol.server import ListResult, SessionInfo, ToolHostInfo
from ..runtime import ConnectionLost, Peer, RemoteError, open_peer
from ..runtime._accept import Admission, ConnectionLimits
from ..runtime._websocket import JSON_SUBPROTOCOL, WebSocketStream
from ._auth import LOCAL_ADMIN, Credentials, Identity, bearer_token, token_digest
from ._calls import ConnectionCalls
from ._confine import check_root
from ._fanout import _Client
from ._hosting import SessionHosting, _Session
from ._registry import SessionIndex

__all__ = ["Server"]

log = logging.getLogger("pi_actors.server")

class Server(SessionHosting):
    """Hosts sessions; ``make_config(cwd)`` gives the actor configuration of a new session.

    ``root``: sessions work inside it (default: ``default_cwd``, else the current directory);
    ``/`` is refused (``CwdRefused``). ``credentials``: the tokens WebSocket clients present
    (None: only the token given to ``serve_websocket``). ``state_dir``: where sessions are kept
    (``<state_dir>/sessions``) so that they outlive the server; None keeps them as
    ``make_config`` says (in memory in tests). ``agent_dir`` and ``hidden``: more paths no
    session may work in or see. ``max_sessions``: live sessions per non-admin identity.
    ``placement``: where each session's runtime runs (default: ``LocalPlacement``, this
    machine; ``pi-actors serve --placement ray`` places them on a Ray cluster).
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
        placement: SessionHost | None = None,
    ) -> None:
        self.make_config = make_config
        #: Where sessions' runtimes run (``placement.SessionHost``); default: this machine.
        self.placement: SessionHost = placement if placement is not None else LocalPlacement(1)
        #: Where a session's tool host started by the placement dials this server (a
        #: WebSocket URL reachable from the cluster's nodes; ``serve`` sets it once listening).
        self.tool_host_url: str | None = None
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
        #: The browser client's front (``serve_websocket(web=True)``), else None.
        self.web: Any = None

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
        self,
        host: str,
        port: int,
        token: str | None,
        *,
        ssl_context: Any = None,
        web: bool = False,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve WebSocket clients on ``host:port`` (``port`` 0 picks one; TLS with
        ``ssl_context``); ``task_status`` gets an object with the bound ``.port``. A request's
        bearer token is looked up in the server's credentials; ``token`` (if given) is one
        more token, an admin's. ``web``: also serve the browser client (``self.web`` is then
        its :class:`~.web.WebFront`); without it plain HTTP requests are refused (400)."""
        from ..runtime._websocket import serve_websocket_admitted

        by_token, by_digest = self._token_checks(token)
        front = None
        if web:
            from .web import WebFront

            front = self.web = WebFront(by_token, by_digest, tls=ssl_context is not None)

        def refusal_headers() -> list[tuple[bytes, bytes]] | None:
            # A fresh list each time: trio-websocket appends its content-length to it.
            return front.security_headers() if front is not None else None

        async def on_request(request: Any) -> None:
            presented = bearer_token(request.headers)
            identity: Identity | None
            if presented is None and front is not None:
                from .web import UpgradeRefused

                try:
                    identity = front.upgrade_identity(request.headers, request.host)
                except UpgradeRefused as refused:
                    await request.reject(refused.status, extra_headers=refusal_headers(), body=refused.body)
                    return
            else:
                found = by_token(presented) if presented else None
                identity = found[0] if found else None
            if identity is None:
                await request.reject(401, extra_headers=refusal_headers(), body=b"missing or wrong bearer token\n")
                return
            json_codec = JSON_SUBPROTOCOL in request.proposed_subprotocols
            ws = await request.accept(subprotocol=JSON_SUBPROTOCOL if json_codec else None)
            stream = WebSocketStream(ws, text=json_codec)
            await self.serve_stream(stream, identity, codecs=("json",) if json_codec else ("cbor",))

        async def on_http(request: Any) -> Any:
            assert front is not None
            return front.respond(request)

        await serve_websocket_admitted(
            on_request, host, port, self.admission, ssl_context=ssl_context, on_http=on_http if front else None,
            task_status=task_status,
        )

    async def serve_unix(self, path: str, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Serve a 0600 unix socket; peers of another uid or namespace are refused."""
        from ..runtime._listen import serve_unix_admitted

        self.hidden_paths.add(os.path.dirname(os.path.abspath(path)))
        await serve_unix_admitted(path, self.serve_stream, self.admission, task_status=task_status)

    # -- one connection ----------------------------------------------------------------------

    def _token_checks(
        self, token: str | None
    ) -> tuple[Callable[[str], tuple[Identity, str] | None], Callable[[str], Identity | None]]:
        """``(by_token, by_digest)``: a token → ``(identity, its SHA-256)``, and a SHA-256
        → the identity it still stands for (a browser sign-in keeps only the digest). The
        sources are the server's credentials and ``token`` (the one shared token of a server
        without a credentials file, an admin token). No credentials at all: every token is
        refused."""
        extra = Credentials(extra_admin_tokens=(token,)) if token else None

        def by_digest(digest: str) -> Identity | None:
            for source in (self.credentials, extra):
                if source is not None:
                    identity = source.authenticate_digest(digest)
                    if identity is not None:
                        return identity
            return None

        def by_token(presented: str) -> tuple[Identity, str] | None:
            if not presented:
                return None
            digest = token_digest(presented)
            identity = by_digest(digest)
            return None if identity is None else (identity, digest)

        return by_token, by_digest

    async def serve_stream(
        self, stream: trio.abc.Stream, identity: Identity = LOCAL_ADMIN, *, codecs: tuple[str, ...] = ("cbor",)
    ) -> None:
        client = _Client(self, self.send_queue, identity)
        self.stats["connections"] += 1
        self._clients.add(client)
        handle = ConnectionCalls(self, client)
        try:
            with client.scope:
                async with open_peer(
                    stream, side="server", role="server", name=self.name, handler=handle,
                    handshake_timeout=self.admission.limits.handshake_timeout, codecs=codecs,
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
        self.detach(client)
        for name, peer in list(self.tool_hosts.items()):
            if peer is client.peer:
                del self.tool_hosts[name]
                self.tool_host_owner.pop(name, None)

    # -- what the calls do (``_calls`` checks and routes them) ---------------------------------

    @staticmethod
    def _may_use(identity: Identity, owner: str) -> bool:
        return identity.admin or identity.name == owner

    def listing(self, identity: Identity) -> ListResult:
        """``list``: the sessions ``identity`` may use (live, then on disk only), the tool hosts."""
        sessions = [s.info() for s in self.sessions.values() if self._may_use(identity, s.owner)]
        if self.index is not None:
            live = {s.id for s in sessions} | set(self.sessions)
            for record in sorted(self.index.records.values(), key=lambda r: r.created):
                if record.id not in live and self._may_use(identity, record.owner):
                    sessions.append(
                        SessionInfo(id=record.id, cwd=self._listed_cwd(record), tool_host=record.toolHost, attachments=0, live=False, owner=record.owner)
                    )
        hosts = [ToolHostInfo(name=n, tools=self.tool_host_tools.get(n, [])) for n in self.tool_hosts]
        return ListResult(sessions=sessions, tool_hosts=hosts)

    def _listed_cwd(self, record: Any) -> str:
        try:
            return self.record_cwd(record)
        except RemoteError:
            return record.cwd

    def _check_owner(self, identity: Identity, owner: str, session_id: str) -> None:
        if not self._may_use(identity, owner):
            raise RemoteError("forbidden", f"session {session_id} belongs to another identity")

    async def live_session(self, session_id: str, identity: Identity) -> _Session:
        """The running session ``session_id``, reopened from its file if it is on disk only.

        Raises RemoteError ``session_not_found``, ``forbidden``, ``session_terminated`` (ended
        and not on disk), and those of reopening (``_hosting``)."""
        while True:
            session = self.sessions.get(session_id)
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

    async def remove_session(self, session_id: str, identity: Identity) -> None:
        """``remove``: stop the session and delete its directory (``session_not_found``,
        ``forbidden``)."""
        session = self.sessions.get(session_id)
        record = self.index.get(session_id) if self.index is not None else None
        owner = session.owner if session is not None else record.owner if record is not None else None
        if owner is None:
            raise RemoteError("session_not_found", f"no session {session_id!r}")
        self._check_owner(identity, owner, session_id)
        if session is not None:
            await self._end_session(session, "session removed")
        if record is not None and self.index is not None:
            await trio.to_thread.run_sync(self.index.delete, record)

    def register_tool_host(self, client: _Client, tools: list[str]) -> None:
        """``register_tool_host``: ``client``'s connection becomes the tool host its
        credential names (``forbidden``, ``invalid_request``: see protocol.server)."""
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
        self.tool_host_tools[name] = list(tools)
        self.tool_host_changed.set()
        self.tool_host_changed = trio.Event()

    def detach(self, client: _Client) -> None:
        """End ``client``'s attachment, if any (its id is refused from then on)."""
        if client.attachment is not None:
            old = self.sessions.get(client.attachment[0])
            if old is not None:
                old.attachments.pop(client.attachment[1], None)
            client.attachment = None
