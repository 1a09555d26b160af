"""Tool dispatch overhead: coordinator → tool pool → worker → result, without the tool itself.

Run from the repository root with the project's virtualenv::

    .venv/bin/python -m benchmarks.tool_dispatch            # ~20 s
    .venv/bin/python -m benchmarks.tool_dispatch --json     # also one JSON line with the figures

``python -m benchmarks`` runs it with the micro-benchmarks (:func:`measure_dispatch`) and
prints its figures beside the last run's.

The tool pool runs as its own actor process, as in the CLI; this process plays the
coordinator (a Peer on a socketpair). The measured call is ``ls`` of an empty directory (no
subprocess); the time that ``ls`` takes by itself, run in this process, is subtracted, so
the figure is the cost of the dispatch: the call frame to the pool, the pool picking a
worker, the frame to the worker, the result back through both hops.

- warm: consecutive calls on a pool whose workers are running (median and p95).
- cold: the first call of a fresh pool (its zygote — bwrap + Python start-up + imports — then
  a worker forked from it, its handshake and the call); the pool process itself is started
  before the clock runs.
- both with the sandbox on (workspace-write) and off. Target: warm, sandbox on, < 5 ms.
- worker start: a worker forked by a running zygote until its hello is answered (sequential;
  the zygote in this process's control, no pool), sandbox on and off.
- concurrency: 32 ``sleep 1`` bash calls at once on a pool with 32 warm workers (sandbox
  on), wall time from the first call to the last result (target < 1.5 s); and the same burst
  on a pool as the CLI leaves it before the first tool call (zygote running, 2 warm
  workers), so 30 workers are forked during the burst: wall minus the 1 s of ``sleep``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from pi_actors.coding.tools import run_tool
from pi_actors.runtime import Peer, link_pair, open_peer, start_actor

POOL_ENTRY = "pi_actors.actors.tool_pool:run_tool_pool"


@asynccontextmanager
async def pool_process(workspace: str, mode: str, *, max_workers: int = 4, warm: int = 2) -> AsyncIterator[Peer]:
    """The tool pool actor in its own process; yields the coordinator's Peer to it."""
    config = {
        "max_workers": max_workers,
        "warm": warm,
        "warm_on_request": True,
        "sandbox": {"mode": mode, "workspace": workspace},
    }
    ours, theirs = link_pair()
    async with trio.open_nursery() as nursery:
        await start_actor(nursery, name="tool-pool", entry=POOL_ENTRY, links={"coordinator": theirs}, config=config)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        async with open_peer(stream, side="client", role="coordinator", name="tool-pool") as peer:
            yield peer
        nursery.cancel_scope.deadline = trio.current_time() + 5


async def timed_call(peer: Peer, args: dict) -> float:
    start = time.perf_counter()
    result = await peer.call("run_tool", args)
    elapsed = time.perf_counter() - start
    assert result.get("isError") is False, result
    return elapsed


async def tool_alone(workspace: str, rounds: int) -> float:
    """Median time of the trivial tool run directly in this process."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await run_tool("ls", {"path": "empty"}, cwd=workspace)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def warm_dispatch(workspace: str, mode: str, rounds: int) -> list[float]:
    args = {"toolCallId": "t", "name": "ls", "args": {"path": "empty"}, "cwd": workspace}
    async with pool_process(workspace, mode) as peer:
        await peer.call("warm")
        for _ in range(20):  # warm-up: workers started, code paths exercised
            await timed_call(peer, args)
        return [await timed_call(peer, args) for _ in range(rounds)]


async def cold_dispatch(workspace: str, mode: str, rounds: int) -> list[float]:
    args = {"toolCallId": "t", "name": "ls", "args": {"path": "empty"}, "cwd": workspace}
    times = []
    for _ in range(rounds):
        async with pool_process(workspace, mode, warm=0) as peer:
            times.append(await timed_call(peer, args))
    return times


async def concurrent_sleeps(workspace: str, count: int = 32, *, warm: int | None = None) -> float:
    """Wall time of ``count`` concurrent ``sleep 1`` calls. ``warm=None``: every worker is
    started and used once before; else the pool has its zygote and ``warm`` warm workers."""
    args = {"toolCallId": "s", "name": "bash", "args": {"command": "sleep 1"}, "cwd": workspace}
    trivial = {"toolCallId": "t", "name": "ls", "args": {"path": "empty"}, "cwd": workspace}
    async with pool_process(workspace, "workspace-write", max_workers=count, warm=count if warm is None else warm) as peer:
        await peer.call("warm")
        async with trio.open_nursery() as nursery:  # the warm workers up and used once
            for _ in range(count if warm is None else warm):
                nursery.start_soon(timed_call, peer, trivial)
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(timed_call, peer, args)
        return time.perf_counter() - start


async def worker_starts(workspace: str, mode: str, rounds: int) -> list[float]:
    """Seconds from asking a running zygote for a worker to that worker's hello answer."""
    import socket

    from pi_actors.actors._sandboxed import launch_zygote
    from pi_actors.actors._zygote import Zygote
    from pi_actors.coding.sandbox import SandboxPolicy

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    times = []
    async with trio.open_nursery() as nursery:
        policy = SandboxPolicy(mode=mode, workspace=workspace)
        await launch_zygote(nursery, name="tool-zygote-bench", policy=policy, control=theirs, ours=ours)
        zygote = Zygote("tool-zygote-bench", ours)
        nursery.start_soon(zygote.serve)
        await zygote.ready.wait()
        config = {"sandboxed": policy.sandboxed, "limits": policy.limits.to_config()}
        for i in range(rounds):
            mine, its = link_pair()
            start = time.perf_counter()
            worker = await zygote.spawn(f"tool-worker-{i}", its, config)
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(mine))
            async with open_peer(stream, side="client", role="tool-pool", name="w"):
                times.append(time.perf_counter() - start)
            await worker.exited.wait()  # it leaves at end-of-stream
        nursery.cancel_scope.cancel()
    return times


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


