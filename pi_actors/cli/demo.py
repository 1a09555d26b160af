"""``pi-actors demo``: a real multi-process session against a bundled scripted model.

No API key and no network: a scripted LLM server (the real OpenAI chat-completions SSE wire)
runs on 127.0.0.1 inside this process; the provider actor talks to it through the official
SDK. Everything else is the ordinary runtime: coordinator, session store, tool pool and its
sandbox-less workers, in their own processes. The scripted model works in a scratch
directory: it makes parallel tool calls (a slow one first, so you can see results collected
in call order), then a second round that writes a file, then a summary.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

__all__ = ["main", "demo_reply"]

DEMO_FILES = {
    "notes.txt": "pi-actors demo scratch directory\n- the coordinator runs the agent loop\n- each tool call runs in a worker process\n",
    "hello.py": "print('hello from a tool worker')\n",
}


def _tool_results(body: dict) -> list[str]:
    return [str(m.get("content") or "") for m in body.get("messages") or [] if m.get("role") == "tool"]


def demo_reply(body: dict) -> Any:
    """The scripted model's next reply, computed from the request (OpenAI chat format)."""
    from ..testing.scripted_server import Reply
    from ..testing.wire_formats import ScriptToolCall

    results = _tool_results(body)
    if not results:
        return Reply(
            text="I'll look around the scratch directory, with several tools at once.",
            tool_calls=[
                ScriptToolCall(id="call_1", name="bash", arguments={"command": "sleep 0.5; echo 'slow call finished (started first)'"}),
                ScriptToolCall(id="call_2", name="bash", arguments={"command": "ls -la"}),
                ScriptToolCall(id="call_3", name="read", arguments={"path": "notes.txt"}),
                ScriptToolCall(id="call_4", name="bash", arguments={"command": "python3 hello.py"}),
            ],
            chunks=8,
        )
    if len(results) == 4:
        return Reply(
            text="Now I'll write a summary file and count the lines of every file.",
            tool_calls=[
                ScriptToolCall(
                    id="call_5", name="bash", arguments={"command": "echo 'written by the demo' > summary.txt && wc -l *"}
                ),
            ],
            chunks=6,
        )
    last = results[-1].strip().splitlines()
    total = last[-1] if last else "(no output)"
    return Reply(
        text=(
            "Done. I ran five tool calls in two rounds: four in parallel (their results came back "
            f"in call order even though the first was the slowest), then one that wrote summary.txt. "
            f"Line count: {total}."
        ),
        chunks=20,
    )


#: ``pi-actors demo --help``: what the module docstring says, as plain text.
DESCRIPTION = """\
Run a real multi-process session against a bundled scripted model: no API key, no network.

A scripted LLM server (the real OpenAI chat-completions wire) runs on 127.0.0.1 in this
process; the provider process talks to it through the official SDK. The coordinator, the
session store and the tool workers are the ordinary ones, each in its own process. The
model works in a scratch directory: four tool calls in parallel (the slowest first, to show
results collected in call order), then one that writes a file, then a summary."""


def main(argv: list[str]) -> int:
    """``pi-actors demo [--mode text|json] [--keep]``; returns the exit code."""
    from ._usage import CliParser

    parser = CliParser(prog="pi-actors demo", description=DESCRIPTION)
    parser.add_argument("--mode", choices=["text", "json"], default="text", help="text (default) or json: one event per line")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)

    import trio

    from ..ai import types as T
    from ..coding.system_prompt import build_system_prompt
    from ..testing.scripted_server import ScriptedLLM
    from ._render import JsonRenderer, LiveRenderer
    from .main import run_prompts, runtime_config

    scratch = tempfile.mkdtemp(prefix="pi-actors-demo-")
    for name, text in DEMO_FILES.items():
        with open(os.path.join(scratch, name), "w", encoding="utf-8") as f:
            f.write(text)
    renderer: Any = JsonRenderer() if args.mode == "json" else LiveRenderer()
    live = args.mode == "text"

    async def run() -> int:
        server = ScriptedLLM(demo_reply)
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            model = T.Model(
                id="scripted-demo",
                name="Scripted demo model",
                api="openai-completions",
                provider="scripted",
                base_url=server.base_url_openai,
            )
            tools = ["read", "bash"]
            config = runtime_config(
                model=model,
                thinking="off",
                tools=tools,
                cwd=scratch,
                system_prompt=build_system_prompt(cwd=scratch, tools=tools),
                no_session=False,
                session_dir=os.path.join(scratch, ".sessions"),
                agent_dir=os.path.join(scratch, ".pi-actors"),
                runtime_keys={"scripted": "demo-key"},
                key_sources={},
            )
            if live:
                print(f"pi-actors demo — scripted model on 127.0.0.1:{server.port}, scratch dir {scratch}\n")
                print("> Look around this directory and summarise it.")
            code = await run_prompts(config, ["Look around this directory and summarise it."], renderer)
            nursery.cancel_scope.cancel()
        if live:
            sessions = os.path.join(scratch, ".sessions")
            files = sorted(os.listdir(sessions)) if os.path.isdir(sessions) else []
            if files:
                path = os.path.join(sessions, files[-1])
                with open(path, encoding="utf-8") as f:
                    entries = [json.loads(line) for line in f if line.strip()]
                print(f"\nsession: {path} ({len(entries)} lines, fsynced at every message)")
            print(f"LLM requests served by the scripted model: {len(server.requests)}")
        return code

    try:
        return trio.run(run)
    finally:
        if args.keep:
            print(f"scratch directory kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
