"""One writer per session file: an advisory lock next to it (``<file>.jsonl.lock``).

Contract:

- :meth:`SessionLock.acquire` takes ``flock(LOCK_EX | LOCK_NB)`` on the sibling file
  ``<session path>.lock`` (created 0600 if missing) and writes the owner's pid into it. It
  never waits: a lock held by another open file — another process, or another writer in
  this one — raises :class:`SessionLocked`, whose message names the holder's pid and says
  what to do. Other failures (no permission to create the lock file) raise ``OSError``.
- :meth:`SessionLock.release` removes the lock file and closes it. A process that dies
  releases its lock without any of this (the kernel drops ``flock`` locks when the last
  descriptor closes), so a crash never leaves a stale lock — at most a stale lock *file*,
  which the next writer takes over.
- :func:`lock_holder` asks, without taking the lock, whether someone holds it (for a
  friendly refusal before any actor starts); it reads ``/proc/locks`` and answers None
  where that is unavailable — the store's own :meth:`SessionLock.acquire` is the authority.

Why a sibling file rather than the session file itself: pi (and pi-actors) only ever open
``*.jsonl`` files, so the lock file is invisible to both and the session file stays exactly
pi's format (there is no room in it for a pid); and a session file that is rewritten by an
atomic rename (a migration) would drop a lock held on its old inode. The lock is advisory:
pi itself does not take it, so a pi process can still open and append to a session that
pi-actors is writing, as it can today.

Removing the lock file on release is safe because the remover holds the lock while
unlinking: a process that was waiting on the old inode sees, once it gets the lock, that the
path no longer names the file it locked and starts over.

The pid recorded is the *owner's* — by default this process, but the session store records
the pi-actors process that started it (the CLI or the server), which is the process a user
can recognise and close.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

__all__ = ["SessionLock", "SessionLocked", "lock_holder", "lock_path_for"]

_ATTEMPTS = 20  # each retry means another process unlinked the file under us; never loops long


class SessionLocked(Exception):
    """The session file is open for writing in another process (or another writer here)."""

    def __init__(self, path: str, session_id: str, pid: int | None) -> None:
        self.path = path
        self.session_id = session_id
        self.pid = pid
        short = session_id[:8]
        holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"session {short} is open in another pi-actors process ({holder}); close it or use --fork {short}"
        )


def lock_path_for(session_path: str) -> str:
    return session_path + ".lock"


def _session_id(session_path: str) -> str:
    """The id from the header's first line, else the file name (``<timestamp>_<id>.jsonl``)."""
    import json

    try:
        with open(session_path, "rb") as handle:
            header = json.loads(handle.readline(64 * 1024))
        if isinstance(header, dict) and isinstance(header.get("id"), str) and header["id"]:
            return header["id"]
    except (OSError, ValueError, RecursionError):
        pass
    name = os.path.basename(session_path)
    name = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    return name.rsplit("_", 1)[-1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _recorded_pid(fd: int) -> int | None:
    """The owner pid written in the lock file, if it names a live process."""
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    if text.isdigit() and int(text) > 0 and _alive(int(text)):
        return int(text)
    return None


def _flock_holder(st: os.stat_result) -> int | None:
    """The pid holding an exclusive flock on the file ``st`` describes, from /proc/locks."""
    try:
        with open("/proc/locks", "rb") as handle:
            lines = handle.read().decode("ascii", "replace").splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[3] != "WRITE":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            if int(inode) == st.st_ino and (int(major, 16), int(minor, 16)) == (os.major(st.st_dev), os.minor(st.st_dev)):
                pid = int(fields[4])
                return pid if pid > 0 else None
        except ValueError:
            continue
    return None


def lock_holder(session_path: str) -> int | None:
    """The pid of the process holding ``session_path``'s lock, or None when it is free (or
    when this cannot be told without taking the lock: no ``/proc/locks``)."""
    path = lock_path_for(session_path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        holder = _flock_holder(st)
        if holder is None:
            return None
        return _recorded_pid(fd) or holder
    finally:
        os.close(fd)


class SessionLock:
    """A held lock on one session file; see the module docstring."""

    def __init__(self, session_path: str, fd: int) -> None:
        self.session_path = session_path
        self.path = lock_path_for(session_path)
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, session_path: str, *, owner_pid: int | None = None, session_id: str | None = None) -> SessionLock:
        """Lock ``session_path`` for writing; raises :class:`SessionLocked` or ``OSError``."""
        path = lock_path_for(session_path)
        owner = owner_pid or os.getpid()
        for _ in range(_ATTEMPTS):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    pid = _recorded_pid(fd) or _flock_holder(os.fstat(fd))
                    raise SessionLocked(session_path, session_id or _session_id(session_path), pid) from None
                try:
                    named = os.stat(path, follow_symlinks=False)
                except FileNotFoundError:
                    named = None
                mine = os.fstat(fd)
                if named is None or (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino):
                    os.close(fd)  # the holder before us removed it: start over on the new file
                    fd = -1
                    continue
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{owner}\n".encode("ascii"), 0)
            except BaseException:
                if fd >= 0:
                    os.close(fd)
                raise
            return cls(session_path, fd)
        raise OSError(f"the lock file {path} keeps being replaced by other processes")

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            named = os.stat(self.path, follow_symlinks=False)
            mine = os.fstat(fd)
            if (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino):
                os.unlink(self.path)
        except OSError:
            pass  # gone already, or not ours to remove: closing below still drops the lock
        finally:
            os.close(fd)

    def __enter__(self) -> SessionLock:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()
