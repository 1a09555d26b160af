"""Run pi 0.73.1 and pi-actors side by side in ``--mode rpc`` on one scripted model, and
compare what they print (a developer's tool: pi is not installed in CI, so tests compare
against the shapes this printed, written down in tests/test_rpc_pi_073_shapes.py).

Use::

    .venv/bin/python -m tests.support.pi_side_by_side [--pi /tmp/pi073/node_modules/.bin/pi]

Each CLI gets a fresh config directory with the same ``models.json`` (pi: through
``PI_CODING_AGENT_DIR``, offline), its own session directory, and the same commands, sent one
after the other: a command is sent once the previous one's response has arrived and, for a
``prompt``, once its ``agent_end`` has too. :func:`normalize` replaces what must differ (ids,
timestamps, paths, durations) so that the two transcripts can be diffed line by line.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from pi_actors.testing.scripted_server import Reply, ScriptedLLM
from pi_actors.testing.wire_formats import ScriptToolCall

from .rpc import RpcClient

__all__ = ["normalize", "run_cli", "side_by_side"]

_VOLATILE_KEYS = {"timestamp", "id", "sessionId", "toolCallId", "parentId", "entryId", "firstKeptEntryId", "tokensBefore"}
_PATH = re.compile(r"/[^\s\"']*/(sessions|work)/[^\s\"']*")


def normalize(value: Any) -> Any:
    """``value`` with ids, timestamps and temporary paths replaced by placeholders."""
    if isinstance(value, dict):
        return {k: (f"<{k}>" if k in _VOLATILE_KEYS and v is not None else normalize(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, str):
        return _PATH.sub("<path>", value)
    return value


def _models_json(port: int) -> str:
    provider = {"baseUrl": f"http://127.0.0.1:{port}/v1", "api": "openai-completions", "apiKey": "k", "models": [{"id": "scripted-model"}]}
    return json.dumps({"providers": {"scripted": provider}})


async def run_cli(argv: list[str], env: dict[str, str], cwd: Path, commands: list[dict]) -> list[dict]:
    """Drive one CLI in RPC mode through ``commands``; every line it printed, decoded."""
    proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    rpc = RpcClient(proc, timeout=120)
    for n, command in enumerate(commands):
        command = {"id": f"r{n}", **command}
        await rpc.send(command)
        await rpc.until(lambda o, i=command["id"]: o.get("type") == "response" and o.get("id") in (i, None))
        if command.get("type") == "prompt" and rpc.lines[-1].get("success"):
            await rpc.until(lambda o: o.get("type") == "agent_end")
    assert proc.stdin is not None
    await proc.stdin.aclose()
    proc.kill()
    await proc.wait()
    return rpc.lines


async def side_by_side(pi: str, commands: list[dict], replies: list[Reply]) -> tuple[list[dict], list[dict]]:
    """pi's and pi-actors' output for ``commands``, each against its own copy of ``replies``."""
    ours = str(Path(sys.executable).with_name("pi-actors"))
    results = []
    for which in ("pi", "pi-actors"):
        server = ScriptedLLM(list(replies))
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                home, work, sessions = root / "home", root / "work", root / "sessions"
                for d in (home, work, sessions):
                    d.mkdir()
                (home / "models.json").write_text(_models_json(server.port))
                env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
                if which == "pi":
                    env.update(PI_CODING_AGENT_DIR=str(home), PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1", PI_TELEMETRY="0")
                    argv = [pi, "--provider", "scripted", "--model", "scripted-model"]
                else:
                    env["PI_ACTORS_DIR"] = str(home)
                    argv = [ours, "--model", "scripted/scripted-model"]
                argv += ["--session-dir", str(sessions), "--mode", "rpc"]
                results.append(await run_cli(argv, env, work, commands))
            nursery.cancel_scope.cancel()
    return results[0], results[1]


_SCENARIO = [
    {"message": "no type"},
    {"type": "set_thinking_level"},
    {"type": "cycle_thinking_level"},
    {"type": "fork", "entryId": "nope"},
    {"type": "get_state"},
    {"type": "prompt", "message": "hello"},
    {"type": "set_session_name", "name": "named"},
    {"type": "get_state"},
    {"type": "get_session_stats"},
    {"type": "compact"},
    {"type": "clone"},
]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.pi_side_by_side")
    parser.add_argument("--pi", default="/tmp/pi073/node_modules/.bin/pi")
    args = parser.parse_args()
    replies = [
        Reply(text="hi", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo hi"})]),
        Reply(text="done"),
        Reply(text="## Goal\nsummary"),
    ]
    theirs, ours = trio.run(side_by_side, args.pi, _SCENARIO, replies)
    a = [json.dumps(normalize(o), sort_keys=True) for o in theirs if o.get("type") != "message_update"]
    b = [json.dumps(normalize(o), sort_keys=True) for o in ours if o.get("type") != "message_update"]
    sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(a, b, "pi", "pi-actors", lineterm=""))


if __name__ == "__main__":
    main()
