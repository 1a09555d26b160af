"""The session store called in the coordinator's own process, without a wire.

For the placement ``store_with_coordinator`` (``local.run_coordinator_with_store``, every CLI
mode): :class:`LocalStore` has the ``call(method, args)`` of the ``Peer`` the coordinator
otherwise holds to a store process, and serves it by calling the :class:`SessionStore`
handlers directly — no CBOR encoding, socketpair, reader task, frame decoding or wake-up per
append (two appends per tool turn). What a caller sees is what the wire gives it:

* the arguments are checked against the method's declaration (``protocol.store.STORE``) as the
  store's router checks them: a missing or mistyped field is ``invalid_request`` naming it, an
  unknown method ``not_found``;
* the answer is the result Struct's wire form (``msgspec.to_builtins``: fresh dicts and lists,
  camelCase keys, defaults left out), never the store's own objects;
* a refusal is the same ``RemoteError`` (``write_failed``, ``session_locked``, ...); an
  unexpected exception in a handler (a bug) is ``internal`` with its type and text, as the
  Peer answers it;
* calls run concurrently as on the wire (each caller's task runs its handler); an append
  answers once its line is written and fsynced (the write still runs in a worker thread, so
  the event loop is never blocked on the disk); a cancelled caller waits for a write already
  under way to end before it sees the cancellation (no write is left running behind it).

The store lives as long as the coordinator: ``close`` lets go of its file (and lock).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..protocol.store import STORE
from ..runtime import Empty, Method, RemoteError
from .session_store import SessionStore

__all__ = ["LocalStore"]


class LocalStore:
    """A :class:`SessionStore` behind the ``call`` of a store Peer (module docstring)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._routes: dict[str, tuple[Method[Any, Any, Any], Any]] = {}
        declared = {m.name: m for m in STORE}
        for attr in dir(type(store)):
            method: Method[Any, Any, Any] | None = getattr(getattr(type(store), attr, None), "__pi_method__", None)
            if method is not None and declared.get(method.name) is method:
                self._routes[method.name] = (method, getattr(store, attr))
        missing = sorted(set(declared) - set(self._routes))
        if missing:
            raise ValueError(f"SessionStore: no handler for {', '.join(missing)}")

    async def call(self, method: str, args: Any = None, target: str = "") -> Any:
        """The store's answer to ``method`` with the wire-form ``args``, as ``Peer.call``
        returns it; raises RemoteError."""
        route = self._routes.get(method)
        if route is None:
            raise RemoteError("not_found", f"SessionStore: unknown method {method!r}")
        declared, handler = route
        typed = declared.decode_args(args)
        try:
            value = await handler(typed, None)
        except RemoteError:
            raise
        except Exception as exc:
            raise RemoteError("internal", f"{type(exc).__name__}: {exc}") from exc
        if value is None:
            if declared.result is not Empty:
                raise RemoteError("internal", f"SessionStore.{method} returned None; it declares {declared.result.__name__}")
            return {}
        return msgspec.to_builtins(value, builtin_types=(bytes,))

    def close(self) -> None:
        self.store.close()
