"""Admission control and an accept loop that survives running out of descriptors.

Why: a listener that accepts everything and gives each connection a minute to finish its
handshake lets anyone who can reach the port hold a descriptor per connection until the
server can no longer open files; ``trio.serve_listeners`` then logs a traceback every
0.1 s. This module bounds what an unauthenticated peer can hold, and backs off quietly.

Contract:

* ``ConnectionLimits(max_pending, max_connections, handshake_timeout)``: at most
  ``max_pending`` connections not yet authenticated ("pending"), at most ``max_connections``
  in all, and a pending connection must be admitted within ``handshake_timeout`` seconds of
  its accept or it is closed. ``ValueError`` for values out of range.
* ``Admission(limits)`` holds the counts of one server; every listener of that server
  shares it (``stats`` counts accepted, refused and evicted connections, and timeouts).
* ``serve_admitted(listener, handler, admission)`` accepts connections until cancelled and
  runs ``handler(stream, ticket)`` for each in its own task, inside a cancel scope whose
  deadline is ``handshake_timeout`` after the accept. The handler calls ``ticket.admit()``
  once the peer is authenticated: that lifts the deadline and makes the connection
  established. When the handler returns (or fails), the stream is closed and the slot freed.
  A broken or closed stream ends the connection quietly; any other handler exception is
  logged (with its traceback: it is a bug) and does not end the loop.
* Full house: a new connection that finds ``max_pending`` pending connections evicts the
  *oldest* pending one (it is cancelled and closed), so half-open connections can never lock
  out a client that completes its handshake promptly; one that finds ``max_connections``
  connections evicts the oldest pending one if there is any, and is otherwise closed at once,
  without a byte read or written. Established connections are never evicted.
* ``accept`` failing for lack of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM) does not end
  the loop: it waits 0.1 s, doubling up to 1 s, and retries; one warning is logged when such
  an episode starts and one when accepting works again (never a traceback). Other accept
  errors propagate.

Cancellation: cancelling ``serve_admitted`` cancels every connection task it started and
waits for them; every stream it accepted is closed.
"""

from __future__ import annotations

import errno
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

__all__ = ["Admission", "ConnectionLimits", "Ticket", "serve_admitted"]

log = logging.getLogger("pi_actors.server")

#: accept() errors that mean "out of resources for now": back off and retry.
_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_BACKOFF_FIRST = 0.1
_BACKOFF_MAX = 1.0


@dataclass(frozen=True)
class ConnectionLimits:
    """Bounds on a server's connections (see the module docstring)."""

    max_pending: int = 64
    max_connections: int = 512
    handshake_timeout: float = 5.0

    def __post_init__(self) -> None:
        if self.max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {self.max_pending}")
        if self.max_connections < self.max_pending:
            raise ValueError(
                f"max_connections ({self.max_connections}) must be at least max_pending ({self.max_pending})"
            )
        if not (self.handshake_timeout > 0 and math.isfinite(self.handshake_timeout)):
            raise ValueError(f"handshake_timeout must be a positive number of seconds, got {self.handshake_timeout}")


class Ticket:
    """One accepted connection's place in the admission counts.

    ``state`` is "pending" (not yet authenticated), "established", "evicted" (cancelled to
    make room; its slot is already free) or "closed".
    """

    __slots__ = ("_admission", "scope", "state")

    def __init__(self, admission: Admission, scope: trio.CancelScope) -> None:
        self._admission = admission
        self.scope = scope
        self.state = "pending"

    def admit(self) -> None:
        """The peer is authenticated: lift the handshake deadline, count it as established."""
        if self.state != "pending":
            return
        self.state = "established"
        self.scope.deadline = math.inf
        self._admission._pending.pop(self, None)


class Admission:
    """The connection counts of one server, shared by its listeners."""

    def __init__(self, limits: ConnectionLimits | None = None) -> None:
        self.limits = limits or ConnectionLimits()
        #: Pending tickets, oldest first (a dict keeps insertion order).
        self._pending: dict[Ticket, None] = {}
        self._open = 0
        self.stats = {"accepted": 0, "refused": 0, "evicted": 0, "timed_out": 0}

    @property
    def open(self) -> int:
        """Connections accepted and not yet closed (an evicted one leaves at once)."""
        return self._open

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _evict_oldest_pending(self) -> bool:
        for ticket in self._pending:
            del self._pending[ticket]
            ticket.state = "evicted"
            ticket.scope.cancel()
            self._open -= 1
            self.stats["evicted"] += 1
            return True
        return False

    def _enter(self) -> Ticket | None:
        """A ticket for a new connection, or None when it must be refused."""
        limits = self.limits
        if self._open >= limits.max_connections and not self._evict_oldest_pending():
            self.stats["refused"] += 1
            return None
        if len(self._pending) >= limits.max_pending:
            self._evict_oldest_pending()
        ticket = Ticket(self, trio.CancelScope(deadline=trio.current_time() + limits.handshake_timeout))
        self._pending[ticket] = None
        self._open += 1
        self.stats["accepted"] += 1
        return ticket

    def _release(self, ticket: Ticket) -> None:
        """The connection is closed: give its slot back (an evicted one already did)."""
        if ticket.state in ("pending", "established"):
            self._pending.pop(ticket, None)
            self._open -= 1
        ticket.state = "closed"


async def _run_connection(
    handler: Callable[[Any, Ticket], Awaitable[None]], stream: trio.abc.Stream, ticket: Ticket, admission: Admission
) -> None:
    try:
        with ticket.scope:
            await handler(stream, ticket)
        if ticket.scope.cancelled_caught and ticket.state == "pending":
            admission.stats["timed_out"] += 1
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the peer hung up or reset the connection: nothing to report
    except Exception:
        log.exception("server: connection handler failed")
    finally:
        admission._release(ticket)
        await trio.aclose_forcefully(stream)


async def serve_admitted(
    listener: trio.abc.Listener[Any],
    handler: Callable[[Any, Ticket], Awaitable[None]],
    admission: Admission,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept on ``listener`` until cancelled (see the module docstring)."""
    delay = 0.0
    failures = 0
    async with trio.open_nursery() as nursery:
        task_status.started()
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _CAPACITY_ERRNOS:
                    raise
                failures += 1
                if delay == 0.0:
                    delay = _BACKOFF_FIRST
                    log.warning(
                        "server: cannot accept connections: %s; retrying with back-off (up to %g s) until it clears",
                        exc.strerror or errno.errorcode.get(exc.errno or 0, exc),
                        _BACKOFF_MAX,
                    )
                else:
                    delay = min(delay * 2, _BACKOFF_MAX)
                await trio.sleep(delay)
                continue
            if delay:
                log.warning("server: accepting connections again (after %d failed attempts)", failures)
                delay = 0.0
                failures = 0
            ticket = admission._enter()
            if ticket is None:
                await trio.aclose_forcefully(stream)
                continue
            nursery.start_soon(_run_connection, handler, stream, ticket, admission)
