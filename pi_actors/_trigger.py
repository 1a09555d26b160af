"""A set-once flag whose setting also runs callbacks: shared by the runtime (an incoming call's
``cancel_requested``) and the agent stack (``AbortSignal``), which may not import each other.

A relay of a cancel or an abort — cancelling a scope, asking another actor to cancel a call —
registers a callback with :meth:`Trigger.on_set` instead of running a task that waits for a
flag that is almost never set: a task's start and cancellation cost more than a request's
own bookkeeping on a turn's critical path. Used from the event loop's thread only.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Trigger"]


class Trigger:
    """A flag set once, with ``trio.Event``'s ``set``/``is_set``/``wait``, that also calls the
    functions given to :meth:`on_set` when it is set."""

    __slots__ = ("_event", "_callbacks")

    def __init__(self) -> None:
        import trio  # here, not at module level: importing pi_actors.ai must not cost trio's import

        self._event = trio.Event()
        self._callbacks: list[Callable[[], object]] = []

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        if self._event.is_set():
            return
        self._event.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    async def wait(self) -> None:
        await self._event.wait()

    def on_set(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback()`` when set (now, if it is); returns a function that takes the
        callback back (a no-op once it has run)."""
        if self._event.is_set():
            callback()
            return _nothing
        self._callbacks.append(callback)

        def remove() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return remove


def _nothing() -> None:
    pass
