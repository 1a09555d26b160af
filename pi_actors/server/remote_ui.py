"""A remote UI's session loop: attach, render the snapshot, follow live updates, and after a
disconnect reconnect with backoff, re-attach (a new attachment id) and re-render.

``follow_session`` drives a ``view`` with four callbacks — ``attached(session_id,
attachment_id)``, ``snapshot(snapshot)``, ``event(event)`` (pi's full AgentEvent shapes,
rebuilt from the stripped wire form) and ``status(text)`` — and either takes prompts from
``prompts`` (a trio receive channel of strings; the loop ends when it is closed and the last
prompt has finished, and the view has been shown its end) or, without ``prompts``, follows the session until cancelled while
``bind(session)`` hands each new attachment (``None`` while disconnected) to a caller that
makes its own calls (the TUI). A prompt in flight when the connection drops fails locally
with an "outcome unknown" error (``view.status``) and is not re-sent. A server that restarts
(or a session whose processes died) is waited for the same way: the next ``attach`` reopens
the session from its file, history included.

The subscription is checked: its snapshot carries ``seq`` N and its updates must carry N+1,
N+2, … in order. An update out of sequence (a lost one) or a subscription ended for falling
behind (``overflow``) is repaired by subscribing again on the same attachment: the view gets
a fresh ``snapshot`` (a redraw) and then the updates after it, so it never shows a state the
session was not in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from ..protocol.events import AgentEventRebuilder
from ..runtime import ConnectionLost, RemoteError, leaf_exceptions
from .client import ConnectionRefused, RemoteSession, connect

__all__ = ["follow_session", "open_or_create"]

_RETRY_CODES = frozenset({"overflow", "server_draining", "session_terminated"})

#: Seconds a finished prompt waits for its run's end to reach the view (see ``_Shown``).
_TAIL_WAIT = 10.0


class _Shown:
    """How far the view has got: counts the run ends (``agent_end``) shown, and the
    snapshots of an idle session from a subscription taken again (after a gap or an
    overflow: any run that ended before is in them). The first snapshot is not counted: it
    may predate the prompt.

    Why: a prompt's result and the subscription's updates are two calls' traffic, and the
    session answers the prompt once its last events are *queued* for every subscriber; the
    updates may reach this client after the answer. A loop that stopped following at the
    answer would leave the view without the run's end."""

    def __init__(self) -> None:
        self.marks = 0
        self._changed = trio.Event()

    def mark(self) -> None:
        self.marks += 1
        self._changed.set()
        self._changed = trio.Event()

    async def wait_past(self, marks: int) -> None:
        """Return once something was shown since :attr:`marks` read ``marks``."""
        while self.marks <= marks:
            await self._changed.wait()


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
    prompts: trio.MemoryReceiveChannel | None = None,
    bind: Callable[[RemoteSession | None], None] | None = None,
    retry_first: bool = True,
    backoff: tuple[float, float] = (0.2, 5.0),
    tls_ca: str | None = None,
) -> str:
    """Run until ``prompts`` is closed (without ``prompts``: until cancelled); returns the
    session id. Raises RemoteError for a refusal that reconnecting cannot fix (unknown
    session, bad token) and, with ``retry_first=False``, the ConnectionLost of a first
    connection that fails before any attachment (a wrong address is then an error at once)."""
    delay = backoff[0]
    finished = trio.Event()
    ever_attached = False
    while not finished.is_set():

        async def attempt() -> None:
            nonlocal session_id, delay, ever_attached
            async with connect(address, token=token, role="ui", name="attach", tls_ca=tls_ca) as peer:
                session_id = await open_or_create(peer, session_id, create)
                session = await RemoteSession.attach(peer, session_id)
                ever_attached = True
                view.attached(session.session_id, session.attachment_id)
                if bind is not None:
                    bind(session)
                delay = backoff[0]
                shown = _Shown()
                async with trio.open_nursery() as nursery:

                    async def send_prompts(source: trio.MemoryReceiveChannel) -> None:
                        async for text in source:
                            before = shown.marks
                            try:
                                await session.call("prompt", {"text": text})
                            except ConnectionLost as exc:
                                view.status(f"prompt failed: {exc.message}")
                                raise
                            except RemoteError as exc:
                                view.status(f"prompt failed: {exc.message} ({exc.code})")
                                continue
                            # The run is over: its end (or a snapshot after it) is on its way
                            # to the view, perhaps behind the answer (_Shown).
                            with trio.move_on_after(_TAIL_WAIT):
                                await shown.wait_past(before)
                        finished.set()
                        nursery.cancel_scope.cancel()

                    if prompts is not None:
                        nursery.start_soon(send_prompts, prompts)
                    await _follow_updates(session, view, shown)

        try:
            await attempt()
        except (Exception, BaseExceptionGroup) as exc:
            leaves = leaf_exceptions(exc)
            # A lost connection, a subscription dropped for falling behind, a server going down
            # or a session whose processes ended: start again (a server that restarted
            # reopens the session from its file on attach; one that is gone says so).
            final = [leaf for leaf in leaves if not (isinstance(leaf, ConnectionLost) or getattr(leaf, "code", None) in _RETRY_CODES)]
            if final:
                if all(isinstance(leaf, RemoteError) for leaf in final):
                    raise final[0] from None  # a refusal (no such session, forbidden, ...): one error, not a group
                raise
            refused = [leaf for leaf in leaves if isinstance(leaf, ConnectionRefused)]
            if refused and refused[0].status == 401:
                raise RemoteError("unauthorized", "the server refused the token") from None
            if not ever_attached and not retry_first:
                raise leaves[0] from None
            view.status(f"disconnected: {getattr(leaves[0], 'message', leaves[0])}; reconnecting in {delay:g} s")
        finally:
            if bind is not None:
                bind(None)
        if finished.is_set():
            break
        await trio.sleep(delay)
        delay = min(delay * 2, backoff[1])
    assert session_id is not None
    return session_id


