"""The sandbox through the real ``pi-actors`` CLI (scripted model, real actor processes).

Uses the ``scripted`` and ``env`` fixtures of ``conftest.py``: a scripted LLM server on
127.0.0.1 and a CLI environment (PI_ACTORS_DIR holding models.json, a work directory, a
marker variable that every process started for the test carries).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess

import trio
from _procs import cmdline, environ_has, live_pids, wait_exited
from conftest import CLI
from support.sandbox import is_descendant
from support.wire import ends_in_call_order

from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


def _events(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.decode().splitlines() if line.strip()]


def _tool_results(events: list[dict]) -> list[tuple[bool, str]]:
    return [(e["isError"], e["result"]["content"][0]["text"]) for e in ends_in_call_order(events)]


async def test_default_tools_write_in_the_workspace_and_see_no_keys_or_agent_files(scripted, env):
    env.env["ANTHROPIC_API_KEY"] = "sk-ant-cli-secret"
    scripted.script.append(
        Reply(
            tool_calls=[
                ScriptToolCall(name="write", arguments={"path": "notes/a.txt", "content": "hello"}),
                ScriptToolCall(
                    name="bash",
                    arguments={"command": 'echo "key=[$ANTHROPIC_API_KEY]"; cat "$PI_ACTORS_DIR/models.json" || echo hidden'},
                ),
            ]
        )
    )
    scripted.script.append(Reply(text="Done."))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--mode", "json", "go")
    assert done.returncode == 0, done.stderr.decode()
    (write, bash) = _tool_results(_events(done.stdout))
    assert write == (False, "Successfully wrote 5 bytes to notes/a.txt")
    assert (env.work / "notes" / "a.txt").read_text() == "hello"
    assert bash[1].startswith("key=[]\n") and bash[1].endswith("hidden\n") and "test-key" not in bash[1]
    assert done.stderr == b""  # sandboxed by default: no "without a sandbox" notice


async def test_sandbox_flag_read_only_refuses_writes_and_off_says_so(scripted, env):
    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="write", arguments={"path": "a.txt", "content": "x"})]))
    scripted.script.append(Reply(text="Done."))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--sandbox", "read-only", "--mode", "json", "go")
    assert done.returncode == 0, done.stderr.decode()
    ((is_error, text),) = _tool_results(_events(done.stdout))
    assert is_error and text.startswith("EROFS: read-only file system")
    assert not (env.work / "a.txt").exists()

    scripted.script.append(Reply(tool_calls=[ScriptToolCall(name="write", arguments={"path": "a.txt", "content": "x"})]))
    scripted.script.append(Reply(text="Done."))
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--sandbox", "off", "--mode", "json", "go")
    assert done.returncode == 0 and (env.work / "a.txt").read_text() == "x"
    assert "tools run without a sandbox (--sandbox off)" in done.stderr.decode()


def _marked(marker: str) -> list[int]:
    return live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={marker}"))


async def test_sigkill_of_the_root_during_8_sandboxed_tool_calls_leaves_no_process_within_2_s(scripted, env):
    base = 700000 + secrets.randbelow(100000)
    calls = [
        ScriptToolCall(name="bash", arguments={"command": f"sleep {base + i} & setsid sleep {base + i} & echo started {i}; wait"})
        for i in range(8)
    ]
    scripted.script.append(Reply(tool_calls=calls))
    proc = await trio.lowlevel.open_process(
        [CLI, "--model", "scripted/scripted-model", "--no-session", "--mode", "json", "run forever"],
        env=env.env,
        cwd=env.work,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        started: set[str] = set()
        buffer = b""
        with trio.fail_after(60):
            while len(started) < 8:
                data = await proc.stdout.receive_some()
                assert data, "the CLI ended before the tool calls started"
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    event = json.loads(line)
                    if event["type"] == "tool_execution_update" and event["partialResult"].get("content"):
                        started.add(event["toolCallId"])
        # The whole tree: every descendant of the root, and everything carrying the marker.
        tree = set(live_pids(lambda pid: is_descendant(pid, proc.pid))) | set(_marked(env.marker)) | {proc.pid}
        for i in range(8):
            # The shell and its two children (forked before "started"; exec'd or not yet).
            family = [pid for pid in tree if f"sleep {base + i}" in cmdline(pid) or f"started {i};" in cmdline(pid)]
            assert len(family) == 3, [cmdline(p) for p in family]
        assert any(cmdline(pid).split(" ", 1)[0].endswith("bwrap") for pid in tree)  # sandboxed
        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()
        await wait_exited(tree, timeout=2)
        assert not _marked(env.marker)
    finally:
        for pid in _marked(env.marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
