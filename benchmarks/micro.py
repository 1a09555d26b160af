"""Micro-benchmarks of ``pi_actors.runtime``, each next to its own baseline, in one run.

1. **Codec** — per message (a text delta, a tool call, a 4 KiB tool result, a ~500 KB
   session transcript): ``encode_message``, ``decode_message``, and the framed round trip
   ``encode_message`` + ``encode_frame`` → ``FrameDecoder`` + ``decode_message``; also the
   whole sans-I/O ``Connection.send`` → ``receive_data`` → ``next_event`` path. Baseline,
   doing the same work: the strict codec of PROTOCOL §3 written on cbor2's C extension
   (``benchmarks/cbor2_codec.py``: the same checks, errors and bytes; the same framing
   and ``msgspec.convert(strict=True)``). For reference only, doing less: cbor2 without the
   §3 checks (the envelope still validated), cbor2 alone, and msgspec's typed MessagePack
   (protocol version 1 offers no msgpack codec).
2. **Call round trip** over a unix socketpair, p50/p99: ``Peer.call`` through
   ``open_peer``, with the server (a) in the same process and trio run, (b) in a child
   process started by ``start_actor``. Baseline: the same bytes echoed with a 4-byte
   length prefix over a raw ``trio.SocketStream``, placed the same way.
3. **Hello handshake** — a fresh socketpair, both sides of ``open_peer`` in one process,
   until the client's ``open_peer`` has returned. Baseline: one raw framed request/answer
   of the same sizes on a fresh socketpair.
4. **Memory-channel hop** — one item from a producer task to a consumer task. pi-actors has
   no object-passing in-process placement yet, so its in-process hop is a streamed
   ``chunk`` through a ``Peer`` over ``trio.testing.memory_stream_pair`` (encoded and
   decoded). Baseline: ``trio.open_memory_channel(0)``.
5. **Chunk stream** (the path of every LLM delta) — chunks of one call streamed from a child
   process through ``start_actor`` + ``open_peer``, per second. Baseline: raw framed one-way
   stream of the same bytes from a child process.
6. **Actor spawn** — ``start_actor`` until the child answered the hello, for a minimal actor
   and for the tool worker (what the pool pays for each call beyond its warm workers), wall
   and the child's CPU at that moment, spawned one after another. Baselines: the same
   interpreter running ``-c pass`` and ``-c "import trio"`` to exit.

Every figure is the best of ``repeat`` timed runs (throughputs; the codec's in CPU time, its
contestants taking turns) or the percentiles of all samples (latencies), after a warm-up.
"""

from __future__ import annotations

import os
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

__all__ = ["MicroResult", "run_micro"]


@dataclass
class MicroResult:
    group: str
    name: str
    value: float
    unit: str  # "/s" or "µs"
    baseline: bool = False
    note: str = ""


# -- messages ---------------------------------------------------------------------------------


