"""Starting a tool worker process, inside its sandbox, and owning it until it exits.

:func:`launch_worker` starts ``python -m pi_actors.runtime.child`` for a worker entry —
wrapped in ``bwrap`` (see :mod:`.bwrap`) when the policy has a sandbox — hands it its boot
document and its end of the link, and starts an owner task in the given nursery. The owner
waits for the exit; when cancelled it *hangs up* the link (the worker exits at end-of-stream)
and gives the worker a grace period before killing it.

Why no SIGTERM/SIGKILL to ``bwrap`` alone: bubblewrap has a start-up race — its namespace
child waits on an eventfd for the outer process before arming its own parent-death signal,
so an outer ``bwrap`` killed during set-up leaves that child blocked for ever. Hence:

- the launcher sets no parent-death signal on a sandboxed ``bwrap`` (bwrap arms its own,
  ``--die-with-parent``, once set up); if the pool dies before that, the worker still starts,
  finds its link closed and exits, and bwrap with it;
- a forced stop waits for bwrap's ``--json-status-fd`` report of the sandbox's PID 1 (its
  host pid), and SIGKILLs that process (through a pidfd) — which ends the whole sandbox —
  along with bwrap.

When running as root the launcher joins the sandbox's pids cgroup between fork and exec
(:mod:`.limits`); the owner removes the cgroup once its last process has exited.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import trio

from ...runtime import ChildProcess
from ...runtime.child import PR_SET_PDEATHSIG
from . import SandboxPolicy

__all__ = ["launch_worker", "describe_exit"]

STOP_GRACE = 2.0

# Resolved in the parent: nothing is loaded between fork and exec.
_prctl = None
if sys.platform.startswith("linux"):
    import ctypes

    _prctl = ctypes.CDLL(None, use_errno=True).prctl


async def launch_worker(
    nursery: trio.Nursery,
    *,
    name: str,
    entry: str,
    policy: SandboxPolicy,
    link: socket.socket,
    ours: socket.socket,
    private_tmp: str | None = None,
) -> ChildProcess:
    """Start one worker process (inside the sandbox if ``policy`` has one), owned by
    ``nursery``. ``link`` is the worker's end of the link (closed here), ``ours`` the
    caller's end (hung up to stop the worker). Raises SandboxUnavailable or OSError."""
    from .env import sandbox_environment, unsandboxed_environment

    command = [sys.executable, "-m", "pi_actors.runtime.child", name]
    cgroup = status = None
    status_w: int | None = None
    config: dict[str, Any] = {"sandboxed": policy.sandboxed}
    if policy.sandboxed:
        from .bwrap import build_argv, check_bwrap
        from .limits import PidsCgroup, needs_pids_cgroup

        bwrap = await trio.to_thread.run_sync(check_bwrap, policy)
        status_r, status_w = os.pipe()
        status = _SandboxStatus(status_r)
        argv = build_argv(policy, command, bwrap=bwrap, tmp_dir=private_tmp, status_fd=status_w)
        if needs_pids_cgroup():
            try:
                cgroup = PidsCgroup.create(policy.limits.processes)
            except BaseException:
                status.close()
                os.close(status_w)
                raise
        env = sandbox_environment(os.environ)
        config["limits"] = policy.limits.to_config()
        # The worker is PID 1 of its namespace: its parent is outside, seen as pid 0.
        parent_pid, death, launcher_death = 0, signal.SIGKILL, None
    else:
        argv, env = command, unsandboxed_environment(os.environ)
        parent_pid, death, launcher_death = os.getpid(), signal.SIGTERM, signal.SIGTERM
    fd = link.fileno()
    boot = json.dumps(
        {"name": name, "entry": entry, "links": {"pool": fd}, "config": config, "parent_pid": parent_pid, "death_signal": int(death)}
    ).encode()
    try:
        popen = subprocess.Popen(
            argv,
            pass_fds=(fd,) if status_w is None else (fd, status_w),
            env=env,
            stdin=subprocess.PIPE,
            close_fds=True,
            preexec_fn=partial(_launcher_setup, os.getpid(), cgroup.join if cgroup else None, launcher_death),
        )
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        if status is not None:
            status.close()
        raise
    finally:
        link.close()
        if status_w is not None:
            os.close(status_w)
    # The boot document fits the pipe buffer: written at once, it cannot be cut off by a
    # cancellation (a worker must never start without it).
    assert popen.stdin is not None
    try:
        os.write(popen.stdin.fileno(), boot)
    except OSError:
        pass  # the worker died at once; its exit status tells why
    popen.stdin.close()
    process = ChildProcess(popen)
    await nursery.start(_own_process, process, cgroup, status, partial(_hang_up, ours))
    return process


