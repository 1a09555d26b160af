"""Placing a served session's runtime: ``open_session`` for the server (``pi-actors serve``).

A served session is long-lived and interactive, so a placement does not ``run`` it to an end
(the batch runner's ``Placement.run``): it *opens* it and hands back where to reach its
coordinator — a :class:`PlacedSession` whose ``link`` has a ``Peer``'s ``call`` /
``open_call`` / ``closed_event`` — until the block ends (or the session dies: then
``link.closed_event`` is set and the server reopens it from its file at once, on a live
node, keeping its clients' attachments: see ``NodeSessions.reopens_lost``).

Two shapes:

- :func:`open_local_session` — today's behaviour: the whole actor set (provider, tool pool,
  coordinator, session store) runs on this machine under ``actors.local``'s supervisor.
- :class:`NodeSessions` — the session's runtime (coordinator, provider, tool pool) runs on
  another node, started by a :class:`NodeLauncher` (Ray, or :class:`ProcessNodes`: a plain
  process here, which is how the path is tested without a cluster). What stays on the
  server (the head): the session store, which writes the session file to the head's disk,
  and the UI. The node's coordinator reaches both over *connect links*
  (``runtime._connect``: it dials the head and authenticates with a per-link secret), so an
  acknowledged entry is already on the head's disk when the node dies; a remote tool host's
  link (``tools_link``) is relayed to the node the same way. Clients still talk to the
  server, which relays to the coordinator over our own CBOR link.

Cancellation of the block stops the session: the node is told to stop (and killed if it
does not), the store on the head sees end-of-stream and exits.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import msgspec
import trio

from ..actors.local import open_local_runtime, secret_env_names
from ..protocol.config import RuntimeConfig, read_part
from ..runtime import ChildProcess, Peer, child_environment, open_peer, start_watched_actor, watch_heartbeat
from ..runtime._connect import LinkOffer, open_link_listener
from ._paths import rebase_paths, rebase_prompt_cwd

__all__ = [
    "NodeHandle",
    "NodeLauncher",
    "NodeSessions",
    "PlacedSession",
    "ProcessNodes",
    "SessionHost",
    "open_local_session",
]

log = logging.getLogger("pi_actors.placement")

#: How long a placed session's node may take to dial the head (its start-up on a busy
#: cluster: scheduling, an interpreter, the imports).
NODE_START_TIMEOUT = 60.0
#: Liveness of a placed coordinator: a node lost without a FIN (a cut network, a frozen
#: machine) is noticed by a ping that goes unanswered this long.
HEARTBEAT_INTERVAL = 5.0
HEARTBEAT_TIMEOUT = 20.0


class PlacedSession:
    """An open session: ``link`` reaches its coordinator (``call``, ``open_call``,
    ``closed_event``); ``node``: where it runs (a host name, a Ray node id)."""

    def __init__(self, link: Any, node: str) -> None:
        self.link = link
        self.node = node


class SessionHost(Protocol):
    """What the server needs of a placement (``open_session``): see the module docstring.

    ``open_session(config, tools_link=, processes=, shutdown_grace=)`` is an async context
    manager yielding a :class:`PlacedSession`. ``tools_link``: a socket whose other end serves
    the session's tools (a remote tool host) instead of its own tool pool; ``processes``: kept
    filled with the session's local actor processes by name (only those on this machine).
    Raises (entering) what the session's start-up raised."""

    name: str

    def open_session(
        self, config: RuntimeConfig, *, tools_link: socket.socket | None = None, processes: dict[str, Any] | None = None,
        shutdown_grace: float = 3.0,
    ) -> Any: ...  # fmt: skip


@asynccontextmanager
async def open_local_session(
    config: RuntimeConfig, *, tools_link: socket.socket | None = None, processes: dict[str, Any] | None = None,
    shutdown_grace: float = 3.0,
) -> AsyncIterator[PlacedSession]:  # fmt: skip
    """The whole session on this machine (``actors.local``); the coordinator is given 30 s
    to answer (a busy machine starting several sessions)."""
    async with open_local_runtime(
        config, tools_link=tools_link, processes=processes, shutdown_grace=shutdown_grace, handshake_timeout=30.0
    ) as link:
        yield PlacedSession(link, socket.gethostname())


# -- a session on another node -----------------------------------------------------------------


class NodeHandle(Protocol):
    """A session runtime started on a node by a :class:`NodeLauncher`. ``node``: where;
    ``done``: set when it has ended (for any reason); ``stop()``: end it (idempotent, no
    wait; ``done`` follows)."""

    node: str
    done: trio.Event

    def stop(self) -> None: ...