def _messages():
    from pi_actors.runtime import protocol as P

    delta = P.Chunk(
        id=7,
        seq=1234,
        data={"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "abc "}},
    )
    call = P.Call(
        id=3,
        method="run_tool",
        args={"toolCallId": "call_1", "name": "bash", "arguments": {"command": "sleep 1; echo 1"}},
    )
    result = P.Result(id=3, ok=True, value={"content": [{"type": "text", "text": "x" * 4096}], "details": None})
    return [("text delta chunk", delta), ("tool call", call), ("tool result 4 KiB", result),
            ("session transcript ~500 KB", P.Result(id=4, ok=True, value={"entries": _transcript(300)}))]


def _transcript(turns: int) -> list[dict[str, Any]]:
    """A session's messages: user text, assistant thinking + tool call with usage, tool result."""
    out: list[dict[str, Any]] = []
    for i in range(turns):
        text = "the quick brown fox — jumps over the lazy dog. " * (1 + i % 7)
        out.append({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1_700_000_000_000 + i})
        out.append({
            "role": "assistant", "stopReason": "toolUse", "timestamp": 1_700_000_000_500 + i,
            "content": [{"type": "thinking", "thinking": text * 3},
                        {"type": "toolCall", "id": f"call_{i}", "name": "bash", "arguments": {"command": "ls -la", "timeout": 30}}],
            "usage": {"input": 1234 + i, "output": 56, "cacheRead": 0, "cacheWrite": 0,
                      "cost": {"input": 0.0037 * i, "output": 0.00084, "total": 0.0037 * i + 0.00084}},
        })
        out.append({"role": "toolResult", "toolCallId": f"call_{i}", "isError": False,
                    "content": [{"type": "text", "text": "drwxr-xr-x  2 root root 4096 Dec  1 15:00 dir\n" * 10}]})
    return out


def _connection_path(P: Any, msg: Any) -> tuple[Callable[[], None], str]:
    """``msg`` through a client/server ``Connection`` pair (send, then receive_data and
    next_event), keeping the call rules of PROTOCOL §6: a chunk of a call in flight with the
    next ``seq``; a call or a result together with the minimal result or call that closes it,
    so that ids are not reused while in flight (that work is included, and labelled)."""
    import msgspec

    client, server = P.Connection("client"), P.Connection("server")
    server.receive_data(client.send(P.Hello(protocol=P.PROTOCOL_NAME, min_version=1, max_version=1, role="ui", name="c")))
    server.next_event()
    client.receive_data(server.send(P.HelloOk(version=1, role="coordinator", name="s")))
    client.next_event()
    label = "pi-actors Connection.send / receive_data+next_event"
    replace = msgspec.structs.replace
    if isinstance(msg, P.Chunk):  # the server's call, streamed by the client
        client.receive_data(server.send(P.Call(id=msg.id, method="m")))
        client.next_event()
        seq = iter(range(1 << 62))

        def chunk() -> None:
            server.receive_data(client.send(replace(msg, seq=next(seq))))
            server.next_event()

        return chunk, label
    if isinstance(msg, P.Call):

        def call() -> None:
            server.receive_data(client.send(msg))
            server.next_event()
            client.receive_data(server.send(P.Result(id=msg.id, ok=True)))
            client.next_event()

        return call, label + " (+ a minimal result)"

    def result() -> None:  # the client's minimal call, answered by the server
        server.receive_data(client.send(P.Call(id=msg.id, method="m")))
        server.next_event()
        client.receive_data(server.send(msg))
        client.next_event()

    return result, label + " (+ a minimal call)"


def _rates(fns: list[Callable[[], Any]], seconds: float, repeat: int) -> list[float]:
    """Calls per CPU second of each of ``fns``: the best of ``repeat`` rounds of about
    ``seconds`` each, the functions taking turns within every round, so that a busy machine
    slows them alike. CPU time of this thread, not wall time: the codec does no I/O."""
    clock = time.thread_time
    counts = []
    for fn in fns:  # calibrate
        n = 1
        while True:
            t0 = clock()
            for _ in range(n):
                fn()
            dt = clock() - t0
            if dt > seconds / 5:
                break
            n *= 4
        counts.append(max(1, int(n * seconds / dt)))
    best = [0.0] * len(fns)
    for _ in range(repeat):
        for i, (fn, n) in enumerate(zip(fns, counts, strict=True)):
            t0 = clock()
            for _ in range(n):
                fn()
            best[i] = max(best[i], n / max(clock() - t0, 1e-9))
    return best


def _twice(outer: Callable[[Any], Any], inner: Callable[[Any], Any], value: Any) -> Any:
    return outer(inner(value))


def bench_codec(seconds: float, repeat: int) -> list[MicroResult]:
    """The codec and framing, per message, against the same work done on cbor2 (see 1.)."""
    import cbor2
    import msgspec

    from pi_actors.runtime import protocol as P

    from . import cbor2_codec

    mp_enc = msgspec.msgpack.Encoder()
    mp_dec = msgspec.msgpack.Decoder(P.Message)
    out = []
    for label, msg in _messages():
        group = f"codec, {label}"
        payload = P.encode_message(msg)
        assert cbor2_codec.encode_message(msg) == payload  # the same bytes, so the same work
        cls = type(msg)

        def framed(encode: Callable[[Any], bytes], decode: Callable[[bytes], Any], msg: Any = msg) -> Callable[[], None]:
            decoder = P.FrameDecoder()

            def run() -> None:
                decoder.feed(P.encode_frame(encode(msg)))
                frame = decoder.next_frame()
                assert frame is not None
                decode(frame)

            return run

        connection, connection_label = _connection_path(P, msg)

        def unchecked_encode(msg: Any) -> bytes:
            return cbor2.dumps(msgspec.to_builtins(msg, builtin_types=(bytes, bytearray)))

        def unchecked_decode(data: bytes, cls: Any = cls) -> Any:
            return msgspec.convert(cbor2.loads(data), cls, strict=True)

        tree = msgspec.to_builtins(msg)
        ours, theirs = "pi-actors codec (runtime/_codec.py)", "baseline cbor2 + the §3 checks (benchmarks/cbor2_codec.py)"
        cases: list[tuple[str, Callable[[], Any], bool]] = [
            (f"{ours}, encode", partial(P.encode_message, msg), False),
            (f"{theirs}, encode", partial(cbor2_codec.encode_message, msg), True),
            (f"{ours}, decode", partial(P.decode_message, payload), False),
            (f"{theirs}, decode", partial(cbor2_codec.decode_message, payload), True),
            (f"{ours}, framed round trip", framed(P.encode_message, P.decode_message), False),
            (connection_label, connection, False),
            (f"{theirs}, framed round trip", framed(cbor2_codec.encode_message, cbor2_codec.decode_message), True),
            ("reference cbor2 without the §3 checks (envelope validated), framed round trip",
             framed(unchecked_encode, unchecked_decode), True),
            ("reference cbor2.dumps / cbor2.loads alone, round trip", partial(_twice, cbor2.loads, cbor2.dumps, tree), True),
            ("reference msgspec msgpack typed (not offered by protocol v1), round trip",
             partial(_twice, mp_dec.decode, mp_enc.encode, msg), True),
        ]
        rates = _rates([fn for _, fn, _ in cases], seconds, repeat)
        for (name, _, baseline), rate in zip(cases, rates, strict=True):
            out.append(MicroResult(group, name, rate, "/s", baseline))
    return out


# -- actors for the two-process benchmarks (entry points of start_actor) ----------------------


async def echo_actor(links: dict, config: Any) -> None:
    """pi-actors server: answers ``echo`` with its args and ``stream`` with N chunks."""
    from pi_actors.runtime import open_peer

    async def handler(call) -> Any:
        if call.method == "stream":
            n, data = call.args["n"], call.args["data"]
            for _ in range(n):
                await call.send_chunk(data)
            return n
        return call.args

    import trio

    async with open_peer(links["peer"], side="server", role="bench", name="bench-client", handler=handler) as peer:
        await peer.closed_event.wait()
        await trio.lowlevel.checkpoint()


async def raw_echo_actor(links: dict, config: Any) -> None:
    """Baseline server: echoes 4-byte-framed messages; on a frame of 4 bytes N, streams N frames."""
    stream = links["peer"]
    await _raw_serve(stream, config["stream_frame"].encode("latin-1") if config else b"")


async def _raw_serve(stream, stream_frame: bytes) -> None:
    import trio

    buf = bytearray()
    try:
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            buf += data
            while len(buf) >= 4:
                n = struct.unpack_from(">I", buf, 0)[0]
                if len(buf) < 4 + n:
                    break
                frame = bytes(buf[: 4 + n])
                del buf[: 4 + n]
                if n == 4 and stream_frame:
                    count = struct.unpack(">I", frame[4:])[0]
                    for _ in range(count):
                        await stream.send_all(stream_frame)
                    await stream.send_all(struct.pack(">I", 0))
                else:
                    await stream.send_all(frame)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


# -- round trips ------------------------------------------------------------------------------


def _pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


async def _raw_call(stream, frame: bytes, buf: bytearray) -> bytes:
    await stream.send_all(frame)
    while True:
        if len(buf) >= 4:
            n = struct.unpack_from(">I", buf, 0)[0]
            if len(buf) >= 4 + n:
                out = bytes(buf[4 : 4 + n])
                del buf[: 4 + n]
                return out
        data = await stream.receive_some(65536)
        if not data:
            raise EOFError
        buf += data


#: The repository root: where a child actor finds ``benchmarks.micro`` (children start
#: isolated, ``python -I``, so neither the working directory nor PYTHONPATH counts).
_ROOT = str(Path(__file__).resolve().parent.parent)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")  # the plain-Python baseline
    return env


async def _round_trips(n: int, stream_n: int, stream_repeat: int) -> list[MicroResult]:
    import trio

    from pi_actors.runtime import link_pair, open_peer, start_actor
    from pi_actors.runtime import protocol as P

    args = {"toolCallId": "call_1", "name": "bash", "arguments": {"command": "echo 1"}}
    # The raw baseline echoes a frame of the same size as our call's frame.
    conn = P.Connection("client")
    conn.send(P.Hello(protocol=P.PROTOCOL_NAME, min_version=1, max_version=1, role="ui", name="c"))
    raw_frame = struct.pack(">I", 0) + b"x" * (len(conn.send(P.Call(id=1, method="echo", args=args))) - 4)
    raw_frame = struct.pack(">I", len(raw_frame) - 4) + raw_frame[4:]
    delta = {"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "abc "}}
    chunk_len = len(P.encode_frame(P.encode_message(P.Chunk(id=1, seq=1000, data=delta))))
    stream_frame = struct.pack(">I", chunk_len - 4) + b"y" * (chunk_len - 4)
    out: list[MicroResult] = []

    async def peer_samples(peer) -> list[float]:
        for _ in range(200):
            await peer.call("echo", args)
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            await peer.call("echo", args)
            samples.append(time.perf_counter() - t0)
        return samples

    async def raw_samples(stream) -> list[float]:
        buf = bytearray()
        for _ in range(200):
            await _raw_call(stream, raw_frame, buf)
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            await _raw_call(stream, raw_frame, buf)
            samples.append(time.perf_counter() - t0)
        return samples

    def add(group: str, name: str, samples: list[float], baseline: bool) -> None:
        out.append(MicroResult(group, f"{name} p50", _pct(samples, 0.5) * 1e6, "µs", baseline))
        out.append(MicroResult(group, f"{name} p99", _pct(samples, 0.99) * 1e6, "µs", baseline))

    def stream_pair():
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        return (trio.SocketStream(trio.socket.from_stdlib_socket(a)), trio.SocketStream(trio.socket.from_stdlib_socket(b)))

    async def echo_handler(call) -> Any:
        return call.args

    # (a) one process
    group = "call round trip, unix socketpair, one process"
    s_client, s_server = stream_pair()
    async with trio.open_nursery() as nursery:
        async def serve(task_status=trio.TASK_STATUS_IGNORED):
            async with open_peer(s_server, side="server", role="bench", name="client", handler=echo_handler) as peer:
                task_status.started()
                await peer.closed_event.wait()

        nursery.start_soon(serve)
        async with open_peer(s_client, side="client", role="ui", name="server") as peer:
            add(group, "pi-actors Peer.call", await peer_samples(peer), False)
        nursery.cancel_scope.cancel()
    r_client, r_server = stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_raw_serve, r_server, b"")
        add(group, "baseline raw framed echo", await raw_samples(r_client), True)
        await r_client.aclose()

    # (b) two processes, (5) chunk streams
    group = "call round trip, unix socketpair, two processes (start_actor)"
    sgroup = "chunk stream from a child process (one LLM delta per chunk)"
    env = _child_env()
    async with trio.open_nursery() as nursery:
        mine, theirs = link_pair()
        await start_actor(nursery, name="bench-echo", entry="benchmarks.micro:echo_actor", links={"peer": theirs}, env=env, import_paths=(_ROOT,))
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(mine))
        async with open_peer(stream, side="client", role="ui", name="bench-echo") as peer:
            add(group, "pi-actors Peer.call", await peer_samples(peer), False)
            best = 0.0
            for _ in range(stream_repeat):
                t0 = time.perf_counter()
                got = 0
                async with peer.open_call("stream", {"n": stream_n, "data": delta}) as call:
                    async for _ in call:
                        got += 1
                    await call.result()
                best = max(best, got / (time.perf_counter() - t0))
            out.append(MicroResult(sgroup, "pi-actors chunks through open_call", best, "/s"))
        mine, theirs = link_pair()
        await start_actor(
            nursery, name="bench-raw-echo", entry="benchmarks.micro:raw_echo_actor", links={"peer": theirs},
            env=env, config={"stream_frame": stream_frame.decode("latin-1")}, import_paths=(_ROOT,),
        )
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(mine))
        add(group, "baseline raw framed echo", await raw_samples(stream), True)
        best = 0.0
        buf = bytearray()
        for _ in range(stream_repeat):
            t0 = time.perf_counter()
            got = 0
            await stream.send_all(struct.pack(">II", 4, stream_n))
            done = False
            while not done:
                buf += await stream.receive_some(65536)
                pos = 0
                while len(buf) - pos >= 4:
                    size = struct.unpack_from(">I", buf, pos)[0]
                    if len(buf) - pos < 4 + size:
                        break
                    pos += 4 + size
                    if size == 0:  # the end frame
                        done = True
                        break
                    got += 1
                del buf[:pos]
            best = max(best, got / (time.perf_counter() - t0))
        out.append(MicroResult(sgroup, "baseline raw framed one-way stream", best, "/s", True))
        await stream.aclose()
    return out


