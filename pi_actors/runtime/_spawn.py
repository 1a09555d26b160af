"""Spawning actors as child processes connected by socketpairs.

An actor process is ``python -m pi_actors.runtime.child``: it reads one JSON document from
stdin (the entry point ``module:function``, the names and fd numbers of its links, its
configuration, its parent's pid) and runs ``await function(links, config)`` under trio, where
``links`` maps each name to a ``trio.SocketStream``.

Ownership: ``start_actor`` runs the process as a task in the caller's nursery, which waits
for it (see ``_process`` for why we fork from the trio thread rather than using
``trio.run_process``). Cancelling that nursery terminates the child (SIGTERM, then SIGKILL after a grace
period) and waits for its exit. A child also dies with its parent: it sets a parent-death
signal at start (Linux prctl) and exits at EOF on its links.

Isolation: the child interpreter starts as ``python -I`` (no script or working directory on
``sys.path``, no user site, no ``PYTHON*`` variables) in ``/``. The actors are unsandboxed and
hold secrets (the provider an API key), while tools write files in the session's working
directory: with the working directory on ``sys.path``, a ``json.py`` or ``sitecustomize.py``
written there by a tool would be imported by the next actor started. An actor that needs the
session's directory gets it in its configuration (``cwd``), never as its working directory.

The configuration travels over a pipe, not the command line or the environment, so secrets in
it (an API key for the provider actor) are not visible in ``/proc/<pid>/cmdline``.

Starting ahead of the configuration: ``prestart_actor`` starts the process (and its links)
before its owner knows its configuration or runs trio, with modules to import while it waits
for its boot document (``--preload``). A program whose start-up is long (the CLI imports and
prepares for ~0.3 s before its event loop runs) thus overlaps the child's interpreter start
and imports (the provider's SDK) with its own. The owner later adopts it with
``start_actor(..., prestarted=...)``, or gives it up with ``PrestartedActor.abandon()``
(kills and reaps it): a prestarted process is never left running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import Any

import trio

from ._process import ChildProcess

__all__ = ["link_pair", "start_actor", "prestart_actor", "PrestartedActor", "child_environment", "ISOLATED", "NEUTRAL_CWD"]

#: Interpreter options of every child interpreter: isolated mode (see the module docstring).
ISOLATED = ("-I",)
#: The working directory of every child interpreter: nothing there can be imported.
NEUTRAL_CWD = "/"


def link_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair of unix stream sockets (both ends inheritable by children)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return a, b


def child_environment(extra: dict[str, str] | None = None, *, scrub: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment for a child: ours, minus ``scrub``-listed names, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in scrub}
    if extra:
        env.update(extra)
    return env


class PrestartedActor:
    """An actor process started ahead of its configuration (``prestart_actor``): it runs its
    interpreter start and its ``preload`` imports, then waits for its boot document.

    ``ends``: our ends of its links by name (the child got the other ends at its start).
    Owned by whoever holds it until ``start_actor(..., prestarted=...)`` adopts it (then
    ``adopted`` is true); the holder must otherwise ``abandon()`` it."""

    def __init__(self, name: str, process: ChildProcess, ends: dict[str, socket.socket], fds: dict[str, int]) -> None:
        self.name = name
        self.process = process
        self.ends = ends
        self.fds = fds  # the links' fd numbers in the child
        self.adopted = False

    def take_end(self, link: str) -> socket.socket:
        """Our end of ``link``, handed over to the caller (no longer closed by ``abandon``)."""
        return self.ends.pop(link)

    def abandon(self) -> None:
        """Give the process up (no trio needed): close our link ends and its stdin (it exits
        at end-of-file before booting), SIGKILL it and reap it. No-op once adopted."""
        if self.adopted:
            return
        self.adopted = True  # (only once)
        for sock in self.ends.values():
            sock.close()
        self.ends.clear()
        self.process.kill_and_reap()


def actor_command(name: str) -> list[str]:
    """The command line of the actor process ``name`` (``python -I -m pi_actors.runtime.child
    NAME``); a forked one shows it too (``_fork``)."""
    return [sys.executable, *ISOLATED, "-m", "pi_actors.runtime.child", name]


def prestart_command(name: str, preload: tuple[str, ...]) -> list[str]:
    """The command line of a process started ahead of its configuration, by this process."""
    return [*actor_command(name), "--preload", ",".join(preload), "--parent", str(os.getpid())]


def prestart_actor(
    *, name: str, links: tuple[str, ...], preload: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> PrestartedActor:
    """Start an actor process now, before its configuration is known and without trio (see
    the module docstring): one socketpair per name in ``links``; ``preload``: modules the child
    imports while it waits for its boot document (an import error there is left to the boot's
    own import of its entry, which reports it). Raises OSError if the process cannot start."""
    pairs = {link: link_pair() for link in links}
    ends = {link: ours for link, (ours, _theirs) in pairs.items()}
    fds = {link: theirs.fileno() for link, (_ours, theirs) in pairs.items()}
    argv = prestart_command(name, preload)
    try:
        process = ChildProcess.spawn(argv, pass_fds=tuple(fds.values()), env=env, cwd=NEUTRAL_CWD)
    except BaseException:
        for sock in ends.values():
            sock.close()
        raise
    finally:
        for _ours, theirs in pairs.values():
            theirs.close()
    return PrestartedActor(name, process, ends, fds)


async def start_actor(
    nursery: trio.Nursery,
    *,
    name: str,
    entry: str,
    links: dict[str, socket.socket] | dict[str, Any],
    config: Any = None,
    death_signal: int = signal.SIGKILL,
    env: dict[str, str] | None = None,
    grace: float = 2.0,
    import_paths: tuple[str, ...] = (),
    prestarted: PrestartedActor | None = None,
) -> ChildProcess:
    """Start an actor process owned by ``nursery``; returns once it is running.

    Args:
      name: for messages and the process title.
      entry: ``"package.module:function"``; the function gets ``(links, config)``.
      links: our ends of socketpairs to hand to the child (closed here after the spawn), or
        connect links (a ``_connect`` spec dict: the child dials it and authenticates).
      config: JSON-serialisable configuration.
      death_signal: what the child receives when its parent dies.
      import_paths: absolute directories put in front of the child's ``sys.path`` before
        ``entry`` is imported — for an application whose actors are not installed packages
        (the child is isolated: neither its working directory nor ``PYTHONPATH`` counts).
      prestarted: an already running process (``prestart_actor``) to boot instead of starting
        one; ``links`` must then be empty (its links were made at its start) and ``env`` is
        the one it was started with. It is adopted here: owned by ``nursery`` from now on.
    Raises ValueError for a relative import path.
    Cancellation of ``nursery`` stops the child: SIGTERM, then SIGKILL after ``grace``.
    """
    relative = [path for path in import_paths if not os.path.isabs(path)]
    if relative:
        raise ValueError(f"start_actor: import paths must be absolute: {', '.join(relative)}")
    if prestarted is not None and (links or prestarted.adopted):
        raise ValueError("start_actor: a prestarted actor brings its own links and is adopted once")
    connects = {link_name: spec for link_name, spec in links.items() if isinstance(spec, dict)}
    inherited = {link_name: sock for link_name, sock in links.items() if not isinstance(sock, dict)}
    fds = prestarted.fds if prestarted is not None else {link_name: sock.fileno() for link_name, sock in inherited.items()}
    boot = json.dumps(
        {
            "name": name,
            "entry": entry,
            "links": {**fds, **connects},
            "config": config,
            "parent_pid": os.getpid(),
            "death_signal": int(death_signal),
            "import_paths": list(import_paths),
        }
    ).encode()
    if prestarted is not None:
        prestarted.adopted = True
        process = prestarted.process
    else:
        argv = actor_command(name)
        try:
            process = ChildProcess.spawn(argv, pass_fds=tuple(fds.values()), env=env, cwd=NEUTRAL_CWD)
        finally:
            for sock in inherited.values():
                sock.close()
    started: ChildProcess = await nursery.start(_own_process, process, boot, grace)
    return started


async def _own_process(process: ChildProcess, boot: bytes, grace: float, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """The owner task of one actor process: feeds its boot document, waits for its exit."""
    try:
        task_status.started(process)
        await process.send_stdin(boot)
        await process.wait()
    finally:
        if process.returncode is None:
            with trio.CancelScope(shield=True):
                await process.stop(grace)
