"""AbortSignal: pi's abort signal on trio.

A stream function or tool that receives a signal watches it and ends *cooperatively*: the
provider stops reading, closes the HTTP response and emits an ``error`` event with reason
``aborted`` and the partial content kept; a tool kills its processes and raises. We do not
use trio cancellation for aborts because a cancelled task cannot report what it had done.

Contract: ``abort()`` is idempotent and never blocks; ``aborted`` flips once and stays true;
``wait()`` returns at once if already aborted.  ``watch(scope)`` is a helper task body that
cancels ``scope`` when the signal fires (run it in a nursery next to the work).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import trio

__all__ = ["AbortSignal", "AbortedError"]


class AbortedError(Exception):
    """Raised by code that notices an abort and has nothing better to return."""


class AbortSignal:
    __slots__ = ("_event", "reason")

    def __init__(self) -> None:
        import trio  # here, not at module level: importing pi_actors.ai must not cost trio's import

        self._event = trio.Event()
        self.reason: str | None = None

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def abort(self, reason: str | None = None) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()

    async def watch(self, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` once this signal is aborted (a task body for a nursery)."""
        await self._event.wait()
        scope.cancel()
