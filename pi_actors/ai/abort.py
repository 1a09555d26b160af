"""AbortSignal: pi's abort signal on trio.

A stream function or tool that receives a signal watches it and ends *cooperatively*: the
provider stops reading, closes the HTTP response and emits an ``error`` event with reason
``aborted`` and the partial content kept; a tool kills its processes and raises. We do not
use trio cancellation for aborts because a cancelled task cannot report what it had done.

Contract: ``abort()`` is idempotent and never blocks; ``aborted`` flips once and stays true;
``wait()`` returns at once if already aborted.  ``watch(scope)`` is a helper task body that
cancels ``scope`` when the signal fires (run it in a nursery next to the work).
``on_set(callback)`` calls ``callback()`` inside ``abort()`` (at once if already aborted), so
that relaying an abort — cancelling a scope, a call to another actor — needs no task that
waits for it on every request (a task's start and cancellation cost more than the request's
own bookkeeping); it returns the function that takes the callback back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .._trigger import Trigger

if TYPE_CHECKING:
    import trio

__all__ = ["AbortSignal", "AbortedError"]


class AbortedError(Exception):
    """Raised by code that notices an abort and has nothing better to return."""


class AbortSignal:
    __slots__ = ("_flag", "reason")

    def __init__(self) -> None:
        self._flag = Trigger()
        self.reason: str | None = None

    @property
    def aborted(self) -> bool:
        return self._flag.is_set()

    def abort(self, reason: str | None = None) -> None:
        if not self._flag.is_set():
            self.reason = reason
            self._flag.set()

    def on_set(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback()`` when the signal is aborted (now, if it is); returns a function
        that takes the callback back (a no-op once it has run). Must be called, like
        ``abort``, from the event loop's thread."""
        return self._flag.on_set(callback)

    async def wait(self) -> None:
        await self._flag.wait()

    async def watch(self, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` once this signal is aborted (a task body for a nursery)."""
        await self._flag.wait()
        scope.cancel()
