"""Starting, reopening and ending the server's sessions (a part of ``Server``).

``SessionHosting`` is mixed into :class:`~._server.Server`; it holds the session side of the
server: the quota per identity, the confinement of working directories (``_confine``), the
configuration handed to a session's actors (the server's private paths hidden from its
tools, its file and directory when sessions are kept on disk), starting a session's
processes under the server's nursery (a few at a time), reopening a session from its file,
and the proxy that carries a session's tool calls to its remote tool host (a typed router for
``protocol.server.TOOL_PROXY``: ``warm`` answered here, ``run_tool`` relayed as it is).
Where a session's runtime runs is the server's placement (``self.placement``, a
``placement.SessionHost``: ``open_session`` yields where to reach the coordinator): on this
machine (``local``, ``pi_actors.actors.local``), or on a cluster's node with its store
staying here (``placement._serve.NodeSessions``). A session here whose coordinator dies
ends, and is reopened from its file on the next ``attach``; one whose node dies (a
placement that ``reopens_lost``) is reopened from its file at once on a live node, its
clients staying attached (``_host_session``).

Errors reach the caller as ``RemoteError``: ``quota_exceeded``, ``invalid_request`` (cwd or
configuration), ``startup_failed``, ``server_draining``.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import partial
from typing import TYPE_CHECKING, Any

import trio
from msgspec.structs import replace

from ..actors.local import CoordinatorLink
from ..placement import from_root, in_root
from ..protocol.config import ExportsConfig, RuntimeConfig, SessionConfig, read_part
from ..protocol.server import TOOL_PROXY, WARM, CreateArgs, SessionInfo
from ..runtime import (
    ConnectionLost,
    Empty,
    IncomingCall,
    RemoteError,
    RestartIntensity,
    RestartPolicy,
    Router,
    TooManyRestarts,
    TypedCall,
    implements,
    open_peer,
    remote_error_of,
)
from ._auth import CredentialsError, Identity
from ._confine import CwdRefused, confine_cwd
from ._registry import SessionRecord

if TYPE_CHECKING:
    from ._fanout import _Client

__all__ = ["SessionHosting", "_Session"]

log = logging.getLogger("pi_actors.server")

#: Reopening a placed session whose node was lost: at most 3 in a minute (a session that
#: kills every node it lands on must not take the cluster down with it), the first at once.
_REOPEN_POLICY = RestartPolicy(max_restarts=3, window=60.0, backoff_first=1.0, backoff_max=5.0)
#: How long a session's tool host started on the cluster may take to register with us.
_TOOL_HOST_REGISTER_TIMEOUT = 60.0


class _Session:
    def __init__(self, session_id: str, cwd: str, tool_host: str | None, owner: str, record: SessionRecord | None = None) -> None:
        self.id = session_id
        self.cwd = cwd
        self.tool_host = tool_host
        self.owner = owner
        self.record = record
        self.peer: CoordinatorLink | Any = None  # the placement's link to the coordinator
        self.node = ""
        self.processes: dict[str, Any] = {}
        self.attachments: dict[str, _Client] = {}
        self.scope = trio.CancelScope()
        self.ended = trio.Event()
        self.end_reason: str | None = None
        #: Its tool host was placed by the server (``serve --ray-tool-hosts``), which starts
        #: it again when it dies: a tool call waits for it meanwhile.
        self.tool_host_kept = False

    def info(self) -> SessionInfo:
        return SessionInfo(id=self.id, cwd=self.cwd, tool_host=self.tool_host, attachments=len(self.attachments), live=True, owner=self.owner)


class _ToolProxy:
    """The tool proxy's own methods (``protocol.server.TOOL_PROXY``); ``run_tool`` is relayed."""

    @implements(WARM)
    async def warm(self, args: Empty, call: TypedCall[Empty, None]) -> None:
        return None  # the tool host keeps its own workers warm


