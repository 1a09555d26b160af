"""A remote UI's session loop: attach, render the snapshot, follow live updates, and after a
disconnect reconnect with backoff, re-attach (a new attachment id) and re-render.

``follow_session`` drives a ``view`` with four callbacks — ``attached(session_id,
attachment_id)``, ``snapshot(snapshot)``, ``event(event)`` (pi's full AgentEvent shapes,
rebuilt from the stripped wire form) and ``status(text)`` — and takes prompts from
``prompts`` (a trio receive channel of strings). A prompt in flight when the connection drops
fails locally with an "outcome unknown" error (``view.status``) and is not re-sent. The
loop ends when ``prompts`` is closed and the last prompt has finished.
"""

from __future__ import annotations

from typing import Any

import trio

from ..actors._event_wire import AgentEventRebuilder
from ..runtime import ConnectionLost, RemoteError
from .client import ConnectionRefused, RemoteSession, connect

__all__ = ["follow_session", "open_or_create"]


async def open_or_create(peer: Any, session_id: str | None, create: dict | None) -> str:
    if session_id is None:
        return (await peer.call("create", create or {}))["sessionId"]
    return session_id


async def follow_session(
    address: str,
    *,
    token: str | None,
    session_id: str | None,
    create: dict | None,
    view: Any,
    prompts: trio.MemoryReceiveChannel,
    backoff: tuple[float, float] = (0.2, 5.0),
) -> str:
    """Run until ``prompts`` is closed; returns the session id. Raises RemoteError for a
    refusal that reconnecting cannot fix (unknown session, bad token)."""
    delay = backoff[0]
    finished = trio.Event()
    while not finished.is_set():

        async def attempt() -> None:
            nonlocal session_id, delay
            async with connect(address, token=token, role="ui", name="attach") as peer:
                session_id = await open_or_create(peer, session_id, create)
                session = await RemoteSession.attach(peer, session_id)
                view.attached(session.session_id, session.attachment_id)
                delay = backoff[0]
                async with trio.open_nursery() as nursery:

                    async def send_prompts() -> None:
                        async for text in prompts:
                            try:
                                await session.call("prompt", {"text": text})
                            except ConnectionLost as exc:
                                view.status(f"prompt failed: {exc.message}")
                                raise
                            except RemoteError as exc:
                                view.status(f"prompt failed: {exc.message} ({exc.code})")
                        finished.set()
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(send_prompts)
                    async with session.open_call("subscribe") as sub:
                        rebuild = AgentEventRebuilder()
                        first = True
                        async for chunk in sub:
                            if first:
                                first = False
                                snap = chunk["snapshot"]
                                rebuild.seed(snap.get("streamMessage"))
                                view.snapshot(snap)
                                continue
                            view.event(rebuild.apply(chunk["event"]))
                        await sub.result()

        try:
            await attempt()
        except (Exception, BaseExceptionGroup) as exc:
            leaves = _leaves(exc)
            if not all(isinstance(leaf, ConnectionLost) for leaf in leaves):
                raise
            refused = [leaf for leaf in leaves if isinstance(leaf, ConnectionRefused)]
            if refused and refused[0].status == 401:
                raise RemoteError("unauthorized", "the server refused the token") from None
            view.status(f"disconnected: {leaves[0].message}; reconnecting in {delay:g} s")
        if finished.is_set():
            break
        await trio.sleep(delay)
        delay = min(delay * 2, backoff[1])
    assert session_id is not None
    return session_id


def _leaves(exc: BaseException) -> list:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
