"""The tool-worker zygote: one process per sandbox that forks the pool's worker processes.

Starting a tool worker used to cost a ``bwrap`` and a fresh Python interpreter (~130 ms of
CPU) per worker. A zygote is started once per sandbox key (workspace and policy): it imports
trio and the tool code, then forks a worker whenever the pool asks for one. Each worker is
still its own process serving one call at a time (see :mod:`.tool_pool`).

Process side (``python -m pi_actors.actors._zygote NAME``, boot document on stdin:
``{"control": fd, "sandboxed": bool, "parent_pid": int, "idle": bool}``; ``idle``: a zygote
started ahead of need does its imports at the lowest CPU priority):

- The zygote never runs trio itself (a fork of a running event loop is unusable); it serves
  its *control socket* (a ``SOCK_SEQPACKET`` socket, one JSON message per packet) with a
  blocking ``poll`` loop, and answers ``{"op": "ready"}`` once its imports are done.
- ``{"op": "spawn", "id", "name", "config"}`` carries the worker's end of a fresh link as an
  ``SCM_RIGHTS`` fd. The zygote forks a worker that runs :func:`run_tool_worker` on that link
  under a fresh ``trio.run`` (with its normal hello handshake), and answers
  ``{"op": "started", "id", "pid"}`` or ``{"op": "failed", "id", "error"}``. When the worker
  has been reaped: ``{"op": "exited", "id", "returncode"}`` (negative: killed by a signal).
- ``{"op": "kill", "id"}``: SIGKILL that worker (its exit is reported as usual).
- At end-of-file on the control socket (the pool hung up or died) the zygote kills every
  worker, reaps them and exits (``os._exit``: no interpreter teardown). Workers exit at
  end-of-file on their own links.

Sandboxed, the zygote is PID 1 of the bubblewrap sandbox and keeps ``CAP_SYS_ADMIN`` and
``CAP_SETPCAP`` (in the sandbox's user namespace when not root; no other capability) for one
purpose: every worker gets a PID namespace and a mount namespace of its own, with its own
``/proc``, and is the init of that namespace — exactly what a worker had as the PID 1 of a
``bwrap`` of its own (a tool can see and signal only its own call's processes, cannot kill
the worker, and ``end_strays`` can kill everything a call left). The worker then drops every
capability (bounding, ambient, permitted, effective, inheritable), stays non-dumpable (as the
zygote is) and loads the seccomp filter (:mod:`pi_actors.coding.sandbox.seccomp`: no ptrace,
``process_vm_*``, ``pidfd_getfd``, keyring, bpf, mount or namespace calls for it and every
command it starts) before it reads a byte from the pool; a worker whose filter could not be
loaded refuses every call with the reason. A zygote that is not PID 1 of a sandbox refuses to
spawn sandboxed workers. Unsandboxed, workers are plain children with a parent-death signal (SIGTERM, on which they
kill their tool process groups), and the zygote dies with the pool (SIGKILL).

Pool side: :class:`Zygote` (messages over the control socket, one :class:`ForkedProcess`
per worker).
"""

from __future__ import annotations

import array
import ctypes
import errno
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from .._startup_gc import pause_for_startup, release

__all__ = ["Zygote", "ForkedProcess", "ZygoteGone"]

_MAX_MESSAGE = 65536
_CLONE_NEWNS = 0x00020000
_CLONE_NEWPID = 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_RDONLY = 2, 4, 8, 1
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_SLAVE = 32, 4096, 16384, 1 << 19
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NAME, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS = 1, 4, 15, 24, 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# What bubblewrap's --proc covers read-only (root may write there without any capability).
_PROC_COVERED = ("sys", "sysrq-trigger", "irq", "bus")


# -- process side ----------------------------------------------------------------------------


class _Libc:
    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)

    def call(self, what: str, name: str, *args: Any) -> int:
        result: int = getattr(self._libc, name)(*args)
        if result == -1:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")
        return result


