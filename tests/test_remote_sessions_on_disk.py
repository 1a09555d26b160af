"""Issue 13 item 4: served sessions outlive their processes and the server. A session's id
is its file's id; after its coordinator dies, or after ``pi-actors serve`` is killed and
started again on the same state directory, ``attach`` reopens it from its file with its whole
history, clients that were attached re-attach by themselves, and its owner is still its
owner."""

from __future__ import annotations

import os
import signal
import stat
import subprocess

import pytest
import trio
from conftest import CLI, actor_config
from support.wire import Lines

from pi_actors.runtime import RemoteError
from pi_actors.server import Credentials, Server
from pi_actors.server.client import RemoteSession, connect
from pi_actors.testing.scripted_server import Reply


def _texts(request: dict) -> list[str]:
    """The text of every message an OpenAI chat request carried."""
    out = []
    for m in request["body"]["messages"]:
        content = m.get("content")
        out.append(content if isinstance(content, str) else "".join(p.get("text", "") for p in content or []))
    return out


@pytest.fixture
async def kept(scripted, tmp_path, nursery):
    """A server keeping its sessions in ``tmp_path/state``; client token "tok" (alice)."""
    served = tmp_path / "served"
    served.mkdir()
    creds = Credentials()
    creds.add("alice", "client", token="tok")
    srv = Server(
        lambda cwd: actor_config(scripted, cwd), default_cwd=str(served), shutdown_grace=1.0, credentials=creds,
        state_dir=str(tmp_path / "state"),
    )
    cm = srv.running()
    await cm.__aenter__()
    ws = await nursery.start(srv.serve_websocket, "127.0.0.1", 0, None)
    srv.url = f"ws://127.0.0.1:{ws.port}/"
    yield srv
    await cm.__aexit__(None, None, None)


async def test_a_session_whose_coordinator_died_reopens_from_its_file_on_attach(kept, scripted, tmp_path):
    scripted.script += [Reply(text="first answer"), Reply(text="second answer")]
    with trio.fail_after(120):
        async with connect(kept.url, token="tok") as peer:
            sid = (await peer.call("create", {}))["sessionId"]
            files = os.listdir(tmp_path / "state" / "sessions" / sid)
            assert f"_{sid}.jsonl" in "".join(files) and "owner.json" in files  # the id is the file's id
            directory = tmp_path / "state" / "sessions" / sid
            assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
            assert stat.S_IMODE(os.stat(directory.parent).st_mode) == 0o700
            assert all(stat.S_IMODE(os.stat(directory / f).st_mode) == 0o600 for f in files)
            s = await RemoteSession.attach(peer, sid)
            await s.call("prompt", {"text": "first question"})
            os.kill(kept.sessions[sid].processes["coordinator"].pid, signal.SIGKILL)
            while sid in kept.sessions:
                await kept.sessions[sid].ended.wait()
            listed = (await peer.call("list"))["sessions"]
            assert [(x["id"], x["live"], x["owner"]) for x in listed] == [(sid, False, "alice")]
            with pytest.raises(RemoteError) as info:
                await s.call("get_state")
            assert info.value.code == "session_terminated"
            again = await RemoteSession.attach(peer, sid)
            assert again.session_id == sid and again.attachment_id != s.attachment_id
            roles = [m["role"] for m in (await again.call("get_messages"))["messages"]]
            assert roles == ["user", "assistant"]
            await again.call("prompt", {"text": "second question"})
            assert _texts(scripted.requests[-1])[-3:] == ["first question", "first answer", "second question"]
            assert [x["live"] for x in (await peer.call("list"))["sessions"]] == [True]


