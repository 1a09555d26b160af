"""Child processes of tool calls: each in its own process group, killed as a group.

Contract:

- :meth:`GroupProcess.spawn` starts ``argv`` in a new session (so a new process group whose
  id is the child's pid), stdin from /dev/null, stdout and stderr merged into one pipe read
  through :attr:`GroupProcess.output`. On Linux the child gets ``PR_SET_PDEATHSIG(SIGKILL)``
  so it dies with the worker. Signal dispositions and the signal mask are reset to the
  defaults in the child (as Node/libuv does), so a worker that ignores a signal does not
  hand that on to commands.
- The process group id is in a module-level registry from spawn until the leader has been
  reaped; :func:`kill_all_process_groups` signals every registered group and is safe to call
  from a signal handler or at exit.
- The leader is reaped only by :meth:`GroupProcess.shutdown`. Until then it stays a zombie
  after exiting, which keeps its pid — the group id — from being reused; signalling the
  group is therefore always safe while it is registered.
- :meth:`GroupProcess.shutdown` (idempotent; call it shielded) terminates the group if the
  leader still runs (SIGTERM, a grace period, then SIGKILL), always SIGKILLs what is left of
  the group, reaps the leader and closes the file descriptors.

Why the spawn does not use ``trio.lowlevel.open_process``: trio runs ``subprocess.Popen`` in
a worker thread, and PR_SET_PDEATHSIG fires when the *thread* that forked the child exits —
trio's idle worker threads exit after 10 s, which would SIGKILL a long-running command. So
the fork happens in the calling (trio) thread; it blocks the loop only for the fork/exec.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import partial

import trio

# Group ids (= leader pids) whose leader has not been reaped yet.
_live_groups: set[int] = set()
# True in a sandboxed worker (see :func:`spawn_as_namespace_init`).
_namespace_init = False

_PR_SET_PDEATHSIG = 1
_SIG_SETMASK = 2
_libc = None
if sys.platform.startswith("linux"):
    try:
        # The process's own symbols, libc's among them (no find_library: it runs ldconfig).
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _libc.prctl.restype = ctypes.c_int
        _libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
        _libc.signal.restype = ctypes.c_void_p
        _libc.sigprocmask.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        _libc.sigprocmask.restype = ctypes.c_int
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        _libc = None
# Allocated in the parent so the child does as little as possible between fork and exec.
_EMPTY_SIGSET = ctypes.create_string_buffer(128)
_RESET_SIGNALS = tuple(
    s for s in range(1, 65) if s not in (signal.SIGKILL, signal.SIGSTOP, 32, 33)
)


_COMMAND_OOM_SCORE_ADJ = 1000
# The worker's own /proc/self/oom_score_adj, opened once (spawn_as_namespace_init): written
# twice per command, one write(2) each (the file takes a number at any offset).
_oom_score_adj_fd = -1


def _set_oom_score_adj(value: int) -> None:
    global _oom_score_adj_fd
    try:
        if _oom_score_adj_fd < 0:
            _oom_score_adj_fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
        os.write(_oom_score_adj_fd, str(value).encode())
    except OSError:
        pass  # no /proc (or not allowed): the kernel's own choice stands


def kill_all_process_groups(sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to every live tool process group. Synchronous, signal-handler-safe."""
    for pgid in tuple(_live_groups):
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass


def spawn_as_namespace_init() -> None:
    """Declare that this process is the init (PID 1) of its own PID namespace, in a session
    without a terminal, ignoring no signal but those ``subprocess`` restores (SIGPIPE,
    SIGXFSZ): a sandboxed tool worker. Commands are then started without the fork-and-run-
    Python child set-up (no death signal, no signal reset), which lets ``subprocess`` use
    vfork: a few ms less per command and no copy-on-write faults in the worker afterwards.
    Nothing is lost: when the namespace's init dies the kernel kills everything in it, and
    there is no inherited disposition to reset.

    Also sets SIGINT back to its default (actors ignore it: Ctrl-C is the root's), so that
    commands inherit the default. As init, the worker itself still cannot be sent SIGINT
    from inside its namespace, and it has no terminal to get one from."""
    global _namespace_init, _oom_score_adj_fd
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _namespace_init = True
    _oom_score_adj_fd = -1  # this process's own file, opened at its first command


def live_process_groups() -> frozenset[int]:
    """The registered group ids (for diagnostics and tests)."""
    return frozenset(_live_groups)


