"""Starting a tool-worker zygote, inside its sandbox, and owning it until it exits.

The sandbox itself — the policy, the ``bwrap`` command line, the environment, the cgroup
limits and the seccomp filter — is defined in :mod:`pi_actors.coding.sandbox`; this module,
in the actors layer, launches and owns the process (the coding layer knows nothing of
processes or of the runtime).

:func:`launch_zygote` starts ``python -I -m pi_actors.actors._zygote`` in ``/`` — wrapped in
``bwrap`` (see :mod:`pi_actors.coding.sandbox.bwrap`) when the policy has a sandbox — hands it its boot document and
its end of the control socket, and starts an owner task in the given nursery. The owner waits for the
exit; when cancelled it *hangs up* the control socket (the zygote kills its workers and exits
at end-of-file) and gives it a grace period before killing it.

The zygote dies with the pool. Unsandboxed, through its parent-death signal (SIGKILL).
Sandboxed, through end-of-file on the control socket, which the kernel delivers when the pool
dies however it dies: ``bwrap`` gets no parent-death signal, neither from us nor its own
``--die-with-parent``. That is deliberate. Bubblewrap has a start-up race: its namespace child
waits on an eventfd for the outer ``bwrap`` before going on, so an outer ``bwrap`` killed
during set-up leaves that child blocked for ever (a stray ``bwrap`` with NSpid 1, no children,
re-parented to init). Without a parent-death signal a dying pool never kills ``bwrap``
mid-set-up: the sandbox finishes starting, the zygote finds its control socket closed, exits,
and the whole sandbox with it.

Terminal signals: for the same reason the sandboxed launcher runs in a session (and process
group) of its own. Ctrl-C (SIGINT) and a terminal's hang-up (SIGHUP, when a terminal window
or tmux pane closes) go to the terminal's whole foreground process group — the CLI and its
actors, which ignore or handle them — and used to reach ``bwrap`` too: one that got such a
signal mid-set-up died before releasing its namespace child, which was left blocked on its
eventfd for ever (found so: a ``bwrap`` with NSpid 1 in ``eventfd_read``, re-parented to
init, its stdout on a deleted pseudo-terminal, after a TUI test's pane had closed).

For the same reason a forced stop never kills ``bwrap`` alone (:func:`_kill_bwrap_tree`): it
SIGKILLs every child ``bwrap`` has (through pidfds: they cannot be reaped, hence their pids not
reused, while ``bwrap`` lives), again at each look until ``bwrap`` — whose child's death ends
it — has reaped it and exited; ``bwrap`` itself is SIGKILLed only if, past a grace, it has no
child and is not inside a kernel wait such as ``clone()``. (Killing ``bwrap`` right away left
its dead child to be re-parented to init, or to a subreaper above us; stopping it with
SIGSTOP first left it stopped for ever when the pool died before letting it go on.)

The launcher joins the sandbox's cgroup (:mod:`pi_actors.coding.sandbox.limits`: memory where a writable hierarchy
has that controller, pids when running as root) between fork and exec; the returned process's
``cgroup`` attribute is that :class:`~pi_actors.coding.sandbox.limits.SandboxCgroup` (None without one), which the
owner removes once its last process has exited.
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

from ..coding.sandbox import SandboxPolicy
from ..runtime import ChildProcess
from ..runtime._spawn import ISOLATED, NEUTRAL_CWD
from ..runtime.child import PR_SET_PDEATHSIG

__all__ = ["launch_zygote", "describe_exit", "ZYGOTE_MODULE"]

STOP_GRACE = 2.0
ZYGOTE_MODULE = f"{__package__}._zygote"

# Resolved in the parent: nothing is loaded between fork and exec.
_prctl = None
if sys.platform.startswith("linux"):
    import ctypes

    _prctl = ctypes.CDLL(None, use_errno=True).prctl


async def launch_zygote(
    nursery: trio.Nursery,
    *,
    name: str,
    policy: SandboxPolicy,
    control: socket.socket,
    ours: socket.socket,
    idle: bool = False,
    ready: trio.Event | None = None,
) -> ChildProcess:
    """Start one zygote process (inside the sandbox if ``policy`` has one), owned by
    ``nursery``. ``control`` is the zygote's end of the control socket (closed here), ``ours``
    the caller's end (hung up to stop it); ``idle``: it is started ahead of need (it imports
    at idle priority); ``ready``: set once it serves its control socket — until then a stop
    kills it at once (it could not hear the hang-up). Raises SandboxUnavailable or OSError."""
    from ..coding.sandbox.env import sandbox_environment, unsandboxed_environment

    # Isolated, in a neutral directory: nothing in the workspace is ever imported by the
    # zygote (which keeps capabilities inside the sandbox) or by a worker.
    command = [sys.executable, *ISOLATED, "-m", ZYGOTE_MODULE, name]
    cgroup = None
    if policy.sandboxed:
        from ..coding.sandbox.bwrap import build_argv, check_bwrap
        from ..coding.sandbox.limits import SandboxCgroup, needs_pids_cgroup
        from ..coding.sandbox.seccomp import check_available

        bwrap = await trio.to_thread.run_sync(check_bwrap, policy)
        await trio.to_thread.run_sync(check_available)
        argv = build_argv(policy, command, bwrap=bwrap)
        cgroup = SandboxCgroup.create(policy.limits, need_pids=needs_pids_cgroup())
        env = sandbox_environment(os.environ)
        launcher_death = None
    else:
        argv, env = command, unsandboxed_environment(os.environ)
        launcher_death = signal.SIGKILL
    fd = control.fileno()
    boot = json.dumps({"control": fd, "sandboxed": policy.sandboxed, "parent_pid": os.getpid(), "idle": idle}).encode()
    try:
        # A blocking fork+exec, on purpose: ``preexec_fn`` joins the cgroup between the two,
        # and the boot document must be written before anything can cancel us.
        popen = subprocess.Popen(  # noqa: ASYNC220
            argv,
            pass_fds=(fd,),
            env=env,
            stdin=subprocess.PIPE,
            close_fds=True,
            cwd=NEUTRAL_CWD,
            # A sandbox's launcher in a session of its own: see "Terminal signals" above.
            start_new_session=policy.sandboxed,
            preexec_fn=partial(_launcher_setup, os.getpid(), cgroup.join if cgroup else None, launcher_death),
        )
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        raise
    finally:
        control.close()
    # The boot document fits the pipe buffer: written at once, it cannot be cut off by a
    # cancellation (a zygote must never start without it).
    assert popen.stdin is not None
    try:
        os.write(popen.stdin.fileno(), boot)
    except OSError:
        pass  # it died at once; its exit status tells why
    popen.stdin.close()
    process = ChildProcess(popen)
    process.cgroup = cgroup  # type: ignore[attr-defined]
    await nursery.start(_own_process, process, cgroup, policy.sandboxed, partial(_hang_up, ours), ready)
    return process


def _launcher_setup(parent_pid: int, join_cgroup: Callable[[], None] | None, death_signal: int | None) -> None:
    """Runs in the launcher between fork and exec. A sandboxed launcher (``bwrap``) gets no
    parent-death signal (see the module docstring)."""
    if join_cgroup is not None:
        join_cgroup()
    if death_signal is not None and _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def _hang_up(sock: Any) -> None:
    """End the pool's side of the control socket (the zygote exits at end-of-file). A
    shutdown, not a close: the socket may be in use by a trio task."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        return data[data.rindex(b")") + 2 :].split()[0].decode()
    except (OSError, ValueError, IndexError):
        return "X"


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                out += [int(word) for word in handle.read().split()]
        except (OSError, ValueError):
            continue
    return out


