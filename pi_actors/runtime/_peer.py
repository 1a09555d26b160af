"""Peer: the trio adapter that drives one sans-I/O ``Connection`` over a byte stream.

Theory of operation
-------------------
``open_peer`` owns one ``trio.abc.Stream`` (a socketpair end, a unix socket, a memory stream,
a WebSocket adapter). It performs the hello handshake (5 s limit), then runs a reader task
that feeds received bytes into the ``Connection`` and routes each event:

* ``Call``   -> a handler task (``handler(IncomingCall)``), whose return value becomes
  ``Result{ok: true}``, whose ``RemoteError`` becomes ``Result{ok: false, error}``, and whose
  other exceptions become ``Result{ok: false, code: "internal"}`` (and are re-raised to the
  owner: a bug must not be swallowed).
* ``Cancel`` -> sets the incoming call's ``cancel_requested`` event and, unless the handler
  said it handles cancellation itself (``call.cooperative = True``), cancels its task; the
  call then answers ``Result{ok: false, code: "cancelled"}``.
* ``Chunk``/``Result`` -> the waiting outgoing call.
* ``Call`` of the reserved method ``$ping`` -> answered by the peer itself (``Result{ok:
  true}``), whatever the handler: a liveness check of the process's event loop, not of any
  call it is serving (``Peer.ping``; see ``_supervise`` for the heartbeat built on it).

A protocol violation by the peer (a malformed frame, a duplicate call id, a gap in a call's
chunk numbering, a second result: the rules the sans-I/O ``Connection`` enforces) gets one
final ``hello_error`` and the stream is closed. When the stream ends, every outgoing call
still waiting fails with ``ConnectionLost`` ("outcome unknown"): nothing is retried or
replayed.

Backpressure (protocol version 2, PROTOCOL.md §6): per call, by credit. The reader never
blocks on a consumer: a call's chunks go into a buffer of ``CHUNK_WINDOW`` chunks, and the
callee may not send more than that until the caller grants credit. ``OutgoingCall`` grants
credit (``Credit{id, n}``, sent by a small task so a consumer never waits on the socket)
each time its consumer has taken half a window off the buffer, so a slow consumer makes the
remote handler's ``send_chunk`` wait, and a producer that coalesces (the provider's deltas)
merges while it waits. One call's full buffer therefore never stalls the connection: ``$ping``,
cancels, results and chunks of other calls keep flowing. A call given up by its caller
(leaving ``open_call`` before the result) keeps being granted credit for whatever still
arrives, so a handler that finishes cooperatively after the cancel is never left waiting.
A version-1 peer has no credit: its calls get an unbounded buffer, as before.

Cancellation: leaving ``open_peer`` cancels the reader and all handler tasks and closes the
stream. Cancelling a task blocked in ``call``/``open_call`` sends ``cancel{id}`` to the peer.
"""

from __future__ import annotations

import errno
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import trio

from .. import _ready
from . import protocol as P
from ._calls import (
    ActorDied,
    ConnectionLost,
    Handler,
    IncomingCall,
    MessageTooLarge,
    OutgoingCall,
    RemoteError,
    Trigger,
    _CallOver,
    leaf_exceptions,
    remote_error_of,
)

__all__ = [
    "RemoteError",
    "ConnectionLost",
    "IncomingCall",
    "OutgoingCall",
    "Peer",
    "open_peer",
    "Handler",
    "ActorDied",
    "MessageTooLarge",
    "PING_METHOD",
    "remote_error_of",
    "leaf_exceptions",
    "Trigger",
]

#: The reserved method of a liveness check, answered by the runtime on every connection.
PING_METHOD = "$ping"

#: Seconds a peer that cancelled a call gets to read the rest of a frame that call's handler
#: had started writing; a peer that has not read the rest by then has stopped reading, and
#: the connection is closed (see ``Peer._write``).
CANCELLED_FRAME_GRACE = 10.0


