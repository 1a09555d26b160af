"""Remote benchmark: the server actor over WebSocket and a unix socket.

    .venv/bin/python -m benchmarks.remote [--quick] [--bad-frames 10000]

Reports, each next to a baseline measured in the same run:

* hello+attach latency (median and p90 of connect, hello, ``attach``) over WebSocket and the
  unix socket; baseline: hello plus one call over a socketpair in this process;
* update fan-out rate (updates delivered per second, summed over clients) to 1, 10 and 50
  subscribed clients over each transport; baseline: one subscriber talking to the session's
  coordinator directly (no server);
* hostile first frames: N hypothesis-generated bad openings against the live server (each must
  get ``hello_error`` and a close), with the process RSS before and after (the test suite runs
  300 of them; this runs 10,000 by default).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import trio

from pi_actors.actors import open_local_runtime
from pi_actors.ai import types as T
from pi_actors.cli.main import runtime_config
from pi_actors.runtime import link_pair, open_peer
from pi_actors.runtime import protocol as P
from pi_actors.server import Server
from pi_actors.server.client import RemoteSession, connect
from pi_actors.server.testing import bad_inputs, raw_exchange
from pi_actors.testing.scripted_server import Reply, ScriptedLLM


def _config(server: ScriptedLLM, cwd: str) -> dict:
    model = T.Model(id="scripted-model", api="openai-completions", provider="scripted", base_url=server.base_url_openai)
    return runtime_config(
        settings={"retry": {"enabled": False}}, model=model, thinking="off", tools=[], cwd=cwd,
        system_prompt="bench", no_session=True, agent_dir=cwd, runtime_keys={"scripted": "k"}, key_sources={},
    )


def _rss() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _ms(values: list[float]) -> str:
    values = sorted(values)
    return f"median {statistics.median(values) * 1000:7.2f} ms  p90 {values[int(len(values) * 0.9) - 1] * 1000:7.2f} ms"


async def _baseline_hello(n: int) -> list[float]:
    async def echo(call):
        return call.args

    out = []
    for _ in range(n):
        a, b = link_pair()
        sa = trio.SocketStream(trio.socket.from_stdlib_socket(a))
        sb = trio.SocketStream(trio.socket.from_stdlib_socket(b))
        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:

            async def serve(sb: trio.SocketStream = sb) -> None:
                async with open_peer(sb, side="server", role="server", name="s", handler=echo) as p:
                    await p.closed_event.wait()

            nursery.start_soon(serve)
            async with open_peer(sa, side="client", role="ui", name="c") as peer:
                await peer.call("attach", {"sessionId": "x"})
                out.append(time.perf_counter() - t0)
    return out


async def _hello_attach(address: str, token: str, sid: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        async with connect(address, token=token) as peer:
            await RemoteSession.attach(peer, sid)
            out.append(time.perf_counter() - t0)
    return out


async def _fan_out(scripted: ScriptedLLM, addresses: list[str], token: str, sid: str, chunks: int, rounds: int) -> tuple[int, float]:
    """All clients subscribe; ``rounds`` prompts one after another; (updates delivered, seconds
    from the first prompt until every client saw the last agent_end)."""
    scripted.script.extend(Reply(text="tok " * chunks, chunks=chunks) for _ in range(rounds))
    counts = [0] * len(addresses)
    async with trio.open_nursery() as nursery:
        readies = [trio.Event() for _ in addresses]
        done = trio.Event()
        finished = [0]

        async def client(i: int, address: str) -> None:
            ends = 0
            async with connect(address, token=token) as peer:
                s = await RemoteSession.attach(peer, sid)
                async with s.open_call("subscribe") as sub:
                    async for chunk in sub:
                        if "snapshot" in chunk:
                            readies[i].set()
                            continue
                        counts[i] += 1
                        if chunk["event"]["type"] == "agent_end":
                            ends += 1
                            if ends == rounds:
                                break
            finished[0] += 1
            if finished[0] == len(addresses):
                done.set()

        for i, address in enumerate(addresses):
            nursery.start_soon(client, i, address)
        for r in readies:
            await r.wait()
        t0 = time.perf_counter()
        async with connect(addresses[0], token=token) as peer:
            s = await RemoteSession.attach(peer, sid)
            for _ in range(rounds):
                await s.call("prompt", {"text": "go"})
        await done.wait()
        elapsed = time.perf_counter() - t0
    return sum(counts), elapsed


async def _fan_out_direct(scripted: ScriptedLLM, cwd: str, chunks: int, rounds: int) -> tuple[int, float]:
    scripted.script.extend(Reply(text="tok " * chunks, chunks=chunks) for _ in range(rounds + 1))
    async with open_local_runtime(_config(scripted, cwd), shutdown_grace=1.0) as coordinator:
        await coordinator.call("session")
        await coordinator.call("prompt", {"text": "warm up"})
        count = 0
        async with trio.open_nursery() as nursery:
            ready, done = trio.Event(), trio.Event()

            async def sub():
                nonlocal count
                ends = 0
                async with coordinator.open_call("subscribe", {}) as call:
                    async for chunk in call:
                        if "snapshot" in chunk:
                            ready.set()
                            continue
                        count += 1
                        if chunk["event"]["type"] == "agent_end":
                            ends += 1
                            if ends == rounds:
                                break
                done.set()

            nursery.start_soon(sub)
            await ready.wait()
            t0 = time.perf_counter()
            for _ in range(rounds):
                await coordinator.call("prompt", {"text": "go"})
            await done.wait()
            return count, time.perf_counter() - t0


async def _bad_frames(path: str, n: int) -> tuple[int, float, int, int]:
    inputs = bad_inputs(n, seed=1)
    limiter = trio.CapacityLimiter(32)
    ok = [0]
    before = _rss()

    async def one(data: bytes) -> None:
        async with limiter:
            stream = await trio.open_unix_socket(path)
            async with stream:
                frames = await raw_exchange(stream, data)
            if frames and isinstance(frames[-1], P.HelloError):
                ok[0] += 1

    t0 = time.perf_counter()
    for i in range(0, len(inputs), 500):
        async with trio.open_nursery() as nursery:
            for data in inputs[i : i + 500]:
                nursery.start_soon(one, data)
    return ok[0] if len(inputs) == ok[0] else -ok[0], time.perf_counter() - t0, before, _rss()


async def main(args: argparse.Namespace) -> None:
    cwd = tempfile.mkdtemp(prefix="pi-remote-bench-")
    reps = 10 if args.quick else 50
    chunks = 100 if args.quick else 400
    rounds = 3 if args.quick else 10
    async with trio.open_nursery() as nursery:
        replies: list[Reply] = []
        scripted = ScriptedLLM(replies)
        scripted.script = replies
        await nursery.start(scripted.serve)
        server = Server(lambda c: _config(scripted, c), default_cwd=cwd, shutdown_grace=1.0, send_queue=4096)
        async with server.running():
            ws = await nursery.start(server.serve_websocket, "127.0.0.1", 0, "bench")
            path = os.path.join(cwd, "sock", "server.sock")
            await nursery.start(server.serve_unix, path)
            url, unix = f"ws://127.0.0.1:{ws.port}/", f"unix:{path}"
            scripted.script.append(Reply(text="warm up"))
            async with connect(url, token="bench") as admin:
                sid = (await admin.call("create", {}))["sessionId"]
                await (await RemoteSession.attach(admin, sid)).call("prompt", {"text": "warm up"})

            print("hello+attach latency")
            base = await _baseline_hello(reps)
            print(f"  baseline (socketpair, hello + one call): {_ms(base)}")
            for label, address in (("websocket", url), ("unix", unix)):
                lat = await _hello_attach(address, "bench", sid, reps)
                print(f"  {label:9}: {_ms(lat)}   ratio {statistics.median(lat) / statistics.median(base):5.2f}x baseline")

            print(f"update fan-out ({rounds} prompts of a {chunks}-chunk reply, after a warm-up prompt)")
            n, secs = await _fan_out_direct(scripted, cwd, chunks, rounds)
            base_rate = n / secs
            print(f"  baseline (1 direct subscriber to the coordinator): {base_rate:9.0f} updates/s ({n} updates)")
            for label, address in (("websocket", url), ("unix", unix)):
                for clients in (1, 10, 50):
                    n, secs = await _fan_out(scripted, [address] * clients, "bench", sid, chunks, rounds)
                    rate = n / secs
                    print(f"  {label:9} {clients:3} clients: {rate:9.0f} updates/s delivered ({n} in {secs:.2f} s)   ratio {rate / base_rate:5.2f}x baseline")

            if args.bad_frames:
                ok, secs, before, after = await _bad_frames(path, args.bad_frames)
                status = "all got hello_error" if ok > 0 else f"ONLY {-ok} got hello_error"
                print(f"hostile first frames: {args.bad_frames} connections in {secs:.1f} s ({args.bad_frames / secs:.0f}/s), {status}; "
                      f"RSS {before / 2**20:.0f} MiB -> {after / 2**20:.0f} MiB")
                async with connect(url, token="bench") as peer:
                    await peer.call("list")
                print("  server still serving: yes")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--bad-frames", type=int, default=10000, help="hostile openings to send (0: skip)")
    trio.run(main, p.parse_args(sys.argv[1:]))
