"""The tool executor pool actor: sandboxed worker processes, one call per worker at a time.

It serves :data:`pi_actors.protocol.pool.POOL` to the coordinator (and, in ``pi-actors
tool-host``, to the host's link), and calls :data:`~pi_actors.protocol.pool.WORKER` on its
workers:

- ``run_tool {toolCallId, name, args, cwd}`` → chunks are partial results, the
  result is ``{content, details, isError}``. Tool failures, a sandbox that cannot be set up
  and a worker that crashed are all results with ``isError: true`` and a clear text; a
  ``cancel`` ends the call with ``Command aborted`` (bash: after the output so far) /
  ``Operation aborted``.
- ``warm {}`` starts the warm workers if they are not started yet.
- ``expect_calls {calls: N, cwd}``: the reply the model is streaming holds N tool calls so far.

Workers: ``warm`` are started ahead (when ``warm`` is called, or at once without
``warm_on_request``); for a reply being streamed, as many as it holds calls so far
(``expect_calls``: they are forked while the model still answers, not after the calls
arrive); more on demand up to ``max_workers``; beyond that a call waits for a free worker.
A worker serves one call at a time. Workers are forked by a *zygote* (see
:mod:`._zygote`): one per sandbox key — under a sandbox policy the key is the workspace (the
call's ``cwd``). The zygote of the pool's own workspace starts with the pool (its imports at
idle priority until a call needs it, :meth:`ToolPool.prepare`), others on first need. A
zygote runs inside bubblewrap (see
:mod:`pi_actors.coding.sandbox`) as the init of the sandbox, joining the sandbox's cgroup
(memory where possible, pids when running as root); each worker it forks is the init of PID and
mount namespaces of its own, non-dumpable, with no capability and under a seccomp filter. A worker that dies mid-call gives that call an error result naming the
signal or exit status, and is replaced; so does a zygote that dies (with all its workers): the
next worker needed starts a new one.

Sandbox notes: a sandboxed call's result says when a process of it was killed by the
sandbox's memory limit (the zygote's cgroup counted an OOM kill during the call), and the
first ``bash`` result of the pool (the session) whose command wrote to the private ``/tmp``
says that ``/tmp`` is discarded (see :mod:`pi_actors.coding.sandbox.notes`).

Ordering: every call runs at once, in its own worker. Calls that change the same file are
ordered before they get here, by the agent loop (``AgentTool.exclusive_key``: the coordinator
keys ``write``/``edit`` by real path, so one reply's calls on one file run one after another,
in call order) — one mechanism, in one place.

Ownership: every zygote process is owned by a task of the pool's nursery that waits for its
exit, and every worker by a task that waits until the zygote has reaped it. When the pool ends
it hangs up every worker link and every zygote's control socket; a zygote kills what is left
of its workers and exits, taking its whole sandbox with it; a zygote that does not is killed
with its ``bwrap`` (:mod:`pi_actors.actors._sandboxed`). A pool that dies abruptly closes
the control sockets all the same: the zygotes and their workers follow it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import msgspec
import trio

from ..ai.types import TextContent
from ..coding.sandbox import SandboxPolicy, SandboxUnavailable
from ..protocol.config import ToolPoolConfig, read_part
from ..protocol.pool import (
    EXPECT_CALLS,
    POOL,
    RUN_TOOL,
    WARM,
    WORKER_RUN,
    ExpectCallsArgs,
    RunToolArgs,
    ToolResult,
    ToolUpdate,
    WorkerResult,
    WorkerRunArgs,
)
from ..runtime import (
    ChildProcess,
    ConnectionLost,
    Empty,
    Peer,
    RemoteError,
    Router,
    Trigger,
    TypedCall,
    implements,
    link_pair,
    open_method,
    open_peer,
)
from ..runtime.protocol import SIBLING_HANDSHAKE_TIMEOUT
from ._sandboxed import describe_exit, launch_zygote
from ._serve_link import serve_coordinator_link
from ._zygote import ForkedProcess, Zygote

T = TypeVar("T")

__all__ = ["run_tool_pool", "ToolPool"]

_STOP_GRACE = 2.0  # seconds a worker gets to leave after its link closed
_TMP_PREFIX = "pi-actors-tmp-"  # + a pool's pid: the host directories older versions used as /tmp


def sweep_stale_private_tmps() -> None:
    """Delete host directories that older versions used as the sandboxes' /tmp (today /tmp
    is a tmpfs inside the sandbox) whose pool process is gone."""
    base = tempfile.gettempdir()
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        owner = name[len(_TMP_PREFIX) :].split("-", 1)[0]
        if not name.startswith(_TMP_PREFIX) or not owner.isdigit() or int(owner) == os.getpid():
            continue
        path = os.path.join(base, name)
        try:
            if os.stat(path).st_uid != os.getuid():
                continue
            os.kill(int(owner), 0)
            continue  # its pool still runs
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


class _Worker:
    def __init__(self, index: int, key: str | None) -> None:
        self.index = index
        self.key = key  # the workspace it is sandboxed to (None: unsandboxed)
        self.peer: Peer | None = None
        self.process: ForkedProcess | None = None
        self.zygote: Zygote | None = None
        self.exited = trio.Event()


class _ZygoteStart:
    def __init__(self) -> None:
        self.done = trio.Event()
        self.needed = trio.Event()  # a call waits for it
        self.error: BaseException | None = None


async def _set_then_cancel(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


class ToolPool:
    def __init__(
        self, nursery: trio.Nursery, *, max_workers: int = 32, warm: int = 2, policy: SandboxPolicy | None = None
    ) -> None:
        self._nursery = nursery
        self.max_workers = max(1, max_workers)
        self.warm = min(warm, self.max_workers)
        self.policy = policy or SandboxPolicy(mode="off")
        self._idle: list[_Worker] = []
        self._count = 0
        self._changed = trio.Event()
        self._next_index = 0
        self._warm_requested = False
        self._warming = 0  # warm workers starting; they will land in _idle
        self._waiting = 0  # calls inside acquire()
        self._tmp_notice_given = False  # see _sandbox_notes
        self._closing = False
        self._zygotes: dict[str | None, Zygote] = {}
        self._zygote_starts: dict[str | None, _ZygoteStart] = {}
        self._zygote_index = 0
        #: Workers started so far (diagnostics: a replaced worker shows as a new index).
        self.started = 0

    # -- workers -----------------------------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _key(self, cwd: str | None) -> str | None:
        if not self.policy.sandboxed:
            return None
        # Never this process's own working directory ("/"): a call always names its cwd.
        where = cwd or self.policy.workspace
        if not where:
            raise SandboxUnavailable("no workspace was given for the sandbox")
        return os.path.realpath(where)

    async def start_warm(self) -> None:
        key = self._key(self.policy.workspace or None)
        for _ in range(self.warm):
            self._start_idle(key)

    def expect_calls(self, calls: int, cwd: str | None) -> int:
        """``calls`` tool calls for ``cwd`` (None: the pool's workspace) are on their way (a
        reply being streamed holds that many so far): start workers until that many are idle
        or starting for its sandbox, within ``max_workers``, so that they are forked while
        the model still answers. Returns how many were started; none when the sandbox has
        no workspace (the calls will report it)."""
        if self._closing or (self.policy.sandboxed and cwd and not os.path.isdir(cwd)):
            return 0  # ending; or the calls will be refused (serve_run_tool)
        try:
            key = self._key(cwd or self.policy.workspace or None)
        except SandboxUnavailable:
            return 0
        ready = sum(1 for worker in self._idle if worker.key == key) + self._warming
        started = max(0, min(calls - ready, self.max_workers - self._count))
        for _ in range(started):
            self._start_idle(key)
        return started

    async def wait_idle(self, count: int, cwd: str | None = None) -> None:
        """Return once ``count`` workers for ``cwd`` (None: the pool's workspace) are idle."""
        key = self._key(cwd or self.policy.workspace or None)
        while sum(1 for worker in self._idle if worker.key == key) < count:
            await self._changed.wait()

    def _start_idle(self, key: str | None) -> None:
        """Start one idle worker for ``key`` in the background (counted at once, so that a
        call or a second request arriving meanwhile sees it as starting)."""
        self._count += 1  # _run_worker gives it back when the worker ends (or fails to start)
        self._warming += 1
        self._nursery.start_soon(self._spawn_idle, key)

    async def _spawn_idle(self, key: str | None) -> None:
        """The body of :meth:`_start_idle`."""
        try:
            worker = await self._nursery.start(self._run_worker, key)
        except (SandboxUnavailable, OSError):
            return  # the calls will report it
        finally:
            self._warming -= 1
        self._idle.append(worker)
        self._notify()

    def _policy_for(self, key: str | None) -> SandboxPolicy:
        return self.policy.for_workspace(key) if key else self.policy

    async def prepare(self) -> None:
        """Start the zygote of the pool's workspace ahead of need (its imports run at idle
        priority, so the other actors' start-up does not wait for it). A failure is
        reported by the calls."""
        try:
            await self._zygote_for(self._key(self.policy.workspace or None), idle=True)
        except (SandboxUnavailable, OSError):
            pass

    async def _zygote_for(self, key: str | None, *, idle: bool = False) -> Zygote:
        """The running zygote for ``key``, started if there is none (once, however many
        callers ask at the same time; all of them get its start-up failure)."""
        while True:
            zygote = self._zygotes.get(key)
            if zygote is not None and not zygote.ended.is_set():
                return zygote
            start = self._zygote_starts.get(key)
            if start is None:
                break
            start.needed.set()  # started ahead of need at idle priority: it is needed now
            await start.done.wait()
            if start.error is not None:
                raise type(start.error)(*start.error.args)
        start = _ZygoteStart()
        self._zygote_starts[key] = start
        try:
            started: Zygote = await self._nursery.start(self._run_zygote, key, idle, start.needed)
            self._zygotes[key] = started
            return started
        except (SandboxUnavailable, OSError) as exc:
            start.error = exc
            raise
        finally:
            del self._zygote_starts[key]
            start.done.set()

    async def _run_zygote(
        self, key: str | None, idle: bool, needed: trio.Event, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Owns one zygote process and its control socket for the zygote's whole life.
        ``needed`` is set when a call waits for an ``idle`` one (which is then told so)."""
        name = f"tool-zygote-{self._zygote_index}"
        self._zygote_index += 1
        sandboxed = self.policy.sandboxed
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        zygote: Zygote | None = None
        process: ChildProcess | None = None
        ready = trio.Event()
        try:
            async with _ungrouped(SandboxUnavailable, OSError), trio.open_nursery() as n:
                process = await launch_zygote(
                    n,
                    name=name,
                    policy=self._policy_for(key),
                    control=theirs,
                    ours=ours,
                    idle=idle,
                    ready=ready,
                )
                zygote = Zygote(name, ours, ready=ready)
                zygote.cgroup = getattr(process, "cgroup", None)
                n.start_soon(zygote.serve)
                if idle:
                    n.start_soon(zygote.hurry_when, needed)
                async with trio.open_nursery() as first:
                    for event in (zygote.ready, zygote.ended):
                        first.start_soon(_set_then_cancel, event, first.cancel_scope)
                if not zygote.ready.is_set():
                    # It died before it was ready (bwrap refused a mount, for instance; its
                    # own message went to stderr): say how it ended.
                    with trio.move_on_after(_STOP_GRACE):
                        await process.exited.wait()
                    raise OSError(f"the sandbox {describe_exit(process, sandboxed=sandboxed)} while starting")
                task_status.started(zygote)
                await zygote.ended.wait()
                with trio.move_on_after(_STOP_GRACE):
                    await process.exited.wait()
                n.cancel_scope.cancel()  # the owner task stops the process if still running
        finally:
            theirs.close()
            if zygote is not None:
                status = describe_exit(process, sandboxed=sandboxed)
                zygote.ended_all(f"the sandbox {status}", -signal.SIGKILL if sandboxed else None)
            ours.close()
            if zygote is not None and self._zygotes.get(key) is zygote:
                del self._zygotes[key]

    async def _run_worker(self, key: str | None, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Owns one worker process (forked by the zygote for ``key``) and its connection for
        the worker's whole life."""
        worker = _Worker(self._next_index, key)
        self._next_index += 1
        name = f"tool-worker-{worker.index}"
        crashed = False
        try:
            zygote = await self._zygote_for(key)
            ours, theirs = link_pair()
            worker.zygote = zygote
            config: dict[str, Any] = {"sandboxed": key is not None}
            if key is not None:
                config.update(limits=self.policy.limits.to_config(), mode=self.policy.mode, workspace=key)
            try:
                process = worker.process = await zygote.spawn(name, theirs, config)
            except BaseException:
                ours.close()
                theirs.close()
                raise
            self.started += 1
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
            try:
                try:
                    async with open_peer(stream, side="client", role="tool-pool", name=name, handshake_timeout=SIBLING_HANDSHAKE_TIMEOUT) as peer:
                        worker.peer = peer
                        task_status.started(worker)
                        await peer.closed_event.wait()
                except ConnectionLost:
                    if worker.peer is not None:
                        raise
                    # It died before the handshake: say how it ended.
                    with trio.move_on_after(_STOP_GRACE):
                        await process.exited.wait()
                    raise OSError(f"the worker {describe_exit(process, sandboxed=False)} while starting") from None
            finally:
                # Also when cancelled mid-handshake: the worker exits at end-of-stream. Then
                # make sure the process is gone too (the zygote reaps it and says so).
                await trio.aclose_forcefully(stream)
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(_STOP_GRACE):
                        await process.exited.wait()
                    await zygote.kill(process)
                    await process.exited.wait()
            crashed = not self._closing
        finally:
            worker.exited.set()
            if worker in self._idle:
                self._idle.remove(worker)
            self._count -= 1
            self._notify()
            if crashed and self._warm_requested and self._count + self._warming < self.warm:
                self._start_idle(key)  # replace it

    async def acquire(self, key: str | None) -> _Worker:
        """A live idle worker for ``key``: an idle one, one that is warming up (when there are
        at least as many warming as callers waiting), or a new one up to the limit (retiring
        an idle worker of another workspace if the pool is full). Raises SandboxUnavailable
        or OSError when no worker can be started."""
        self._waiting += 1
        try:
            while True:
                worker = self._take_idle(key)
                if worker is not None:
                    return worker
                if self._warming < self._waiting:
                    if self._count < self.max_workers:
                        self._count += 1  # given back by _run_worker
                        started: _Worker = await self._nursery.start(self._run_worker, key)
                        return started
                    other = next((w for w in self._idle if w.key != key), None)
                    if other is not None:
                        self._idle.remove(other)
                        await self._retire(other)
                        continue
                await self._changed.wait()
        finally:
            self._waiting -= 1

    def _take_idle(self, key: str | None) -> _Worker | None:
        for worker in reversed(self._idle):
            if worker.key == key:
                self._idle.remove(worker)
                if worker.peer is not None and not worker.peer.closed_event.is_set():
                    return worker
                return self._take_idle(key)
        return None

    async def _retire(self, worker: _Worker) -> None:
        if worker.peer is not None:
            await worker.peer.aclose()
        await worker.exited.wait()

    def release(self, worker: _Worker) -> None:
        if worker.peer is not None and not worker.peer.closed_event.is_set():
            self._idle.append(worker)
        self._notify()

    def request_warm(self) -> None:
        """Start the warm workers (once), in the background of the pool's nursery."""
        if not self._warm_requested:
            self._warm_requested = True
            if self.warm and (self.policy.workspace or not self.policy.sandboxed):
                self._nursery.start_soon(self.start_warm)

    def close(self) -> None:
        """The pool is ending: workers that go away now did not crash."""
        self._closing = True

    # -- calls -------------------------------------------------------------------------------

    @implements(WARM)
    async def serve_warm(self, args: Empty, call: TypedCall[Empty, None]) -> None:
        """``warm``: start the warm workers (once)."""
        self.request_warm()

    @implements(EXPECT_CALLS)
    async def serve_expect_calls(self, args: ExpectCallsArgs, call: TypedCall[ExpectCallsArgs, None]) -> None:
        """``expect_calls``: workers for the calls of the reply being streamed (:meth:`expect_calls`)."""
        self.expect_calls(args.calls, args.cwd or None)

    @implements(RUN_TOOL)
    async def serve_run_tool(self, args: RunToolArgs, call: TypedCall[RunToolArgs, ToolUpdate]) -> ToolResult:
        """``run_tool``: wait for a worker and run the call there.
        Every failure to run is a result (see the module docstring)."""
        name, cwd = args.name, args.cwd
        aborted = _error_result("Command aborted" if name == "bash" else "Operation aborted")
        if self.policy.sandboxed and not os.path.isdir(cwd):
            return _error_result(f"Tool {name} was not run: the working directory {cwd} does not exist")
        try:
            key = self._key(cwd)
            # An idle worker is taken at once (what acquire does first), without the task
            # that watches for a cancel while a call waits for its worker.
            worker = self._take_idle(key) or await _unless_cancelled(call.cancel_requested, self.acquire(key))
        except SandboxUnavailable as exc:
            return _error_result(f"Tool {name} was not run: the sandbox could not be set up: {exc}")
        except OSError as exc:
            return _error_result(f"Tool {name} was not run: no tool worker could be started: {exc}")
        if worker is None:
            return aborted
        try:
            return await self._run_on(worker, call, args)
        finally:
            self.release(worker)

    async def _run_on(self, worker: _Worker, call: TypedCall[RunToolArgs, ToolUpdate], args: RunToolArgs) -> ToolResult:
        assert worker.peer is not None
        cgroup = getattr(worker.zygote, "cgroup", None)
        kills = cgroup.oom_kills() if cgroup is not None else 0
        watch_tmp = worker.key is not None and args.name == "bash" and not self._tmp_notice_given
        run = WorkerRunArgs(
            tool_call_id=args.tool_call_id, name=args.name, cwd=args.cwd, args=args.args,
            session_id=args.session_id, watch_tmp=watch_tmp, auto_resize_images=args.auto_resize_images,
            shell_path=args.shell_path, shell_command_prefix=args.shell_command_prefix, updates=args.updates,
        )  # fmt: skip
        try:
            async with open_method(worker.peer, WORKER_RUN, run) as out:
                async with out.raw.cancel_when(call.cancel_requested):
                    async for partial_result in out:
                        await call.send(partial_result)
                result = await out.result()
            return self._sandbox_notes(result, worker, cgroup, kills)
        except ConnectionLost:
            await worker.exited.wait()
            status = describe_exit(worker.process, sandboxed=False)
            return _error_result(f"Tool worker crashed while running {args.name}: {status}")
        except RemoteError as exc:
            if exc.code == "cancelled":
                return _error_result("Command aborted" if args.name == "bash" else "Operation aborted")
            raise

    def _sandbox_notes(self, result: WorkerResult, worker: _Worker, cgroup: Any, kills: int) -> ToolResult:
        """The worker's result as the pool answers it, with the pool's notes on a sandboxed
        worker's: a process killed by the sandbox's memory limit during the call, and (once per
        pool, i.e. per session) where writes to ``/tmp`` go, the first time a command writes
        there."""
        plain = ToolResult(content=result.content, details=result.details, is_error=result.is_error)
        if worker.key is None:
            return plain
        from ..coding.sandbox.notes import append_note, oom_note, tmp_notice

        notes: list[str] = []
        if result.tmp_written and not self._tmp_notice_given:
            self._tmp_notice_given = True
            notes.append(tmp_notice(worker.key, self.policy.mode))
        if cgroup is not None and cgroup.memory_limit and cgroup.oom_kills() > kills:
            notes.append(oom_note(cgroup.memory_limit))
        if not notes:
            return plain
        out = msgspec.to_builtins(plain)
        for note in notes:
            out = append_note(out, note)
        return msgspec.convert(out, ToolResult)


@asynccontextmanager
async def _ungrouped(*kinds: type[BaseException]) -> AsyncIterator[None]:
    """Re-raise a lone exception of ``kinds`` out of a nursery's exception group, bare."""
    try:
        yield
    except BaseExceptionGroup as group:
        matched, rest = group.split(kinds)
        if matched is not None and rest is None:
            leaf: BaseException = matched
            while isinstance(leaf, BaseExceptionGroup):
                leaf = leaf.exceptions[0]
            raise leaf from None
        raise


async def _unless_cancelled(cancel_requested: Trigger, work: Awaitable[T]) -> T | None:
    """``await work``, or None as soon as ``cancel_requested`` is set (the caller asked to
    cancel)."""
    result = None
    async with _ungrouped(Exception), trio.open_nursery() as nursery:

        async def watch() -> None:
            await cancel_requested.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        try:
            result = await work
        except BaseException:
            nursery.cancel_scope.cancel()
            raise
        nursery.cancel_scope.cancel()
    return result


def _error_result(text: str) -> ToolResult:
    return ToolResult(content=[TextContent(text=text)], details=None, is_error=True)


async def run_tool_pool(links: dict[str, trio.SocketStream], config: Any) -> None:
    """Actor entry: serve the coordinator link; own every worker process.

    ``config``: a ``protocol.config.ToolPoolConfig`` (or its dict form): ``max_workers``,
    ``warm``, ``warm_on_request``, ``sandbox`` (absent: the platform default policy).
    """
    part = read_part(config, ToolPoolConfig)
    policy = SandboxPolicy.from_config(None if part.sandbox is None else msgspec.to_builtins(part.sandbox))
    if not policy.sandboxed:
        print("pi-actors: tools run without a sandbox (--sandbox off)", file=sys.stderr, flush=True)
    elif os.getuid() == 0:
        from ..coding.sandbox.limits import sweep_stale_cgroups

        sweep_stale_cgroups()
    if policy.sandboxed:
        sweep_stale_private_tmps()
    async with trio.open_nursery() as nursery:
        pool = ToolPool(nursery, max_workers=part.max_workers, warm=part.warm, policy=policy)
        try:
            if not part.warm_on_request:
                pool.request_warm()
            elif policy.workspace or not policy.sandboxed:
                nursery.start_soon(pool.prepare)
            await serve_coordinator_link(
                links["coordinator"], role="tool-pool", handler=Router.serving(pool, POOL), standby=part.standby
            )
        finally:
            pool.close()
            nursery.cancel_scope.cancel()
