"""The local multi-process placement: the CLI process holds the UI and supervises the actors.

``open_local_runtime`` spawns four children — coordinator, session store, provider streamer,
tool pool (which spawns its own workers); three with the placement ``store_with_coordinator``
(the store then runs as a task of the coordinator's process) — links them with socketpairs (the coordinator to
each of the others, the UI to the coordinator), and yields the UI's ``Peer`` to the
coordinator. Leaving the block closes the UI link; every child then sees end-of-stream and
exits; any child still running after a grace period is terminated, then killed. Each child
also dies with this process (parent-death signal), so a SIGKILLed CLI leaves nothing behind.

API keys reach only the provider process: the others get an environment without them.
"""

from __future__ import annotations

import os
import re
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import trio

from ..runtime import Peer, child_environment, link_pair, open_peer, start_actor

__all__ = ["open_local_runtime", "secret_env_names"]

_SECRET = re.compile(r"(_API_KEY|_TOKEN|_SECRET|_SECRET_KEY|_ACCESS_KEY_ID|_PASSWORD)$|^ANTHROPIC_|^OPENAI_")


def secret_env_names(env: dict[str, str] | None = None) -> tuple[str, ...]:
    """Names of environment variables that may hold credentials (never given to tools)."""
    env = os.environ if env is None else env
    return tuple(name for name in env if _SECRET.search(name))


@asynccontextmanager
async def open_local_runtime(
    config: dict[str, Any],
    *,
    shutdown_grace: float = 3.0,
    tools_link: Any = None,
    processes: dict[str, Any] | None = None,
    handshake_timeout: float | None = None,
    store_with_coordinator: bool = False,
) -> AsyncIterator[Peer]:
    """Spawn the actors for ``config`` (keys provider, tools, store, coordinator) and yield
    the UI's connection to the coordinator; see the module docstring for shutdown.

    ``tools_link``: a socket to use as the coordinator's "tools" link instead of spawning a
    tool pool (the caller serves ``run_tool`` on the other end, e.g. a remote tool host).
    ``processes``: if given, filled with each actor's ``ChildProcess`` by name.
    ``handshake_timeout``: how long the coordinator may take to answer the UI's hello
    (default: the protocol's 5 s; a server starting sessions on a busy machine gives more).
    ``store_with_coordinator``: place the session store in the coordinator's process (one
    process and interpreter start-up fewer; see :func:`run_coordinator_with_store`)."""
    scrubbed = child_environment(scrub=secret_env_names())
    async with trio.open_nursery() as nursery:
        ui_end, coord_ui = link_pair()
        coord_prov, prov = link_pair()
        if tools_link is None:
            coord_tools, tools = link_pair()
        else:
            coord_tools, tools = tools_link, None
        coord_store, store = link_pair()
        coordinator_links = {"ui": coord_ui, "provider": coord_prov, "tools": coord_tools, "store": coord_store}
        part = {key: config.get(key) or {} for key in ("provider", "tools", "store", "coordinator")}
        # (name, entry, links, config, environment); only the provider sees API keys.
        actors = [
            ("provider", "pi_actors.actors.provider:run_provider", {"coordinator": prov}, part["provider"], None),
            ("tool-pool", "pi_actors.actors.tool_pool:run_tool_pool", {"coordinator": tools}, part["tools"], scrubbed),
        ]
        if tools is None:
            actors = actors[:1]
        if store_with_coordinator:
            coord_store.close()
            store.close()
            del coordinator_links["store"]
            actors.append(("coordinator", "pi_actors.cli._supervisor:run_coordinator_with_store", coordinator_links,
                           {"coordinator": part["coordinator"], "store": part["store"]}, scrubbed))
        else:
            actors += [
                ("session-store", "pi_actors.actors.session_store:run_session_store", {"coordinator": store},
                 part["store"], scrubbed),
                ("coordinator", "pi_actors.actors.coordinator:run_coordinator", coordinator_links, part["coordinator"],
                 scrubbed),
            ]
        try:
            for name, entry, links, actor_config, env in actors:
                child = await start_actor(nursery, name=name, entry=entry, links=links, config=actor_config, env=env)
                if processes is not None:
                    processes[name] = child
        except BaseException:
            ui_end.close()
            raise
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ui_end))
        try:
            extra = {} if handshake_timeout is None else {"handshake_timeout": handshake_timeout}
            async with open_peer(stream, side="client", role="ui", name="coordinator", **extra) as peer:
                yield peer
        finally:
            # Children exit on end-of-stream; give them a moment, then terminate what is left.
            nursery.cancel_scope.deadline = trio.current_time() + shutdown_grace


async def run_coordinator_with_store(links: dict[str, trio.SocketStream], config: dict[str, Any]) -> None:
    """Actor entry for the placement ``store_with_coordinator``: the coordinator and the session
    store as two tasks of one process, linked by an in-process socketpair (the same protocol,
    hello included, as across processes). ``config``: ``{"coordinator": ..., "store": ...}``.
    The coordinator's return closes its end of the store link, which ends the store. A store
    write error is still the failed call it always is; a crash of either task (a bug) ends the
    process, so the UI sees the coordinator's link break, as for a crashed coordinator."""
    from ..actors.coordinator import run_coordinator
    from ..actors.session_store import run_session_store

    ours, theirs = link_pair()
    coordinator_end = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
    store_end = trio.SocketStream(trio.socket.from_stdlib_socket(theirs))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_session_store, {"coordinator": store_end}, config["store"])
        try:
            await run_coordinator({**links, "store": coordinator_end}, config["coordinator"])
        finally:
            await coordinator_end.aclose()
