"""Streaming throughput: text deltas per second from the wire to a consumer in another process.

Run: ``python -m benchmarks.stream_deltas [--deltas 50000] [--rounds 3] [--api openai-completions]``

Every figure comes from the same run against the same scripted server (its own process,
``python -m pi_actors.testing.scripted_server``; the reply's frames are generated once, before
any timing):

* ``bare SDK loop`` (the baseline) — the official SDK's own streaming iterator in this process,
  counting text deltas and doing nothing else;
* ``ai.stream, in-process`` — ``pi_actors.ai.stream`` with an ``emit`` that counts the
  ``text_delta`` events (the 12 events, live partial message, usage, cost); a provider joins
  the plain text deltas of one network read into one event, so there are fewer events than
  deltas: the figure counts the wire's deltas, and the final text is checked to be complete;
* ``provider actor -> consumer`` (the end-to-end figure the issue asks for) — the provider actor
  as a real child process (``runtime.start_actor``), called over a socketpair through
  ``open_peer`` by this process, which rebuilds every chunk into events with
  ``protocol.events.StreamRebuilder`` as the coordinator does. Deltas that pile up behind a busy
  link are merged into one delta per block (see ``protocol.events``), so fewer chunks than deltas
  cross; the figure counts the original deltas, and the rebuilt text is checked to be complete.

A round is timed from the request to the final message. The best round of each is reported
(the median is printed too). Targets: at least 150,000 deltas/s end to end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from pi_actors.ai import types as T
from pi_actors.protocol.events import StreamRebuilder
from pi_actors.runtime import link_pair, open_peer, start_actor

PIECE = "abc "
TARGET = 150_000
_PROVIDER = "bench"
_KEY = "sk-bench"


def _reply_text(deltas: int) -> str:
    return PIECE * deltas


async def _start_server(nursery: trio.Nursery, deltas: int, script_dir: str) -> int:
    path = os.path.join(script_dir, "script.json")
    with open(path, "w") as f:
        json.dump({"replies": [{"text": _reply_text(deltas), "chunks": deltas, "usage": {"input": 12}}],
                   "cycle": True}, f)
    send, receive = trio.open_memory_channel[int](1)

    async def run() -> None:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "pi_actors.testing.scripted_server", "--script", path],
            stdout=__import__("subprocess").PIPE)
        try:
            line = b""
            assert proc.stdout is not None
            while not line.endswith(b"\n"):
                data = await proc.stdout.receive_some(64)
                if not data:
                    raise RuntimeError("the scripted server exited before printing its port")
                line += data
            await send.send(int(line))
            await proc.wait()
        finally:
            with trio.CancelScope(shield=True):
                proc.terminate()
                await proc.wait()

    nursery.start_soon(run)
    return await receive.receive()


def _model(api: str, port: int) -> T.Model:
    base = f"http://127.0.0.1:{port}" + ("" if api == "anthropic-messages" else "/v1")
    return T.Model(id="bench-model", name="bench-model", api=api, provider=_PROVIDER, base_url=base,
                   cost=T.ModelCost(input=1, output=2), max_tokens=4096)


def _context() -> T.Context:
    return T.Context(system_prompt="Be quick.", messages=[T.UserMessage(content="stream", timestamp=1)])


# ---------------------------------------------------------------------------------------------
# The three measurements; each returns (seconds, deltas counted, extra info)


async def bare_sdk(api: str, port: int, deltas: int) -> tuple[float, int, str]:
    model = _model(api, port)
    count = 0
    t0 = time.perf_counter()
    if api == "anthropic-messages":
        import anthropic

        client = anthropic.AsyncAnthropic(api_key=_KEY, base_url=model.base_url, max_retries=0)
        stream = await client.messages.create(model=model.id, max_tokens=4096, stream=True,
                                              messages=[{"role": "user", "content": "stream"}])
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                count += 1
    else:
        import openai

        client = openai.AsyncOpenAI(api_key=_KEY, base_url=model.base_url, max_retries=0)
        if api == "openai-responses":
            stream = await client.responses.create(model=model.id, input="stream", stream=True)
            async for event in stream:
                if event.type == "response.output_text.delta":
                    count += 1
        else:
            stream = await client.chat.completions.create(model=model.id, stream=True,
                                                          messages=[{"role": "user", "content": "stream"}])
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    count += 1
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed, count, ""


async def in_process(api: str, port: int, deltas: int) -> tuple[float, int, str]:
    from pi_actors import ai

    events = 0

    async def emit(event: Any) -> None:
        nonlocal events
        if event.type == "text_delta":
            events += 1

    t0 = time.perf_counter()
    final = await ai.stream(_model(api, port), _context(), ai.StreamOptions(api_key=_KEY), emit)
    elapsed = time.perf_counter() - t0
    _check(final, deltas)  # every delta's text is in the message
    return elapsed, deltas, f"{events} text_delta events"


class ActorClient:
    """The provider actor in its own process, and our end of its link."""

    def __init__(self, peer: Any) -> None:
        self.peer = peer

    async def run(self, api: str, port: int, deltas: int) -> tuple[float, int, str]:
        args = {"model": T.to_plain(_model(api, port)), "context": T.to_plain(_context()), "options": {}}
        rebuild = StreamRebuilder()
        chunks = 0
        t0 = time.perf_counter()
        async with self.peer.open_call("stream", args) as call:
            async for data in call:
                rebuild.apply(data)
                chunks += 1
            final = msgspec_convert(await call.result())
        elapsed = time.perf_counter() - t0
        _check(final, deltas)
        partial = rebuild.partial
        if partial is None or [getattr(b, "text", None) for b in partial.content] != [final.content[0].text]:
            raise RuntimeError("the rebuilt message differs from the final one")
        return elapsed, deltas, f"{chunks} chunks"


def msgspec_convert(plain: Any) -> T.AssistantMessage:
    import msgspec

    return msgspec.convert(plain, T.AssistantMessage)


def _check(final: T.AssistantMessage, deltas: int) -> None:
    if final.stop_reason != "stop":
        raise RuntimeError(f"the stream failed: {final.stop_reason}: {final.error_message}")
    text = final.content[0].text if final.content else ""
    if text != _reply_text(deltas):
        raise RuntimeError(f"the final text is wrong ({len(text)} characters)")


async def _rounds(name: str, fn: Callable[[], Awaitable[tuple[float, int, str]]], rounds: int,
                  deltas: int) -> dict[str, Any]:
    rates: list[float] = []
    info = ""
    for _ in range(rounds):
        elapsed, count, info = await fn()
        if count != deltas:
            raise RuntimeError(f"{name}: counted {count} deltas, expected {deltas}")
        rates.append(count / elapsed)
    return {"name": name, "best": max(rates), "median": statistics.median(rates), "info": info}


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as script_dir:
        async with trio.open_nursery() as nursery:
            port = await _start_server(nursery, args.deltas, script_dir)
            await in_process(args.api, port, args.deltas)  # warm-up: imports, server frames
            results.append(await _rounds("bare SDK loop (baseline)",
                                         lambda: bare_sdk(args.api, port, args.deltas), args.rounds, args.deltas))
            results.append(await _rounds("ai.stream, in-process",
                                         lambda: in_process(args.api, port, args.deltas), args.rounds, args.deltas))
            ours, theirs = link_pair()
            config = {"runtime_api_keys": {_PROVIDER: _KEY}, "warm_api": args.api}
            async with trio.open_nursery() as actors:
                await start_actor(actors, name="provider", entry="pi_actors.actors.provider:run_provider",
                                  links={"coordinator": theirs}, config=config)
                stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
                async with open_peer(stream, side="client", role="coordinator", name="bench") as peer:
                    client = ActorClient(peer)
                    await client.run(args.api, port, args.deltas)  # warm-up of the actor process
                    results.append(await _rounds("provider actor -> consumer process (end to end)",
                                                 lambda: client.run(args.api, port, args.deltas),
                                                 args.rounds, args.deltas))
                actors.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
    return results


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    base = results[0]["best"]
    lines = [f"stream_deltas: {args.deltas:,} text deltas of {PIECE!r}, api {args.api}, best of {args.rounds}",
             f"{'':50} {'deltas/s':>12} {'median':>12} {'x baseline':>11}"]
    for r in results:
        extra = f"  ({r['info']})" if r["info"] else ""
        lines.append(f"{r['name']:50} {r['best']:>12,.0f} {r['median']:>12,.0f} {r['best'] / base:>10.2f}x{extra}")
    end_to_end = results[-1]["best"]
    verdict = "met" if end_to_end >= TARGET else "NOT met"
    lines.append(f"target {TARGET:,} deltas/s end to end: {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stream_deltas", description=__doc__.split("\n")[0])
    parser.add_argument("--deltas", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--api", default="openai-completions",
                        choices=["openai-completions", "openai-responses", "anthropic-messages"])
    args = parser.parse_args(argv)
    results = trio.run(main_async, args)
    print(report(results, args))


if __name__ == "__main__":
    main()
