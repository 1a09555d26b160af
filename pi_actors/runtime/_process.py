"""A child process started from the trio thread, waited for through a pidfd.

Why not ``trio.run_process``: trio forks in a worker thread, and Linux delivers the
parent-death signal when the *thread* that forked the child exits — trio retires idle worker
threads after about 10 s, which would kill our actors at random. So the fork happens here, in
the calling thread (it blocks the loop only for fork/exec), and waiting uses a pidfd.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO, Protocol

import trio

__all__ = ["ChildProcess", "Reapable"]


class Reapable(Protocol):
    """What :class:`ChildProcess` needs of the process it owns: ``subprocess.Popen``'s pid,
    stdin (the boot pipe), returncode, ``poll`` and ``wait`` (a forked child that never
    exec'd, ``_fork``, provides the same)."""

    pid: int
    stdin: IO[bytes] | None
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...


class ChildProcess:
    """A started child; ``await wait()`` reaps it, ``terminate``/``kill`` signal it."""

    def __init__(self, popen: Reapable) -> None:
        self._popen = popen
        self.pid: int = popen.pid
        try:
            self._pidfd: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # pragma: no cover - non-Linux or very old kernel
            self._pidfd = None
        #: Set once the owner has reaped the process; other tasks wait on this, not ``wait``.
        self.exited = trio.Event()

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        pass_fds: Sequence[int] = (),
        env: Mapping[str, str] | None = None,
        stdin: int | None = subprocess.PIPE,
        cwd: str | None = None,
    ) -> ChildProcess:
        """Start ``argv`` (in ``cwd``, default ours); raises OSError if it cannot be started.

        The child starts with SIGINT blocked (the mask survives exec): Ctrl-C in a terminal
        goes to the whole foreground process group, and an actor still importing its modules
        would die of it with a KeyboardInterrupt traceback. ``child.main`` then ignores SIGINT
        and unblocks it (a pending one is dropped); the root owns the reaction to Ctrl-C. Our
        own mask is restored at once: a SIGINT for us meanwhile stays pending, not lost."""
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            popen = subprocess.Popen(list(argv), pass_fds=tuple(pass_fds), env=env, stdin=stdin, close_fds=True, cwd=cwd)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return cls(popen)

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def send_stdin(self, data: bytes) -> None:
        """Write ``data`` to the child's stdin and close it."""
        pipe = self._popen.stdin
        assert pipe is not None
        stream = trio.lowlevel.FdStream(os.dup(pipe.fileno()))
        pipe.close()
        try:
            await stream.send_all(data)
        except trio.BrokenResourceError:
            pass  # the child died early; its exit status tells why
        finally:
            await stream.aclose()

    async def wait(self) -> int:
        """Wait for the exit and reap (owner only: one waiter at a time); returns the exit
        status, negative when killed by a signal. Other tasks use ``exited``."""
        while (status := self._popen.poll()) is None:
            if self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
            else:  # pragma: no cover
                await trio.sleep(0.01)
        self._close_pidfd()
        self.exited.set()
        return status

    def send_signal(self, sig: int) -> None:
        if self._popen.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def kill_and_reap(self) -> None:
        """SIGKILL and reap, blocking (for an owner without an event loop; see
        ``_spawn.PrestartedActor.abandon``). Its stdin, if still open, is closed first."""
        if self._popen.stdin is not None:
            self._popen.stdin.close()
        self.kill()
        self._popen.wait()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    async def stop(self, grace: float) -> None:
        """SIGTERM, up to ``grace`` seconds to exit, then SIGKILL; always reaps."""
        self.terminate()
        with trio.move_on_after(grace):
            await self.wait()
            return
        self.kill()
        await self.wait()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            trio.lowlevel.notify_closing(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
