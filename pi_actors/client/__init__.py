"""The client of a pi-actors session server: the one import for writing your own UI.

A server (``pi-actors serve``) hosts sessions; a client connects over WebSocket
(``ws://``, ``wss://``, with a bearer token) or a unix socket, opens or creates a session,
attaches to it and follows its events. Everything here speaks the protocol of
``proto/PROTOCOL.md``; the methods a session answers are declared in
:mod:`pi_actors.protocol` (the coordinator's interface).

- :func:`attach` — open or create a session and follow it for as long as you like:
  reconnects with back-off after a lost connection, re-attaches, and hands your view the
  snapshot and every event in pi's full AgentEvent shapes. What ``pi-actors attach`` runs.
- :func:`connect` — one connection to a server (a runtime ``Peer``) for lower-level use;
  :meth:`RemoteSession.attach` attaches to a session over it and :func:`open_or_create`
  creates one first when no id is given.
- :class:`RemoteSession` — one attachment: ``call`` / ``open_call`` to the session, each
  call carrying its attachment id.
- :class:`AgentEventRebuilder` — turns the stripped wire form of ``message_update`` events
  (deltas only) back into pi's full shapes (the partial message on each event).
- Errors: :class:`ConnectionRefused` (no connection was made; ``status`` 401 for a bad
  token), :class:`ConnectionLost` (a call's outcome is unknown), :class:`RemoteError` (the
  server or the session refused: ``code`` and ``message``).

Example — send one prompt and print the reply as it streams::

    import trio
    from pi_actors.client import AgentEventRebuilder, RemoteSession, connect, open_or_create

    async def main() -> None:
        async with connect("ws://127.0.0.1:8765", token="...") as peer:
            session_id = await open_or_create(peer, None, {"cwd": "/home/me/project"})
            session = await RemoteSession.attach(peer, session_id)
            rebuild = AgentEventRebuilder()
            async with session.open_call("prompt", {"text": "What does main.py do?"}) as call:
                async for event in call:
                    event = rebuild.apply(event)
                    if event["type"] == "message_update" and event["assistantMessageEvent"]["type"] == "text_delta":
                        print(event["assistantMessageEvent"]["delta"], end="", flush=True)
                await call.result()

    trio.run(main)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from ..protocol.events import AgentEventRebuilder
from ..runtime import ConnectionLost, RemoteError
from ..server.client import ConnectionRefused, RemoteSession, connect, parse_address, tls_context
from ..server.remote_ui import follow_session, open_or_create

__all__ = [
    "AgentEventRebuilder",
    "ConnectionLost",
    "ConnectionRefused",
    "RemoteError",
    "RemoteSession",
    "attach",
    "connect",
    "open_or_create",
    "parse_address",
    "tls_context",
]


async def attach(
    address: str,
    *,
    view: Any,
    token: str | None = None,
    session_id: str | None = None,
    create: dict[str, Any] | None = None,
    prompts: trio.MemoryReceiveChannel[str] | None = None,
    bind: Callable[[RemoteSession | None], None] | None = None,
    retry_first: bool = True,
    backoff: tuple[float, float] = (0.2, 5.0),
    tls_ca: str | None = None,
) -> str:
    """Open the session ``session_id`` on the server at ``address`` (or, without an id,
    create one with the ``create`` arguments: ``cwd``, ``model``, ...), attach to it and
    follow it; returns the session id.

    ``view`` gets four callbacks: ``attached(session_id, attachment_id)``,
    ``snapshot(snapshot)`` (the session as it is now: messages, state, a reply in progress),
    ``event(event)`` (every AgentEvent from then on, in pi's full shapes) and
    ``status(text)`` (disconnected, reconnecting, a prompt failed). ``prompts``: a trio
    receive channel of prompt texts, sent one after the other; the call returns once it is
    closed and the last prompt has finished. Without ``prompts`` it follows the session until
    cancelled, and ``bind(session)`` receives each new :class:`RemoteSession` (``None`` while
    disconnected) for a caller that makes its own calls. ``token``: the bearer token;
    ``tls_ca``: a PEM file of trusted CAs for ``wss://``.

    After a lost connection it reconnects with exponential ``backoff`` (first, max seconds)
    and re-attaches; a prompt in flight then is reported through ``view.status`` and not
    sent again. Raises :class:`RemoteError` for a refusal that reconnecting cannot fix (no
    such session, bad token) and, with ``retry_first=False``, :class:`ConnectionLost` when
    the first connection fails (a wrong address is then an error at once). Cancellation
    closes the connection (the session goes on running on the server)."""
    return await follow_session(
        address, token=token, session_id=session_id, create=create, view=view, prompts=prompts, bind=bind,
        retry_first=retry_first, backoff=backoff, tls_ca=tls_ca,
    )  # fmt: skip
