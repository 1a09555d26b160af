"""The handles of one call and the errors of calls: the half of the Peer layer that a handler
or a caller holds (see ``_peer`` for the theory of operation).

- :class:`IncomingCall` — a call the remote side made to us: its method and arguments, a
  ``send_chunk`` that waits for credit, the ``cancel_requested`` :class:`Trigger`.
- :class:`Trigger` (from :mod:`pi_actors._trigger`, shared with ``AbortSignal``) — a one-way
  flag like ``trio.Event`` whose setting also runs callbacks at once: a cancel or an abort
  is relayed (``OutgoingCall.cancel_when``) by a callback, not by a task per call that waits
  for a cancel that almost never comes.
- :class:`OutgoingCall` — a call we made: iterate it for the chunks, then read its result;
  it grants credit as its consumer takes chunks off its buffer.
- :class:`RemoteError` and its kinds (:class:`ConnectionLost`, :class:`ActorDied`,
  :class:`MessageTooLarge`), and the one walker of exception groups (:func:`leaf_exceptions`,
  :func:`remote_error_of`).

Both handles talk to their :class:`~pi_actors.runtime._peer.Peer` through its private
members; only the Peer makes them.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .. import _ready
from .._trigger import Trigger
from . import protocol as P

if TYPE_CHECKING:
    from typing import Protocol

    from ._peer import Peer

    class CancelSource(Protocol):
        """What ``cancel_when`` relays without a task: a :class:`Trigger`, an ``AbortSignal``."""

        def on_set(self, callback: Callable[[], object]) -> Callable[[], None]: ...

__all__ = [
    "ActorDied",
    "ConnectionLost",
    "Handler",
    "IncomingCall",
    "MessageTooLarge",
    "OutgoingCall",
    "RemoteError",
    "Trigger",
    "leaf_exceptions",
    "remote_error_of",
]


class RemoteError(Exception):
    """A call failed: ``code`` is stable and machine-readable, ``message`` is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message


class ConnectionLost(RemoteError):
    """The connection ended while a call was in flight: its outcome is unknown."""

    def __init__(self, detail: str = "connection lost") -> None:
        super().__init__("connection_lost", f"{detail}; the outcome of the call is unknown")


class ActorDied(ConnectionLost):
    """The process at the other end of a link died (or was killed as unresponsive) while a
    call was in flight: its outcome is unknown. ``message`` says which process and how."""

    def __init__(self, message: str) -> None:
        RemoteError.__init__(self, "actor_died", message)


class MessageTooLarge(RemoteError):
    """A message to send is larger than the connection's frame limit; nothing was sent."""

    def __init__(self, message: str) -> None:
        super().__init__("too_large", message)


