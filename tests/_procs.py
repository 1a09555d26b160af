"""Process inspection for tests: find processes in /proc, wait for their exit through pidfds.

Waiting for an exit uses ``pidfd_open`` (which works for any process, not only our children):
the pidfd becomes readable when the process exits, so tests wait for the event itself instead
of polling. Zombies count as gone: they have exited and only wait to be reaped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

import trio

__all__ = ["live_pids", "cmdline", "describe", "process_state", "environ_has", "parent_pid", "wait_all_gone", "wait_exited", "wait_for_pids"]


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 : data.rindex(b")") + 3].decode()
    except (OSError, ValueError):
        return "X"


def process_state(pid: int) -> str:
    """The one-letter state of ``pid`` (``R``, ``S``, ``D``, ``T``, ``Z``, ...; ``X``: gone)."""
    return _state(pid)


def parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def describe(pid: int) -> str:
    """One line for an assertion message: pid, parent, state, where in the kernel it waits
    (``wchan``: e.g. ``synchronize_rcu_expedited`` while a network namespace is made) and
    the command line — then one indented line for each descendant, found or not by the
    test's own look (an exiting process has no environment left to carry a marker), with
    its kernel stack when it is readable: what a process left behind is waiting for."""
    lines = [_one_line(pid)]
    for child, depth in _descendants(pid):
        stack = _read(f"/proc/{child}/stack").replace("\n", " | ")[:300]
        lines.append("  " * depth + _one_line(child) + (f" stack=[{stack}]" if stack else ""))
    return "\n".join(lines)


def _one_line(pid: int) -> str:
    wchan = _read(f"/proc/{pid}/wchan") or "-"
    return f"{pid} ppid={parent_pid(pid)} state={_state(pid)} wchan={wchan} {cmdline(pid)[:200]}"


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _descendants(pid: int, depth: int = 1) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        for word in _read(f"/proc/{pid}/task/{task}/children").split():
            out.append((int(word), depth))
            out += _descendants(int(word), depth + 1)
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def environ_has(pid: int, needle: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle.encode() in f.read()
    except OSError:
        return False


def live_pids(predicate: Callable[[int], bool]) -> list[int]:
    """Pids of running (non-zombie) processes for which ``predicate(pid)`` holds."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            pid = int(entry)
            if pid != os.getpid() and predicate(pid) and _state(pid) not in ("Z", "X"):
                out.append(pid)
    return out


async def wait_exited(pids: Iterable[int], timeout: float = 10.0) -> None:
    """Return once every process in ``pids`` has exited; fail after ``timeout`` seconds."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            pass  # already gone
    try:
        with trio.fail_after(timeout):
            for fd in fds:
                await trio.lowlevel.wait_readable(fd)
    finally:
        for fd in fds:
            trio.lowlevel.notify_closing(fd)
            os.close(fd)


async def wait_all_gone(find: Callable[[], list[int]], timeout: float = 20.0) -> list[int]:
    """Wait until ``find()`` lists no live process; return what it lists at the end.

    One snapshot is not enough for orphans: a ``bwrap`` whose parent was killed mid-start may
    still fork its namespace child after the snapshot was taken, so every round waits for the
    processes seen and then looks again. Gives up (returning what is left) after ``timeout``.
    """
    left = find()
    with trio.move_on_after(timeout):
        while left:
            try:
                await wait_exited(left, timeout=timeout)
            except trio.TooSlowError:
                break
            left = find()
    # Not looked at again: a look that found nothing is the answer (a new look could find
    # the namespace child an orphaned ``bwrap`` forks just then, on its way out).
    return left if not left else find()


async def wait_for_pids(find: Callable[[], list[int]], timeout: float = 30.0) -> list[int]:
    """Wait until ``find()`` lists a process (one that has started, or has reached a state the
    caller's predicate looks for) and return that list; fail after ``timeout`` seconds.

    A process start is not an event a test can wait on (no pidfd exists before the pid), so
    this is the one place that looks at /proc again until it holds: at first after each
    scheduling round, then backing off to 10 ms, never for a fixed time in the test."""
    delay = 0.0
    with trio.fail_after(timeout):
        while not (found := find()):
            await trio.sleep(delay)
            delay = min(0.01, delay * 2 or 0.001)
    return found