async def _kill_bwrap_tree(process: ChildProcess) -> None:
    """SIGKILL every child of ``bwrap`` until ``bwrap`` exits by itself, never ``bwrap``
    alone while it may have one (module docstring).

    ``bwrap`` exits once its child (the zygote, PID 1 of the sandbox: its death ends every
    process of the namespace) is dead, and reaps it. A child that ``clone()`` is still making
    shows up at a later look and is killed then. No SIGSTOP: a pool killed between stopping
    ``bwrap`` and letting it go on left it stopped for ever with its child (seen after a
    full suite run). ``bwrap`` is killed itself only when, past the grace, it has no child
    and is not waiting in the kernel (state D: e.g. inside ``clone()``, which on a busy
    machine waits for the namespaces being torn down; killed there it would strand the
    child being made, blocked for ever on its eventfd)."""
    give_up = trio.current_time() + STOP_GRACE
    while process.returncode is None:
        children = _children(process.pid)
        for child in children:
            try:
                pidfd = os.pidfd_open(child)
            except OSError:
                continue
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(pidfd)
        if not children and trio.current_time() > give_up and _state(process.pid) not in ("D", "Z", "X"):
            process.kill()
            break
        # (The kernel announces no "new child" event: look again shortly, until bwrap exits.)
        with trio.move_on_after(0.01):
            await process.wait()
    await process.wait()


async def _own_process(
    process: ChildProcess,
    cgroup: Any,
    sandboxed: bool,
    hang_up: Callable[[], None],
    ready: trio.Event | None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """The owner task of one zygote process: waits for its exit; stops it when cancelled.

    Stopping hangs up the control socket and waits (up to a grace period, none if it is not
    ``ready`` yet: it has no worker) for the zygote to leave by itself (it kills its workers
    first); then it is killed — a sandboxed one with its whole ``bwrap`` tree.
    """
    task_status.started()
    try:
        await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                hang_up()
                with trio.move_on_after(STOP_GRACE if ready is None or ready.is_set() else 0):
                    await process.wait()
                if process.returncode is None:
                    if sandboxed:
                        await _kill_bwrap_tree(process)
                    else:
                        process.kill()  # its workers get their parent-death signal
                        await process.wait()
            if cgroup is not None:
                # The sandbox's processes die just after bwrap; remove the cgroup once they have.
                await cgroup.remove_when_empty()


def describe_exit(process: Any, *, sandboxed: bool) -> str:
    """``killed by signal SIGKILL`` / ``exited with code N`` for a process that is gone
    (``sandboxed``: the exit status of ``bwrap``, which reports a command killed by signal
    N as 128 + N)."""
    if process is None or process.returncode is None:
        return "the worker exited"
    code = process.returncode
    if sandboxed and code > 128:
        code = -(code - 128)
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"