def _confine(libc: _Libc, last_cap: int) -> None:
    """In a freshly forked sandboxed worker (PID 1 of its own PID namespace): a mount
    namespace with this namespace's /proc, a new session, then no capability at all."""
    libc.call("unshare(CLONE_NEWNS)", "unshare", _CLONE_NEWNS)
    libc.call("make / a slave mount", "mount", None, b"/", None, _MS_REC | _MS_SLAVE, None)
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    libc.call("mount /proc", "mount", b"proc", b"/proc", b"proc", flags, None)
    for name in _PROC_COVERED:
        path = f"/proc/{name}".encode()
        if not os.path.exists(path):
            continue
        libc.call(f"bind {path!r}", "mount", path, path, None, _MS_BIND | _MS_REC, None)
        libc.call(f"remount {path!r} read-only", "mount", None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags, None)
    os.setsid()
    libc.call("no_new_privs", "prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc.call("clear ambient capabilities", "prctl", _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(last_cap + 1):
        libc.call(f"drop capability {cap}", "prctl", _PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    libc.call("capset", "capset", header, (ctypes.c_uint32 * 6)())


def _become_worker(libc: _Libc, link: int, message: dict[str, Any], close: list[int], sandboxed: bool, last_cap: int, zygote: int) -> None:
    """The forked worker: never returns (``os._exit``)."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        name = str(message.get("name") or "tool-worker")
        libc.call("set the name", "prctl", _PR_SET_NAME, name.encode()[:15], 0, 0, 0)
        config = dict(message.get("config") or {})
        if sandboxed:
            _confine(libc, last_cap)
            libc.call("not dumpable", "prctl", _PR_SET_DUMPABLE, 0, 0, 0, 0)
            from ..coding.sandbox import SandboxUnavailable
            from ..coding.sandbox.seccomp import load_filter

            try:
                load_filter()
            except SandboxUnavailable as exc:
                config["refusal"] = f"Tool worker refused the call: the sandbox could not be set up: {exc}"
        else:
            libc.call("parent-death signal", "prctl", _PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != zygote:
                os._exit(1)
        import trio

        from .tool_worker import run_tool_worker

        async def main() -> None:
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(socket.socket(fileno=link)))
            await run_tool_worker({"pool": stream}, config)

        trio.run(main)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class _Server:
    """The zygote's loop: see the module docstring."""

    def __init__(self, control: socket.socket, sandboxed: bool) -> None:
        self.control = control
        self.sandboxed = sandboxed
        self.libc = _Libc()
        self.children: dict[int, int] = {}  # pid -> worker id
        # Sandboxed: this process's own PID namespace, to go back to after each worker's
        # (see _spawn).
        self.own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC) if sandboxed else -1
        self.last_cap = 40
        try:
            with open("/proc/sys/kernel/cap_last_cap") as handle:
                self.last_cap = int(handle.read())
        except (OSError, ValueError):
            pass
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.poller = select.poll()

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.control.send(json.dumps(message).encode())
        except OSError:
            pass  # the pool is gone; the loop sees the end-of-file next

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_w)
        self.poller.register(self.control, select.POLLIN)
        self.poller.register(self.wake_r, select.POLLIN)
        self.send({"op": "ready", "pid": os.getpid()})
        try:
            while True:
                ready = {fd for fd, _ in self.poller.poll()}
                if self.wake_r in ready:
                    self._drain_wakeups()
                    self._reap()
                if self.control.fileno() in ready:
                    try:
                        data, fds, _flags, _addr = socket.recv_fds(self.control, _MAX_MESSAGE, 4)
                    except InterruptedError:
                        continue
                    except OSError:
                        data, fds = b"", []
                    if not data:
                        for fd in fds:
                            os.close(fd)
                        return
                    self._handle(data, fds)
        finally:
            self._end_all()

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self.wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            ident = self.children.pop(pid, None)
            if ident is not None:
                self.send({"op": "exited", "id": ident, "returncode": os.waitstatus_to_exitcode(status)})

    def _handle(self, data: bytes, fds: list[int]) -> None:
        try:
            message = json.loads(data)
            op, ident = message["op"], message.get("id")
        except (ValueError, KeyError, TypeError, AttributeError):
            for fd in fds:
                os.close(fd)
            return
        if op == "hurry":
            return  # it woke the start-up up (see _preload_at_idle_priority); nothing else
        if op == "kill":
            pid = next((p for p, i in self.children.items() if i == ident), None)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)  # not reaped yet (by us): the pid is still its own
                except ProcessLookupError:
                    pass  # gone already (seen once in a benchmark run): never end the loop for it
            return
        if op != "spawn" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            self.send({"op": "failed", "id": ident, "error": f"bad request {op!r} with {len(fds)} fds"})
            return
        try:
            self._spawn(ident, fds[0], message)
        except OSError as exc:
            self.send({"op": "failed", "id": ident, "error": str(exc)})
        finally:
            os.close(fds[0])

    def _spawn(self, ident: int, link: int, message: dict[str, Any]) -> None:
        close = [self.control.fileno(), self.wake_r, self.wake_w]
        if self.sandboxed:
            if os.getpid() != 1:
                raise OSError(errno.EPERM, "the zygote is not the init of a sandbox: no sandboxed worker started")
            close.append(self.own_pid_ns)
            # unshare(CLONE_NEWPID) puts the *next* child in a new PID namespace, as its init;
            # setns back to our own namespace afterwards makes the next unshare possible
            # again. One fork per worker, by us: no intermediate process.
            self.libc.call("unshare(CLONE_NEWPID)", "unshare", _CLONE_NEWPID)
        zygote = os.getpid()
        try:
            pid = os.fork()
            if pid == 0:
                _become_worker(self.libc, link, message, close, self.sandboxed, self.last_cap, zygote)
            self.children[pid] = ident  # known (so reaped and killed) whatever happens next
            self.send({"op": "started", "id": ident, "pid": pid})
        finally:
            if self.sandboxed:  # (the parent: a worker never returns from _become_worker)
                # Should this fail, every later unshare fails too: spawns answer "failed".
                self.libc.call("return to the zygote's PID namespace", "setns", self.own_pid_ns, _CLONE_NEWPID)

    def _end_all(self) -> None:
        """Kill every worker and reap them all (blocking; the pool is gone)."""
        for pid in self.children:
            try:
                os.kill(pid, signal.SIGKILL if self.sandboxed else signal.SIGTERM)
            except OSError:
                pass
        deadline = 2.0
        while self.children:
            try:
                pid, _status = os.waitpid(-1, 0) if deadline <= 0 else _waitpid_timeout(deadline)
            except ChildProcessError:
                return
            if pid == 0:  # grace period over: no more mercy
                deadline = 0
                for other in self.children:
                    try:
                        os.kill(other, signal.SIGKILL)
                    except OSError:
                        pass
                continue
            self.children.pop(pid, None)


