"""Supervision primitives: watched actor processes, liveness, restart intensity and back-off.

Erlang/OTP's "let it crash", for actor processes on one machine. This module knows nothing of
agents; the placement that wires actors together (``pi_actors.actors.local``) decides what
to restart and in which order.

* :func:`start_watched_actor` starts an actor process (``start_actor``) with one extra link,
  ``supervisor``, which the child's runtime serves by itself (``child.py``) and which carries
  nothing but liveness checks (``$ping`` calls, answered by the child's event loop whatever
  the actor is doing). The returned :class:`WatchedActor` reports, once, that the actor is
  down: its process exited (how: :func:`describe_exit`), or it stopped answering the
  heartbeat (SIGSTOP, a loop blocked by a deadlock or a runaway computation), in which case
  it is killed (SIGKILL) and reaped first. A provider waiting minutes for a slow model is
  not "silent": its event loop still answers.
* :class:`RestartIntensity` implements the restart-intensity limit (at most ``max_restarts``
  restarts in any ``window`` seconds, then :class:`TooManyRestarts`) and the back-off before
  each restart (none for the first restart in a window, then doubling up to a cap).

Ownership: the process and its watcher are tasks of the nursery given to
``start_watched_actor``; cancelling that nursery stops both (the process: SIGTERM, then
SIGKILL, then reaped).
"""

from __future__ import annotations

import signal
import socket
from collections import deque
from dataclasses import dataclass
from typing import Any

import trio

from ._peer import ConnectionLost, Peer, open_peer
from ._process import ChildProcess
from ._spawn import PrestartedActor, link_pair, start_actor

__all__ = [
    "RestartPolicy",
    "RestartIntensity",
    "TooManyRestarts",
    "WatchedActor",
    "describe_exit",
    "start_watched_actor",
    "watch_heartbeat",
]


@dataclass(frozen=True)
class RestartPolicy:
    """How actors are watched and restarted.

    Attributes:
      max_restarts, window: at most ``max_restarts`` restarts in any ``window`` seconds.
      backoff_first, backoff_max: the delay before the second restart within a window, doubled
        for each further one up to ``backoff_max``; the first restart is immediate.
      heartbeat_interval: seconds between two liveness checks of an actor.
      heartbeat_timeout: an actor that has not answered a check for this long is killed.
      start_timeout: how long a starting actor may take to answer on its supervision link
        (interpreter start-up and imports on a busy machine).
      spares: whether a placement that can keep warm standby actors may do so.
    """

    max_restarts: int = 5
    window: float = 60.0
    backoff_first: float = 0.25
    backoff_max: float = 2.0
    heartbeat_interval: float = 1.0
    heartbeat_timeout: float = 5.0
    start_timeout: float = 60.0
    spares: bool = True


class TooManyRestarts(Exception):
    """The restart-intensity limit was reached: the supervised set fails for good."""


class RestartIntensity:
    """Counts restarts in a sliding window and says how long to wait before the next one."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self._times: deque[float] = deque()

    def next_delay(self, what: str, now: float | None = None) -> float:
        """Record a restart of ``what`` now; return the back-off delay before it.

        Raises TooManyRestarts (with a message naming ``what`` and the limit) when this
        restart would exceed ``max_restarts`` within ``window`` seconds."""
        now = trio.current_time() if now is None else now
        policy = self.policy
        while self._times and now - self._times[0] > policy.window:
            self._times.popleft()
        if len(self._times) >= policy.max_restarts:
            raise TooManyRestarts(
                f"{what} failed again after {len(self._times)} restart{'' if len(self._times) == 1 else 's'}"
                f" within {policy.window:g} s; giving up"
            )
        earlier = len(self._times)
        self._times.append(now)
        if earlier == 0:
            return 0.0
        return float(min(policy.backoff_max, policy.backoff_first * 2 ** (earlier - 1)))


def describe_exit(returncode: int | None) -> str:
    """How a process ended, for messages: ``"was killed by SIGKILL"``, ``"exited with status 1"``."""
    if returncode is None:
        return "is gone"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


async def watch_heartbeat(peer: Peer, *, interval: float, timeout: float) -> str | None:
    """Check ``peer`` every ``interval`` seconds until it fails to answer within ``timeout``.

    Returns a reason (for messages) when the peer went silent; returns None when the
    connection closed (the process is exiting: its exit status tells the rest)."""
    while True:
        with trio.move_on_after(timeout) as scope:
            try:
                await peer.ping()
            except ConnectionLost:
                return None
        if scope.cancelled_caught:
            return f"did not answer a liveness check for {timeout:g} s (stopped or stuck) and was killed"
        await trio.sleep(interval)  # the heartbeat's period, not a wait for an event


class WatchedActor:
    """An actor process under watch. ``down`` is set once it is gone for good (exited, or
    killed as unresponsive, and reaped); ``reason`` then says how."""

    def __init__(self, name: str, process: ChildProcess) -> None:
        self.name = name
        self.process = process
        self.down = trio.Event()
        self.reason: str | None = None
        self._silent: str | None = None

    def kill(self) -> None:
        """SIGKILL the process (its watcher then reports it down)."""
        self.process.kill()

    async def _watch(self, sup: socket.socket, policy: RestartPolicy) -> None:
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sup))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeat, stream, policy)
                await self.process.exited.wait()
                nursery.cancel_scope.cancel()
        finally:
            await trio.aclose_forcefully(stream)
            self.reason = self._silent or describe_exit(self.process.returncode)
            self.down.set()

    async def _heartbeat(self, stream: trio.SocketStream, policy: RestartPolicy) -> None:
        silent: str | None
        try:
            async with open_peer(
                stream, side="client", role="supervisor", name=self.name, handshake_timeout=policy.start_timeout
            ) as peer:
                silent = await watch_heartbeat(peer, interval=policy.heartbeat_interval, timeout=policy.heartbeat_timeout)
        except ConnectionLost as exc:
            # The child closed its end (it is exiting), or it never answered its hello.
            silent = None if self.process.returncode is not None or "no hello answer" not in str(exc) else (
                f"did not start within {policy.start_timeout:g} s and was killed"
            )
        if silent is not None and self.process.returncode is None:
            self._silent = silent
            self.process.kill()


async def start_watched_actor(
    nursery: trio.Nursery,
    *,
    name: str,
    entry: str,
    links: dict[str, socket.socket] | dict[str, Any],
    config: Any = None,
    env: dict[str, str] | None = None,
    policy: RestartPolicy = RestartPolicy(),
    prestarted: PrestartedActor | None = None,
) -> WatchedActor:
    """``start_actor`` plus a ``supervisor`` link carrying the heartbeat (module docstring).

    ``prestarted``: boot this process (``prestart_actor`` with a ``supervisor`` link among its
    links) instead of starting one; ``links`` must then be empty.
    The process and its watcher run in ``nursery``. Raises what ``start_actor`` raises."""
    if prestarted is not None:
        ours = prestarted.take_end("supervisor")
        child_links = links
    else:
        ours, theirs = link_pair()
        child_links = {**links, "supervisor": theirs}
    try:
        process = await start_actor(
            nursery, name=name, entry=entry, links=child_links, config=config, env=env, prestarted=prestarted
        )
    except BaseException:
        ours.close()
        raise
    actor = WatchedActor(name, process)
    nursery.start_soon(actor._watch, ours, policy)
    return actor
