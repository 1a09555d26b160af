"""``pi-actors tool-host``: a session created with ``toolHost`` runs its tool calls there; a
host dying mid-call gives error results and the session goes on; a reconnecting host is used
again."""

from __future__ import annotations

import signal
import subprocess

import trio
from conftest import CLI

from pi_actors.server.client import RemoteSession, connect
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


def _token_file(workspace):
    """Tool host h1's own credential ("h1-tok" in conftest.served_credentials), in a 0600 file
    beside its workspace."""
    path = workspace.parent / "h1.token"
    if not path.exists():
        path.write_text("h1-tok\n")
        path.chmod(0o600)
    return path


async def _start_host(server, env, workspace):
    proc = await trio.lowlevel.open_process(
        [CLI, "tool-host", "--connect", server.url, "--token-file", str(_token_file(workspace)), "--name", "h1", "--workspace", str(workspace), "--sandbox", "off"],
        stdout=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )
    with trio.fail_after(30):
        while "h1" not in server.tool_hosts:
            await server.tool_host_changed.wait()
    return proc


async def _run(session, text) -> list[dict]:
    events = []
    async with session.open_call("prompt", {"text": text}) as call:
        async for e in call:
            events.append(e)
        await call.result()
    return events


async def test_tool_calls_run_on_the_tool_host_and_survive_its_death(server, scripted, env, tmp_path):
    workspace = tmp_path / "host-ws"
    workspace.mkdir()
    scripted.script += [
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "pwd; echo remote > made.txt"})]),
        Reply(text="done one"),
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "sleep 60"})]),
        Reply(text="done two"),
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo back again"})]),
        Reply(text="done three"),
    ]
    host = await _start_host(server, env, workspace)
    try:
        async with connect(server.url, token="tok") as peer:
            hosts = (await peer.call("list"))["toolHosts"]
            assert hosts[0]["name"] == "h1" and {"bash", "read"} <= set(hosts[0]["tools"])
            sid = (await peer.call("create", {"toolHost": "h1"}))["sessionId"]
            s = await RemoteSession.attach(peer, sid)
            with trio.fail_after(60):
                events = await _run(s, "one")
            end = [e for e in events if e["type"] == "tool_execution_end"][0]
            assert not end["isError"]
            assert str(workspace) in end["result"]["content"][0]["text"]
            assert (workspace / "made.txt").read_text() == "remote\n"

            # the host dies while its call runs: an error result, and the run goes on
            with trio.fail_after(60):
                events = []
                async with s.open_call("prompt", {"text": "two"}) as call:
                    async for e in call:
                        events.append(e)
                        if e["type"] == "tool_execution_start":
                            host.send_signal(signal.SIGKILL)
                    await call.result()
            end = [e for e in events if e["type"] == "tool_execution_end"][0]
            assert end["isError"]
            assert "tool host" in end["result"]["content"][0]["text"]
            assert events[-1]["type"] == "agent_end"
            await host.wait()

            # a host that comes back is used again
            host = await _start_host(server, env, workspace)
            with trio.fail_after(60):
                events = await _run(s, "three")
            end = [e for e in events if e["type"] == "tool_execution_end"][0]
            assert not end["isError"] and "back again" in end["result"]["content"][0]["text"]
    finally:
        if host.returncode is None:
            host.terminate()
            with trio.fail_after(20):
                await host.wait()


async def test_the_tool_host_sandbox_confines_writes_to_its_workspace(server, scripted, env):
    import shutil
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="pi-toolhost-", dir="/var/tmp"))
    try:
        workspace, outside = base / "ws", base / "outside"
        workspace.mkdir()
        outside.mkdir()
        scripted.script += [
            Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"echo in > inside.txt; echo out > {outside}/escaped.txt"})]),
            Reply(text="ok"),
        ]
        proc = await trio.lowlevel.open_process(
            [CLI, "tool-host", "--connect", server.url, "--token-file", str(_token_file(workspace)), "--name", "h1", "--workspace", str(workspace), "--sandbox", "workspace-write"],
            stdout=subprocess.DEVNULL, env=env.env, cwd=env.work,
        )
        try:
            with trio.fail_after(30):
                while "h1" not in server.tool_hosts:
                    await server.tool_host_changed.wait()
            async with connect(server.url, token="tok") as peer:
                sid = (await peer.call("create", {"toolHost": "h1"}))["sessionId"]
                s = await RemoteSession.attach(peer, sid)
                with trio.fail_after(60):
                    await _run(s, "try")
            assert (workspace / "inside.txt").read_text() == "in\n"
            assert not (outside / "escaped.txt").exists()
        finally:
            proc.terminate()
            with trio.fail_after(20):
                await proc.wait()
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def test_a_tool_host_that_answers_a_malformed_result_is_reported_not_believed(server, scripted):
    """A host that claims success with a result of the wrong shape (content as a bare string)
    gives the model an error naming what was wrong, and the session goes on."""
    scripted.script += [
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "rm -rf /"})]),
        Reply(text="noted"),
    ]

    async def lying_host(call):
        return {"content": "done, nothing to see", "details": None, "isError": False}

    async with connect(server.url, token="h1-tok", role="tool-host", name="h1", handler=lying_host) as host:
        await host.call("register_tool_host", {"tools": ["bash"]})
        async with connect(server.url, token="tok") as peer:
            sid = (await peer.call("create", {"toolHost": "h1"}))["sessionId"]
            s = await RemoteSession.attach(peer, sid)
            with trio.fail_after(60):
                events = await _run(s, "clean up")
    end = [e for e in events if e["type"] == "tool_execution_end"][0]
    text = end["result"]["content"][0]["text"]
    assert end["isError"] and "does not match" in text and "$.content" in text, end
    assert events[-1]["type"] == "agent_end"
