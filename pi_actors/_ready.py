"""Waits that return at once when what they wait for is ready: shared by the runtime and the
agent stack (which may not import each other).

trio makes every one of its blocking operations a schedule point, also when it need not
block: acquiring a free lock, waiting for an event already set, receiving from a channel that
holds an item, sending on a socket with room in its buffer all go once through the scheduler
(the task is put back on the run queue and the loop polls for I/O before it runs again). On a
turn's critical path that is about twenty round trips in the coordinator alone, each
~10–30 µs on a loaded two-CPU machine, and nothing else is waiting to run in most of them.
These helpers take the ready case without the round trip and fall back to trio's own
operation otherwise.

Contract kept: each still raises ``trio.Cancelled`` if the calling task is cancelled when it
is called (``checkpoint_if_cancelled``), so a cancelled caller never gets past one. What is
given up is only the *yield* of the ready case: a loop that calls them and nothing else would
not let other tasks run. Every user here waits for real (a socket read, a chunk still to
come) within a bounded number of steps.

trio is imported inside the functions, as in ``_trigger``: ``pi_actors.ai`` imports this
module, and importing it must not cost trio's import (after the first, the import statement
is a lookup in ``sys.modules``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import trio

__all__ = ["acquire", "wait", "receive", "send_now", "ReadyLimiter"]

T = TypeVar("T")


async def acquire(lock: trio.Lock) -> None:
    """``await lock.acquire()``, without a schedule point when the lock is free (trio's
    ``acquire_nowait`` respects waiters, so a free lock is taken only when nobody queues)."""
    import trio

    await trio.lowlevel.checkpoint_if_cancelled()
    try:
        lock.acquire_nowait()
    except trio.WouldBlock:
        await lock.acquire()


async def wait(event: Any) -> None:
    """``await event.wait()`` (a ``trio.Event`` or anything with ``is_set``/``wait``),
    without a schedule point when it is already set."""
    import trio

    if event.is_set():
        await trio.lowlevel.checkpoint_if_cancelled()
        return
    await event.wait()


async def receive(channel: trio.MemoryReceiveChannel[T]) -> T:
    """``await channel.receive()``, without a schedule point when an item is waiting."""
    import trio

    await trio.lowlevel.checkpoint_if_cancelled()
    try:
        return channel.receive_nowait()
    except trio.WouldBlock:
        return await channel.receive()


def send_now(sock: Any, data: bytes | memoryview) -> int:
    """Write to ``sock`` (a trio socket) what the kernel takes without waiting; returns how
    many bytes that was: 0 when none fit, or when the socket is closed (its descriptor is
    asked for at each call, so a closed socket is never written through a number already
    reused by another file). The caller sends the rest with its stream's own (waiting) send,
    which also reports a closed socket. Raises OSError for a failed write.

    Why: a stream's send is a trip through the scheduler after the bytes are gone, and a
    frame or a request fits the socket's buffer as a rule."""
    import os

    fd = sock.fileno()  # -1 once closed
    if fd < 0:
        return 0
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0


class ReadyLimiter:
    """A ``CapacityLimiter``-like wrapper (``trio.to_thread.run_sync(limiter=...)``) whose
    acquisition is not a schedule point when a token is free: a thread call then costs the
    one wait for the thread's answer, not that plus a trip through the scheduler before the
    thread starts. ``None`` wraps trio's default thread limiter (same capacity)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: trio.CapacityLimiter | None = None) -> None:
        import trio

        self._inner = inner if inner is not None else trio.to_thread.current_default_thread_limiter()

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        import trio

        try:
            self._inner.acquire_on_behalf_of_nowait(borrower)
        except trio.WouldBlock:
            await self._inner.acquire_on_behalf_of(borrower)

    def release_on_behalf_of(self, borrower: object) -> None:
        self._inner.release_on_behalf_of(borrower)
