"""The UI's connection to a supervised session's coordinator (see ``local.py``).

:class:`CoordinatorLink` has a ``Peer``'s ``call`` / ``open_call`` / ``closed_event`` and
stays valid across coordinator restarts: the placement attaches each new coordinator's
Peer, reports each death, and ends the link when the session is over or has failed.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from ..protocol.coordinator import CONTINUE, PROMPT
from ..runtime import ActorDied, ConnectionLost, OutgoingCall, Peer, RemoteError

__all__ = ["CoordinatorLink"]

#: The methods that run the agent: their end marks the end of a run.
_RUNS = frozenset({PROMPT.name, CONTINUE.name})

#: How long a failed UI call waits for the report of how its coordinator died.
_REASON_WAIT = 2.0


class CoordinatorLink:
    """The UI's connection to the session's coordinator, across coordinator restarts.

    ``call`` / ``open_call`` go to the current coordinator (waiting while one restarts).
    A call in flight when the coordinator died fails with :class:`ActorDied` ("the coordinator
    process was killed by SIGKILL; the outcome of the prompt is unknown"). ``closed_event`` is
    set when the session has ended for good; ``failure`` then says why if it failed.
    ``generation`` counts coordinator starts; ``restarted`` is set (and replaced) at each
    restart, for UIs that hold a subscription and must subscribe again."""

    name = "coordinator"

    def __init__(self, *, restartable: bool, announce: bool = True) -> None:
        self.restartable = restartable
        self.announce = announce
        self.closed_event = trio.Event()
        self.failure: str | None = None
        self.generation = 0
        self.restarted = trio.Event()
        self._peer: Peer | None = None
        self._changed = trio.Event()
        self._down: dict[int, trio.Event] = {}
        self._reasons: dict[int, str] = {}
        self._ended: str | None = None
        #: What supervision did, in order ("the provider process was killed by SIGKILL;
        #: restarting it", "provider restarted", ...); ``noted`` is set (and replaced) at each.
        self.notes: list[str] = []
        self.noted = trio.Event()
        #: Set when a first prompt has ended (any outcome): the moment to start warm spares.
        self.first_run_done = trio.Event()
        #: Set (and replaced) whenever a prompt ends: the moment to replace a used spare.
        self.run_ended = trio.Event()

    async def wait_note(self, text: str, count: int = 1) -> None:
        """Wait until ``count`` notes contain ``text``."""
        while sum(text in note for note in self.notes) < count:
            await self.noted.wait()

    def _note(self, text: str, *, tell: bool = True) -> None:
        """Record a supervision event; ``tell``: also one line on stderr for the person."""
        self.notes.append(text)
        self.noted.set()
        self.noted = trio.Event()
        if tell and self.announce:
            try:
                print(f"pi-actors: {text}", file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass

    # -- what the placement drives ------------------------------------------------------------

    def _attach(self, peer: Peer) -> None:
        self.generation += 1
        self._peer = peer
        self._down[self.generation] = trio.Event()
        if self.generation > 1:
            self.restarted.set()
            self.restarted = trio.Event()
        self._wake()

    def _report_down(self, reason: str) -> None:
        self._reasons[self.generation] = reason
        event = self._down.get(self.generation)
        if event is not None:
            event.set()
        self._wake()

    def _end(self, reason: str, *, failed: bool) -> None:
        if self.closed_event.is_set():
            return
        self._ended = reason
        if failed:
            self.failure = reason
        self.closed_event.set()
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- the Peer-like surface ----------------------------------------------------------------

    @property
    def peer_role(self) -> str:
        return self._peer.peer_role if self._peer else ""

    @property
    def peer_name(self) -> str:
        return self._peer.peer_name if self._peer else ""

    def _live(self) -> bool:
        peer, down = self._peer, self._down.get(self.generation)
        return peer is not None and not peer.closed_event.is_set() and not (down is not None and down.is_set())

    async def current(self) -> Peer:
        """The live coordinator's Peer, waiting while it restarts. Raises RemoteError
        ``session_failed`` once the session has failed, ConnectionLost once it has ended."""
        while True:
            if self.failure is not None:
                raise RemoteError("session_failed", self.failure)
            if self._ended is not None:
                # As a closed Peer would: the session's connection is gone.
                raise ConnectionLost(self._ended)
            if self._live():
                assert self._peer is not None
                return self._peer
            await self._changed.wait()

    @asynccontextmanager
    async def open_call(self, method: str, args: Any = None, target: str = "") -> AsyncIterator[OutgoingCall]:
        peer = await self.current()
        generation = self.generation
        started = False
        try:
            try:
                async with peer.open_call(method, args, target) as call:
                    started = True
                    yield call
            except ConnectionLost:
                if started or not self.restartable:
                    raise
                # Never sent (the coordinator was already gone): make it on the new one.
                peer = await self.current()
                generation = self.generation
                async with peer.open_call(method, args, target) as call:
                    yield call
        except ConnectionLost as exc:
            if isinstance(exc, ActorDied):
                raise
            down = self._down.get(generation)
            if down is not None:
                with trio.move_on_after(_REASON_WAIT):
                    await down.wait()
            how = self._reasons.get(generation, "closed its connection")
            what = "prompt" if method in _RUNS else f"{method!r} call"
            after = ""
            if self.restartable and self.failure is None:
                after = " (it is restarting and reloads the session from its file)"
            raise ActorDied(f"the coordinator process {how}; the outcome of the {what} is unknown{after}") from None
        finally:
            if method in _RUNS:
                self.first_run_done.set()
                self.run_ended.set()
                self.run_ended = trio.Event()

    async def call(self, method: str, args: Any = None, target: str = "") -> Any:
        async with self.open_call(method, args, target) as call:
            return await call.result()

    async def aclose(self) -> None:
        peer = self._peer
        if peer is not None:
            await peer.aclose()