def _waitpid_timeout(timeout: float) -> tuple[int, int]:
    """``waitpid(-1)`` for up to ``timeout`` seconds (through a pidfd-free poll on SIGCHLD)."""
    import time

    end = time.monotonic() + timeout
    while True:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            return pid, status
        left = end - time.monotonic()
        if left <= 0:
            return 0, 0
        select.select([], [], [], min(left, 0.01))


def _preload() -> None:
    """Everything a worker imports, imported once here (fork shares it). Libraries are
    looked up without ``ldconfig`` (:mod:`pi_actors._libraries`)."""
    from .._libraries import without_ldconfig

    with without_ldconfig():
        _import_all()


def _import_all() -> None:
    import trio  # noqa: F401

    from ..coding import tools  # noqa: F401
    from ..coding.sandbox import init, limits, notes, seccomp  # noqa: F401 (notes: every sandboxed result)
    from ..coding.tools import bash, process, rg  # noqa: F401 (process: preloaded for the workers)
    from . import tool_worker  # noqa: F401

    bash._shell()  # found once, in the sandbox the workers run in
    rg.rg_path()
    try:
        seccomp.prepare()  # built once, loaded by each worker; a failure is each worker's to report
    except Exception:
        pass


def _warm_up() -> None:
    """Pay, once here, what each forked worker would otherwise pay on its first call: trio's
    one-time set-up of a run, and msgspec's analysis of the worker's message types (each
    worker would build those caches anew, in memory of its own). Main thread, after
    :func:`_preload`."""
    import msgspec
    import trio

    from ..protocol.pool import WORKER_RUN, ToolUpdate, WorkerResult, WorkerRunArgs

    async def nothing() -> None:
        await trio.lowlevel.checkpoint()

    trio.run(nothing)
    try:
        trio.run(_exercise_a_call)
    except Exception:
        pass  # a warm-up only: a worker that cannot run a call says so in its own result
    WORKER_RUN.decode_args(msgspec.to_builtins(WorkerRunArgs(tool_call_id="", name="bash", cwd="/", args={"command": ""})))
    content = [{"type": "text", "text": ""}]
    msgspec.to_builtins(msgspec.convert({"content": content, "details": None}, ToolUpdate))
    msgspec.to_builtins(msgspec.convert({"content": content, "details": None, "isError": False, "tmpWritten": False}, WorkerResult))