class NodeLauncher(Protocol):
    """Starts :func:`host_node_session` somewhere with ``job`` (a JSON-able dict: ``config``,
    ``links``) as a task of ``nursery``; returns once it is submitted. Raises OSError (or
    the launcher's own error) if it cannot."""

    name: str

    async def launch(self, nursery: trio.Nursery, job: dict[str, Any]) -> NodeHandle: ...


class NodeSessions:
    """A placement whose sessions run on other nodes (module docstring).

    ``launcher``: how a node's runtime is started; ``link_host``: the head's address the
    nodes dial (an interface of this machine they can reach). ``workspace``: ``(head root,
    node root)`` when the nodes keep the workspace under another absolute root: every path
    of the runtime's configuration inside the head's root (its cwd, its sandbox's paths) is
    moved under the node's (``_paths.rebase_paths``), and the system prompt's working-directory
    line with them (``_paths.rebase_prompt_cwd``); the store's stay the head's.
    ``reopens_lost``: a node can die under a session, so the server reopens one whose link
    closed by itself at once from its file (``server._hosting``), not at the next attach.

    ``tool_hosts``: custom resources (``{"tool_host": 1}``) that make the server run each
    session's tools in a tool host of its own started through the launcher
    (:meth:`start_tool_host`) on a node that has them; None: the session's own tool pool."""

    reopens_lost = True

    def __init__(
        self, launcher: NodeLauncher, *, link_host: str = "127.0.0.1", workspace: tuple[str, str] | None = None,
        tool_hosts: dict[str, float] | None = None,
    ) -> None:  # fmt: skip
        self.launcher = launcher
        self.name = launcher.name
        self.link_host = link_host
        self.workspace = workspace
        self.tool_hosts = tool_hosts

    def start_tool_host(self, *, connect: str, token: str, name: str, workspace: str) -> Any:
        """Start a session's tool host (``pi-actors tool-host --connect CONNECT --name NAME``
        with ``token``, its tools in ``workspace``) on a node with :attr:`tool_hosts`; a
        handle with ``node``, ``stop()`` and ``await wait_ended()`` (returns once it has
        ended by any cause: the server starts another then). Blocks until it runs (call it in a thread);
        raises OSError when no node could start it, ValueError without ``tool_hosts`` or a
        launcher that cannot start tool hosts."""
        start = getattr(self.launcher, "start_tool_host", None)
        if not self.tool_hosts or start is None:
            raise ValueError(f"the {self.name} placement starts no tool hosts")
        return start(connect=connect, token=token, name=name, workspace=workspace, resources=self.tool_hosts)

    @asynccontextmanager
    async def open_session(
        self, config: RuntimeConfig, *, tools_link: socket.socket | None = None, processes: dict[str, Any] | None = None,
        shutdown_grace: float = 3.0,
    ) -> AsyncIterator[PlacedSession]:  # fmt: skip
        config = read_part(config, RuntimeConfig)
        async with open_link_listener(self.link_host) as listener, trio.open_nursery() as nursery:
            ui, store = listener.offer("ui"), listener.offer("store")
            links = {"ui": ui.spec, "store": store.spec}
            if tools_link is not None:
                tools = listener.offer("tools")
                links["tools"] = tools.spec
                nursery.start_soon(_relay_offer, tools, tools_link)
            nursery.start_soon(_host_store, nursery, store, config, processes)
            document = msgspec.to_builtins(config)
            if self.workspace is not None:
                document = rebase_paths(document, *self.workspace)
                coordinator = document["coordinator"]
                coordinator["systemPrompt"] = rebase_prompt_cwd(
                    coordinator.get("systemPrompt", ""), config.coordinator.cwd, coordinator.get("cwd", "")
                )
            handle = await self.launcher.launch(nursery, {"config": document, "links": links})
            try:
                stream = await _accept_or_fail(ui, handle)
                async with open_peer(stream, side="client", role="ui", name="coordinator", handshake_timeout=NODE_START_TIMEOUT) as peer:
                    nursery.start_soon(_watch, peer, handle)
                    log.info("placement: session placed on %s", handle.node)
                    yield PlacedSession(peer, handle.node)
            finally:
                handle.stop()
                with trio.move_on_after(shutdown_grace + 5.0) as waiting:
                    waiting.shield = True
                    await handle.done.wait()
                nursery.cancel_scope.cancel()


async def _accept_or_fail(offer: LinkOffer, handle: NodeHandle) -> trio.SocketStream:
    """``offer``'s connection, or an OSError if the node ends first or takes too long."""
    result: list[trio.SocketStream] = []
    async with trio.open_nursery() as nursery:

        async def accept() -> None:
            result.append(await offer.accept())
            nursery.cancel_scope.cancel()

        async def ended() -> None:
            await handle.done.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(accept)
        nursery.start_soon(ended)
        nursery.cancel_scope.deadline = trio.current_time() + NODE_START_TIMEOUT
    if not result:
        what = "ended" if handle.done.is_set() else f"did not connect within {NODE_START_TIMEOUT:g} s"
        raise OSError(f"the session's runtime on {handle.node} {what}")
    return result[0]


