"""Entry point of every actor process: ``python -m pi_actors.runtime.child NAME``.

Reads the boot document from stdin (see ``_spawn.py``), arranges to die with the parent,
wraps the inherited link fds as trio streams — and dials its connect links (``_connect``:
``{"connect": "HOST:PORT", ...}`` in place of an fd; one refused or unreachable ends the
process with the reason) — and runs the actor's entry function.

A link named ``supervisor`` (see ``_supervise.start_watched_actor``) is not given to the
actor: the runtime serves it here, answering its owner's liveness checks (``$ping``) from
this process's event loop for as long as the actor runs.

Started ahead of its configuration (``_spawn.prestart_actor``: ``--preload ITEMS --parent
PID`` after the name), it imports those modules (in a thread) while it waits for the boot
document. Any actor exits quietly if its stdin closes without one (its parent gave up).

Start-up runs with the cyclic garbage collector off (``pi_actors._startup_gc``): from the runtime
package's first import to the entry's, and to the end of the preload thread's work; then what
start-up allocated is frozen out of every later collection and the collector is turned on.

Exit, made quick (the user of ``-p`` waits for the whole tree): once the actor's entry
function has returned (its links are closed, every frame it wrote is in the kernel's socket
buffers, every child it owned has been waited for), the ``atexit`` handlers run, stdout and
stderr are flushed, and the process ends with ``os._exit(0)``. Skipping the interpreter's
teardown (module finalisation, garbage collection) saves up to ~0.1 s of CPU in a process
that imported an SDK, at the moment every actor is shutting down at once. An entry that
raises exits the usual way, with its traceback and status 1.

Profiling (a development aid, ``python -m benchmarks.profile``): with ``PI_ACTORS_PROFILE_DIR``
set to a directory in its environment, an actor runs its event loop under ``cProfile``,
timed by the CPU time of that thread, and writes ``<pid>-<name>.prof`` there when its entry
has ended (also when it raised). Actors start with ``python -I``, which ignores the
``sitecustomize`` a profiler would otherwise use. A profile that cannot be written is reported
on stderr and changes nothing else. Sandboxed tool workers do not start through here (and
could not write outside their workspace); they are not profiled.
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
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .. import _startup_gc

PR_SET_PDEATHSIG = 1
#: The environment variable naming the directory an actor writes its profile to (module docstring).
PROFILE_DIR_ENV = "PI_ACTORS_PROFILE_DIR"


def set_parent_death_signal(sig: int) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def ignore_interrupts() -> None:
    """Ctrl-C in the terminal goes to the whole foreground group; the root owns the reaction.
    The spawner started us with SIGINT blocked (``_process.ChildProcess.spawn``; a fork
    blocks it around the fork, ``_fork``), so none could interrupt the imports before this;
    one that came meanwhile is dropped here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def run_once_booted(parent: int | None = None, preload: Sequence[str] = ()) -> None:
    """Read the boot document from stdin (to its end) and run the actor it names; ends the
    process. Without a boot document (stdin closed first) the process ends quietly: a
    prestarted one abandoned (``PrestartedActor.abandon``), or a parent that stopped while
    starting us (Ctrl-C during start-up).

    ``parent``: this process was started (``_spawn.prestart_actor``) or forked (``_fork``)
    ahead of its configuration by ``parent``: the parent-death signal is armed now (the boot
    document re-arms it with its own), and the process ends if that parent is gone already.
    ``preload``: items imported meanwhile — a module, or ``module:function``: the module, then
    a call of its function without arguments (preparations that need no event loop) — in a
    thread, while this thread waits for the boot document.

    In a thread, so that the boot is not held up by the preparations: once booted, the actor
    answers its links while they go on (the coordinator waits for each actor's hello, and
    other actors wait for the coordinator's). Python's import locks order the rest: the
    actor's own import of a module the thread is importing waits for it. A failure in the
    thread happens again, and is reported, where the actor does the same (its entry at boot,
    an SDK on first use)."""
    if parent is not None:
        set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)  # the parent died before the death signal was armed
    items = [item for item in preload if item]
    if items:
        _startup_gc.hold()  # start-up goes on in the thread: the collector stays off for it
        threading.Thread(target=_import_all, args=(items,), name="preload", daemon=True).start()
    chunks = []
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
    if not chunks:
        os._exit(0)
    run_booted(json.loads(b"".join(chunks)))


