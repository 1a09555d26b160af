"""CPU of the provider's request path per turn, in one process: ``python -m benchmarks.provider_request``.

    .venv/bin/python -m benchmarks.provider_request [--turns 50] [--rounds 3] [--api API]
        [--output-bytes N] [--profile FILE]

Starts the benchmark's scripted server, then calls the API's ``stream`` (the real SDK, inside
``reuse_clients`` as the provider actor calls it; ``--api``: openai-completions (default),
openai-responses, anthropic-messages, google-generative-ai, google-vertex or google-gemini-cli) once per turn of a ``turns-N`` conversation: the
context grows by one assistant tool call (``echo k``) and its result per turn (``k`` and a
newline, or ``--output-bytes`` of ``x`` before them, as (f)'s ~1 kB), with a ~1.4 kB system
prompt and four tools, as in the CLI's run. Reported: CPU (``time.process_time``, every
thread of this process) and wall per call, medians over the turns, per round, and the median
CPU of the first and the last ten turns (a build that grows with the session shows there).
Only the provider's own work is in it: no actor link, no coordinator. ``--profile FILE``: a
cProfile of one more round, written to FILE (``python -m pstats FILE``).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trio

from pi_actors.ai import types as T
from pi_actors.ai.options import StreamOptions
from pi_actors.ai.providers import openai_completions as oc
from pi_actors.ai.providers._common import reuse_clients

from . import scenarios as S
from .e2e import Server

SYSTEM = "You are an expert coding assistant. " * 40

TOOLS = [
    T.Tool(name=name, description=f"{name}: " + "Does what the tool does, with care. " * 8,
           parameters={"type": "object", "properties": {"path": {"type": "string", "description": "A path."},
                                                         "command": {"type": "string"},
                                                         "timeout": {"type": "number"}},
                       "required": ["path"], "additionalProperties": False})
    for name in ("read", "bash", "edit", "write")
]


def _assistant(k: int, api: str = oc.API) -> T.AssistantMessage:
    return T.AssistantMessage(
        content=[T.ToolCall(id=f"call_{k}", name="bash", arguments={"command": f"echo {k}"})],
        api=api, provider="scripted", model="scripted-model", usage=T.Usage(input=100, output=10),
        stop_reason="toolUse", timestamp=1_700_000_000_000 + k,
    )  # fmt: skip


def _result(k: int, output_bytes: int = 0) -> T.ToolResultMessage:
    text = "x" * output_bytes + f"\n{k}\n" if output_bytes else f"{k}\n"
    return T.ToolResultMessage(tool_call_id=f"call_{k}", tool_name="bash", content=[T.TextContent(text=text)],
                               is_error=False, timestamp=1_700_000_000_000 + k)


#: The provider module of each API this benchmark drives, and the base URL path it is given.
_APIS = {"openai-completions": ("openai_completions", "/v1"), "openai-responses": ("openai_responses", "/v1"),
         "anthropic-messages": ("anthropic_messages", ""), "google-generative-ai": ("google_generative_ai", "/v1beta"),
         "google-vertex": ("google_vertex", "/v1"),  # Vertex with the key: express mode, no credentials
         "google-gemini-cli": ("google_gemini_cli", "")}
#: The key each API is given (a Google login's JSON for Code Assist; "bench-key" otherwise).
_KEYS = {"google-gemini-cli": '{"token": "bench-key", "projectId": "bench-project"}'}


async def _round(api: Any, model: T.Model, turns: int, output_bytes: int) -> tuple[list[float], list[float]]:
    run_id = "pr" + uuid.uuid4().hex[:8]
    messages: list[T.Message] = [T.UserMessage(content=S.prompt_for(f"turns-{turns}", run_id), timestamp=1)]
    cpu: list[float] = []
    wall: list[float] = []

    async def emit(_event: Any) -> None:
        pass

    async with reuse_clients():
        for k in range(turns):
            context = T.Context(system_prompt=SYSTEM, messages=list(messages), tools=TOOLS)
            c0, w0 = time.process_time(), time.perf_counter()
            final = await api.stream(model, context, StreamOptions(api_key=_KEYS.get(model.api, "bench-key")), emit)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
            if final.stop_reason in ("error", "aborted"):
                raise RuntimeError(f"turn {k}: {final.stop_reason} {final.error_message}")
            messages += [_assistant(k, model.api), _result(k, output_bytes)]
    return cpu[1:], wall[1:]  # the first call opens the connection


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.provider_request")
    p.add_argument("--turns", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--api", choices=sorted(_APIS), default="openai-completions")
    p.add_argument("--output-bytes", type=int, default=0, help="bytes of each tool result (default: a line)")
    p.add_argument("--profile", help="write a cProfile of one more round here")
    args = p.parse_args(argv)
    module, path = _APIS[args.api]
    api = importlib.import_module(f"pi_actors.ai.providers.{module}")
    work = Path(tempfile.mkdtemp(prefix="pi-actors-provreq-"))
    server = Server(work)
    try:
        model = T.Model(id="scripted-model", api=args.api, provider="scripted",
                        base_url=f"http://127.0.0.1:{server.port}{path}")
        trio.run(api.warm_up)
        for r in range(args.rounds):
            cpu, wall = trio.run(_round, api, model, args.turns, args.output_bytes)
            print(f"round {r + 1}: CPU/call median {statistics.median(cpu) * 1e3:.3f} ms "
                  f"(min {min(cpu) * 1e3:.3f}), wall median {statistics.median(wall) * 1e3:.3f} ms; "
                  f"CPU turns 2-11 {statistics.median(cpu[:10]) * 1e3:.3f} ms, "
                  f"last 10 {statistics.median(cpu[-10:]) * 1e3:.3f} ms")
        if args.profile:
            prof = cProfile.Profile(time.thread_time)
            prof.enable()
            trio.run(_round, api, model, args.turns, args.output_bytes)
            prof.disable()
            prof.dump_stats(args.profile)
            print(f"profile written to {args.profile}")
    finally:
        server.proc.kill()
        server.proc.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
