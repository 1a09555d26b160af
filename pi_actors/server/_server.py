"""The server actor: session registry, attachments, routing, bounded fan-out, tool hosts.

Transport: any ``trio.abc.Stream`` (``serve_stream``); ``serve_websocket`` checks a bearer
token on the upgrade (401 before any frame) and carries frames in binary messages;
``serve_unix`` listens on a 0600 socket in a 0700 directory and refuses peers of another uid
or namespace (``runtime._listen``). Both accept through ``runtime._accept`` with the caps and
handshake deadline of ``limits`` (``self.admission``). Every connection opens with our
hello (``open_peer``, side "server"); a bad hello gets ``hello_error`` and the connection
closes, the server keeps serving.

Server-scoped calls (``target`` ""):

``list {}``                    → ``{sessions: [{id, cwd, toolHost, attachments}],
                                 toolHosts: [{name, tools}]}``
``create {cwd?, toolHost?}``   → ``{sessionId}``: spawns the session's actors (coordinator,
                                 store, provider, and a tool pool unless ``toolHost`` names a
                                 remote tool host, which then runs the session's tool calls).
``remove {sessionId}``         → ``{}``: ends every attachment on it, stops its processes.
``attach {sessionId}``         → ``{sessionId, attachmentId}``: a fresh id (re-attaching the
                                 session already held keeps the id); replaces this
                                 connection's previous attachment.
``detach {}``                  → ``{}``.
``register_tool_host {tools}`` → ``{}``: from a connection whose hello role is "tool-host";
                                 its hello ``name`` is the host's name. A host that
                                 reconnects replaces its old connection.

While the server shuts down, ``create`` and ``attach`` are refused with ``server_draining``.

Session-scoped calls: ``target`` = the session id, ``args.attachmentId`` = this connection's
current attachment to it, else ``session_not_attached``. Session calls (``SESSION_METHODS``
lists the usual ones; any other method is passed on too) are forwarded to the session's coordinator (``attachmentId`` removed), chunks relayed, result
returned; a cancel is relayed to the coordinator. ``subscribe`` gives the coordinator's
snapshot (sequence N) and then every update N+1, N+2, … A session whose processes die (or
that is removed) fails its attachments' calls and subscriptions with ``session_terminated``.

Fan-out and slow clients: every chunk to a client goes through that connection's bounded send
queue (``send_queue`` items), drained by one writer task; a client whose queue overflows is
disconnected at once, so it never slows the session or other clients. A call's result is sent
only after its chunks have left the queue.

Errors: any unexpected failure in a handler becomes ``internal`` for that call; a connection's
failure never ends the server.
"""

from __future__ import annotations

import logging
import socket
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

import trio

from ..runtime import ConnectionLost, IncomingCall, Peer, RemoteError, open_peer
from ..runtime._accept import Admission, ConnectionLimits
from ..runtime._websocket import WebSocketStream, bearer_token_ok

__all__ = ["Server", "SESSION_METHODS"]

log = logging.getLogger("pi_actors.server")

SESSION_METHODS = frozenset(
    {
        "prompt", "continue", "steer", "follow_up", "abort", "abort_retry", "compact", "set_model",
        "set_thinking_level", "get_state", "get_messages", "subscribe", "session", "tree", "navigate",
        "label", "fork", "fork_messages", "get_available_models",
    }
)

_FLUSHED = object()


class _Session:
    def __init__(self, session_id: str, cwd: str, tool_host: str | None) -> None:
        self.id = session_id
        self.cwd = cwd
        self.tool_host = tool_host
        self.peer: Peer | None = None
        self.processes: dict[str, Any] = {}
        self.attachments: dict[str, "_Client"] = {}
        self.scope = trio.CancelScope()
        self.ended = trio.Event()
        self.end_reason: str | None = None

    def info(self) -> dict:
        return {"id": self.id, "cwd": self.cwd, "toolHost": self.tool_host, "attachments": len(self.attachments)}