async def _follow_updates(session: RemoteSession, view: Any, shown: _Shown | None = None) -> None:
    """Subscribe and feed ``view``: snapshot, then every update in sequence. Subscribes again
    (a new snapshot) after a gap, an ``overflow``, or ``actor_died`` (the session's node was
    lost and the server is reopening it: the new subscription waits for it); returns when a
    subscription ends normally. Raises the RemoteError of any other failure."""
    again = False
    while True:
        try:
            if not await _follow_one_subscription(session, view, shown if again else None, shown):
                return
            again = True
        except RemoteError as exc:
            if exc.code not in ("overflow", "actor_died") or isinstance(exc, ConnectionLost):
                raise
            if exc.code == "actor_died":
                view.status(exc.message)
            again = True


async def _follow_one_subscription(
    session: RemoteSession, view: Any, shown_snapshot: _Shown | None = None, shown: _Shown | None = None
) -> bool:
    """One ``subscribe`` call: True if it must be replaced (an update arrived out of
    sequence; leaving the call cancels it), False if it ended normally. ``shown`` is told of
    each run end shown, ``shown_snapshot`` of a snapshot of an idle session (see _Shown)."""
    async with session.open_call("subscribe") as sub:
        rebuild = AgentEventRebuilder()
        expected: int | None = None
        async for chunk in sub:
            if expected is None:
                snap = chunk["snapshot"]
                expected = _seq_of(snap, "snapshot") + 1
                rebuild.seed(snap.get("streamMessage"))
                view.snapshot(snap)
                if shown_snapshot is not None and not snap.get("isStreaming"):
                    shown_snapshot.mark()
                continue
            if _seq_of(chunk, "update") != expected:
                return True  # a gap (or a repeat): the view would go wrong from here on
            expected += 1
            event = rebuild.apply(chunk["event"])
            view.event(event)
            if shown is not None and event.get("type") == "agent_end":
                shown.mark()
        await sub.result()
    return False


def _seq_of(item: Any, what: str) -> int:
    seq = item.get("seq") if isinstance(item, dict) else None
    if type(seq) is not int:
        raise RemoteError("invalid_request", f"a subscription {what} without an integer seq: {str(item)[:80]}")
    return seq

