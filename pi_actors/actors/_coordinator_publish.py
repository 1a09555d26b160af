"""The coordinator's ordered publication of a run's events (to its UI call, subscribers and
extension hooks), some of which wait for a session append that runs in the background.

Why: a tool result's ``message_end`` may be told to nobody before the store has acknowledged
its entry (fsynced), yet the agent loop need not wait for that acknowledgement to build and
send the next LLM request. So the coordinator appends a tool result in the background and
hands the publication of its ``message_end`` to :class:`OrderedPublisher` with a
:class:`Gate` that opens on the acknowledgement; every event published after it (turn_end,
the next turn's events, session events) queues behind it, so subscribers still get every
event in the loop's order with contiguous ``seq``. An assistant message that calls tools is
handed in once it is saved, deferred to the drain task (``defer``): its ``message_end`` is
told while its tools run, not before they start.

Contract:

* :meth:`OrderedPublisher.publish` runs the publication at once when nothing is queued (the
  common case: no extra task, no extra wake-up) and it is not deferred; otherwise it queues it, and a drain task
  (started in the nursery given to :meth:`OrderedPublisher.start`) runs the queue in order,
  waiting at each gate until it opens.
* A gate that opens as failed (the append failed) drops its publication and everything
  queued behind it: the UI never hears of an entry that is not on disk, nor of anything that
  followed it. A publication that raises (e.g. the UI's call is gone) drops the rest too, and
  the error is raised to the next :meth:`publish` caller (as if it had published itself).
* :meth:`settle` waits until the queue is empty and the drain task idle; the coordinator
  calls it before anything that must follow every earlier publication (the next
  synchronous append, ``agent_end``, the end of a run).
* Cancellation: a cancelled drain task leaves the queue as it was; :meth:`reset` (at the
  start of a run) forgets it.

:class:`BackgroundAppender` makes those appends: in the order handed in, one store call at a
time (so the file keeps the loop's order), and the messages handed in while a call is in
flight go together in the next call — a group commit, one fsync for all of them (the 32
results of a parallel turn are not 32 fsyncs in a row).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .. import _ready

__all__ = ["BackgroundAppender", "Gate", "OrderedPublisher"]

Publication = Callable[[], Awaitable[None]]


class Gate:
    """Opens once, as succeeded (``ok``) or failed: the outcome of one background append."""

    def __init__(self) -> None:
        self.ok = False
        self.done = trio.Event()

    def open(self, ok: bool) -> None:
        self.ok = ok
        self.done.set()


class OrderedPublisher:
    """Runs publications in the order they were handed in; see the module docstring."""

    def __init__(self) -> None:
        self._queue: deque[tuple[Gate | None, Publication]] = deque()
        self._busy = False
        self._idle = trio.Event()
        self._idle.set()
        self._failure: BaseException | None = None
        self._nursery: trio.Nursery | None = None

    def start(self, nursery: trio.Nursery) -> None:
        """Use ``nursery`` for the drain task (a run's nursery, which outlives its events)."""
        self.reset()
        self._nursery = nursery

    def reset(self) -> None:
        """Forget what a previous run left (a cancelled drain's queue, a failure)."""
        self._queue.clear()
        self._busy = False
        self._idle = trio.Event()
        self._idle.set()
        self._failure = None
        self._nursery = None

    @property
    def pending(self) -> bool:
        """True while a publication waits or runs in the drain task."""
        return self._busy

    async def publish(self, publication: Publication, gate: Gate | None = None, *, defer: bool = False) -> None:
        """Publish now, or after everything handed in before (and after ``gate`` opens).
        ``defer``: never now, always from the drain task (the caller goes on at once).

        Raises what a queued publication raised since the last call (once)."""
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        if gate is None and not defer and not self._busy:
            await publication()
            return
        if self._nursery is None:
            raise RuntimeError("a gated or deferred publication needs a run's nursery (OrderedPublisher.start)")
        self._queue.append((gate, publication))
        if not self._busy:
            self._busy = True
            self._idle = trio.Event()
            self._nursery.start_soon(self._drain)

    async def settle(self) -> None:
        """Wait until every publication handed in so far has run (or been dropped)."""
        while self._busy:
            await self._idle.wait()

    async def _drain(self) -> None:
        try:
            while self._queue:
                gate, publication = self._queue[0]
                if gate is not None:
                    await _ready.wait(gate.done)
                    if not gate.ok:
                        self._queue.clear()
                        break
                self._queue.popleft()
                try:
                    await publication()
                except Exception as exc:
                    self._queue.clear()
                    self._failure = exc
        finally:
            self._busy = False
            self._idle.set()


class BackgroundAppender:
    """Appends messages in the background, in order, batching those that wait.

    ``save(messages)`` makes one store call for the messages (in order) and raises if they
    are not all on disk; its failure fails the batch's gates and every later batch's (a
    failed save is not retried: the run stops)."""

    def __init__(self, save: Callable[[list[Any]], Awaitable[None]]) -> None:
        self._save = save
        self._queue: list[tuple[Any, Gate]] = []
        self._running = False
        self._failed = False
        #: The gate of the last message handed in (None: none since :meth:`reset`).
        self.last: Gate | None = None

    def reset(self) -> None:
        """Start afresh (a new run): forget what a cancelled run left."""
        self._queue = []
        self._running = False
        self._failed = False
        self.last = None

    def append(self, message: Any, nursery: trio.Nursery) -> Gate:
        """Hand in ``message``; the gate opens once it is saved (or failed)."""
        gate = Gate()
        self._queue.append((message, gate))
        self.last = gate
        if not self._running:
            self._running = True
            nursery.start_soon(self._run)
        return gate

    async def wait(self) -> None:
        """Wait until every message handed in so far is saved or failed."""
        if self.last is not None:
            await _ready.wait(self.last.done)  # (saved long ago, as a rule: no schedule point)

    async def _run(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                ok = False
                try:
                    if not self._failed:
                        await self._save([message for message, _ in batch])
                        ok = True
                except Exception:
                    pass  # ``save`` has recorded why; the gates say it failed
                finally:
                    self._failed = self._failed or not ok
                    for _, gate in batch:
                        gate.open(ok)
        finally:
            self._running = False
