"""A coordinator wired in-process over socketpairs: the real provider actor (talking to the
scripted server), a stand-in tool pool, a session store, and the UI's peer — for tests that
watch what the coordinator asks of its pool and store."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from conftest import actor_config

from pi_actors.actors.coordinator import Coordinator
from pi_actors.actors.provider import run_provider
from pi_actors.actors.session_store import SessionStore
from pi_actors.protocol.store import STORE
from pi_actors.runtime import Peer, Router, open_peer


def stream_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    """Two connected trio streams over a Unix socketpair."""
    a, b = socket.socketpair()
    return trio.SocketStream(trio.socket.from_stdlib_socket(a)), trio.SocketStream(trio.socket.from_stdlib_socket(b))


async def serve(stream: trio.SocketStream, role: str, handler: Any) -> None:
    """The server end of a link, until the other end closes it."""
    async with open_peer(stream, side="server", role=role, name=role, handler=handler) as peer:
        await peer.closed_event.wait()


@asynccontextmanager
async def open_wired_coordinator(
    scripted: Any, tmp_path: Any, pool: Any, store: SessionStore, *, ui_stream: Any = None
) -> AsyncIterator[Peer]:
    """A coordinator (tools: bash; no session file) wired to the provider actor, ``pool`` (a
    call handler) and ``store``; yields the UI's peer. ``ui_stream``: wraps the coordinator's
    end of the UI link (a function of the stream), to watch or hold what it sends."""
    config = actor_config(scripted, tmp_path, tools=("bash",))
    async with trio.open_nursery() as nursery:
        provider_ours, provider_theirs = stream_pair()
        nursery.start_soon(run_provider, {"coordinator": provider_theirs}, config.provider)
        pool_ours, pool_theirs = stream_pair()
        nursery.start_soon(serve, pool_theirs, "tool-pool", pool)
        store_ours, store_theirs = stream_pair()
        nursery.start_soon(serve, store_theirs, "session-store", Router.serving(store, STORE))
        async with (
            open_peer(provider_ours, side="client", role="coordinator", name="provider") as provider,
            open_peer(pool_ours, side="client", role="coordinator", name="tools") as tools,
            open_peer(store_ours, side="client", role="coordinator", name="store") as store_peer,
        ):
            coordinator = Coordinator(config.coordinator, provider, tools, store_peer)
            await coordinator.open_session({"cwd": str(tmp_path), "noSession": True})
            ui_ours, ui_theirs = stream_pair()
            ui_end = ui_stream(ui_theirs) if ui_stream is not None else ui_theirs
            nursery.start_soon(serve, ui_end, "coordinator", coordinator.router())
            async with open_peer(ui_ours, side="client", role="ui", name="coordinator") as ui:
                yield ui
        nursery.cancel_scope.cancel()