class Peer:
    """One open connection after the handshake. Create with ``open_peer``."""

    def __init__(self, stream: trio.abc.Stream, conn: P.Connection, handler: Handler | None, name: str) -> None:
        self._stream = stream
        self._conn = conn
        self._handler = handler
        self.name = name
        self._send_lock = trio.Lock()
        self._ids = itertools.count(1)
        self._outgoing: dict[int, OutgoingCall] = {}
        self._incoming: dict[int, IncomingCall] = {}
        self._closed = False
        self._close_reason = "connection closed"
        self.closed_event = trio.Event()
        self.peer_role: str = ""
        self.peer_name: str = ""
        self._handler_nursery: trio.Nursery | None = None
        # The frame being written, and the task writing it (see _write).
        self._frame_scope: trio.CancelScope | None = None
        self._frame_task: trio.lowlevel.Task | None = None
        # A socket stream's socket, for writes without a schedule point (_send_all).
        self._socket = stream.socket if type(stream) is trio.SocketStream else None

    def _them(self) -> str:
        """The other side, for error texts: the name it gave in its hello."""
        return self.peer_name or "the peer"

    # -- sending -----------------------------------------------------------------------------

    def _frame_of(self, msg: Any) -> bytes:
        """``msg``'s frame from the Connection (which checks and records it).

        Raises MessageTooLarge past the frame limit, LocalProtocolError for anything else
        the Connection refuses; either way nothing is recorded."""
        try:
            return self._conn.send(msg)
        except P.LocalProtocolError as exc:
            size = getattr(exc, "size", None)
            if size is None:
                raise
            what = f"the {msg.method!r} call" if isinstance(msg, P.Call) else f"a {type(msg).__name__.lower()} message"
            raise MessageTooLarge(
                f"{what} is {size:,} bytes, more than the limit of one message"
                f" ({self._conn.max_frame:,} bytes, {self._conn.max_frame / 2**20:g} MiB); nothing was sent"
            ) from None

    async def _send(self, msg: Any) -> None:
        await self._write(lambda: self._frame_of(msg))

    async def _write(self, frame: Callable[[], bytes]) -> None:
        """Write the frame ``frame()`` returns, in turn with every other sender.

        ``frame`` runs under the send lock, right before the write, so the Connection records
        a message (a call id, a chunk's number, credit used) only when it is really written:
        a sender cancelled while waiting for its turn leaves no trace. Exceptions of
        ``frame`` propagate with nothing sent.

        Once its first byte is written, a frame is finished even if the sender is cancelled
        meanwhile: the link is shared by every call, and a frame cut in the middle would leave
        nothing after it readable. The sender's cancellation takes effect right after. Only two
        things cut a frame short, and both close the connection: the connection closing, and
        a ``cancel`` from the peer for the call whose handler is writing when the peer then does
        not read the rest within :data:`CANCELLED_FRAME_GRACE` seconds (it stopped reading).

        Raises:
            ConnectionLost: the connection is (or became) closed; nothing or part was sent.
        """
        if self._closed:
            raise ConnectionLost(self._close_reason)
        # A cancellation already pending ends the send here, before any byte is written.
        await _ready.acquire(self._send_lock)
        try:
            await trio.lowlevel.checkpoint_if_cancelled()  # (cancelled while waiting for the turn)
            if self._closed or self._conn.state is P.CLOSED:
                # (CLOSED while open: a final hello_error is on its way; nothing may follow it.)
                raise ConnectionLost(self._close_reason)
            data = frame()
            with trio.CancelScope(shield=True) as scope:
                self._frame_scope = scope
                self._frame_task = trio.lowlevel.current_task()
                try:
                    await self._send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    self._mark_closed(f"connection to {self._them()} broke: {exc}")
                    raise ConnectionLost(self._close_reason) from None
                finally:
                    self._frame_scope = None
                    self._frame_task = None
            if scope.cancelled_caught:
                # Part of the frame may be written, and nothing after it could be framed: close
                # rather than leave the peer waiting for the rest of a frame.
                self._mark_closed(f"a send to {self._them()} was interrupted mid-frame; connection closed")
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(self._stream)
                raise ConnectionLost(self._close_reason)
        finally:
            self._send_lock.release()
        await trio.lowlevel.checkpoint_if_cancelled()  # a cancellation held off by the frame

    async def _send_all(self, data: bytes) -> None:
        """``self._stream.send_all(data)``; on a socket, what the kernel takes at once is
        written directly, and trio's ``send_all`` (a schedule point) only writes the rest.

        Why: a frame almost always fits in the socket's buffer, and trio's send then costs a
        trip through the scheduler after the bytes are gone — one per frame, on every hop of
        a turn (see :mod:`pi_actors._ready`). Errors are trio's: ``BrokenResourceError``,
        ``ClosedResourceError``."""
        sent = 0
        if self._socket is not None:
            try:
                sent = _ready.send_now(self._socket, data)
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("the connection's socket was closed") from None
                raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
        if sent < len(data):
            with memoryview(data) as view:
                await self._stream.send_all(view[sent:])

    def _cut_frame(self) -> None:
        """End the frame being written now (the connection is closing)."""
        if self._frame_scope is not None:
            self._frame_scope.cancel()

    def _limit_frame_of(self, call: IncomingCall) -> None:
        """The peer cancelled ``call``: if its handler (or a task under it) is writing a frame,
        give the peer :data:`CANCELLED_FRAME_GRACE` seconds to read the rest of it."""
        scope, task = self._frame_scope, self._frame_task
        if scope is None or task is None or call._task is None:
            return
        while task is not None and task is not call._task:
            nursery = task.parent_nursery
            task = nursery.parent_task if nursery is not None else None
        if task is not None:
            scope.deadline = min(scope.deadline, trio.current_time() + CANCELLED_FRAME_GRACE)

    async def _send_cancel(self, call_id: int) -> None:
        def frame() -> bytes:
            # Checked under the send lock, right before the write: the result may arrive
            # while this sender waits for its turn, and then there is nothing to cancel.
            if not self._conn.awaiting_result(call_id):
                raise _CallOver
            return self._frame_of(P.Cancel(id=call_id))

        try:
            await self._write(frame)
        except (_CallOver, ConnectionLost):
            pass

    def _send_cancel_soon(self, call_id: int) -> None:
        """Ask the peer to cancel our call ``call_id`` from a task of its own (the caller is a
        callback, which cannot wait for the socket)."""
        nursery = self._handler_nursery
        if self._closed or nursery is None or nursery.cancel_scope.cancel_called:
            return  # the connection is ending: the call fails with it anyway
        nursery.start_soon(self._send_cancel, call_id)

    def _send_credit_soon(self, call_id: int, n: int) -> None:
        """Grant ``n`` chunks of credit for our call ``call_id`` from a task of its own: the
        consumer (or the reader) that decided it must never wait for the socket."""
        nursery = self._handler_nursery
        if self._closed or nursery is None or nursery.cancel_scope.cancel_called:
            return  # the connection is ending: credit would not be sent anyway
        nursery.start_soon(self._send_credit, call_id, n)

    async def _send_credit(self, call_id: int, n: int) -> None:
        def frame() -> bytes:
            if not self._conn.awaiting_result(call_id):
                raise _CallOver  # the result arrived meanwhile: credit is moot
            return self._conn.send(P.Credit(id=call_id, n=n))

        try:
            await self._write(frame)
        except (ConnectionLost, _CallOver):
            pass

    # -- calling -----------------------------------------------------------------------------

    @asynccontextmanager
    async def open_call(self, method: str, args: Any = None, target: str = "") -> AsyncIterator[OutgoingCall]:
        """Start a call; yields an ``OutgoingCall`` to iterate for chunks.

        Leaving the block before the result arrived (an exception, or cancellation) sends
        ``cancel{id}`` to the peer. Raises ``ConnectionLost`` if the connection is gone.
        """
        call_id = next(self._ids)
        call = OutgoingCall(self, call_id)
        self._outgoing[call_id] = call
        try:
            await self._send(P.Call(id=call_id, method=method, args=args, target=target))
            yield call
        finally:
            if call._flow and self._conn.awaiting_result(call_id) and not self._closed:
                # Kept until its result arrives, to keep granting credit (see the module doc).
                call._abandon()
            else:
                self._outgoing.pop(call_id, None)
            if not call._done and not self._closed:
                with trio.CancelScope(shield=True):
                    await self._send_cancel(call_id)

    async def call(self, method: str, args: Any = None, target: str = "") -> Any:
        """A call without chunks (any chunks are ignored); returns the value or raises RemoteError."""
        async with self.open_call(method, args, target) as c:
            return await c.result()

    async def ping(self) -> None:
        """One liveness check: returns once the peer's event loop has answered a ``$ping``
        call (any answer counts, so a peer that predates ``$ping`` and answers ``not_found``
        is alive too). Raises ConnectionLost if the connection is gone. Unbounded: the caller
        chooses how long to wait (see ``_supervise.watch_heartbeat``)."""
        try:
            await self.call(PING_METHOD)
        except ConnectionLost:
            raise
        except RemoteError:
            pass

    # -- receiving ---------------------------------------------------------------------------

    def _mark_closed(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_reason = reason
        for call in list(self._outgoing.values()):
            call._deliver_lost(reason)
        for incoming in list(self._incoming.values()):
            incoming._credit_arrived()  # a sender waiting for credit: it gets ConnectionLost
        self.closed_event.set()

    async def _run_reader(self) -> None:
        try:
            while True:
                event = self._conn.next_event()
                if event is P.NEED_DATA:
                    try:
                        data = await self._stream.receive_some(65536)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        data = b""
                    self._conn.receive_data(data)
                    continue
                if event is P.CLOSED:
                    self._mark_closed(f"{self._them()} closed the connection")
                    return
                self._dispatch(event)
        except P.RemoteProtocolError as exc:
            await self._fail(exc.code, exc.message, getattr(exc, "supported", None))

    async def _fail(self, code: str, message: str, supported: list[int] | None = None) -> None:
        """Send one final hello_error and close (remote protocol violation).

        The final frame is sent shielded (bounded to 1 s) *before* the peer is marked closed,
        so an owner that leaves as soon as ``closed_event`` fires cannot cut it off. The bound
        is for a peer that does not read: the lock, when free, is taken and the frame written
        (on a socket, what the kernel takes at once) before any schedule point, so an event
        loop that runs late — a loaded machine, where the next pass of the loop may come more
        than a second later — still gets the frame out instead of finding its own deadline
        past at the first checkpoint.
        """
        reason = f"protocol error from {self._them()}: {message}"
        try:
            data = self._conn.fail(code, message, supported)
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + 1
                await _ready.acquire(self._send_lock)
                try:
                    await self._send_all(data)
                finally:
                    self._send_lock.release()
        except (P.LocalProtocolError, trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
            pass  # the stream is already gone or unusable; closing below is all we can do
        self._mark_closed(reason)
        await trio.aclose_forcefully(self._stream)

    def _dispatch(self, msg: Any) -> None:
        if isinstance(msg, P.Call):
            assert self._handler_nursery is not None
            if msg.method == PING_METHOD:
                self._handler_nursery.start_soon(self._answer_ping, msg.id)
                return
            call = IncomingCall(self, msg)
            self._incoming[msg.id] = call
            assert self._handler_nursery is not None
            self._handler_nursery.start_soon(self._run_handler, call)
        elif isinstance(msg, P.Chunk):
            out = self._outgoing.get(msg.id)
            if out is not None:
                out._deliver_chunk(msg.data)
        elif isinstance(msg, P.Result):
            out = self._outgoing.get(msg.id)
            if out is not None:
                out._deliver_result(msg)
                if out._abandoned:
                    del self._outgoing[msg.id]
        elif isinstance(msg, P.Credit):
            inc = self._incoming.get(msg.id)
            if inc is not None:
                inc._credit_arrived()
        elif isinstance(msg, P.Cancel):
            inc = self._incoming.get(msg.id)
            if inc is not None:
                inc.cancel_requested.set()
                if not inc.cooperative and inc._scope is not None:
                    inc._scope.cancel()
                    self._limit_frame_of(inc)
        elif isinstance(msg, P.HelloError):
            self._mark_closed(f"{self._them()} ended the connection: {msg.message} ({msg.code})")

    async def _cancel_unless_cooperative(self, call: IncomingCall) -> None:
        """A cancel that came before ``call``'s handler started, applied as one arriving now."""
        if self._incoming.get(call.id) is call and not call.cooperative and call._scope is not None:
            call._scope.cancel()
            self._limit_frame_of(call)

    async def _answer_ping(self, call_id: int) -> None:
        try:
            await self._send(P.Result(id=call_id, ok=True))
        except ConnectionLost:
            pass

    async def _run_handler(self, call: IncomingCall) -> None:
        result: P.Result
        try:
            with trio.CancelScope() as scope:
                call._scope = scope
                call._task = trio.lowlevel.current_task()
                if call.cancel_requested.is_set():
                    # The cancel arrived with the call, before this task ran. Whether it cancels
                    # the handler depends on ``cooperative``, which the handler sets in its first
                    # step (the Router from the method; a handler itself): decided after it.
                    assert self._handler_nursery is not None
                    self._handler_nursery.start_soon(self._cancel_unless_cooperative, call)
                if self._handler is None:
                    raise RemoteError("not_found", f"{self.name} serves no calls")
                value = await self._handler(call)
                result = P.Result(id=call.id, ok=True, value=value)
            if scope.cancelled_caught:
                result = P.Result(id=call.id, ok=False, error=P.ErrorInfo(code="cancelled", message="call cancelled"))
        except RemoteError as exc:
            result = P.Result(id=call.id, ok=False, error=P.ErrorInfo(code=exc.code, message=exc.message))
        except BaseExceptionGroup as group:
            # A handler that raised RemoteError from inside a nursery: still a refusal, not a bug.
            remote = remote_error_of(group)
            if remote is None:
                raise
            result = P.Result(id=call.id, ok=False, error=P.ErrorInfo(code=remote.code, message=remote.message))
        except Exception as exc:
            self._incoming.pop(call.id, None)
            with trio.CancelScope(shield=True):
                try:
                    await self._send(
                        P.Result(id=call.id, ok=False, error=P.ErrorInfo(code="internal", message=f"{type(exc).__name__}: {exc}"))
                    )
                except ConnectionLost:
                    pass
            raise
        finally:
            if not call._last:
                self._incoming.pop(call.id, None)
        last, call._last = call._last, []
        try:
            if last:
                # Still an incoming call while its last items go out: credit for them (and a
                # cancel) must find it.
                try:
                    await call.send_chunks(last, result=result)  # one write for the end and the answer
                finally:
                    self._incoming.pop(call.id, None)
            else:
                await self._send(result)
        except MessageTooLarge as exc:
            # The answer itself does not fit in a frame: the caller gets that as its error.
            await self._send_failure(call.id, exc.code, exc.message)
        except P.LocalProtocolError as exc:
            # The answer holds a value the wire cannot carry (a lone surrogate, an integer past
            # 64 bits, too many items): that call fails, the connection goes on.
            await self._send_failure(call.id, "internal", f"the result could not be encoded: {exc.message}")
        except ConnectionLost:
            pass
        except RemoteError as exc:  # a last item (send_with_result) the wire cannot carry
            await self._send_failure(call.id, exc.code, exc.message)

    async def _send_failure(self, call_id: int, code: str, message: str) -> None:
        try:
            await self._send(P.Result(id=call_id, ok=False, error=P.ErrorInfo(code=code, message=message)))
        except ConnectionLost:
            pass

    async def aclose(self) -> None:
        self._mark_closed("closed locally")
        self._cut_frame()
        await trio.aclose_forcefully(self._stream)


@asynccontextmanager
async def open_peer(
    stream: trio.abc.Stream,
    *,
    side: Literal["client", "server"],
    role: str,
    name: str,
    handler: Handler | None = None,
    handshake_timeout: float = P.HANDSHAKE_TIMEOUT,
    max_frame: int = P.DEFAULT_MAX_FRAME,
    codecs: tuple[str, ...] = ("cbor",),
) -> AsyncIterator[Peer]:
    """Open a connection over ``stream``: handshake, then serve and call until the block ends.

    Args:
      side: "client" (sends hello first) or "server" (answers it).
      role, name: what we tell the peer about ourselves.
      handler: serves the peer's calls; None if we only call.
      codecs: the payload codecs spoken (``Connection``): a client speaks ``codecs[0]``; a
        server answers a hello in any of them, in the hello's own codec.
    Raises:
      ConnectionLost: the handshake failed (the peer refused our hello, closed, or timed out).
    On exit the stream is closed and every task this peer started has finished.
    """
    conn = P.Connection(side, max_frame=max_frame, codecs=codecs)
    peer = Peer(stream, conn, handler, name)
    await _handshake(peer, conn, side=side, role=role, name=name, timeout=handshake_timeout)
    try:
        async with trio.open_nursery() as nursery:
            peer._handler_nursery = nursery
            nursery.start_soon(peer._run_reader)
            try:
                yield peer
            finally:
                nursery.cancel_scope.cancel()
                peer._cut_frame()  # a handler finishing a frame must not hold the exit up
    finally:
        peer._mark_closed("closed locally")
        await trio.aclose_forcefully(stream)


async def _handshake(peer: Peer, conn: P.Connection, *, side: Literal["client", "server"], role: str, name: str, timeout: float) -> None:
    lo, hi = P.SUPPORTED_VERSIONS
    stream = peer._stream

    async def next_event() -> Any:
        while True:
            event = conn.next_event()
            if event is not P.NEED_DATA:
                return event
            try:
                data = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            conn.receive_data(data)

    try:
        if side == "client":
            await stream.send_all(
                conn.send(P.Hello(protocol=P.PROTOCOL_NAME, min_version=lo, max_version=hi, role=role, name=name, codecs=[conn.codec]))
            )
            with trio.fail_after(timeout):
                event = await next_event()
            if isinstance(event, P.HelloOk):
                peer.peer_role, peer.peer_name = event.role, event.name
                return
            if isinstance(event, P.HelloError):
                raise ConnectionLost(f"{name}: hello refused by peer: {event.message} ({event.code})")
            raise ConnectionLost(f"{name}: peer closed during the handshake")
        else:
            with trio.move_on_after(timeout) as scope:
                event = await next_event()
            if scope.cancelled_caught:
                await peer._fail("invalid_request", f"handshake not finished within {timeout:g} s")
                raise ConnectionLost(f"{name}: handshake timed out")
            if not isinstance(event, P.Hello):
                raise ConnectionLost(f"{name}: peer closed during the handshake")
            peer.peer_role, peer.peer_name = event.role, event.name
            assert conn.negotiated_version is not None  # set when the Hello was accepted
            await stream.send_all(conn.send(P.HelloOk(version=conn.negotiated_version, role=role, name=name, codec=conn.codec)))
    except P.RemoteProtocolError as exc:
        await peer._fail(exc.code, exc.message, getattr(exc, "supported", None))
        raise ConnectionLost(f"{name}: handshake failed: {exc.message}") from None
    except trio.TooSlowError:
        await trio.aclose_forcefully(stream)
        raise ConnectionLost(f"{name}: no hello answer within {timeout:g} s") from None
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        raise ConnectionLost(f"{name}: connection broke during the handshake") from None