def _launcher_setup(parent_pid: int, join_cgroup: Callable[[], None] | None, death_signal: int | None) -> None:
    """Runs in the worker's launcher between fork and exec.

    A sandboxed launcher gets no parent-death signal here (see the module docstring).
    """
    if join_cgroup is not None:
        join_cgroup()
    if death_signal is not None and _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


class _SandboxStatus:
    """What bubblewrap reports on ``--json-status-fd``: the host pid of the sandbox's PID 1."""

    def __init__(self, fd: int) -> None:
        self._stream = trio.lowlevel.FdStream(fd)
        self.child_pid: int | None = None
        self.child_pidfd: int | None = None
        self.reported = trio.Event()  # child-pid known, or bwrap gone without one
        self._buffer = b""

    async def read(self) -> None:
        """Read until the child pid is reported or bwrap closes the fd; safe to call again
        after a cancellation (it resumes where it stopped)."""
        try:
            while not self.reported.is_set():
                chunk = await self._stream.receive_some(4096)
                if not chunk:
                    self.reported.set()
                    return
                *lines, self._buffer = (self._buffer + chunk).split(b"\n")
                for line in lines:
                    try:
                        info = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(info, dict) and isinstance(info.get("child-pid"), int):
                        self.child_pid = info["child-pid"]
                        try:
                            self.child_pidfd = os.pidfd_open(self.child_pid)  # pins it: no pid reuse
                        except OSError:
                            pass
                        self.reported.set()
                        return
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self.reported.set()

    def kill_sandbox(self) -> None:
        """SIGKILL the sandbox's PID 1, which ends every process of the sandbox."""
        if self.child_pidfd is not None:
            try:
                signal.pidfd_send_signal(self.child_pidfd, signal.SIGKILL)
            except OSError:
                pass

    def close(self) -> None:
        self._stream.close()
        if self.child_pidfd is not None:
            os.close(self.child_pidfd)
            self.child_pidfd = None


def _hang_up(sock: Any) -> None:
    """End the pool's side of a worker link (the worker exits at end-of-stream). A shutdown,
    not a close: the socket may be in use by a trio stream."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


async def _own_process(
    process: ChildProcess,
    cgroup: Any,
    status: _SandboxStatus | None,
    hang_up: Callable[[], None],
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """The owner task of one worker process: waits for its exit; stops it when cancelled.

    Stopping hangs up the worker's link and waits (up to a grace period) for it to leave by
    itself. A sandboxed worker still running then is killed through the sandbox's PID 1,
    after bubblewrap has reported it (never bwrap alone mid-set-up).
    """
    task_status.started()
    try:
        async with trio.open_nursery() as nursery:
            if status is not None:
                nursery.start_soon(status.read)
            await process.wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                hang_up()
                if status is None:
                    await process.stop(STOP_GRACE)
                else:
                    with trio.move_on_after(STOP_GRACE):
                        await process.wait()
                    if process.returncode is None:
                        with trio.move_on_after(STOP_GRACE):
                            await status.read()  # bwrap's set-up must be over before a kill
                        status.kill_sandbox()
                        process.kill()
                        await process.wait()
            if status is not None:
                status.close()
            if cgroup is not None:
                # The sandbox's processes die just after bwrap; remove the cgroup once they have.
                await cgroup.remove_when_empty()


def describe_exit(process: ChildProcess | None, *, sandboxed: bool) -> str:
    """``killed by signal SIGKILL`` / ``exited with code N`` for a worker that is gone."""
    if process is None or process.returncode is None:
        return "the worker exited"
    code = process.returncode
    # bwrap reports a command killed by signal N as exit status 128 + N.
    if sandboxed and code > 128:
        code = -(code - 128)
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"