async def _handshakes(n: int) -> list[MicroResult]:
    import trio

    from pi_actors.runtime import open_peer
    from pi_actors.runtime import protocol as P

    hello = P.encode_frame(P.encode_message(P.Hello(protocol=P.PROTOCOL_NAME, min_version=1, max_version=1, role="ui", name="client")))
    ok = P.encode_frame(P.encode_message(P.HelloOk(version=1, role="bench", name="server")))

    def pair():
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        return (trio.SocketStream(trio.socket.from_stdlib_socket(a)), trio.SocketStream(trio.socket.from_stdlib_socket(b)))

    async def ours() -> float:
        t0 = time.perf_counter()
        a, b = pair()
        async with trio.open_nursery() as nursery:
            async def server():
                async with open_peer(b, side="server", role="bench", name="client"):
                    pass

            nursery.start_soon(server)
            async with open_peer(a, side="client", role="ui", name="server"):
                dt = time.perf_counter() - t0
        return dt

    async def raw() -> float:
        t0 = time.perf_counter()
        a, b = pair()
        async with trio.open_nursery() as nursery:
            async def server():
                buf = bytearray()
                while len(buf) < len(hello):
                    buf += await b.receive_some(65536)
                await b.send_all(ok)
                await b.aclose()

            nursery.start_soon(server)
            await a.send_all(hello)
            buf = bytearray()
            while len(buf) < len(ok):
                buf += await a.receive_some(65536)
            dt = time.perf_counter() - t0
            await a.aclose()
        return dt

    out = []
    group = "hello handshake, fresh socketpair, one process"
    for name, fn, baseline in (("pi-actors open_peer client+server", ours, False), ("baseline raw framed hello/answer", raw, True)):
        for _ in range(50):
            await fn()
        samples = [await fn() for _ in range(n)]
        out.append(MicroResult(group, f"{name} p50", _pct(samples, 0.5) * 1e6, "µs", baseline))
        out.append(MicroResult(group, f"{name} p99", _pct(samples, 0.99) * 1e6, "µs", baseline))
    return out


