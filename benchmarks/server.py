"""The benchmark's scripted LLM server: ``python -m benchmarks.server [--log FILE]``.

A :class:`pi_actors.testing.scripted_server.ScriptedLLM` whose script is a callable
(:func:`benchmarks.scenarios.reply_for`): each reply is computed from the request, so one
server answers every scenario for both CLIs. It serves the OpenAI chat-completions wire on
127.0.0.1, prints its port on the first stdout line, and serves until killed.

``--log FILE``: one line per request, ``<run id> <scenario> <number of messages> <unix time>``,
flushed at once, so the runner can check that a CLI really talked to this server, as often as
the scenario requires, and when (the times split a run into start-up, turns and the end);
and one line ``<run id> <scenario> <number of messages> <unix time> replied <unix time>``
when the request's reply has been written to its end: the first time is that moment, the
second the moment the request's last byte had been read (before the server parsed it). The
gap from the end of one reply to the arrival of the run's next request is the client's own
time for that turn, tool run included, with none of the server's work in it. ``--scenario NAME`` answers every request as ``NAME`` even without a
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

__all__ = ["make_script", "make_on_replied", "main"]


def _with_marker(body: dict, scenario: str | None) -> tuple[dict, tuple[str, str] | None]:
    marker = parse_marker(body)
    if marker is None and scenario is not None:
        body = dict(body)
        body["messages"] = [{"role": "user", "content": prompt_for(scenario, "manual")}] + list(body.get("messages") or [])
        marker = (scenario, "manual")
    return body, marker


def _log_line(log: Any, body: dict, marker: tuple[str, str] | None, when: float, suffix: str = "") -> None:
    """One log line, flushed at once (the runner reads the log while the server runs)."""
    run, name = (marker[1], marker[0]) if marker else ("-", "-")
    log.write(f"{run} {name} {len(body.get('messages') or [])} {when:.6f}{suffix}\n")
    log.flush()


def make_script(log: Any = None, scenario: str | None = None):
    """The server's script: the scenario's reply to each request, logged on arrival."""

    def script(body: dict):
        body, marker = _with_marker(body, scenario)
        if log is not None:
            _log_line(log, body, marker, time.time())
        return reply_for(body)

    return script


def make_on_replied(log: Any, scenario: str | None = None):
    """``ScriptedLLM``'s ``on_replied``: logs the end of each reply (see the module doc)."""

    def on_replied(record: dict) -> None:
        now = time.time()
        body = record.get("body")
        if isinstance(body, dict):
            body, marker = _with_marker(body, scenario)
            _log_line(log, body, marker, now, f" replied {record['received']:.6f}")

    return on_replied


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", help="append one line per request to this file")
    parser.add_argument("--scenario", help="answer unmarked requests as this scenario")
    args = parser.parse_args(argv)
    log = open(args.log, "a", encoding="utf-8") if args.log else None
    on_replied = make_on_replied(log, args.scenario) if log is not None else None
    server = ScriptedLLM(make_script(log, args.scenario), port=args.port, on_replied=on_replied)

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
