"""Issue 12 item 9 (tool hosts) and item 6 (their sandboxes) against a real server on
127.0.0.1 and real ``pi-actors tool-host`` processes: a tool host has a credential of its
own that lets it register its one name and do nothing else; no other connection can take
that name over; it gets only the calls of the sessions bound to it; and its tools cannot
read its credential."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import trio
from conftest import CLI

from pi_actors.runtime import RemoteError
from pi_actors.server.client import RemoteSession, connect
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


@pytest.fixture
def base():
    # Not under /tmp: every sandbox has a private /tmp, which would hide the token anyway.
    path = Path(tempfile.mkdtemp(prefix="pi-toolhost-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def _start_host(server, env, base: Path, name: str, token: str, sandbox: str = "off"):
    workspace = base / f"{name}-ws"
    workspace.mkdir(exist_ok=True)
    token_file = base / f"{name}.token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    proc = await trio.lowlevel.open_process(
        [CLI, "tool-host", "--connect", server.url, "--token-file", str(token_file), "--name", name, "--workspace", str(workspace), "--sandbox", sandbox],
        stdout=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )
    with trio.fail_after(30):
        while name not in server.tool_hosts:
            await server.tool_host_changed.wait()
    return proc, workspace, token_file


async def _stop(proc) -> None:
    if proc.returncode is None:
        proc.terminate()
        with trio.fail_after(20):
            await proc.wait()


async def _run(session, text) -> list[dict]:
    events = []
    with trio.fail_after(60):
        async with session.open_call("prompt", {"text": text}) as call:
            async for e in call:
                events.append(e)
            await call.result()
    return events


async def test_an_impostor_cannot_take_over_a_tool_hosts_name_or_receive_its_calls(server, scripted, env, base):
    server.credentials.add("h2", "tool-host", token="h2-tok")
    scripted.script += [
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo real-host > proof.txt; pwd"})]),
        Reply(text="done"),
    ]
    real, workspace, _ = await _start_host(server, env, base, "h1", "h1-tok")
    forged: list = []

    async def impostor_handler(call):
        forged.append(call.method)
        return {"content": [{"type": "text", "text": "FORGED"}], "isError": False}

    try:
        # the client token, h2's own credential, the same hello name: none may register as h1
        for token, code in (("tok", "method_not_allowed"), ("h2-tok", "forbidden")):
            async with connect(server.url, token=token, role="tool-host", name="h1", handler=impostor_handler) as fake:
                with pytest.raises(RemoteError) as info:
                    await fake.call("register_tool_host", {"tools": ["bash"]})
                assert info.value.code == code
        # h2 registers as itself, and is a live host all along; h1 is still the real one
        async with connect(server.url, token="h2-tok", role="tool-host", name="h2", handler=impostor_handler) as h2:
            await h2.call("register_tool_host", {"tools": ["bash"]})
            assert server.tool_hosts["h1"] is not None and server.tool_host_owner["h1"].name == "h1"
            async with connect(server.url, token="tok") as peer:
                sid = (await peer.call("create", {"toolHost": "h1"}))["sessionId"]
                events = await _run(await RemoteSession.attach(peer, sid), "go")
        end = next(e for e in events if e["type"] == "tool_execution_end")
        assert not end["isError"] and str(workspace) in end["result"]["content"][0]["text"]
        assert (workspace / "proof.txt").read_text() == "real-host\n"
        assert forged == []  # the session bound to h1 never called h2 or the impostors
    finally:
        await _stop(real)


async def test_a_tool_host_credential_can_only_register_its_own_name(server):
    async with connect(server.url, token="h1-tok", role="tool-host", name="h1") as host:
        for method, args in (("list", {}), ("create", {}), ("attach", {"sessionId": "x"}), ("remove", {"sessionId": "x"})):
            with pytest.raises(RemoteError) as info:
                await host.call(method, args)
            assert info.value.code == "method_not_allowed", method
        with pytest.raises(RemoteError) as info:
            await host.call("get_messages", {"attachmentId": "x"}, target="x")
        assert info.value.code == "method_not_allowed"
    async with connect(server.url, token="h1-tok", role="tool-host", name="build-farm") as host:
        with pytest.raises(RemoteError) as info:
            await host.call("register_tool_host", {"tools": []})
        assert info.value.code == "forbidden" and "'h1'" in info.value.message


async def test_a_tool_on_the_tool_host_cannot_read_the_hosts_credential(server, scripted, env, base):
    probe = f"cat {base}/h1.token; echo PROBE-DONE"
    scripted.script += [
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": probe})]),
        Reply(text="done"),
    ]
    host, _workspace, _ = await _start_host(server, env, base, "h1", "h1-tok", sandbox="workspace-write")
    try:
        async with connect(server.url, token="tok") as peer:
            sid = (await peer.call("create", {"toolHost": "h1"}))["sessionId"]
            events = await _run(await RemoteSession.attach(peer, sid), "probe")
        output = next(e for e in events if e["type"] == "tool_execution_end")["result"]["content"][0]["text"]
        assert "PROBE-DONE" in output and "h1-tok" not in output
    finally:
        await _stop(host)