class _Client:
    def __init__(self, server: "Server", queue_size: int) -> None:
        self.server = server
        self.peer: Peer | None = None
        self.scope = trio.CancelScope()
        self.attachment: tuple[str, str] | None = None
        self.send, self.recv = trio.open_memory_channel[Any](queue_size)
        self.overflowed = False

    def push(self, item: Any) -> None:
        """Queue a chunk (or flush marker); overflow disconnects this client."""
        if self.overflowed:
            raise RemoteError("overflow", "send queue overflowed")
        try:
            self.send.send_nowait(item)
        except (trio.WouldBlock, trio.ClosedResourceError):
            self.overflowed = True
            self.server.stats["overflow_disconnects"] += 1
            self.scope.cancel()
            raise RemoteError("overflow", "client fell behind its send queue; disconnected") from None

    async def chunk(self, call: IncomingCall, data: Any) -> None:
        self.push((call, data))
        await trio.lowlevel.checkpoint()

    async def flushed(self, call: IncomingCall) -> None:
        done = trio.Event()
        self.push((call, (_FLUSHED, done)))
        await done.wait()

    async def run_writer(self) -> None:
        async for call, data in self.recv:
            if isinstance(data, tuple) and len(data) == 2 and data[0] is _FLUSHED:
                data[1].set()
                continue
            try:
                await call.send_chunk(data)
            except ConnectionLost:
                return