def _child_setup(parent_pid: int) -> None:
    """Runs in the child between fork and exec."""
    if _libc is not None:
        for sig in _RESET_SIGNALS:
            _libc.signal(sig, None)  # SIG_DFL
        _libc.sigprocmask(_SIG_SETMASK, _EMPTY_SIGSET, None)
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The parent may have died before the death signal was armed.
    if os.getppid() != parent_pid:
        os._exit(1)


class GroupProcess:
    """A child process leading its own process group; see the module docstring."""

    def __init__(self, popen: subprocess.Popen, output_fd: int, errors_fd: int | None = None) -> None:
        self._popen = popen
        self.pid: int = popen.pid
        self.pgid: int = popen.pid
        self.output = trio.lowlevel.FdStream(output_fd)
        #: stderr, when spawned with ``separate_stderr``; else None (merged into ``output``).
        self.errors = trio.lowlevel.FdStream(errors_fd) if errors_fd is not None else None
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self._pidfd = None
        self._exited = False
        self._reaped = False
        self.returncode: int | None = None

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str] | None = None,
        separate_stderr: bool = False,
    ) -> GroupProcess:
        """Start ``argv``; raises OSError if it cannot be started. With ``separate_stderr``
        stderr has its own pipe (:attr:`errors`) instead of being merged into :attr:`output`."""
        read_fd, write_fd = os.pipe()
        err_read, err_write = os.pipe() if separate_stderr else (None, write_fd)
        if _namespace_init:
            # A sandboxed worker's commands are the OOM killer's first choice, not the worker
            # (which would take the whole call with it): they inherit the worker's score,
            # raised for the fork only (an unprivileged process may lower it back to 0).
            _set_oom_score_adj(_COMMAND_OOM_SCORE_ADJ)
        try:
            popen = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=err_write,
                start_new_session=True,
                preexec_fn=None if _namespace_init else partial(_child_setup, os.getpid()),
                close_fds=True,
            )
        except BaseException:
            for fd in {fd for fd in (read_fd, write_fd, err_read, err_write) if fd is not None}:
                os.close(fd)
            raise
        finally:
            if _namespace_init:
                _set_oom_score_adj(0)
        os.close(write_fd)
        if separate_stderr:
            os.close(err_write)
        _live_groups.add(popen.pid)
        return cls(popen, read_fd, err_read)

    async def read_output(self, max_bytes: int) -> bytes:
        """``self.output.receive_some(max_bytes)`` (b"" at the end of the output), without the
        schedule point trio's pipe read makes before it reads: the pump of a short command
        reads twice (its output, then the end), on the critical path of every call.
        Raises trio's ``ClosedResourceError`` / ``BrokenResourceError``."""
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            fd = self.output.fileno()  # asked each time: -1 once closed, never a reused number
            if fd < 0:
                raise trio.ClosedResourceError("the output pipe was closed")
            try:
                return os.read(fd, max_bytes)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(fd)
            except OSError as exc:
                raise trio.BrokenResourceError(f"reading the output failed: {exc}") from exc

    def has_exited(self) -> bool:
        """True once the leader has exited (it may still be an unreaped zombie)."""
        if not self._exited:
            try:
                self._exited = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            except ChildProcessError:
                self._exited = True  # already reaped elsewhere; treat as exited
        return self._exited

    async def wait_exited(self) -> None:
        """Wait until the leader has exited, without reaping it."""
        while not self.has_exited():
            if self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
            else:
                await trio.sleep(0.01)

    def signal_group(self, sig: int) -> None:
        """Signal every member of the group; a no-op once the leader is reaped."""
        if self._reaped:
            return
        try:
            os.killpg(self.pgid, sig)
        except OSError:
            pass

    async def terminate(self, grace: float) -> None:
        """SIGTERM the group, give the leader ``grace`` seconds, then SIGKILL the group."""
        self.signal_group(signal.SIGTERM)
        with trio.move_on_after(grace):
            await self.wait_exited()
        if not self.has_exited():
            self.signal_group(signal.SIGKILL)
            await self.wait_exited()

    async def shutdown(self, grace: float) -> None:
        """End the whole group and release everything; idempotent. Call it shielded."""
        if not self._reaped:
            if not self.has_exited():
                await self.terminate(grace)
            self.signal_group(signal.SIGKILL)
            self.returncode = self._popen.wait()
            self._reaped = True
            _live_groups.discard(self.pgid)
        if self._pidfd is not None:
            trio.lowlevel.notify_closing(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self.output.close()
        if self.errors is not None:
            self.errors.close()