async def _watch(peer: Peer, handle: NodeHandle) -> None:
    """Close ``peer`` when the node ends or its coordinator stops answering (a node lost
    without a FIN), so that the server sees the session end and reopens it."""
    async with trio.open_nursery() as nursery:

        async def ended() -> None:
            await handle.done.wait()
            nursery.cancel_scope.cancel()

        async def silent() -> None:
            reason = await watch_heartbeat(peer, interval=HEARTBEAT_INTERVAL, timeout=HEARTBEAT_TIMEOUT)
            if reason is not None:
                log.warning("placement: the coordinator on %s %s", handle.node, reason)
            nursery.cancel_scope.cancel()

        nursery.start_soon(ended)
        nursery.start_soon(silent)
    await peer.aclose()


def _detach(stream: trio.SocketStream) -> socket.socket:
    """The stdlib socket under ``stream`` (to hand to a child process)."""
    return socket.socket(fileno=stream.socket.detach())


async def _host_store(nursery: trio.Nursery, offer: LinkOffer, config: RuntimeConfig, processes: dict[str, Any] | None) -> None:
    """Start the session store here, on the head, once the node's coordinator has dialled
    its link: the store's link *is* that connection (no relay)."""
    stream = await offer.accept()
    sock = _detach(stream)
    env = child_environment(scrub=secret_env_names())
    actor = await start_watched_actor(
        nursery, name="session-store", entry="pi_actors.actors.session_store:run_session_store", links={"coordinator": sock},
        config=msgspec.to_builtins(config.store), env=env,
    )  # fmt: skip
    if processes is not None:
        processes["session-store"] = actor.process


async def _relay_offer(offer: LinkOffer, sock: socket.socket) -> None:
    """Carry bytes both ways between ``offer``'s connection and ``sock`` until either ends."""
    local = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    try:
        remote = await offer.accept()
    except trio.EndOfChannel:
        await local.aclose()
        return
    async with local, remote, trio.open_nursery() as nursery:

        async def pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
            try:
                while chunk := await source.receive_some(65536):
                    await sink.send_all(chunk)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(pump, local, remote)
        nursery.start_soon(pump, remote, local)


async def host_node_session(job: dict[str, Any]) -> str:
    """The node's side: run the session's coordinator, provider and tool pool here, the
    coordinator dialling the head's links (``job["links"]``: ``ui``, ``store``, maybe
    ``tools``), until the coordinator ends; returns how it ended. No coordinator restart:
    the head reopens the session (maybe elsewhere) from its file."""
    links = job["links"]
    connect = {name: links[name] for name in ("ui", "store")}
    async with open_local_runtime(
        job["config"], connect=connect, tools_link=links.get("tools"), restart_coordinator=False, announce=False
    ) as link:
        await link.closed_event.wait()
        return link.failure or "ended"


class _ProcessNode:
    def __init__(self, process: ChildProcess) -> None:
        self.process = process
        self.node = f"{socket.gethostname()}/pid {process.pid}"
        self.done = trio.Event()

    def stop(self) -> None:
        self.process.terminate()

    def kill(self) -> None:
        """SIGKILL the node's host process, as a node's death would: its actors have it as
        their parent and die with it (the parent-death signal)."""
        self.process.kill()


class ProcessNodes:
    """Each session's runtime in a process of its own on this machine
    (``python -m pi_actors.placement._serve``): a stand-in node, to
    run and test the remote path without a cluster. ``nodes`` lists the live ones."""

    name = "process"

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = env
        self.nodes: list[_ProcessNode] = []

    async def launch(self, nursery: trio.Nursery, job: dict[str, Any]) -> NodeHandle:
        argv = [sys.executable, "-I", "-m", "pi_actors.placement._serve"]
        process = ChildProcess.spawn(argv, pass_fds=(), env=self.env, cwd="/")
        node = _ProcessNode(process)
        self.nodes.append(node)

        async def own() -> None:
            try:
                await process.send_stdin(json.dumps(job).encode())
                await process.wait()
            finally:
                if process.returncode is None:
                    node.kill()
                    with trio.CancelScope(shield=True):
                        await process.wait()
                self.nodes.remove(node)
                node.done.set()

        nursery.start_soon(own)
        return node


def _main() -> None:
    """``python -m pi_actors.placement._serve``: a :class:`ProcessNodes` node; its job on stdin."""
    from ..runtime.child import exit_now, set_parent_death_signal

    set_parent_death_signal(signal.SIGKILL)
    job = json.loads(sys.stdin.buffer.read())
    trio.run(host_node_session, job)
    exit_now(0)


if __name__ == "__main__":
    _main()
