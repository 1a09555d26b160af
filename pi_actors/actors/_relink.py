"""The coordinator's links to actors its supervisor may restart (provider, tool pool).

A :class:`PeerSlot` stands where the coordinator used to hold a ``Peer``: it has the same
``call`` / ``open_call``, made against the slot's current peer. When the supervisor (the
local placement, ``pi_actors.actors.local``) restarts the actor behind it, it reports the
death and then hands over the new link on the control channel (``serve_control``), and the
slot swaps peers:

* a call in flight when the actor died fails with :class:`ActorDied` — "the provider process
  was killed by SIGKILL; the outcome of the request is unknown" — never replayed;
* a call made while the actor is down waits for the new link (bounded by ``wait``), so the
  next prompt works without the UI noticing anything;
* without a supervisor (``supervised=False``) the slot is a thin wrapper: calls fail as they
  would on the bare peer.

Answers are checked against the contract of the link's actor (``LINK_INTERFACES``: the
provider's ``PROVIDER``, the tool pool's ``POOL``): a chunk or result of a declared method
that does not match its declaration fails the call with ``invalid_response`` naming the field
— a lying remote tool host behind the server's proxy, or a broken actor, is reported instead
of being read as something it is not. Callers still get the wire tree (untyped callers keep
working); ``call_method(slot, METHOD, args)`` / ``open_method`` work on a slot as on a peer.

The control channel also carries, the other way, the path of the session file whenever it
changes, so that a restarted coordinator reopens the same session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import trio

from ..protocol.pool import POOL
from ..protocol.provider import PROVIDER
from ..runtime import ActorDied, ConnectionLost, FdChannel, Handler, Interface, Method, OutgoingCall, Peer, RemoteError, open_peer
from ..runtime.protocol import SIBLING_HANDSHAKE_TIMEOUT

__all__ = ["PeerSlot", "CheckedCall", "serve_control", "LINK_INTERFACES"]

#: The contract of the actor behind each link a supervisor may re-link (by link name).
LINK_INTERFACES: dict[str, Interface] = {"provider": PROVIDER, "tools": POOL}

#: How long a starting actor may take to answer the coordinator's hello (a sibling process
#: starting on a busy machine, not a stranger).
_HELLO_WAIT = SIBLING_HANDSHAKE_TIMEOUT

#: How long a failed call waits for the supervisor's report of how the actor died.
_REASON_WAIT = 2.0


class _Life:
    """One peer's lifetime in a slot: set down once the supervisor reports its death."""

    def __init__(self, peer: Peer | None) -> None:
        self.peer = peer
        self.down = trio.Event()
        self.reason: str | None = None