async def _exercise_a_call() -> None:
    """One ``bash`` call (``true``) through a worker's own code path — handshake, router,
    the tool, its result — over a socketpair, here in the zygote: what each forked worker
    then runs is already specialized by the interpreter and its caches are built, so its
    first call touches (and copies) fewer pages of the shared heap."""
    import trio

    from ..protocol.pool import WORKER, WORKER_RUN, WorkerRunArgs
    from ..runtime import Router, link_pair, open_method, open_peer
    from .tool_worker import _Worker

    ours, theirs = link_pair()
    client = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
    server = trio.SocketStream(trio.socket.from_stdlib_socket(theirs))
    args = WorkerRunArgs(tool_call_id="warm-up", name="bash", cwd="/", args={"command": "true"})
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                handler = Router.serving(_Worker(False, {}), WORKER)
                async with open_peer(server, side="server", role="tool-worker", name="warm-up", handler=handler) as peer:
                    await peer.closed_event.wait()

            nursery.start_soon(serve)
            async with open_peer(client, side="client", role="tool-pool", name="warm-up") as peer:
                async with open_method(peer, WORKER_RUN, args) as out:
                    async for _ in out:
                        pass
                    await out.result()
            nursery.cancel_scope.cancel()


def _preload_at_idle_priority(control: socket.socket) -> None:
    """:func:`_preload` in a thread of nice 19 (a thread's own nice value; the thread that
    forks keeps its own), so that a zygote started ahead of need takes only CPU time nobody
    else wants. If the pool speaks first (it needs a worker now), the main thread imports the
    rest itself at normal priority, alongside. Single-threaded again on return."""
    import threading

    failure: list[BaseException] = []
    done_r, done_w = os.pipe()

    def run() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except OSError:
            pass
        try:
            _preload()
        except BaseException as exc:
            failure.append(exc)
        finally:
            os.write(done_w, b".")

    thread = threading.Thread(target=run, name="preload", daemon=True)
    thread.start()
    while True:
        try:
            readable = select.select([done_r, control.fileno()], [], [])[0]
            break
        except InterruptedError:
            continue
    if done_r not in readable:
        _preload()
    thread.join()
    os.close(done_r)
    os.close(done_w)
    if failure:
        raise failure[0]


def main() -> None:
    # Start-up (the imports and the warm-up below) without the cyclic collector (334 -> 234
    # ms of CPU, measured; pi_actors._startup_gc): what it made is frozen at the end and the
    # collector turned back on, for the zygote and every worker it forks.
    pause_for_startup()
    boot = json.loads(sys.stdin.buffer.read())
    if not boot.get("sandboxed"):
        from ..runtime.child import set_parent_death_signal

        set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != boot.get("parent_pid"):
            os._exit(1)  # the pool died before the death signal was armed
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the root's to handle
    # Non-dumpable (inherited by every worker it forks): no process without CAP_SYS_PTRACE
    # may ptrace it or open its /proc/<pid>/mem, fd or environ.
    _Libc().call("not dumpable", "prctl", _PR_SET_DUMPABLE, 0, 0, 0, 0)
    control = socket.socket(fileno=boot["control"])
    if boot.get("idle"):
        _preload_at_idle_priority(control)
    else:
        _preload()
    _warm_up()
    # Frozen as start-up left it, without a collection first. A collection would cost 20-25
    # ms of CPU before the first worker can be forked, to free the few objects start-up
    # leaves in cycles, and each worker's own allocations would then fill the holes it left
    # in the shared heap, copying those pages (measured: 6 % more memory copied per worker).
    # Frozen, the shared heap is never walked (nor copied) by a worker's collections.
    release()
    _Server(control, bool(boot.get("sandboxed"))).serve()
    # Every worker is reaped and nothing is left to flush but the standard streams: end
    # without the interpreter's teardown, which would walk (and free) the whole preloaded
    # heap first — work on the path of every session's exit that holds a sandbox.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# -- pool side -------------------------------------------------------------------------------


class ZygoteGone(OSError):
    """The zygote process ended (or never got ready); ``str`` says how."""


class ForkedProcess:
    """A worker forked by a zygote, as the pool sees it (``pid`` is in the sandbox's PID
    namespace). ``returncode`` and ``exited`` are set once the zygote has reaped it, or once
    the zygote itself is gone (which takes its workers with it)."""

    def __init__(self, ident: int, pid: int) -> None:
        import trio

        self.ident = ident
        self.pid = pid
        self.returncode: int | None = None
        self.exited = trio.Event()

    def _set_exit(self, returncode: int | None) -> None:
        if not self.exited.is_set():
            self.returncode = returncode
            self.exited.set()


