"""The benchmark's scripted LLM server: ``python -m benchmarks.server [--log FILE]``.

A :class:`pi_actors.testing.scripted_server.ScriptedLLM` whose script is a callable
(:func:`benchmarks.scenarios.reply_for`): each reply is computed from the request, so one
server answers every scenario for both CLIs. It serves the OpenAI chat-completions wire on
127.0.0.1, prints its port on the first stdout line, and serves until killed.

``--log FILE``: one line per request, ``<run id> <scenario> <number of messages> <unix time>``,
flushed at once, so the runner can check that a CLI really talked to this server, as often as
the scenario requires, and when (the times split a run into start-up, turns and the end). ``--scenario NAME`` answers every request as ``NAME`` even without a
marker in the prompt (for trying a CLI by hand).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import trio

from pi_actors.testing.scripted_server import ScriptedLLM

from .scenarios import parse_marker, prompt_for, reply_for

__all__ = ["make_script", "main"]


def make_script(log: Any = None, scenario: str | None = None):
    def script(body: dict):
        marker = parse_marker(body)
        if marker is None and scenario is not None:
            body = dict(body)
            body["messages"] = [{"role": "user", "content": prompt_for(scenario, "manual")}] + list(body.get("messages") or [])
            marker = (scenario, "manual")
        if log is not None:
            run, name = (marker[1], marker[0]) if marker else ("-", "-")
            log.write(f"{run} {name} {len(body.get('messages') or [])} {time.time():.6f}\n")
            log.flush()
        return reply_for(body)

    return script


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", help="append one line per request to this file")
    parser.add_argument("--scenario", help="answer unmarked requests as this scenario")
    args = parser.parse_args(argv)
    log = open(args.log, "a", encoding="utf-8") if args.log else None
    server = ScriptedLLM(make_script(log, args.scenario), port=args.port)

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(server.serve)
            print(port, flush=True)

    try:
        trio.run(run)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
