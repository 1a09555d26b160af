"""A client of ``pi-actors --mode rpc`` the way pi's RpcClient drives it: JSON lines to the
process's stdin, response and event lines read back in order from its stdout."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["RpcClient", "open_rpc"]


async def open_rpc(env: Any, *extra: str) -> RpcClient:
    """``pi-actors --model scripted/scripted-model --mode rpc EXTRA...`` in ``env``'s work
    directory and environment (its stderr dropped)."""
    import subprocess

    from conftest import CLI

    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--mode", "rpc", *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )  # fmt: skip
    return RpcClient(proc)


class RpcClient:
    """One RPC process. ``lines`` keeps every line read so far (decoded), in order.

    Every wait is bounded by ``timeout`` seconds (a safety net, not a timing assertion);
    a process that closes its output while a line is awaited fails the test, naming what
    was seen."""

    def __init__(self, proc: trio.Process, timeout: float = 60) -> None:
        self.proc = proc
        self.timeout = timeout
        self.buffer = b""
        self.lines: list[dict] = []

    async def send(self, obj: dict | str) -> None:
        """Write one command (a string is written as it is: for lines that are not JSON)."""
        data = obj if isinstance(obj, str) else json.dumps(obj)
        assert self.proc.stdin is not None
        await self.proc.stdin.send_all(data.encode() + b"\n")

    async def next(self) -> dict:
        """The next line the process prints."""
        assert self.proc.stdout is not None
        while b"\n" not in self.buffer:
            data = await self.proc.stdout.receive_some()
            assert data, f"the RPC process closed its output; saw {self.lines}"
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        obj = json.loads(line)
        self.lines.append(obj)
        return obj

    async def until(self, predicate: Callable[[dict], Any]) -> dict:
        """Read lines until one satisfies ``predicate``; that line."""
        with trio.fail_after(self.timeout):
            while True:
                obj = await self.next()
                if predicate(obj):
                    return obj

    async def request(self, obj: dict) -> dict:
        """Send ``obj`` (which has an ``id``) and return the response carrying that id."""
        await self.send(obj)
        return await self.until(lambda o: o.get("type") == "response" and o.get("id") == obj.get("id"))

    async def close(self) -> int:
        """Close stdin, read the output to its end (kept in ``buffer``) and return the exit code."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        await self.proc.stdin.aclose()
        with trio.fail_after(self.timeout):
            while data := await self.proc.stdout.receive_some():
                self.buffer += data
            return await self.proc.wait()