class IncomingCall:
    """A call the peer made to us. The handler reads ``method``/``args`` and may stream chunks."""

    def __init__(self, peer: Peer, msg: P.Call) -> None:
        self._peer = peer
        self.id = msg.id
        self.method = msg.method
        self.args = msg.args
        self.target = msg.target
        #: The size in bytes of the call's frame payload as received (what it cost on the wire).
        self.size = peer._conn.last_payload_size
        self.cancel_requested = Trigger()
        #: Set to True by a handler that watches ``cancel_requested`` itself and finishes
        #: with a proper result instead of being cancelled.
        self.cooperative = False
        self._scope: trio.CancelScope | None = None
        self._task: trio.lowlevel.Task | None = None  # the handler's task, once it runs
        self._credit = trio.Event()  # set when credit arrives (or the connection ends)
        self._last: list[Any] = []  # chunks to go out with the result (send_with_result)

    async def send_chunk(self, data: Any) -> None:
        """Send one item of this call's stream to the caller.

        Waits while the caller has not granted credit for it (flow control: a slow consumer
        slows its producer). Raises ``RemoteError("internal")`` for an item the wire cannot
        carry (nothing is sent, the stream's numbering is unchanged, the connection goes on),
        ``MessageTooLarge`` for one past the frame limit, ``ConnectionLost`` when the
        connection is gone. Cancellation while waiting sends nothing."""
        peer = self._peer
        conn = peer._conn

        def frame() -> bytes:
            if conn.chunk_allowance(self.id) <= 0:
                raise _NoCredit
            return peer._frame_of(P.Chunk(id=self.id, seq=conn.next_chunk_seq(self.id), data=data))

        while True:
            try:
                await peer._write(frame)
                return
            except _NoCredit:
                pass
            except P.LocalProtocolError as exc:
                raise RemoteError("internal", f"a chunk could not be encoded: {exc.message}") from None
            if self._credit.is_set():  # (senders of one call share the unset event)
                self._credit = trio.Event()
            if peer._closed or conn.chunk_allowance(self.id) <= 0:
                await self._credit.wait()

    def send_with_result(self, items: Sequence[Any]) -> None:
        """Hand in ``items`` as the last items of this call's stream, to be written together
        with the call's result once the handler returns, in one write when the credit allows:
        the caller then wakes up once for the end of the stream and its answer, not twice.
        They go out before whatever the result is (an error too). An item the wire cannot
        carry turns the result into ``internal`` (the items before it are sent)."""
        self._last.extend(items)

    async def send_chunks(self, items: Sequence[Any], *, result: Any = None) -> None:
        """Send ``items`` in order as the next items of this call's stream, as many frames
        in one write as the credit allows: a run of items that are ready together costs one
        send and wakes the caller once, not once per item (why: a provider's reply is several
        events parsed from one network read).

        Same contract as :meth:`send_chunk`, item by item: it waits for credit; an item the
        wire cannot carry raises ``RemoteError("internal")`` (or ``MessageTooLarge``) after
        every item before it is sent and with none after it sent; ``ConnectionLost`` when
        the connection is gone. Cancellation while waiting for credit or for the link sends
        nothing more (the items already written stay written).

        ``result`` (the Peer's, for :meth:`send_with_result`): the call's ``Result`` message,
        written after the last item, in the same write; a result that cannot be framed raises
        as ``Peer._send`` would, after the items are sent."""
        peer = self._peer
        conn = peer._conn
        start = 0
        count = 0
        result_written = False
        result_refused: Exception | None = None

        def frames() -> bytes:
            nonlocal count
            allowance = conn.chunk_allowance(self.id)
            if allowance <= 0:
                raise _NoCredit
            end = len(items) if allowance >= len(items) - start else start + int(allowance)
            parts = self._frame_run(items, start, end)
            count = len(parts)
            if result is not None and start + count == len(items):
                nonlocal result_written, result_refused
                try:
                    parts.append(peer._frame_of(result))
                    result_written = True
                except (P.LocalProtocolError, MessageTooLarge) as exc:
                    result_refused = exc  # raised once the items are written
            return b"".join(parts)

        while start < len(items):
            try:
                await peer._write(frames)
                start += count
                continue
            except _NoCredit:
                pass
            except P.LocalProtocolError as exc:
                raise RemoteError("internal", f"a chunk could not be encoded: {exc.message}") from None
            if self._credit.is_set():  # (senders of one call share the unset event)
                self._credit = trio.Event()
            if peer._closed or conn.chunk_allowance(self.id) <= 0:
                await self._credit.wait()
        if result_refused is not None:
            raise result_refused
        if result is not None and not result_written:
            await peer._send(result)

    def _frame_run(self, items: Sequence[Any], start: int, end: int) -> list[bytes]:
        """The frames of ``items[start:end]`` as this call's next chunks, or of fewer: up to
        about ``_WRITE_BYTES`` (a burst of large items goes a part at a time), and up to an
        item the wire cannot carry (raised when it is the first: the next round raises for
        it after those before it are written)."""
        peer = self._peer
        conn = peer._conn
        parts: list[bytes] = []
        size = 0
        for item in items[start:end]:
            if size >= _WRITE_BYTES:
                break
            try:
                part = peer._frame_of(P.Chunk(id=self.id, seq=conn.next_chunk_seq(self.id), data=item))
            except (P.LocalProtocolError, MessageTooLarge):
                if not parts:
                    raise
                break
            parts.append(part)
            size += len(part)
        return parts

    def _credit_arrived(self) -> None:
        self._credit.set()


#: ``send_chunks`` starts a new write once the frames of one reach this many bytes.
_WRITE_BYTES = 1 << 20


class _NoCredit(Exception):
    """Internal: the call's flow-control window is used up; wait for credit."""


class _CallOver(Exception):
    """Internal: credit or a cancel for a call whose result has arrived is not sent."""


Handler = Callable[[IncomingCall], Awaitable[Any]]