class Zygote:
    """The pool's end of one zygote's control socket.

    Run :meth:`serve` in a task for the zygote's life: it reads the zygote's messages, and
    when the socket ends it fails pending spawns with :class:`ZygoteGone`. The owner calls
    :meth:`ended_all` once the zygote process has been reaped, which marks every worker
    exited. :meth:`spawn` and :meth:`kill` may be called from any task.
    """

    def __init__(self, name: str, control: socket.socket, *, ready: Any = None) -> None:
        import trio

        self.name = name
        self._sock = trio.socket.from_stdlib_socket(control)
        self._send_lock = trio.Lock()
        self._next_id = 0
        self._pending: dict[int, Any] = {}  # id -> [Event, reply]
        self._workers: dict[int, ForkedProcess] = {}
        self.ready = ready if ready is not None else trio.Event()  # set by its "ready" message
        self.ended = trio.Event()
        self.end_reason = "the zygote exited"
        #: The sandbox's cgroup (:class:`pi_actors.coding.sandbox.limits.SandboxCgroup`), if any.
        self.cgroup: Any = None

    @property
    def live_workers(self) -> int:
        return len(self._workers)

    async def _send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        data = json.dumps(message).encode()
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
        import trio

        try:
            async with self._send_lock:
                await self._sock.sendmsg([data], ancillary)
        except (OSError, trio.ClosedResourceError):
            raise ZygoteGone(errno.EPIPE, self.end_reason) from None

    async def serve(self) -> None:
        import trio

        try:
            while True:
                try:
                    data = await self._sock.recv(_MAX_MESSAGE)
                except (OSError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    return
                message = json.loads(data)
                op = message.get("op")
                if op == "ready":
                    self.ready.set()
                elif op in ("started", "failed"):
                    waiter = self._pending.pop(message["id"], None)
                    if waiter is not None:
                        waiter[1] = message
                        waiter[0].set()
                elif op == "exited":
                    worker = self._workers.pop(message["id"], None)
                    if worker is not None:
                        worker._set_exit(message.get("returncode"))
        finally:
            self.ended.set()
            for waiter in self._pending.values():
                waiter[0].set()
            self._pending.clear()

    async def spawn(self, name: str, link: socket.socket, config: dict[str, Any]) -> ForkedProcess:
        """Fork a worker serving ``link`` (closed here). Raises :class:`ZygoteGone`."""
        import trio

        self._next_id += 1
        ident = self._next_id
        waiter: list[Any] = [trio.Event(), None]
        self._pending[ident] = waiter
        try:
            if self.ended.is_set():
                raise ZygoteGone(errno.EPIPE, self.end_reason)
            try:
                await self._send({"op": "spawn", "id": ident, "name": name, "config": config}, [link.fileno()])
            finally:
                link.close()
            # Not cancellable: a worker forked for us must be known, so that it is reaped.
            with trio.CancelScope(shield=True):
                await waiter[0].wait()
        finally:
            self._pending.pop(ident, None)
        reply = waiter[1]
        if reply is None:
            raise ZygoteGone(errno.EPIPE, self.end_reason)
        if reply["op"] == "failed":
            raise OSError(errno.EIO, f"the zygote could not fork a worker: {reply.get('error')}")
        worker = ForkedProcess(ident, int(reply["pid"]))
        self._workers[ident] = worker
        return worker

    async def kill(self, worker: ForkedProcess) -> None:
        """SIGKILL ``worker`` (through the zygote, which owns it); no-op if gone."""
        if worker.exited.is_set() or self.ended.is_set():
            return
        try:
            await self._send({"op": "kill", "id": worker.ident})
        except ZygoteGone:
            pass

    async def hurry_when(self, needed: Any) -> None:
        """Once ``needed`` is set, tell a zygote still importing at idle priority to go on
        at normal priority (any packet does; this one is otherwise ignored)."""
        await needed.wait()
        if not self.ready.is_set():
            try:
                await self._send({"op": "hurry"})
            except ZygoteGone:
                pass

    def ended_all(self, reason: str, returncode: int | None) -> None:
        """The zygote process is gone, and so is every worker it forked (``returncode``:
        how they ended, when known)."""
        self.end_reason = reason
        for worker in self._workers.values():
            worker._set_exit(returncode)
        self._workers.clear()


if __name__ == "__main__":
    main()