async def _hops(n: int, repeat: int) -> list[MicroResult]:
    import trio
    import trio.testing

    from pi_actors.runtime import open_peer

    delta = {"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "abc "}}
    group = "in-process hop, producer task -> consumer task"
    out = []

    async def channel_once() -> float:
        send, recv = trio.open_memory_channel(0)

        async def produce():
            async with send:
                for _ in range(n):
                    await send.send(delta)

        t0 = time.perf_counter()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            async with recv:
                async for _ in recv:
                    pass
        return (time.perf_counter() - t0) / n

    async def peer_once() -> float:
        a, b = trio.testing.memory_stream_pair()

        async def handler(call):
            for _ in range(n):
                await call.send_chunk(delta)

        async with trio.open_nursery() as nursery:
            async def serve(task_status=trio.TASK_STATUS_IGNORED):
                async with open_peer(b, side="server", role="bench", name="c", handler=handler) as peer:
                    task_status.started()
                    await peer.closed_event.wait()

            nursery.start_soon(serve)
            async with open_peer(a, side="client", role="ui", name="s") as peer:
                t0 = time.perf_counter()
                async with peer.open_call("stream") as call:
                    async for _ in call:
                        pass
                    await call.result()
                dt = (time.perf_counter() - t0) / n
            nursery.cancel_scope.cancel()
        return dt

    for name, fn, baseline in (
        ("pi-actors chunk through Peer over trio.testing.memory_stream_pair", peer_once, False),
        ("baseline trio.open_memory_channel(0)", channel_once, True),
    ):
        await fn()
        best = min([await fn() for _ in range(repeat)])
        out.append(MicroResult(group, name, best * 1e6, "µs", baseline))
    return out


async def _spawns(n: int) -> list[MicroResult]:
    import subprocess

    import trio

    from pi_actors.runtime import link_pair, open_peer, start_actor

    from .procs import proc_cpu_seconds

    env = _child_env()
    out: list[MicroResult] = []
    group = "actor spawn until the hello is answered (sequential)"

    async def one(entry: str, link: str) -> tuple[float, float]:
        async with trio.open_nursery() as nursery:
            mine, theirs = link_pair()
            t0 = time.perf_counter()
            proc = await start_actor(nursery, name="bench-spawn", entry=entry, links={link: theirs}, env=env, import_paths=(_ROOT,))
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(mine))
            async with open_peer(stream, side="client", role="bench", name="spawned"):
                dt = time.perf_counter() - t0
                cpu = proc_cpu_seconds(proc.pid)
            with trio.fail_after(10):
                await proc.exited.wait()
        return dt, cpu

    for name, entry, link in (
        ("pi-actors minimal actor (benchmarks.micro:echo_actor)", "benchmarks.micro:echo_actor", "peer"),
        ("pi-actors tool worker (pi_actors.actors.tool_worker)", "pi_actors.actors.tool_worker:run_tool_worker", "pool"),
    ):
        await one(entry, link)
        samples = [await one(entry, link) for _ in range(n)]
        out.append(MicroResult(group, f"{name}, wall p50", statistics.median(s[0] for s in samples) * 1e3, "ms"))
        out.append(MicroResult(group, f"{name}, child CPU p50", statistics.median(s[1] for s in samples) * 1e3, "ms"))
    for name, code in (("baseline python -c pass", "pass"), ("baseline python -c 'import trio'", "import trio")):
        walls, cpus = [], []
        for _ in range(n + 1):
            t0 = time.perf_counter()
            p = subprocess.Popen([sys.executable, "-c", code], env=env)  # noqa: ASYNC220 - the spawn is what is timed
            _, _, ru = os.wait4(p.pid, 0)  # noqa: ASYNC222
            p.returncode = 0
            walls.append(time.perf_counter() - t0)
            cpus.append(ru.ru_utime + ru.ru_stime)
        out.append(MicroResult(group, f"{name}, wall p50", statistics.median(walls[1:]) * 1e3, "ms", True))
        out.append(MicroResult(group, f"{name}, child CPU p50", statistics.median(cpus[1:]) * 1e3, "ms", True))
    return out


def run_micro(*, quick: bool = False, progress: Callable[[str], None] = print) -> list[MicroResult]:
    import trio

    seconds, repeat = (0.15, 2) if quick else (0.5, 3)
    n_rt = 2000 if quick else 10000
    results: list[MicroResult] = []
    progress("  codec ...")
    results += bench_codec(seconds, repeat)
    progress("  round trips and chunk streams ...")
    results += trio.run(_round_trips, n_rt, 20000 if quick else 50000, 2 if quick else 3)
    progress("  handshakes ...")
    results += trio.run(_handshakes, 300 if quick else 1000)
    progress("  in-process hops ...")
    results += trio.run(_hops, 20000 if quick else 50000, 2 if quick else 3)
    progress("  actor spawns ...")
    results += trio.run(_spawns, 5 if quick else 15)
    return results


if __name__ == "__main__":  # pragma: no cover
    for r in run_micro(quick="--quick" in sys.argv):
        print(f"{r.group:<60} {r.name:<80} {r.value:>12,.1f} {r.unit}")