async def measure_dispatch(rounds: int = 300, cold_rounds: int = 8, say: Any = print) -> dict[str, Any]:
    """Every figure of this module (see its docstring), as a dict; ``say`` hears each line."""
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pi-actors-dispatch-", dir="/var/tmp") as workspace:
        await trio.Path(workspace, "empty").mkdir()
        alone = await tool_alone(workspace, rounds)
        figures["tool_alone_ms"] = alone * 1000
        say(f"ls of an empty directory, in-process:        {ms(alone)}  (subtracted below)")
        for mode in ("workspace-write", "off"):
            warm = await warm_dispatch(workspace, mode, rounds)
            cold = await cold_dispatch(workspace, mode, cold_rounds)
            warm_med = statistics.median(warm) - alone
            warm_p95 = statistics.quantiles(warm, n=20)[18] - alone
            cold_med = statistics.median(cold) - alone
            figures[mode] = {"warm_median_ms": warm_med * 1000, "warm_p95_ms": warm_p95 * 1000, "cold_median_ms": cold_med * 1000}
            label = "sandbox on " if mode != "off" else "sandbox off"
            say(f"dispatch, warm worker, {label} (median/p95): {ms(warm_med)} / {ms(warm_p95)}")
            say(f"dispatch, cold worker, {label} (median):     {ms(cold_med)}")
            starts = await worker_starts(workspace, mode, cold_rounds * 4)
            figures[mode]["worker_start_median_ms"] = statistics.median(starts) * 1000
            say(f"worker start (fork → hello), {label} (median): {ms(statistics.median(starts))}")
        wall = await concurrent_sleeps(workspace)
        figures["32_sleep_1_wall_s"] = wall
        say(f"32 concurrent 'sleep 1' calls, sandbox on, 32 warm workers, wall: {wall:6.2f} s")
        burst = [await concurrent_sleeps(workspace, warm=2) for _ in range(3)]
        figures["32_sleep_1_burst_overhead_s"] = statistics.median(burst) - 1
        say(f"the same on a pool with 2 warm workers (30 forked in the burst), wall − 1 s (median of 3): {statistics.median(burst) - 1:6.3f} s")
    return figures


def figure_rows(figures: dict[str, Any]) -> list[tuple[str, float, str]]:
    """``(name, value, unit)`` for the tables of ``python -m benchmarks`` (names stay stable:
    the next run finds the last run's figure by its name)."""
    rows: list[tuple[str, float, str]] = []
    for mode, label in (("workspace-write", "sandbox on"), ("off", "sandbox off")):
        f = figures.get(mode) or {}
        rows += [
            (f"dispatch, warm worker, {label}, median", f.get("warm_median_ms", math.nan), "ms"),
            (f"dispatch, warm worker, {label}, p95", f.get("warm_p95_ms", math.nan), "ms"),
            (f"dispatch, cold worker (fresh pool), {label}, median", f.get("cold_median_ms", math.nan), "ms"),
            (f"worker start (zygote fork → hello), {label}, median", f.get("worker_start_median_ms", math.nan), "ms"),
        ]
    rows.append(("32 concurrent `sleep 1` calls, 32 warm workers, wall", figures.get("32_sleep_1_wall_s", math.nan), "s"))
    rows.append(("32 concurrent `sleep 1` calls, 2 warm workers (30 forked), wall − 1 s",
                 figures.get("32_sleep_1_burst_overhead_s", math.nan), "s"))
    return rows


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tool_dispatch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="warm calls per mode")
    parser.add_argument("--cold-rounds", type=int, default=8, help="fresh pools per mode")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    options = parser.parse_args(argv)

    figures = await measure_dispatch(options.rounds, options.cold_rounds)
    on = figures["workspace-write"]["warm_median_ms"]
    print(f"target: warm dispatch with the sandbox on < 5 ms: {'met' if on < 5 else 'MISSED'} ({on:.2f} ms)")
    if options.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main, sys.argv[1:]))