class OutgoingCall:
    """A call we made; iterate it for the chunks' data, then read ``result``."""

    def __init__(self, peer: Peer, call_id: int) -> None:
        self._peer = peer
        self.id = call_id
        #: Flow control: the buffer holds at most a window of chunks, then the result and a
        #: possible "lost" (a version-1 peer has no credit: unbounded, as before).
        self._flow = peer._conn.flow_control
        self._send, self._recv = trio.open_memory_channel[Any](P.CHUNK_WINDOW + 2 if self._flow else math.inf)
        self._done = False
        self._value: Any = None
        self._error: RemoteError | None = None
        self._received = 0  # chunks that arrived
        self._consumed = 0  # chunks taken off the buffer (or thrown away once abandoned)
        self._granted = 0  # credit sent for them
        self._abandoned = False  # the caller left open_call before the result

    def _deliver_chunk(self, data: Any) -> None:
        self._received += 1
        if self._abandoned:
            self._consumed += 1
            self._grant_credit()
            return
        self._send.send_nowait(("chunk", data))

    def _deliver_result(self, msg: P.Result) -> None:
        if not self._abandoned:
            self._send.send_nowait(("result", msg))

    def _deliver_lost(self, detail: str) -> None:
        try:
            self._send.send_nowait(("lost", detail))
        except (trio.ClosedResourceError, trio.WouldBlock):
            pass  # abandoned: nobody reads it

    def _grant_credit(self, at_once: bool = False) -> None:
        """Grant credit for the chunks consumed since the last grant: in batches of half a
        window (a frame per chunk would be waste), or ``at_once``."""
        n = self._consumed - self._granted
        if not self._flow or n <= 0 or (n < P.CHUNK_WINDOW // 2 and not at_once):
            return
        self._granted += n
        self._peer._send_credit_soon(self.id, n)

    def _abandon(self) -> None:
        """The caller gave up before the result: free the chunks it will never read."""
        self._abandoned = True
        self._consumed = self._received
        self._grant_credit(at_once=True)

    def buffered(self) -> int:
        """How many of the call's items (chunks, then its result) have arrived and wait to be
        read: 0 means the next read waits for the peer. A reader that writes what it reads
        somewhere (a pipe, a terminal) flushes once a burst is read, not per item."""
        return self._recv.statistics().current_buffer_used

    def __aiter__(self) -> OutgoingCall:
        return self

    async def __anext__(self) -> Any:
        if self._done:
            raise StopAsyncIteration
        kind, payload = await _ready.receive(self._recv)  # (no trip through the scheduler when buffered)
        if kind == "chunk":
            self._consumed += 1
            self._grant_credit()
            return payload
        self._done = True
        if kind == "result":
            if payload.ok:
                self._value = payload.value
            else:
                err = payload.error
                self._error = RemoteError(err.code if err else "internal", err.message if err else "call failed")
        else:
            self._error = ConnectionLost(payload)
        raise StopAsyncIteration

    async def result(self) -> Any:
        """Drain remaining chunks and return the call's value; raises RemoteError."""
        async for _ in self:
            pass
        if self._error is not None:
            raise self._error
        return self._value

    async def cancel(self) -> None:
        """Ask the peer to cancel; the result (often ``cancelled``) still arrives."""
        if not self._done:
            await self._peer._send_cancel(self.id)

    @asynccontextmanager
    async def cancel_when(self, when: CancelSource | Callable[[], Awaitable[object]] | None) -> AsyncIterator[None]:
        """Within the block, ask the peer to cancel as soon as ``when`` fires.

        ``when``: something with ``on_set(callback)`` (a :class:`Trigger` such as an incoming
        call's ``cancel_requested``, or an ``AbortSignal``): the cancel is sent from the
        callback, by a task started only then; or a function to await (``await when()``
        returns: cancel), watched by a task for the block's length; None does nothing.
        Typical use relays an abort: ``async with call.cancel_when(signal): ...``. The call
        then ends with whatever the peer answers (its own result for a cooperative handler).
        """
        if when is None:
            yield
            return
        on_set = getattr(when, "on_set", None)
        if on_set is not None:
            call_id = self.id
            take_back = on_set(lambda: self._peer._send_cancel_soon(call_id))
            try:
                yield
            finally:
                take_back()
            return
        wait = when
        assert callable(wait)
        async with trio.open_nursery() as nursery:

            async def relay() -> None:
                await wait()
                await self.cancel()

            nursery.start_soon(relay)
            yield
            nursery.cancel_scope.cancel()


def leaf_exceptions(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc`` with exception groups flattened (``[exc]`` for a plain
    one), in order: the one place the project walks exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaf_exceptions(inner)]
    return [exc]


def remote_error_of(group: BaseExceptionGroup) -> RemoteError | None:
    """The first RemoteError of ``group`` if every exception in it is one, else None: a
    handler (or client) that raised a refusal from inside a nursery refused; anything else
    in the group is a bug and must propagate."""
    leaves = leaf_exceptions(group)
    if leaves and all(isinstance(e, RemoteError) for e in leaves):
        first = leaves[0]
        assert isinstance(first, RemoteError)
        return first
    return None
