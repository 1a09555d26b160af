"""The actors of one coding session and their local placement, supervised.

Public surface (everything else in this package is an actor's implementation):

- ``open_local_runtime(config, ...)`` — an async context manager that starts a session's
  actors (provider streamer, tool pool, coordinator, session store) as child processes of
  the calling process, links them with socketpairs, supervises them (restarts, liveness
  checks, restart intensity) and yields the UI's :class:`CoordinatorLink`. The CLI and the
  session server both place sessions through it. See :mod:`pi_actors.actors.local`.
- ``CoordinatorLink`` — the UI's connection to the session's coordinator: ``call`` /
  ``open_call`` / ``closed_event`` like a runtime ``Peer``, valid across coordinator
  restarts; ``failure`` and ``notes`` say what supervision did.
- ``RestartPolicy`` — restart and liveness settings (from ``pi_actors.runtime``; given to
  ``open_local_runtime(policy=...)`` or read from the settings' ``supervision``).
- ``run_coordinator_with_store`` — the actor entry that places the session store in the
  coordinator's process (``open_local_runtime(store_with_coordinator=True)``).
- ``secret_env_names(env)`` — the environment variables that may hold credentials; they
  are scrubbed from the environment of the coordinator, the store and every tool process.

Example (a UI of one prompt)::

    async with open_local_runtime(config, store_with_coordinator=True) as coordinator:
        await coordinator.call("session")
        async with coordinator.open_call("prompt", {"text": "hello"}) as call:
            async for event in call:
                ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runtime import RestartPolicy
    from ._local_store import LocalStore
    from .local import CoordinatorLink, open_local_runtime, run_coordinator_with_store, secret_env_names

__all__ = ["CoordinatorLink", "LocalStore", "RestartPolicy", "open_local_runtime", "run_coordinator_with_store", "secret_env_names"]


def __getattr__(name: str) -> Any:
    """Resolve the public names on first use. Every actor process imports this package
    first (``python -m pi_actors.actors._zygote`` included): the tool zygote must not pay for
    trio and the runtime before it can answer its pool, so nothing is imported eagerly."""
    if name == "RestartPolicy":
        from ..runtime import RestartPolicy

        return RestartPolicy
    if name == "LocalStore":
        from ._local_store import LocalStore

        return LocalStore
    if name in __all__:
        from . import local

        return getattr(local, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
