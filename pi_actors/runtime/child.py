"""Entry point of every actor process: ``python -m pi_actors.runtime.child NAME``.

Reads the boot document from stdin (see ``_spawn.py``), arranges to die with the parent,
wraps the inherited link fds as trio streams and runs the actor's entry function.

A link named ``supervisor`` (see ``_supervise.start_watched_actor``) is not given to the
actor: the runtime serves it here, answering its owner's liveness checks (``$ping``) from
this process's event loop for as long as the actor runs.

Exit, made quick (the user of ``-p`` waits for the whole tree): once the actor's entry
function has returned (its links are closed, every frame it wrote is in the kernel's socket
buffers, every child it owned has been waited for), the ``atexit`` handlers run, stdout and
stderr are flushed, and the process ends with ``os._exit(0)``. Skipping the interpreter's
teardown (module finalisation, garbage collection) saves up to ~0.1 s of CPU in a process
that imported an SDK, at the moment every actor is shutting down at once. An entry that
raises exits the usual way, with its traceback and status 1.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import json
import os
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1


def set_parent_death_signal(sig: int) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def main() -> None:
    boot = json.loads(sys.stdin.buffer.read())
    set_parent_death_signal(boot["death_signal"])
    if os.getppid() != boot["parent_pid"]:
        # The parent died before the death signal was armed.
        os._exit(1)
    # Ctrl-C in the terminal goes to the whole foreground group; the root owns the reaction.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Directories the owner named explicitly (an application's own actors outside the
    # installed packages); never the working directory, which stays out of the path.
    sys.path[:0] = [path for path in boot.get("import_paths") or () if os.path.isabs(path)]
    module_name, _, func_name = boot["entry"].partition(":")
    entry = getattr(importlib.import_module(module_name), func_name)

    import trio

    async def run() -> None:
        links = {
            name: trio.SocketStream(trio.socket.from_stdlib_socket(socket.socket(fileno=fd)))
            for name, fd in boot["links"].items()
        }
        supervisor = links.pop("supervisor", None)
        if supervisor is None:
            await entry(links, boot["config"])
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve_supervisor, supervisor, boot["name"])
            await entry(links, boot["config"])
            nursery.cancel_scope.cancel()

    trio.run(run)
    exit_now()


async def _serve_supervisor(stream: object, name: str) -> None:
    """Answer the owner's liveness checks until it closes the link (``$ping`` is answered by
    the peer itself; nothing else is served)."""
    from ._peer import ConnectionLost, open_peer

    try:
        async with open_peer(stream, side="server", role=name, name="supervisor", handshake_timeout=60.0) as peer:  # type: ignore[arg-type]
            await peer.closed_event.wait()
    except ConnectionLost:
        pass  # the owner went away before the handshake; the parent-death signal handles the rest


def exit_now(status: int = 0) -> None:
    """End the process without the interpreter's teardown: ``atexit`` handlers, then flush
    stdout and stderr, then ``os._exit``."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