class SessionHosting:
    """The session half of ``Server`` (its attributes are set by ``Server.__init__``)."""

    sessions: dict
    index: Any
    hidden_paths: set
    root: str
    default_cwd: str
    max_sessions: int
    shutdown_grace: float
    draining: bool
    tool_hosts: dict
    make_config: Any
    _nursery: Any
    _opening: dict
    _starting: dict
    _start_limiter: Any
    placement: Any
    credentials: Any
    tool_host_changed: Any
    #: The WebSocket URL a session's tool host on the cluster dials (``serve`` sets it).
    tool_host_url: str | None

    @contextmanager
    def _reserving(self, identity: Identity | None, owner: str) -> Iterator[None]:
        """Check ``identity``'s quota (None: no check; admins have none) and hold one of
        ``owner``'s session slots until the block ends (by then the session is live, or
        failed), so that concurrent creates cannot overshoot the quota."""
        if identity is not None and not identity.admin:
            live = sum(1 for s in self.sessions.values() if s.owner == identity.name and s.end_reason is None)
            if live + self._starting.get(identity.name, 0) >= self.max_sessions:
                raise RemoteError(
                    "quota_exceeded", f"{identity.name!r} has {self.max_sessions} live sessions, the most allowed; remove one first"
                )
        self._starting[owner] = self._starting.get(owner, 0) + 1
        try:
            yield
        finally:
            self._starting[owner] -= 1
            if not self._starting[owner]:
                del self._starting[owner]

    def _confine(self, cwd: str) -> str:
        try:
            return confine_cwd(cwd, self.root, sorted(self.hidden_paths))
        except CwdRefused as exc:
            raise RemoteError("invalid_request", str(exc)) from None

    def record_cwd(self, record: SessionRecord) -> str:
        """Where a session on disk works now: its ``cwdInRoot`` under the server's root of now
        (the workspace may have moved: another node, another absolute root), else its ``cwd``.
        Raises RemoteError ``invalid_request`` for a stored path that leaves the root."""
        if record.cwdInRoot is None:
            return record.cwd
        try:
            return from_root(record.cwdInRoot, self.root)
        except ValueError as exc:
            raise RemoteError("invalid_request", f"session {record.id}: {exc}") from None

    def _session_config(self, config: RuntimeConfig | dict[str, Any], record: SessionRecord | None) -> RuntimeConfig:
        """``config`` with this server's private paths hidden from the session's tools, and
        (with a state directory) the session's own file and directory; exports go only there."""
        config = read_part(config, RuntimeConfig)
        tools, coordinator = config.tools, config.coordinator
        if tools.sandbox is not None:
            hidden = [*tools.sandbox.hidden, *sorted(self.hidden_paths)]
            tools = replace(tools, sandbox=replace(tools.sandbox, hidden=hidden))
        directory = self.index.directory(record) if (self.index is not None and record is not None) else None
        coordinator = replace(coordinator, exports=ExportsConfig(dir=directory, caller_path=False))
        if record is not None and self.index is not None:
            session = SessionConfig(resume=self.index.file_path(record), session_dir=directory, agent_dir=coordinator.session.agent_dir)
            coordinator = replace(coordinator, session=session)
        store = config.store
        if record is not None and self.index is not None:
            # The session file's header keeps its paths relative to our root (``roots``).
            store = replace(store, root=self.root)
        return replace(config, tools=tools, coordinator=coordinator, store=store)

    async def create_session(self, args: CreateArgs, identity: Identity) -> str:
        """``create``: start a new session owned by ``identity``; its id. Raises RemoteError
        (see the module docstring)."""
        assert self._nursery is not None, "Server.running() is not active"
        cwd = args.cwd if args.cwd is not None else self.default_cwd
        if not cwd:
            raise RemoteError("invalid_request", "create needs a cwd (the server has no default)")
        cwd = self._confine(cwd)
        tool_host = args.tool_host
        with self._reserving(identity, identity.name):
            try:
                config = self.make_config(cwd)
            except Exception as exc:
                raise RemoteError("invalid_request", f"cannot configure a session in {cwd}: {exc}") from None
            record = (
                await trio.to_thread.run_sync(self.index.create, identity.name, cwd, tool_host, in_root(cwd, self.root))
                if self.index is not None
                else None
            )
            session = _Session(record.id if record else str(uuid.uuid4()), cwd, tool_host, identity.name, record)
            try:
                await self._start(session, self._session_config(config, record))
            except BaseException:
                if record is not None and self.index is not None:
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(self.index.delete, record)
                raise
        return session.id

    async def _reopen(self, record: SessionRecord, identity: Identity) -> _Session:
        """Start the session of ``record`` again from its file (its whole history)."""
        assert self._nursery is not None, "Server.running() is not active"
        if self.draining:
            raise RemoteError("server_draining", "the server is shutting down")
        opening = self._opening[record.id] = trio.Event()
        try:
            # Under the root of now: the workspace may have moved since (another node, another
            # absolute root; placement._paths); the root may also have narrowed: confined again.
            cwd = self._confine(self.record_cwd(record))
            with self._reserving(identity if identity.name == record.owner else None, record.owner):
                try:
                    config = self.make_config(cwd)
                except Exception as exc:
                    raise RemoteError("invalid_request", f"cannot configure session {record.id} in {cwd}: {exc}") from None
                session = _Session(record.id, cwd, record.toolHost, record.owner, record)
                await self._start(session, self._session_config(config, record))
            log.info("server: reopened session %s from %s", record.id, record.file)
            return session
        finally:
            del self._opening[record.id]
            opening.set()

    async def _start(self, session: _Session, config: RuntimeConfig) -> None:
        assert self._nursery is not None
        try:
            async with self._start_limiter:
                await self._nursery.start(self._host_session, session, config)
        except RemoteError:
            raise
        except Exception as exc:
            refusal = remote_error_of(exc) if isinstance(exc, BaseExceptionGroup) else None
            if refusal is not None:
                raise refusal from None
            raise RemoteError("startup_failed", f"session could not start: {_describe(exc)}") from None

    async def _host_session(self, session: _Session, config: RuntimeConfig, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run ``session`` until it ends. With a placement that reopens lost sessions
        (``reopens_lost``: a node that can die under it) and a file on disk, a runtime whose
        link closes without being asked to is started again from the file at once, on a live
        node: attached clients keep their attachment; a call in flight fails "outcome unknown"
        and is never re-sent (``CoordinatorLink``, as under a local supervisor's restart); the
        next call waits for the new coordinator. At most ``_REOPEN_POLICY``'s restarts in its
        window, then the session fails. The first start's errors propagate."""
        reopens = bool(getattr(self.placement, "reopens_lost", False)) and session.record is not None and self.index is not None
        link = CoordinatorLink(restartable=True, announce=False) if reopens else None
        intensity = RestartIntensity(_REOPEN_POLICY)
        started = False
        tool_host: list[Any] = [None]  # the placed tool host's handle; a restart replaces it
        keeper = trio.CancelScope()
        try:
            with session.scope:
                if getattr(self.placement, "tool_hosts", None) and session.tool_host is None:
                    tool_host[0] = await self._start_placed_tool_host(session)
                    session.tool_host_kept = True
                    self._nursery.start_soon(self._keep_placed_tool_host, session, tool_host, keeper)
                while True:
                    try:
                        lost = await self._host_generation(session, config, link, None if started else task_status)
                    except Exception as exc:
                        if not started or link is None:
                            raise
                        lost = f"could not be started again ({_describe(exc)})"  # counted below
                    started = True
                    if link is None or session.end_reason is not None or self.draining:
                        if session.end_reason is None:
                            session.end_reason = "its coordinator process exited"
                        break
                    link._report_down(lost)
                    try:
                        delay = intensity.next_delay("the session's runtime")
                    except TooManyRestarts as exc:
                        session.end_reason = f"failed: the coordinator process {lost}, and {exc}"
                        link._end(session.end_reason, failed=True)
                        break
                    log.warning("server: session %s: the coordinator process %s; reopening it from its file", session.id, lost)
                    await trio.sleep(delay)
                    try:
                        config = self._session_config(self.make_config(session.cwd), session.record)
                    except Exception as exc:
                        session.end_reason = f"failed: cannot configure it again: {exc}"
                        link._end(session.end_reason, failed=True)
                        break
        except Exception as exc:
            if not started:
                raise
            log.exception("server: session %s failed", session.id)
            session.end_reason = session.end_reason or f"failed: {exc}"
        finally:
            self.sessions.pop(session.id, None)
            session.end_reason = session.end_reason or "closed"
            if link is not None:
                link._end(session.end_reason, failed=False)
            keeper.cancel()
            if tool_host[0] is not None:
                self._stop_placed_tool_host(tool_host[0], session.tool_host or "")
            session.ended.set()

    async def _start_placed_tool_host(self, session: _Session) -> Any:
        """Start ``session``'s own tool host through the placement (``serve --ray-tool-hosts``:
        a Ray actor on a node with the placement's ``tool_hosts`` resources), dialling this
        server with a tool-host credential of its own (``ray-<session id>``, removed with it),
        its tools working in the session's cwd; wait until it has registered and make it the
        session's tool host. Returns its handle (``stop()``). Raises RemoteError
        ``startup_failed`` when it cannot."""
        url, credentials = getattr(self, "tool_host_url", None), getattr(self, "credentials", None)
        if url is None or credentials is None:
            raise RemoteError("startup_failed", "a tool host on the cluster needs the server's credentials and a WebSocket listener")
        name = f"ray-{session.id}"
        with suppress(CredentialsError):
            credentials.remove(name)  # left by a server that was killed
        token = credentials.add(name, "tool-host")
        host = None
        stale = self.tool_hosts.get(name)  # a dead predecessor's connection, not yet dropped
        try:
            start = partial(self.placement.start_tool_host, connect=url, token=token, name=name, workspace=session.cwd)
            host = await trio.to_thread.run_sync(start)
            with trio.fail_after(_TOOL_HOST_REGISTER_TIMEOUT):
                while self.tool_hosts.get(name) in (None, stale):
                    await self.tool_host_changed.wait()
        except BaseException as exc:
            self._stop_placed_tool_host(host, name)
            if isinstance(exc, (OSError, trio.TooSlowError)):
                what = "did not register in time" if isinstance(exc, trio.TooSlowError) else str(exc)
                raise RemoteError("startup_failed", f"the session's tool host on the cluster: {what}") from None
            raise
        log.info("server: session %s: tool host %s on %s", session.id, name, host.node)
        session.tool_host = name
        return host

    async def _keep_placed_tool_host(self, session: _Session, handle: list[Any], scope: trio.CancelScope) -> None:
        """Start ``session``'s placed tool host (``handle[0]``) again each time it ends by
        itself — its process killed, its node lost — the way a lost session runtime is
        reopened: a tool call in flight then failed (and is never re-sent); the next one
        waits for the new host, which registers under the same name with a new credential.
        At most ``_REOPEN_POLICY``'s restarts in its window; past that, or when no node can
        start one, it gives up (logged) and the session's tool calls fail "not connected".
        Ends when ``scope`` is cancelled (the session ended). Never raises: it runs in the
        server's nursery."""
        intensity = RestartIntensity(_REOPEN_POLICY)
        name = session.tool_host or ""
        with scope:
            while True:
                await handle[0].wait_ended()
                try:
                    delay = intensity.next_delay("the session's tool host")
                except TooManyRestarts as exc:
                    log.error("server: session %s: tool host %s: %s; not starting it again", session.id, name, exc)
                    return
                log.warning("server: session %s: tool host %s on %s ended; starting another", session.id, name, handle[0].node)
                await trio.sleep(delay)
                self._stop_placed_tool_host(handle[0], name)
                handle[0] = None
                try:
                    handle[0] = await self._start_placed_tool_host(session)
                except RemoteError as exc:
                    log.error("server: session %s: %s", session.id, exc.message)
                    return

    def _stop_placed_tool_host(self, host: Any, name: str) -> None:
        """End a tool host of :meth:`_start_placed_tool_host` (``host`` None: not started)
        and remove its credential."""
        if host is not None:
            host.stop()
        with suppress(CredentialsError):
            self.credentials.remove(name)

    async def _host_generation(self, session: _Session, config: RuntimeConfig, link: CoordinatorLink | None, task_status: Any) -> str:
        """One placed run of ``session``'s runtime, until its coordinator's link closes; how
        it ended (for "the coordinator process ..."). ``task_status``: the first run's, told
        once the session is live (None for a reopen). Raises what its start-up raised."""
        async with trio.open_nursery() as nursery:
            tools_link = None
            if session.tool_host is not None:
                tools_link, ours = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                nursery.start_soon(self._tool_proxy, session, ours)
            async with self.placement.open_session(
                config, tools_link=tools_link, processes=session.processes, shutdown_grace=self.shutdown_grace
            ) as placed:
                peer = placed.link
                session.node = placed.node
                try:
                    await peer.call("session")
                except RemoteError as exc:
                    raise RemoteError("startup_failed", exc.message) from None
                if link is not None:
                    link._attach(peer)
                    if link.generation > 1:
                        log.info("server: session %s reopened on %s", session.id, placed.node)
                session.peer = link if link is not None else peer
                if task_status is not None:
                    self.sessions[session.id] = session
                    task_status.started()
                await peer.closed_event.wait()
            nursery.cancel_scope.cancel()
        return f"on {session.node} ended"

    async def _end_session(self, session: _Session, reason: str) -> None:
        session.end_reason = session.end_reason or reason
        session.scope.cancel()
        await session.ended.wait()

    async def _tool_proxy(self, session: _Session, sock: socket.socket) -> None:
        """Serve the coordinator's ``run_tool`` calls by forwarding them to the tool host."""
        name = session.tool_host
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))

        async def run_tool(call: IncomingCall) -> Any:
            if call.method != "run_tool":
                raise RemoteError("not_found", f"tool proxy: unknown method {call.method!r}")
            host = await self._live_tool_host(session, name or "")
            call.cooperative = True
            try:
                async with host.open_call("run_tool", call.args) as up:
                    async with up.cancel_when(call.cancel_requested):
                        async for item in up:
                            await call.send_chunk(item)
                    return await up.result()
            except ConnectionLost:
                raise RemoteError("tool_host_lost", f"tool host {name!r} disconnected during the call; its outcome is unknown") from None

        handle = Router.serving(_ToolProxy(), TOOL_PROXY, name=f"tool proxy {name}", fallback=run_tool)
        try:
            # The link is to our own coordinator, which may take a while to start on a busy
            # machine: the same allowance as its UI link (open_local_runtime's 30 s).
            async with open_peer(
                stream, side="server", role="tool-pool", name=f"tools:{name}", handler=handle, handshake_timeout=30.0
            ) as peer:
                await peer.closed_event.wait()
        except ConnectionLost:
            pass

    async def _live_tool_host(self, session: _Session, name: str) -> Any:
        """The connection of ``session``'s tool host ``name``. One the server keeps
        (:meth:`_keep_placed_tool_host`) may be starting again: wait for it, as long as a
        start may take. Raises RemoteError ``tool_host_unavailable`` when none is there."""
        host = self.tool_hosts.get(name)
        if session.tool_host_kept:
            with trio.move_on_after(_TOOL_HOST_REGISTER_TIMEOUT):
                while host is None or host.closed_event.is_set():
                    await self.tool_host_changed.wait()
                    host = self.tool_hosts.get(name)
        if host is None or host.closed_event.is_set():
            raise RemoteError("tool_host_unavailable", f"tool host {name!r} is not connected")
        return host

    async def follow_fork(self, session: _Session) -> None:
        """A fork moved the session to a new file in its directory: reopen that one next time
        (nothing to do for a session not kept on disk)."""
        if session.peer is None or session.record is None or self.index is None:
            return
        try:
            info = await session.peer.call("session")
        except (RemoteError, ConnectionLost):
            return
        path = (info or {}).get("path")
        if isinstance(path, str):
            await trio.to_thread.run_sync(self.index.set_file, session.record, path)


def _describe(exc: BaseException) -> str:
    """The leaf messages of a (possibly grouped) exception, for an error result."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
