"""Durability: the session store process is SIGKILLed at random points of a long session.

The coordinator forwards a message's ``message_end`` to the UI only after the store has
acknowledged it, and the store acknowledges only once the line is written and fsynced. So
whatever the moment of the kill, every message the UI saw end must be in the file, the file
must load, and a line torn by the kill must be dropped with a warning.
"""

from __future__ import annotations

import os
import random
import signal

import trio
import trio.lowlevel
from _procs import cmdline, live_pids, parent_pid

from pi_actors.ai import types as T
from pi_actors.cli._supervisor import open_local_runtime
from pi_actors.cli.main import runtime_config
from pi_actors.coding.session import SessionWriter, load_session
from pi_actors.protocol.events import AgentEventRebuilder
from pi_actors.runtime import RemoteError
from pi_actors.testing.scripted_server import Reply, ScriptedLLM
from pi_actors.testing.wire_formats import ScriptToolCall

TURNS = 50
RUNS = 20


def _fifty_turns(body: dict) -> Reply:
    done = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    if done < TURNS - 1:
        return Reply(text=f"turn {done}", tool_calls=[ScriptToolCall(name="read", arguments={"path": "note.txt"})], chunks=1)
    return Reply(text="all turns done", chunks=1)


def _config(server: ScriptedLLM, cwd, session_dir) -> dict:
    model = T.Model(id="scripted-model", api="openai-completions", provider="scripted", base_url=server.base_url_openai)
    return runtime_config(
        model=model,
        thinking="off",
        tools=["read"],
        cwd=str(cwd),
        system_prompt="durability test",
        agent_dir=str(cwd),
        session={"sessionDir": str(session_dir), "agentDir": str(cwd)},
        runtime_keys={"scripted": "k"},
        key_sources={},
    )


def _store_pid() -> int:
    me = os.getpid()
    (pid,) = live_pids(lambda p: cmdline(p).endswith("runtime.child session-store") and parent_pid(p) == me)
    return pid


async def test_killing_the_store_at_random_points_never_loses_an_acknowledged_entry(nursery, tmp_path):
    server = ScriptedLLM(_fifty_turns)
    await nursery.start(server.serve)
    (tmp_path / "note.txt").write_text("a small file\n")
    rng = random.Random(20261130)
    for run in range(RUNS):
        session_dir = tmp_path / f"sessions-{run}"
        kill_after = rng.randrange(1, 2 + 3 * TURNS)  # message_end events before the kill
        extra_ticks = rng.randrange(0, 40)  # then a random number of scheduler checkpoints
        acknowledged: list[dict] = []
        async with open_local_runtime(_config(server, tmp_path, session_dir)) as coordinator:
            store = _store_pid()
            rebuild = AgentEventRebuilder()
            try:
                async with coordinator.open_call("prompt", {"text": f"run {run}"}) as call:
                    async for data in call:
                        event = rebuild.apply(data)
                        if event["type"] == "message_end":
                            acknowledged.append(event["message"])
                            if len(acknowledged) == kill_after:
                                for _ in range(extra_ticks):
                                    await trio.lowlevel.checkpoint()
                                os.kill(store, signal.SIGKILL)
                    await call.result()
            except RemoteError as exc:
                # The run stops because its messages can no longer be saved (or, when the
                # supervisor saw the store die first, because the set was stopped with it).
                assert exc.code in ("write_failed", "actor_died"), exc
        if len(acknowledged) < kill_after:
            continue  # the session finished before the chosen moment (a short run)
        (path,) = list(session_dir.glob("*.jsonl"))
        loaded = load_session(str(path))
        stored = [e["message"] for e in loaded.entries if e["type"] == "message"]
        for message in acknowledged:
            assert message in stored, f"run {run}: an acknowledged {message['role']} message is missing"
        # The damaged file can be continued: the torn tail is cut and appends work again.
        writer = SessionWriter.resume(str(path))
        writer.append_message({"role": "user", "content": "after the crash", "timestamp": 1})
        writer.close()
        again = load_session(str(path))
        assert not again.warnings and again.entries[-1]["message"]["content"] == "after the crash"
    # A SIGKILLed process never leaves half a line (the kernel finishes a write() it began);
    # torn lines come from power loss. The loader's handling of those is pinned by
    # tests/test_session_file.py and tests/test_cli_sessions.py with hand-made torn files.
