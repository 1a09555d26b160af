"""Telling the tool pool, while a reply streams, how many tool calls it holds so far.

The agent loop runs a reply's tool calls only once the reply has ended; each call then needs
a worker, and a worker forked for it costs the zygote's fork and the worker's own set-up. The
tool calls are known earlier, as the model streams them (``toolcall_start``): a
:class:`ToolCallCounter`, fed every event of one streamed reply, sends the pool
``expect_calls {calls: N, cwd}`` (:data:`pi_actors.protocol.pool.EXPECT_CALLS`) with the
number seen so far, and the pool forks workers for them while the model is still answering.
The pool's warm workers (``ready``: how many it keeps in the calls' cwd, which the placement
knows) serve the first calls without being told: only a reply with more calls than that sends
anything. A reply of one call — most turns — costs no request, no answer and no wake-up of the
pool before its ``run_tool``.

At most one request is in flight per reply; calls seen meanwhile are sent with the next one
(the latest count), so a reply of 32 calls costs a few requests, not 32. The requests run in
the background (the caller's nursery) and never delay the stream. A refused request ends the
counting for that reply, silently: the calls ask for their workers when they arrive anyway
(a pool without the method — an older one, or a server's tool proxy — refuses it once per
reply).
"""

from __future__ import annotations

from typing import Any

import trio

from ..ai import types as T
from ..runtime import ConnectionLost, RemoteError

__all__ = ["ToolCallCounter"]


class ToolCallCounter:
    """One streamed reply's tool calls, announced to the pool as they start.

    ``peer``: the coordinator's link to its tool pool; ``cwd``: where the calls run;
    ``nursery``: where the requests run (None: nothing is sent); ``ready``: the calls the
    pool's warm workers serve without being told (the count sent is still every call seen)."""

    def __init__(self, peer: Any, cwd: str, nursery: trio.Nursery | None, *, ready: int = 0) -> None:
        self._peer = peer
        self._cwd = cwd
        self._nursery = nursery
        self._ready = ready
        self.seen = 0  # toolcall_start events so far
        self._sent = 0  # the count the pool was last told
        self._sending = False
        self._refused = False

    def saw(self, event: Any) -> None:
        """Feed one event of the reply (any kind; only ``toolcall_start`` counts)."""
        if not isinstance(event, T.ToolCallStartEvent):
            return
        self.seen += 1
        if self.seen > self._ready and not self._sending and not self._refused and self._nursery is not None and self._peer is not None:
            self._sending = True
            self._nursery.start_soon(self._send)

    async def _send(self) -> None:
        try:
            while self._sent < self.seen:
                count = self.seen
                await self._peer.call("expect_calls", {"calls": count, "cwd": self._cwd})
                self._sent = count
        except (RemoteError, ConnectionLost):
            self._refused = True  # the calls ask for their workers when they arrive
        finally:
            self._sending = False
