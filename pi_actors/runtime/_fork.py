"""An actor process forked from this one, ahead of its configuration, without exec.

Why: every actor started as ``python -I -m pi_actors.runtime.child`` pays for an interpreter
and for its imports — trio and msgspec alone are ~150 ms of CPU. A program that has imported
them already (the CLI, before its event loop runs) can fork instead: the child has them for
the price of the fork and of the pages it then writes. The child is a *prestarted* actor
(``_spawn.PrestartedActor``): it waits for its boot document, and its owner boots it with
``start_actor(..., prestarted=...)`` or gives it up (``abandon``: killed and reaped).

A forked child starts as a copy of its parent, so :func:`fork_actor` makes it into what
``prestart_actor`` would have started, before it runs anything of the actor:

- **descriptors**: only stdin (the boot pipe, as a started actor has), stdout, stderr and the
  child's ends of its links stay open; every other descriptor of the parent is closed.
- **environment**: ``os.environ`` becomes the ``env`` given, and so does the process's
  original environment block (what ``/proc/PID/environ`` shows), overwritten in place: a
  variable scrubbed from ``env`` (a credential) is gone from both.
- **command line**: the process shows the command line a started actor has (``ps`` and
  ``/proc/PID/cmdline`` name the actor), written over the parent's arguments (which may
  hold ``--api-key``); ``sys.argv`` follows.
- **import path**: what ``python -I`` would have — no script directory or working directory,
  no ``PYTHONPATH``, no user site-packages — so that a module a tool writes in the session's
  directory can never be imported by the actor (``_spawn``'s "Isolation").
- **the rest**: working directory ``/``, SIGINT ignored (the root handles Ctrl-C), the
  parent-death signal armed at once, the parent's ``atexit`` handlers dropped, and what the
  parent allocated frozen out of the child's garbage collections.

What cannot be made fresh is the parent's memory: it stays in the child until overwritten.
So a program forks an actor *before* it reads secrets of its own (the CLI: right after its
arguments are parsed, before any credential is resolved or any extension code runs), and
only for an actor it trusts with what it has read so far. The child never returns into the
parent's code: it ends with ``os._exit`` whatever happens.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import os
import signal
import site
import sys
import threading
import traceback
from collections.abc import Mapping
from typing import IO

import trio

from ._process import ChildProcess
from ._spawn import NEUTRAL_CWD, PrestartedActor, actor_command, link_pair

__all__ = ["fork_actor"]

_PR_SET_NAME = 15


class _ForkedChild:
    """A forked child as ``ChildProcess`` owns it (``_process.Reapable``)."""

    def __init__(self, pid: int, stdin: IO[bytes]) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            _pid, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def fork_actor(*, name: str, links: tuple[str, ...], env: Mapping[str, str], preload: tuple[str, ...] = ()) -> PrestartedActor:
    """Fork an actor process ahead of its configuration (see the module docstring).

    Args:
      name: the actor's name (its command line, and the boot's ``name``).
      links: one socketpair per name, as ``prestart_actor`` makes them.
      env: the child's whole environment.
      preload: modules the child imports while it waits for its boot document.
    Returns the prestarted actor; its owner must boot it or ``abandon`` it.
    Raises RuntimeError when this process runs trio or more than one thread (a fork copies only
    the calling thread: a lock another thread held would stay held in the child forever), and
    OSError if the fork fails.
    """
    if trio.lowlevel.in_trio_run():
        raise RuntimeError("fork_actor: trio is running in this process")
    if threading.active_count() != 1:
        raise RuntimeError(f"fork_actor: {threading.active_count()} threads are running")
    title = actor_command(name)
    parent = os.getpid()
    pairs = {link: link_pair() for link in links}
    fds = {link: theirs.fileno() for link, (_ours, theirs) in pairs.items()}
    boot_r, boot_w = os.pipe()
    try:
        if min(boot_r, *fds.values()) <= 2:  # (a standard stream was closed: its number reused)
            raise RuntimeError("fork_actor: a standard stream of this process is closed")
        for stream in (sys.stdout, sys.stderr):  # nothing of ours is written twice
            if stream is not None:
                stream.flush()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child; its behaviour is tested from outside
                _become_actor(parent, title, boot_r, set(fds.values()), dict(env), preload)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    except BaseException:
        os.close(boot_w)
        for ours, _theirs in pairs.values():
            ours.close()
        raise
    finally:
        os.close(boot_r)
        for _ours, theirs in pairs.values():
            theirs.close()
    process = ChildProcess(_ForkedChild(pid, os.fdopen(boot_w, "wb")))
    return PrestartedActor(name, process, {link: ours for link, (ours, _theirs) in pairs.items()}, fds)


def _become_actor(parent: int, title: list[str], boot_r: int, link_fds: set[int], env: dict[str, str], preload: tuple[str, ...]) -> None:
    """The child's side of :func:`fork_actor`: made into a started actor, then it waits for
    its boot document as one does (``child.run_once_booted``). Never returns."""
    try:
        gc.freeze()  # the parent's objects: never collected (nor their descriptors closed) here
        from .child import ignore_interrupts, run_once_booted

        ignore_interrupts()
        atexit._clear()
        os.dup2(boot_r, 0)
        _close_all_but({0, 1, 2, *link_fds})
        os.chdir(NEUTRAL_CWD)
        _isolate_import_path()
        os.environ.clear()
        os.environ.update(env)
        _retitle(title, env)
        sys.argv = title[title.index("-m") + 1 :]
        sys.orig_argv = list(title)
        run_once_booted(parent, preload)  # ends the process
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass  # (a closed or broken stream at the very end: nothing left to tell)
        os._exit(1)


def _close_all_but(keep: set[int]) -> None:
    """Close every descriptor of this process except ``keep``."""
    low = 0
    for fd in sorted(keep):
        if low < fd:  # (os.closerange with an empty range would close everything above)
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _isolate_import_path() -> None:
    """Make ``sys.path`` what ``python -I`` gives: without the script's or the working
    directory, ``PYTHONPATH``'s directories and the user's site-packages."""
    drop: set[str] = set()
    if not (sys.flags.isolated or sys.flags.safe_path) and sys.path:
        drop.add(sys.path[0])  # the script's directory, or the working directory
    if not sys.flags.ignore_environment:
        drop.update(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    if site.ENABLE_USER_SITE and site.USER_SITE:
        drop.add(site.USER_SITE)
    sys.path[:] = [p for p in sys.path if p and p not in drop and os.path.abspath(p) not in drop]
    sys.path_importer_cache.clear()


def _retitle(title: list[str], env: Mapping[str, str]) -> None:
    """Show ``title`` as this process's command line and ``env`` as its environment.

    ``/proc/PID/cmdline`` and ``/proc/PID/environ`` are read from the memory the kernel laid
    the arguments and the environment out in at exec; both areas are overwritten here, in
    place (as ``setproctitle`` does), padded with zero bytes. A title longer than the
    arguments' area is shortened (the interpreter's name without its directory, then the
    module and the actor's name alone); an environment larger than the original one (it is
    normally a part of it) loses the variables that do not fit. The comm name follows."""
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()
    # Fields 48-51 of proc(5): arg_start, arg_end, env_start, env_end (index = field - 3).
    arg_start, arg_end, env_start, env_end = (int(v) for v in fields[45:49])
    _overwrite(env_start, env_end, [os.fsencode(f"{k}={v}") for k, v in env.items()])
    short = [os.path.basename(title[0]), *title[1:]]
    for candidate in (title, short, title[-2:]):
        if _overwrite(arg_start, arg_end, [os.fsencode(part) for part in candidate]):
            break
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NAME, ctypes.c_char_p(os.path.basename(sys.executable).encode()[:15]), 0, 0, 0)


def _overwrite(start: int, end: int, strings: list[bytes]) -> bool:
    """Write ``strings``, each ended by a zero byte, over the memory ``[start, end)`` and zero
    the rest; as many whole strings as fit. Returns whether all of them did."""
    if end <= start:
        return not strings
    data = b""
    for item in strings:
        if len(data) + len(item) + 1 > end - start:
            ctypes.memset(start, 0, end - start)
            ctypes.memmove(start, data, len(data))
            return False
        data += item + b"\0"
    ctypes.memset(start, 0, end - start)
    ctypes.memmove(start, data, len(data))
    return True
