"""The sandboxed worker's duties as the init (PID 1) of its PID namespace.

The worker runs as PID 1 of the sandbox's PID namespace (``bwrap --as-pid-1``). That makes
it immune to signals from tools (the kernel delivers to a namespace's init only signals it
has a handler for, and never SIGKILL/SIGSTOP from inside), and it means:

- orphans are re-parented to the worker, which must reap them: :func:`reap_orphans` reaps
  exited children that no tool is waiting for (it never touches a registered process group
  leader, whose owner reaps it);
- at the end of every call, :func:`end_strays` kills every other process in the namespace —
  background children of a bash command, daemons that left its process group, whatever a
  call left behind — and waits until they are gone, so nothing outlives the call.

Both refuse to act unless this process really is PID 1 (never ``kill(-1)`` outside a sandbox).
"""

from __future__ import annotations

import errno
import os
import signal

import trio

from ..tools.process import live_process_groups

__all__ = ["is_namespace_init", "reap_orphans", "end_strays", "serve_reaper"]


def is_namespace_init() -> bool:
    return os.getpid() == 1


def _stat(pid: int) -> tuple[str, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    rest = data[data.rindex(b")") + 2 :].split()
    return rest[0].decode(), int(rest[1])


def reap_orphans() -> int:
    """Reap exited children that no tool waits for; returns how many were reaped."""
    if not is_namespace_init():
        return 0
    owned = live_process_groups()
    reaped = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid == 1 or pid in owned:
            continue
        info = _stat(pid)
        if info is None or info[1] != 1 or info[0] != "Z":
            continue
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                reaped += 1
        except ChildProcessError:
            pass
    return reaped


def _kill_and_reap_all() -> None:
    """SIGKILL everything else in the namespace and reap until no child is left (blocking)."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                raise
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _alone() -> bool:
    """True when no other process is left in the namespace (a call's usual end), checked
    without blocking: ``kill(-1)`` finds no one — not even a zombie, which still counts
    until it is reaped. Otherwise everyone found has just been sent SIGKILL."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError as exc:
        if exc.errno != errno.ESRCH:
            raise
        return True
    return False


async def end_strays(timeout: float = 5.0) -> None:
    """Kill and reap every process of the namespace but this one; call between calls only
    (it reaps any child). Gives up waiting after ``timeout`` seconds (a process stuck in
    uninterruptible sleep); the pool replaces a worker that could not be cleaned. When
    nothing is left (the usual case) it returns at once, without a thread."""
    if not is_namespace_init():
        return
    if _alone():
        return
    with trio.move_on_after(timeout):
        await trio.to_thread.run_sync(_kill_and_reap_all, abandon_on_cancel=True)


async def serve_reaper() -> None:
    """Reap orphans whenever a child exits (runs for the worker's life)."""
    if not is_namespace_init():
        return
    with trio.open_signal_receiver(signal.SIGCHLD) as signals:
        async for _ in signals:
            reap_orphans()
