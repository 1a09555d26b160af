"""A pi-actors process starts up without the cyclic garbage collector.

Why: an actor's start-up is imports — trio, msgspec, the runtime, the actor's own modules
and, for the provider, an SDK: hundreds of thousands of objects that live as long as the
process. Every 700 allocations the collector looks at the young ones, and every so often at
all of them (measured: ~60 ms of CPU per start in the provider alone, for a few dozen
objects freed). Start-up is on the path of every ``-p`` prompt, on two busy CPUs shared
by five processes.

So a process started as an actor (``python -m pi_actors.runtime.child``, recognised from
``sys.orig_argv`` when the runtime package is imported, before any heavy import:
:func:`pause_if_started_as`, the runtime naming its entry module), as the tool zygote, or as
the ``pi-actors`` command (its console entry: :func:`pause_for_startup`) runs with the
collector off until its start-up is over — for an actor, the entry module imported and the
preload thread of a prestarted actor done; for the zygote, its preload and warm-up; for the
command, the moment its event loop starts (:func:`hold` / :func:`release`, counted). Then
every object allocated so far is frozen (``gc.freeze``: kept out of every later collection,
which then only walks what the session itself allocates) and the collector is turned back
on. Freezing costs nothing at run time; what it gives up is the collection of a reference
cycle made at start-up that becomes garbage later (refcounting still frees everything else).

A process that only imports pi-actors (an application using ``pi_actors.client``, the
tests, the CLI's ``main`` called from Python) is left alone.

A leaf module (standard library only), outside the runtime package, so that the command can
pause the collector before that package's imports.
"""

from __future__ import annotations

import gc
import sys
import threading

__all__ = ["pause_if_started_as", "pause_for_startup", "hold", "release"]

_lock = threading.Lock()
_holds = 0  # start-up work still under way; the collector is off while it is above 0


def _started_as(module: str) -> bool:
    """Whether this interpreter was started as ``python ... -m MODULE``."""
    argv = list(getattr(sys, "orig_argv", ()))
    try:
        return argv[argv.index("-m") + 1] == module
    except (ValueError, IndexError):
        return False


def pause_if_started_as(module: str) -> None:
    """:func:`pause_for_startup` if this process was started as ``python -m MODULE`` (the
    runtime names its actor entry); nothing otherwise."""
    if _started_as(module):
        pause_for_startup()


def pause_for_startup() -> None:
    """Turn the collector off until :func:`release` (once; nothing if it is off already,
    paused here or by the application)."""
    global _holds
    with _lock:
        if _holds == 0 and gc.isenabled():
            gc.disable()
            _holds = 1


def hold() -> None:
    """More start-up work begins (a preload thread): the collector stays off until its
    :func:`release` as well. No-op when the collector was not paused."""
    global _holds
    with _lock:
        if _holds:
            _holds += 1


def release() -> None:
    """One piece of start-up work is over; after the last, freeze what start-up allocated
    and turn the collector back on. No-op when the collector was not paused."""
    global _holds
    with _lock:
        if not _holds:
            return
        _holds -= 1
        if _holds:
            return
        gc.freeze()
        gc.enable()