class Server:
    """Hosts sessions; ``make_config(cwd)`` gives the actor configuration of a new session."""

    def __init__(
        self,
        make_config: Callable[[str], dict[str, Any]],
        *,
        name: str = "pi-actors-server",
        send_queue: int = 1024,
        default_cwd: str | None = None,
        shutdown_grace: float = 3.0,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.make_config = make_config
        self.name = name
        self.send_queue = send_queue
        self.default_cwd = default_cwd
        self.shutdown_grace = shutdown_grace
        self.sessions: dict[str, _Session] = {}
        self.tool_hosts: dict[str, Peer] = {}
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
    async def running(self) -> AsyncIterator["Server"]:
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
        ``ssl_context``); ``task_status`` gets an object with the bound ``.port``."""
        from ..runtime._websocket import serve_websocket_admitted

        async def on_request(request: Any) -> None:
            if token is not None and not bearer_token_ok(request.headers, token):
                await request.reject(401, body=b"missing or wrong bearer token\n")
                return
            ws = await request.accept()
            await self.serve_stream(WebSocketStream(ws))

        await serve_websocket_admitted(on_request, host, port, self.admission, ssl_context=ssl_context, task_status=task_status)

    async def serve_unix(self, path: str, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Serve a 0600 unix socket; peers of another uid or namespace are refused."""
        from ..runtime._listen import serve_unix_admitted

        await serve_unix_admitted(path, self.serve_stream, self.admission, task_status=task_status)

    # -- one connection ----------------------------------------------------------------------

    async def serve_stream(self, stream: trio.abc.Stream) -> None:
        client = _Client(self, self.send_queue)
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

    async def _handle(self, client: _Client, call: IncomingCall) -> Any:
        args = call.args if isinstance(call.args, dict) else {}
        if call.target:
            return await self._session_call(client, call, args)
        method = call.method
        if method == "list":
            return {
                "sessions": [s.info() for s in self.sessions.values()],
                "toolHosts": [{"name": n, "tools": self.tool_host_tools.get(n, [])} for n in self.tool_hosts],
            }
        if method in ("create", "attach") and self.draining:
            raise RemoteError("server_draining", "the server is shutting down")
        if method == "create":
            return await self._create(args)
        if method == "remove":
            session = self._session(args.get("sessionId"))
            await self._end_session(session, "session removed")
            return {}
        if method == "attach":
            session = self._session(args.get("sessionId"))
            if session.end_reason is not None:
                raise RemoteError("session_terminated", f"session {session.id} has ended: {session.end_reason}")
            if client.attachment is not None and client.attachment[0] == session.id:
                return {"sessionId": session.id, "attachmentId": client.attachment[1]}
            self._detach(client)
            attachment_id = str(uuid.uuid4())
            client.attachment = (session.id, attachment_id)
            session.attachments[attachment_id] = client
            return {"sessionId": session.id, "attachmentId": attachment_id}
        if method == "detach":
            self._detach(client)
            return {}
        if method == "register_tool_host":
            assert client.peer is not None
            if client.peer.peer_role != "tool-host":
                raise RemoteError("invalid_request", "register_tool_host needs hello role 'tool-host'")
            name = client.peer.peer_name
            self.tool_hosts[name] = client.peer
            tools = args.get("tools")
            self.tool_host_tools[name] = [t for t in tools if isinstance(t, str)] if isinstance(tools, list) else []
            self.tool_host_changed.set()
            self.tool_host_changed = trio.Event()
            return {}
        raise RemoteError("not_found", f"server: unknown method {method!r}")

    def _session(self, session_id: Any) -> _Session:
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            raise RemoteError("session_not_found", f"no session {session_id!r}")
        return session

    def _detach(self, client: _Client) -> None:
        if client.attachment is not None:
            old = self.sessions.get(client.attachment[0])
            if old is not None:
                old.attachments.pop(client.attachment[1], None)
            client.attachment = None

    # -- sessions ----------------------------------------------------------------------------

    async def _create(self, args: dict) -> dict:
        assert self._nursery is not None, "Server.running() is not active"
        cwd = args.get("cwd") if isinstance(args.get("cwd"), str) else self.default_cwd
        if not cwd:
            raise RemoteError("invalid_request", "create needs a cwd (the server has no default)")
        tool_host = args.get("toolHost") if isinstance(args.get("toolHost"), str) else None
        try:
            config = self.make_config(cwd)
        except Exception as exc:
            raise RemoteError("invalid_request", f"cannot configure a session in {cwd}: {exc}") from None
        session = _Session(str(uuid.uuid4()), cwd, tool_host)
        try:
            async with self._start_limiter:
                await self._nursery.start(self._host_session, session, config)
        except RemoteError:
            raise
        except Exception as exc:
            raise RemoteError("startup_failed", f"session could not start: {_describe(exc)}") from None
        return {"sessionId": session.id}

    async def _host_session(self, session: _Session, config: dict, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        from ..cli._supervisor import open_local_runtime

        started = False
        try:
            async with trio.open_nursery() as nursery:
                tools_link = None
                if session.tool_host is not None:
                    tools_link, ours = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                    nursery.start_soon(self._tool_proxy, session, ours)
                async with open_local_runtime(
                    config,
                    tools_link=tools_link,
                    processes=session.processes,
                    shutdown_grace=self.shutdown_grace,
                    handshake_timeout=30.0,
                ) as peer:
                    try:
                        await peer.call("session")
                    except RemoteError as exc:
                        raise RemoteError("startup_failed", exc.message) from None
                    session.peer = peer
                    self.sessions[session.id] = session
                    started = True
                    task_status.started()
                    with session.scope:
                        await peer.closed_event.wait()
                        if session.end_reason is None:
                            session.end_reason = "its coordinator process exited"
                nursery.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                raise
            log.exception("server: session %s failed", session.id)
            session.end_reason = session.end_reason or f"failed: {exc}"
        finally:
            self.sessions.pop(session.id, None)
            session.end_reason = session.end_reason or "closed"
            session.ended.set()

    async def _end_session(self, session: _Session, reason: str) -> None:
        session.end_reason = session.end_reason or reason
        session.scope.cancel()
        await session.ended.wait()

    async def _tool_proxy(self, session: _Session, sock: socket.socket) -> None:
        """Serve the coordinator's ``run_tool`` calls by forwarding them to the tool host."""
        name = session.tool_host
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))

        async def handle(call: IncomingCall) -> Any:
            if call.method == "warm":
                return {}
            if call.method != "run_tool":
                raise RemoteError("not_found", f"tool proxy: unknown method {call.method!r}")
            host = self.tool_hosts.get(name or "")
            if host is None:
                raise RemoteError("tool_host_unavailable", f"tool host {name!r} is not connected")
            call.cooperative = True
            try:
                async with host.open_call("run_tool", call.args) as up:
                    async with up.cancel_when(call.cancel_requested.wait):
                        async for item in up:
                            await call.send_chunk(item)
                    return await up.result()
            except ConnectionLost:
                raise RemoteError("tool_host_lost", f"tool host {name!r} disconnected during the call; its outcome is unknown") from None

        try:
            async with open_peer(stream, side="server", role="tool-pool", name=f"tools:{name}", handler=handle) as peer:
                await peer.closed_event.wait()
        except ConnectionLost:
            pass

    async def _session_call(self, client: _Client, call: IncomingCall, args: dict) -> Any:
        session = self.sessions.get(call.target)
        attachment = args.get("attachmentId")
        if client.attachment != (call.target, attachment):
            if client.attachment is not None and client.attachment[0] == call.target and session is None:
                raise RemoteError("session_terminated", f"session {call.target} has ended")
            raise RemoteError("session_not_attached", f"this connection holds no attachment {attachment!r} to session {call.target!r}")
        if session is None or session.peer is None:
            raise RemoteError("session_terminated", f"session {call.target} has ended")
        forward = {k: v for k, v in args.items() if k != "attachmentId"}
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
        await client.flushed(call)
        return value


def _describe(exc: BaseException) -> str:
    """The leaf messages of a (possibly grouped) exception, for an error result."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
