"""Helpers for the tool pool and sandbox tests: the real tool pool in the test's loop, and process inspection.

``open_pool(**config)`` runs the real tool pool actor (``run_tool_pool``) in the test's trio
loop, linked by a socketpair to a client ``Peer`` playing the coordinator; its workers are
real processes (inside bubblewrap unless the policy is ``off``), children of the test
process. ``PoolClient.run`` makes one ``run_tool`` call and can watch its streamed updates.
Process inspection goes through /proc and waits for exits through pidfds (``_procs``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
from _procs import cmdline, live_pids

from pi_actors.actors.tool_pool import run_tool_pool
from pi_actors.runtime import Peer, link_pair, open_peer

WORKER_NAME = "tool-worker-"
ZYGOTE_MARK = "pi_actors.actors._zygote tool-zygote-"


def text_of(result: dict) -> str:
    return "".join(block.get("text", "") for block in result["content"] if block.get("type") == "text")


class PoolClient:
    def __init__(self, peer: Peer, cwd: str) -> None:
        self.peer = peer
        self.cwd = cwd

    async def run(
        self,
        name: str,
        args: dict,
        *,
        cwd: str | None = None,
        on_update: Callable[[str], Awaitable[None] | None] | None = None,
        **extra: Any,
    ) -> dict:
        """One run_tool call; ``on_update`` gets the text of every partial result."""
        call_args = {"toolCallId": f"call-{id(args)}", "name": name, "args": args, "cwd": cwd or self.cwd, **extra}
        async with self.peer.open_call("run_tool", call_args) as call:
            async for partial in call:
                if on_update is not None:
                    maybe = on_update(text_of(partial))
                    if maybe is not None:
                        await maybe
            return await call.result()

    async def bash(self, command: str, **kw: Any) -> dict:
        timeout = kw.pop("timeout", None)
        args = {"command": command} if timeout is None else {"command": command, "timeout": timeout}
        return await self.run("bash", args, **kw)

    async def assert_healthy(self) -> None:
        """A normal call still works."""
        result = await self.bash("echo healthy")
        assert result["isError"] is False and text_of(result) == "healthy\n", result


@asynccontextmanager
async def open_pool(cwd: str, **config: Any) -> AsyncIterator[PoolClient]:
    """The tool pool actor with ``config``, and a coordinator-side client of it."""
    ours, theirs = link_pair()
    async with trio.open_nursery() as nursery:
        pool_end = trio.SocketStream(trio.socket.from_stdlib_socket(theirs))
        nursery.start_soon(run_tool_pool, {"coordinator": pool_end}, config)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        async with open_peer(stream, side="client", role="coordinator", name="tool-pool") as peer:
            yield PoolClient(peer, cwd)


def sandbox_config(workspace: str, **policy: Any) -> dict:
    """A pool configuration with a sandbox policy document (see SandboxPolicy.to_config)."""
    doc = {"mode": "workspace-write", "workspace": workspace}
    doc.update(policy)
    return {"max_workers": 4, "warm": 0, "warm_on_request": True, "sandbox": doc}


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        return int(data[data.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError):
        return None


def is_descendant(pid: int, ancestor: int) -> bool:
    while pid > 1:
        parent = parent_of(pid)
        if parent is None:
            return False
        if parent == ancestor:
            return True
        pid = parent
    return False


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def worker_pids() -> list[int]:
    """Live tool worker processes started by this test process (forked by a zygote, they
    carry the zygote's command line; their name, ``/proc/PID/comm``, says what they are)."""
    me = os.getpid()
    return sorted(live_pids(lambda pid: comm(pid).startswith(WORKER_NAME) and is_descendant(pid, me)))


def zygote_pids() -> list[int]:
    """Live zygote processes (not the bwrap that starts one) started by this test process."""
    me = os.getpid()

    def is_zygote(pid: int) -> bool:
        line = cmdline(pid)
        # Its workers, forked, share its command line; bwrap has it in its own.
        forked = comm(pid).startswith(WORKER_NAME)
        return ZYGOTE_MARK in line and not forked and not line.split(" ", 1)[0].endswith("bwrap") and is_descendant(pid, me)

    return sorted(live_pids(is_zygote))


def pids_running(text: str) -> list[int]:
    """Live processes whose command line contains ``text``."""
    return live_pids(lambda pid: text in cmdline(pid))


def free_listener() -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (a host service the sandbox must not reach)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    return sock
