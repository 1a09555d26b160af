"""The tool executor pool actor: warm worker processes, one call per worker at a time.

Calls served (from the coordinator): ``run_tool {toolCallId, name, args, cwd}`` → chunks are
partial results, the result is ``{content, details, isError}``; ``warm {}`` starts the warm
workers if they are not started yet (with ``warm_on_request`` the pool waits for it, so that
start-up CPU goes to the provider's SDK import first). The pool keeps ``warm`` workers started, grows on demand up to ``max_workers`` and makes a call wait for a free worker
beyond that. A ``cancel`` is passed on to the worker (which kills the call's process group).
A worker that dies mid-call gives that call an error result naming the exit status, and is
replaced; the pool itself carries on.

Every worker process is owned by the pool's nursery and dies with the pool (SIGTERM as its
parent-death signal, on which it kills its tool process groups).
"""

from __future__ import annotations

import signal
from typing import Any

import trio

from ..runtime import ChildProcess, ConnectionLost, IncomingCall, Peer, RemoteError, link_pair, open_peer, start_actor

__all__ = ["run_tool_pool", "ToolPool"]

WORKER_ENTRY = "pi_actors.actors.tool_worker:run_tool_worker"


class _Worker:
    def __init__(self, index: int) -> None:
        self.index = index
        self.peer: Peer | None = None
        self.process: ChildProcess | None = None
        self.exited = trio.Event()


class ToolPool:
    def __init__(self, nursery: trio.Nursery, *, max_workers: int = 32, warm: int = 2) -> None:
        self._nursery = nursery
        self.max_workers = max(1, max_workers)
        self.warm = min(warm, self.max_workers)
        self._idle: list[_Worker] = []
        self._count = 0
        self._changed = trio.Event()
        self._next_index = 0
        self._warm_requested = False
        self._warming = 0  # warm workers starting; they will land in _idle
        self._waiting = 0  # calls inside acquire()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def start_warm(self) -> None:
        async with trio.open_nursery() as n:
            for _ in range(self.warm):
                n.start_soon(self._spawn_idle)

    async def _spawn_idle(self) -> None:
        self._count += 1  # _run_worker gives it back when the worker ends (or fails to start)
        self._warming += 1
        try:
            worker = await self._nursery.start(self._run_worker)
        finally:
            self._warming -= 1
        self._idle.append(worker)
        self._notify()

    async def _run_worker(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Owns one worker process and its connection for the worker's whole life."""
        worker = _Worker(self._next_index)
        self._next_index += 1
        ours, theirs = link_pair()
        try:
            async with trio.open_nursery() as n:
                worker.process = await start_actor(
                    n,
                    name=f"tool-worker-{worker.index}",
                    entry=WORKER_ENTRY,
                    links={"pool": theirs},
                    death_signal=signal.SIGTERM,
                )
                stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
                async with open_peer(stream, side="client", role="tool-pool", name=f"tool-worker-{worker.index}") as peer:
                    worker.peer = peer
                    task_status.started(worker)
                    await peer.closed_event.wait()
                # The link is gone: make sure the process is too, then reap it.
                with trio.move_on_after(2):
                    await worker.process.exited.wait()
                n.cancel_scope.cancel()  # the owner task stops the process if still running
        finally:
            worker.exited.set()
            if worker in self._idle:
                self._idle.remove(worker)
            self._count -= 1
            self._notify()

    async def acquire(self) -> _Worker:
        """A live idle worker for one call: an idle one, one that is warming up (when there
        are at least as many warming as callers waiting), or a new one up to the limit."""
        self._waiting += 1
        try:
            while True:
                while self._idle:
                    worker = self._idle.pop()
                    if worker.peer is not None and not worker.peer.closed_event.is_set():
                        return worker
                if self._warming < self._waiting and self._count < self.max_workers:
                    self._count += 1  # given back by _run_worker
                    return await self._nursery.start(self._run_worker)
                await self._changed.wait()
        finally:
            self._waiting -= 1

    def release(self, worker: _Worker) -> None:
        if worker.peer is not None and not worker.peer.closed_event.is_set():
            self._idle.append(worker)
        self._notify()

    def request_warm(self) -> None:
        """Start the warm workers (once), in the background of the pool's nursery."""
        if not self._warm_requested:
            self._warm_requested = True
            self._nursery.start_soon(self.start_warm)

    async def handle(self, call: IncomingCall) -> Any:
        if call.method == "warm":
            self.request_warm()
            return {}
        if call.method != "run_tool":
            raise RemoteError("not_found", f"tool pool: unknown method {call.method!r}")
        args = call.args or {}
        call.cooperative = True
        worker = await self.acquire()
        try:
            assert worker.peer is not None
            try:
                async with worker.peer.open_call("run", args) as out:
                    async with out.cancel_when(call.cancel_requested.wait):
                        async for partial in out:
                            await call.send_chunk(partial)
                    return await out.result()
            except ConnectionLost:
                await worker.exited.wait()
                status = _describe_exit(worker.process)
                return {
                    "content": [{"type": "text", "text": f"Tool worker crashed while running {args.get('name')}: {status}"}],
                    "details": None,
                    "isError": True,
                }
            except RemoteError as exc:
                if exc.code == "cancelled":
                    return {"content": [{"type": "text", "text": "Command aborted"}], "details": None, "isError": True}
                raise
        finally:
            self.release(worker)


def _describe_exit(process: ChildProcess | None) -> str:
    if process is None or process.returncode is None:
        return "the worker exited"
    code = process.returncode
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


async def run_tool_pool(links: dict[str, trio.SocketStream], config: dict[str, Any]) -> None:
    """Actor entry: serve the coordinator link; own every worker process."""
    config = config or {}
    async with trio.open_nursery() as nursery:
        pool = ToolPool(nursery, max_workers=int(config.get("max_workers", 32)), warm=int(config.get("warm", 2)))
        if not config.get("warm_on_request"):
            pool.request_warm()
        async with open_peer(links["coordinator"], side="server", role="tool-pool", name="tool-pool", handler=pool.handle) as peer:
            await peer.closed_event.wait()
        nursery.cancel_scope.cancel()