async def _start_serve(env, port: int = 0):
    proc = await trio.lowlevel.open_process(
        [CLI, "serve", "--listen", f"127.0.0.1:{port}", "--model", "scripted/scripted-model", "--sandbox", "off", "--tools", "read"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )
    out = Lines(proc.stdout)
    with trio.fail_after(60):
        assert (await out.next()).startswith("admin token file: ")
        url = (await out.next()).removeprefix("listening: ")
    return proc, url


async def test_sessions_outlive_a_killed_server_and_attached_clients_reattach_by_themselves(env, scripted):
    scripted.script += [Reply(text="first answer"), Reply(text="second answer")]
    serve, url = await _start_serve(env)
    port = int(url.rsplit(":", 1)[1].strip("/"))
    follower = None
    try:
        minted = await env.run("serve", "token", "add", "alice")
        alice = minted.stdout.decode().strip()
        bob_token = open((await env.run("serve", "token", "add", "bob")).stdout.decode().strip()).read().strip()
        done = await env.run("attach", url, "--token-file", alice, "--new", "-p", "first question")
        assert done.returncode == 0 and done.stdout.decode().strip() == "first answer", done.stderr
        async with connect(url, token=open(alice).read().strip()) as peer:
            (listed,) = (await peer.call("list"))["sessions"]
        sid = listed["id"]

        follower = await trio.lowlevel.open_process(
            [CLI, "attach", url, "--token-file", alice, "--session", sid, "--mode", "json"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
        )
        lines = Lines(follower.stdout)
        is_a = lambda kind: lambda o: isinstance(o, dict) and o.get("type") == kind
        with trio.fail_after(60):
            await lines.until(is_a("attached"))
            assert len((await lines.until(is_a("snapshot")))["messages"]) == 2

            serve.send_signal(signal.SIGKILL)
            await serve.wait()
            await lines.until(lambda o: is_a("status")(o) and "disconnected" in o["message"])
            serve, url2 = await _start_serve(env, port)
            assert url2 == url

            # the attached client comes back by itself, to the whole history
            await lines.until(is_a("attached"))
            snap = await lines.until(is_a("snapshot"))
            assert [m["role"] for m in snap["messages"]] == ["user", "assistant"]

            done = await env.run("attach", url, "--token-file", alice, "--session", sid, "-p", "second question")
            assert done.returncode == 0, done.stderr
            assert done.stdout.decode().strip() == "second answer"
            assert _texts(scripted.requests[-1])[-3:] == ["first question", "first answer", "second question"]
            end = await lines.until(is_a("agent_end"))
            assert end["messages"][-1]["content"][0]["text"] == "second answer"

            # ownership survived the restart
            async with connect(url, token=bob_token) as bob:
                assert (await bob.call("list"))["sessions"] == []
                with pytest.raises(RemoteError) as info:
                    await bob.call("attach", {"sessionId": sid})
                assert info.value.code == "forbidden"
            await follower.stdin.aclose()
            assert await follower.wait() == 0
    finally:
        for proc in (follower, serve):
            if proc is not None and proc.returncode is None:
                proc.terminate()
                with trio.fail_after(20):
                    await proc.wait()


async def test_attach_to_an_unknown_session_is_one_line_not_a_traceback(env, server):
    env.env["PI_ACTORS_TOKEN"] = "tok"
    done = await env.run("attach", server.url, "--session", "no-such-session", "-p", "hi")
    assert done.returncode == 1
    assert done.stderr.decode().strip().splitlines() == ["Error: no session 'no-such-session' (session_not_found)"]


async def test_attach_line_mode_to_another_clients_session_is_one_line(env, server):
    async with connect(server.url, token="admin-tok") as admin:
        sid = (await admin.call("create", {}))["sessionId"]
    env.env["PI_ACTORS_TOKEN"] = "tok"
    done = await env.run("attach", server.url, "--session", sid, "--mode", "json")
    assert done.returncode == 1
    assert done.stderr.decode().strip().splitlines() == [f"Error: session {sid} belongs to another identity (forbidden)"]


async def test_an_attached_client_follows_its_session_across_a_graceful_server_restart(scripted, env, tmp_path):
    """The shutdown path: the session ends with ``session_terminated``, the server drains,
    then is gone; the client keeps retrying and re-attaches to the reopened session."""
    scripted.script += [Reply(text="before the restart"), Reply(text="after the restart")]
    served = tmp_path / "served"
    served.mkdir()
    creds = Credentials()
    creds.add("alice", "client", token="tok")

    def make_server() -> Server:
        return Server(
            lambda cwd: actor_config(scripted, cwd), default_cwd=str(served), shutdown_grace=1.0, credentials=creds,
            state_dir=str(tmp_path / "state"),
        )

    is_a = lambda kind: lambda o: isinstance(o, dict) and o.get("type") == kind
    follower = None
    try:
        with trio.fail_after(120):
            first = make_server()
            async with first.running(), trio.open_nursery() as nursery:
                port = (await nursery.start(first.serve_websocket, "127.0.0.1", 0, None)).port
                url = f"ws://127.0.0.1:{port}/"
                async with connect(url, token="tok") as peer:
                    sid = (await peer.call("create", {}))["sessionId"]
                follower = await trio.lowlevel.open_process(
                    [CLI, "attach", url, "--token", "tok", "--session", sid, "--mode", "json"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
                )
                lines = Lines(follower.stdout)
                await lines.until(is_a("snapshot"))
                await follower.stdin.send_all(b"one\n")
                await lines.until(is_a("agent_end"))
                nursery.cancel_scope.cancel()  # the server shuts down (its sessions end first)
            await lines.until(lambda o: is_a("status")(o) and "disconnected" in o["message"])
            second = make_server()
            async with second.running(), trio.open_nursery() as nursery:
                await nursery.start(second.serve_websocket, "127.0.0.1", port, None)
                await lines.until(is_a("attached"))
                snap = await lines.until(is_a("snapshot"))
                assert [m["role"] for m in snap["messages"]] == ["user", "assistant"]
                await follower.stdin.send_all(b"two\n")
                end = await lines.until(is_a("agent_end"))
                assert end["messages"][-1]["content"][0]["text"] == "after the restart"
                await follower.stdin.aclose()
                assert await follower.wait() == 0
                nursery.cancel_scope.cancel()
    finally:
        if follower is not None and follower.returncode is None:
            follower.kill()
            await follower.wait()


async def test_a_forked_session_reopens_the_fork(kept, scripted, tmp_path):
    scripted.script += [Reply(text="a1"), Reply(text="a2"), Reply(text="a3")]
    with trio.fail_after(120):
        async with connect(kept.url, token="tok") as peer:
            sid = (await peer.call("create", {}))["sessionId"]
            s = await RemoteSession.attach(peer, sid)
            await s.call("prompt", {"text": "q1"})
            await s.call("prompt", {"text": "q2"})
            second = [m for m in (await s.call("fork_messages"))["messages"] if m["text"] == "q2"][0]
            forked = await s.call("fork", {"entryId": second["entryId"]})
            assert forked["text"] == "q2" and os.path.dirname(forked["path"]) == str(tmp_path / "state" / "sessions" / sid)
            os.kill(kept.sessions[sid].processes["coordinator"].pid, signal.SIGKILL)
            while sid in kept.sessions:
                await kept.sessions[sid].ended.wait()
            again = await RemoteSession.attach(peer, sid)
            texts = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in (await again.call("get_messages"))["messages"]]
            assert texts == ["q1", "a1"]
            await again.call("prompt", {"text": "q3"})
            assert _texts(scripted.requests[-1])[-3:] == ["q1", "a1", "q3"]