def _import_all(items: list[str]) -> None:
    try:
        _import_each(items)
    finally:
        _startup_gc.release()


def _import_each(items: list[str]) -> None:
    for item in items:
        module, _, function = item.partition(":")
        try:
            loaded = importlib.import_module(module)
            if function:
                getattr(loaded, function)()
        except Exception:  # reported by the actor's own import (see run_once_booted)
            pass


def main() -> None:
    ignore_interrupts()
    if "--preload" in sys.argv:
        # ``NAME --preload ITEM[,ITEM...] --parent PID`` (``_spawn.prestart_actor``).
        options = dict(zip(sys.argv[2::2], sys.argv[3::2], strict=False))
        run_once_booted(int(options.get("--parent", "0")), options.get("--preload", "").split(","))
    else:
        run_once_booted()


def run_booted(boot: dict[str, Any]) -> None:
    """Run the actor that the boot document ``boot`` names, then end the process (see the
    module docstring: ``exit_now`` once the entry returned). Also the way into an actor for
    a process forked rather than started (``_fork``)."""
    set_parent_death_signal(boot["death_signal"])
    if os.getppid() != boot["parent_pid"]:
        # The parent died before the death signal was armed.
        os._exit(1)
    # Directories the owner named explicitly (an application's own actors outside the
    # installed packages); never the working directory, which stays out of the path.
    sys.path[:0] = [path for path in boot.get("import_paths") or () if os.path.isabs(path)]
    module_name, _, func_name = boot["entry"].partition(":")
    entry = getattr(importlib.import_module(module_name), func_name)

    import trio

    # Start-up is over on this thread (a preload thread may still hold the collector off).
    _startup_gc.release()

    async def run() -> None:
        links = {}
        for name, link in boot["links"].items():
            if isinstance(link, dict):  # a connect link (``_connect``): dial and authenticate
                from ._connect import LinkRefused, dial_link

                try:
                    links[name] = await dial_link(link)
                except LinkRefused as exc:
                    print(f"{boot['name']}: {exc}", file=sys.stderr, flush=True)
                    exit_now(1)
            else:
                links[name] = trio.SocketStream(trio.socket.from_stdlib_socket(socket.socket(fileno=link)))
        supervisor = links.pop("supervisor", None)
        if supervisor is None:
            await entry(links, boot["config"])
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve_supervisor, supervisor, boot["name"])
            await entry(links, boot["config"])
            nursery.cancel_scope.cancel()

    profile_dir = os.environ.get(PROFILE_DIR_ENV)
    if profile_dir:
        _run_profiled(lambda: trio.run(run), profile_dir, boot["name"])
    else:
        trio.run(run)
    exit_now()


def _run_profiled(run: Callable[[], object], directory: str, name: str) -> None:
    """``run()`` under ``cProfile`` (this thread's CPU time), written to
    ``directory/<pid>-<name>.prof`` however ``run`` ends (module docstring)."""
    import cProfile
    import time

    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    try:
        run()
    finally:
        profiler.disable()
        path = os.path.join(directory, f"{os.getpid()}-{name.replace(os.sep, '_')}.prof")
        try:
            profiler.dump_stats(path)
        except OSError as exc:
            print(f"{name}: cannot write its profile {path}: {exc.strerror or exc}", file=sys.stderr, flush=True)


async def _serve_supervisor(stream: object, name: str) -> None:
    """Answer the owner's liveness checks until it closes the link (``$ping`` is answered by
    the peer itself; nothing else is served)."""
    from ._peer import ConnectionLost, open_peer
    from .protocol import SIBLING_HANDSHAKE_TIMEOUT

    try:
        async with open_peer(stream, side="server", role=name, name="supervisor", handshake_timeout=SIBLING_HANDSHAKE_TIMEOUT) as peer:  # type: ignore[arg-type]
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
