"""``pi-actors serve`` and ``pi-actors attach`` as real processes on 127.0.0.1."""

from __future__ import annotations

import os
import stat
import subprocess

import trio
from conftest import CLI
from support.wire import Lines

from pi_actors.server.client import RemoteSession, connect
from pi_actors.testing.scripted_server import Reply


async def test_serve_prints_its_admin_token_file_and_address_and_attach_p_runs_a_prompt(env, scripted, tmp_path):
    scripted.script += [Reply(text="remote answer")]
    sock = tmp_path / "run" / "s.sock"
    proc = await trio.lowlevel.open_process(
        [CLI, "serve", "--listen", "127.0.0.1:0", "--unix", str(sock), "--model", "scripted/scripted-model", "--no-session", "--sandbox", "off"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env, cwd=env.work,
    )
    try:
        with trio.fail_after(60):
            out = Lines(proc.stdout)
            token_file = (await out.next()).removeprefix("admin token file: ")
            assert token_file == str(env.home / "server" / "admin.token")
            assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
            assert len(open(token_file).read().strip()) >= 32
            url = (await out.next()).removeprefix("listening: ")
            unix = (await out.next()).removeprefix("listening: ")
            assert url.startswith("ws://127.0.0.1:") and unix == f"unix:{sock}"
            done = await env.run("attach", url, "--token-file", token_file, "--new", "-p", "hi")
            assert done.returncode == 0, done.stderr
            assert done.stdout.decode().strip() == "remote answer"
            bad = await env.run("attach", url, "--token", "wrong", "--new", "-p", "hi")
            assert bad.returncode == 1 and b"401" in bad.stderr
            async with connect(unix) as peer:
                assert len((await peer.call("list"))["sessions"]) == 1
    finally:
        proc.terminate()
        with trio.fail_after(20):
            await proc.wait()


async def test_attach_line_mode_reconnects_reattaches_and_rerenders_from_the_snapshot(server, scripted, env):
    scripted.script += [Reply(text="first answer"), Reply(text="second answer")]
    async with connect(server.url, token="tok") as peer:
        sid = (await peer.call("create", {}))["sessionId"]
    proc = await trio.lowlevel.open_process(
        [CLI, "attach", server.url, "--token", "tok", "--session", sid, "--mode", "json"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env, cwd=env.work,
    )
    try:
        with trio.fail_after(60):
            out = Lines(proc.stdout)
            first = await out.until(lambda o: isinstance(o, dict) and o.get("type") == "attached")
            snap = await out.until(lambda o: isinstance(o, dict) and o.get("type") == "snapshot")
            assert snap["messages"] == []
            await proc.stdin.send_all(b"hello\n")
            end = await out.until(lambda o: isinstance(o, dict) and o.get("type") == "agent_end")
            assert end["messages"][-1]["content"][0]["text"] == "first answer"
            server.disconnect_clients()
            # (a prompt whose result had not arrived yet is reported as "outcome unknown", not re-sent)
            await out.until(lambda o: isinstance(o, dict) and o.get("type") == "status" and "disconnected" in o["message"])
            again = await out.until(lambda o: isinstance(o, dict) and o.get("type") == "attached")
            assert again["sessionId"] == sid and again["attachmentId"] != first["attachmentId"]
            snap2 = await out.until(lambda o: isinstance(o, dict) and o.get("type") == "snapshot")
            assert [m["role"] for m in snap2["messages"]] == ["user", "assistant"]
            await proc.stdin.send_all(b"more\n")
            end = await out.until(lambda o: isinstance(o, dict) and o.get("type") == "agent_end")
            assert end["messages"][-1]["content"][0]["text"] == "second answer"
            await proc.stdin.aclose()
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_attach_p_fails_an_in_flight_prompt_as_outcome_unknown_on_disconnect(server, scripted, env):
    from pi_actors.runtime import ConnectionLost

    scripted.script += [Reply(text="an answer that never ends", chunks=6, hang_after_start=True)]
    async with connect(server.url, token="tok") as peer:
        sid = (await peer.call("create", {}))["sessionId"]
    proc = await trio.lowlevel.open_process(
        [CLI, "attach", server.url, "--token", "tok", "--session", sid, "-p", "go"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env, cwd=env.work,
    )
    try:
        with trio.fail_after(60):
            try:
                async with connect(server.url, token="tok") as watcher:
                    s = await RemoteSession.attach(watcher, sid)
                    async with s.open_call("subscribe") as sub:
                        async for chunk in sub:
                            if chunk.get("event", {}).get("type") == "message_update":
                                server.disconnect_clients()
            except ConnectionLost:
                pass
            assert await proc.wait() == 1
            err = b""
            while chunk := await proc.stderr.receive_some(65536):
                err += chunk
            assert b"outcome of the call is unknown" in err
            async with connect(server.url, token="tok") as again:
                s = await RemoteSession.attach(again, sid)
                while (await s.call("get_state"))["isStreaming"]:
                    await s.call("abort")
                users = [m for m in (await s.call("get_messages"))["messages"] if m["role"] == "user"]
                assert len(users) == 1  # nothing was replayed
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