class PeerSlot:
    """A replaceable link; see the module docstring.

    Args:
      name: the link's name (``provider``, ``tools``), as on the control channel.
      label: the actor for people ("provider", "tool pool").
      what: what a call to it is for people ("request", "tool call").
      supervised: whether a supervisor restarts the actor (otherwise calls fail at once).
      wait: how long a call waits for a restarted actor's link.
      interface: the contract answers are checked against (default: ``LINK_INTERFACES[name]``;
        none for another name).
      handler: serves the calls the actor makes on the link (None: it makes none).
    """

    def __init__(
        self, name: str, label: str, what: str, *, supervised: bool, wait: float = 60.0, interface: Interface | None = None,
        handler: Handler | None = None,
    ) -> None:
        self.name = name
        self.interface = interface if interface is not None else LINK_INTERFACES.get(name)
        self.label = label
        self.what = what
        self.supervised = supervised
        self.wait = wait
        #: Serves the calls the actor makes the other way (the extension host's ``ctx.ui``).
        self.handler = handler
        self._life = _Life(None)
        self._changed = trio.Event()

    @property
    def peer(self) -> Peer | None:
        return self._life.peer

    async def hold(self, nursery: trio.Nursery, stream: trio.SocketStream) -> None:
        """Open the link over ``stream`` (hello included) as a task of ``nursery``, which owns
        it until it closes; it becomes the slot's current peer. Raises ConnectionLost if the
        handshake fails."""
        await nursery.start(self._hold, stream)

    async def _hold(self, stream: trio.SocketStream, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with open_peer(
            stream, side="client", role="coordinator", name=self.name, handler=self.handler, handshake_timeout=_HELLO_WAIT
        ) as peer:
            self._life = _Life(peer)
            self._changed.set()
            self._changed = trio.Event()
            task_status.started()
            await peer.closed_event.wait()

    def mark_down(self, reason: str) -> None:
        """The supervisor's report: the current actor died, ``reason`` says how."""
        life = self._life
        if not life.down.is_set():
            life.reason = reason
            life.down.set()

    def _live(self, life: _Life) -> bool:
        return life.peer is not None and not life.peer.closed_event.is_set() and not life.down.is_set()

    async def _current(self) -> tuple[Peer, _Life]:
        life = self._life
        if not self.supervised or self._live(life):
            assert life.peer is not None, f"{self.name} link used before it was opened"
            return life.peer, life
        with trio.move_on_after(self.wait):
            while not self._live(self._life):
                await self._changed.wait()
            return self._life.peer, self._life  # type: ignore[return-value]
        raise RemoteError("unavailable", f"the {self.label} did not come back within {self.wait:g} s after it stopped")

    @asynccontextmanager
    async def open_call(self, method: str, args: Any = None, target: str = "") -> AsyncIterator[CheckedCall]:
        """Like ``Peer.open_call``, on the current actor; its answers are checked (see the
        module docstring). Raises ActorDied when the actor died with the call in flight,
        RemoteError ``unavailable`` when no actor came back in time."""
        declared = self.interface.methods.get(method) if self.interface is not None else None
        async with self._open_raw(method, args, target) as raw:
            yield CheckedCall(raw, declared)

    @asynccontextmanager
    async def _open_raw(self, method: str, args: Any, target: str) -> AsyncIterator[OutgoingCall]:
        peer, life = await self._current()
        started = False
        try:
            try:
                async with peer.open_call(method, args, target) as call:
                    started = True
                    yield call
            except ConnectionLost:
                if started or not self.supervised:
                    raise
                # The call never left (the link was already broken, its death not yet
                # noticed): it is not a replay to make it on the restarted actor.
                peer, life = await self._current()
                async with peer.open_call(method, args, target) as call:
                    yield call
        except ConnectionLost as exc:
            if not self.supervised or isinstance(exc, ActorDied):
                raise
            with trio.move_on_after(_REASON_WAIT):
                await life.down.wait()
            how = life.reason or "closed its link"
            raise ActorDied(f"the {self.label} process {how}; the outcome of the {self.what} is unknown") from None

    async def call(self, method: str, args: Any = None, target: str = "") -> Any:
        async with self.open_call(method, args, target) as call:
            return await call.result()


class CheckedCall:
    """An ``OutgoingCall`` whose chunks and result are checked against ``method`` (no check
    when None) and handed on as they came: RemoteError ``invalid_response`` for an answer that
    does not match."""

    def __init__(self, raw: OutgoingCall, method: Method[Any, Any, Any] | None) -> None:
        self.raw = raw
        self.method = method
        self.id = raw.id

    def __aiter__(self) -> CheckedCall:
        return self

    async def __anext__(self) -> Any:
        data = await self.raw.__anext__()
        if self.method is not None:
            self.method.decode_chunk(data)
        return data

    async def result(self) -> Any:
        """Drain the chunks left (checking them) and return the checked result."""
        async for _ in self:
            pass
        value = await self.raw.result()
        if self.method is not None:
            self.method.decode_result(value)
        return value

    async def cancel(self) -> None:
        await self.raw.cancel()

    def cancel_when(self, when: Any) -> AbstractAsyncContextManager[None]:
        """See ``OutgoingCall.cancel_when``."""
        return self.raw.cancel_when(when)


async def serve_control(
    channel: FdChannel,
    slots: dict[str, PeerSlot],
    nursery: trio.Nursery,
    outbox: trio.MemoryReceiveChannel[dict[str, Any]],
    log: Callable[..., None] | None = None,
) -> None:
    """Run the coordinator's end of the control channel until it closes: apply the
    supervisor's ``{"down": name, "reason"}`` and ``{"link": name}`` (with the new socket)
    to ``slots``, and send what arrives on ``outbox`` (``{"session": path}``) to it."""

    async def send_outbox() -> None:
        async for message in outbox:
            try:
                await channel.send(message)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return

    async with trio.open_nursery() as own:
        own.start_soon(send_outbox)
        try:
            while True:
                message, sock = await channel.receive()
                slot = slots.get(str(message.get("down") or message.get("link") or ""))
                if slot is None:
                    if sock is not None:
                        sock.close()
                    continue
                if "down" in message:
                    slot.mark_down(str(message.get("reason") or "stopped"))
                elif sock is not None:
                    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
                    try:
                        await slot.hold(nursery, stream)
                    except ConnectionLost as exc:
                        # The new actor died at once; the supervisor reports that too.
                        if log is not None:
                            log("relink_failed", link=slot.name, error=exc.message)
                    else:
                        if log is not None:
                            log("relinked", link=slot.name)
        except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the supervisor went away; the parent-death signal ends us
        finally:
            channel.close()
            own.cancel_scope.cancel()
