"""``pi-actors serve --placement ray``: the real server as the Ray driver, each session's runtime
a Ray actor on a worker node of a local cluster (``tests/support/ray_cluster.py``: a head and
two workers, token auth) against the scripted model. The session store stays on the server;
clients talk to the server only; the server's agent files reach the node by value (a private
copy there). Killing the session's node (kill -9 its raylet) under a prompt fails that prompt
"outcome unknown" and the server reopens the session from its file on the other worker at
once: the client's attachment goes on without an attach, and nothing of it is left on the
dead node. A tool host runs as a Ray
actor on the node its custom resource names. The tests share one cluster and run in file
order: the node kill comes last. ``--ray-tool-hosts`` runs each session's tools in a tool
host of its own, a Ray actor on the node its custom resource names."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess

import pytest
import trio
from _procs import cmdline, environ_has, live_pids, wait_all_gone, wait_for_pids
from conftest import CLI, Env
from support.ray_cluster import ray_cluster_fixture
from support.wire import Lines

from pi_actors.runtime import RemoteError
from pi_actors.server.client import RemoteSession, connect
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall

pytest.importorskip("ray", reason="Ray is not installed (pip install 'pi-actors[ray]')")

pytestmark = pytest.mark.xdist_group("ray")

ray_cluster = ray_cluster_fixture(workers=2)


def _session_processes(marker: str) -> list[int]:
    """The session actors of this test (they carry its marker, shipped to the node)."""
    return live_pids(lambda pid: environ_has(pid, f"PI_ACTORS_TEST_MARKER={marker}") and "pi_actors.runtime.child" in cmdline(pid))


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        entries = f.read().decode(errors="replace").split("\0")
    return dict(entry.split("=", 1) for entry in entries if "=" in entry)


def _coordinator(marker: str) -> int:
    (pid,) = [p for p in _session_processes(marker) if "pi_actors.runtime.child coordinator" in cmdline(p)]
    return pid


async def _serve(env: Env, ray_cluster, *flags: str):  # type: ignore[no-untyped-def]
    return await trio.lowlevel.open_process(
        [CLI, "serve", "--listen", "127.0.0.1:0", "--model", "scripted-anthropic/scripted-claude", "--placement", "ray",
         "--ray-address", ray_cluster.address, "--ray-resources", '{"pi_worker": 1}', *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env, cwd=env.work,
    )  # fmt: skip


async def test_serve_runs_each_sessions_tools_in_a_tool_host_on_the_node_with_the_named_resource(tmp_path, scripted, ray_cluster):
    scripted.script += [
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "pwd; echo tools-ran"})]),
        Reply(text="done"),
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo ran-again"})]),
        Reply(text="done again"),
    ]
    env = Env(tmp_path, scripted)
    env.env.update(ray_cluster.env)
    target = ray_cluster.workers[-1]
    # No node has the resource asked for: one line at start-up, nothing served.
    refused = await _serve(env, ray_cluster, "--ray-tool-hosts", '{"pi_no_such_node": 1}')
    with trio.fail_after(120):
        await refused.wait()
        err = (await refused.stderr.receive_some(65536)).decode()
    assert refused.returncode == 1
    assert err.strip().splitlines() == [
        f"Error: no node of the Ray cluster at {ray_cluster.address} has the resources of --ray-tool-hosts (pi_no_such_node 1)"
    ]

    serve = await _serve(env, ray_cluster, "--tools", "bash", "--ray-tool-hosts", json.dumps({target.resource: 1}))
    try:
        out = Lines(serve.stdout)
        with trio.fail_after(180):
            token_file = (await out.next()).removeprefix("admin token file: ")
            assert await out.next() == "placement: ray"
            url = (await out.next()).removeprefix("listening: ")
            async with connect(url, token=open(token_file).read().strip()) as peer:
                sid = (await peer.call("create", {}))["sessionId"]
                name = f"ray-{sid}"
                assert (await peer.call("list"))["sessions"][0]["toolHost"] == name
                (host,) = live_pids(lambda p: "tool-host --connect" in cmdline(p) and f"--name {name}" in cmdline(p))
                assert ray_cluster.node_of(host) is target  # chosen by its resource
                s = await RemoteSession.attach(peer, sid)
                await s.call("prompt", {"text": "where do tools run?"})
                # The session's node runs no tool pool: its tools ran in the tool host, in its cwd.
                assert not [p for p in _session_processes(env.marker) if "child tool-pool" in cmdline(p)]
                result = json.dumps(scripted.requests[-1]["body"]["messages"][-1])
                assert f"{env.work}\\ntools-ran" in result
                credentials = json.loads((env.home / "server" / "credentials.json").read_text())
                assert name in json.dumps(credentials)
                # Its tool host dies (killed, as with its node): the server starts another on a
                # node with the resource, and the next tool call runs there.
                os.kill(host, signal.SIGKILL)
                (again,) = await wait_for_pids(
                    lambda: live_pids(lambda p: p != host and "tool-host --connect" in cmdline(p) and f"--name {name}" in cmdline(p)),
                    timeout=120,
                )
                assert ray_cluster.node_of(again) is target
                await s.call("prompt", {"text": "and again?"})
                assert "ran-again" in json.dumps(scripted.requests[-1]["body"]["messages"][-1])
                host = again
                await peer.call("remove", {"sessionId": sid})
            assert await wait_all_gone(lambda: live_pids(lambda q: q == host)) == []  # ended with its session
            assert name not in (env.home / "server" / "credentials.json").read_text()  # and its credential
    finally:
        serve.terminate()
        with trio.fail_after(30):
            await serve.wait()
    assert await wait_all_gone(lambda: _session_processes(env.marker)) == []


async def test_a_served_session_runs_on_a_worker_with_shipped_agent_files_and_is_reopened_at_once_when_its_node_dies(
    tmp_path, nursery, scripted, ray_cluster
):
    show = 'echo "dir=$PI_ACTORS_DIR"; env'
    scripted.script += [
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": show})]),
        Reply(text="first answer"),
        Reply(text="an answer the dying node never finishes", hang_after_start=True),
        Reply(text="second answer"),
    ]
    env = Env(tmp_path, scripted)
    (env.home / "settings.json").write_text(json.dumps({"retry": {"enabled": False}}))
    env.env.update(ray_cluster.env)
    serve = await trio.lowlevel.open_process(
        [CLI, "serve", "--listen", "127.0.0.1:0", "--model", "scripted-anthropic/scripted-claude", "--tools", "read,bash",
         "--placement", "ray", "--ray-address", ray_cluster.address, "--ray-resources", '{"pi_worker": 1}'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.env, cwd=env.work,
    )  # fmt: skip
    try:
        out = Lines(serve.stdout)
        with trio.fail_after(180):
            token_file = (await out.next()).removeprefix("admin token file: ")
            assert await out.next() == "placement: ray"
            url = (await out.next()).removeprefix("listening: ")
            token = open(token_file).read().strip()
            async with connect(url, token=token) as peer:
                sid = (await peer.call("create", {}))["sessionId"]
                first = _coordinator(env.marker)
                node = ray_cluster.node_of(first)
                assert node in ray_cluster.workers  # placed on a worker, through Ray
                on_node = [p for p in _session_processes(env.marker) if ray_cluster.node_of(p) is node]
                actors = [cmdline(p).split("pi_actors.runtime.child ", 1) for p in on_node]
                assert {"coordinator", "provider", "tool-pool"} <= {a[1].split()[0] for a in actors if len(a) == 2}
                # The store is the server's own child, here on the head, not on the node.
                (store,) = [p for p in _session_processes(env.marker) if "child session-store" in cmdline(p)]
                assert ray_cluster.node_of(store) is None

                s = await RemoteSession.attach(peer, sid)
                await s.call("prompt", {"text": "first question"})
                sessions = env.home / "server" / "sessions" / sid
                (name,) = [f for f in os.listdir(sessions) if f.endswith(".jsonl")]
                assert '"first answer"' in (sessions / name).read_text()
                # The agent files reached the node by value: a private copy there, not the
                # server's directory; the provider got its key, the sandboxed tool neither it
                # nor Ray's token.
                (provider,) = [p for p in on_node if "child provider" in cmdline(p)]
                private = _environ(provider)["PI_ACTORS_DIR"]
                assert private != str(env.home) and not private.startswith(str(tmp_path))
                assert open(os.path.join(private, "models.json")).read() == (env.home / "models.json").read_text()
                anthropic = [r for r in scripted.requests if r["path"].endswith("/v1/messages")]
                assert anthropic and all(r["headers"].get("authorization") == "Bearer anthropic-test-key" for r in anthropic)
                tool_output = json.dumps(anthropic[-1]["body"]["messages"])
                assert re.findall(r"dir=(/[^\s\\\"]*)", tool_output) == [private]
                assert "PATH=" in tool_output and "anthropic-test-key" not in tool_output
                assert ray_cluster.env["RAY_AUTH_TOKEN"] not in tool_output

                # The node dies under a prompt: the server reopens the session on the other
                # worker at once; the same attachment goes on, the lost prompt is not re-sent.
                failed: list[RemoteError] = []
                async with trio.open_nursery() as inner:

                    async def in_flight() -> None:
                        with pytest.raises(RemoteError) as info:
                            await s.call("prompt", {"text": "lost question"})
                        failed.append(info.value)

                    inner.start_soon(in_flight)
                    await scripted.wait_requests(len(scripted.requests) + 1)
                    sent_before = len(scripted.requests)
                    ray_cluster.kill_raylet(node)
                assert failed[0].code == "actor_died" and "the outcome of the prompt is unknown" in failed[0].message
                assert await wait_all_gone(lambda: [p for p in on_node if p in _session_processes(env.marker)]) == []

                await s.call("prompt", {"text": "second question"})  # no attach
                second = _coordinator(env.marker)
                assert ray_cluster.node_of(second) in ray_cluster.workers and ray_cluster.node_of(second) is not node
                assert len(scripted.requests) == sent_before + 1  # the lost prompt was not sent again
                sent = json.dumps(scripted.requests[-1]["body"]["messages"])
                assert sent.index("first question") < sent.index("first answer") < sent.index("second question")
    finally:
        serve.terminate()
        with trio.fail_after(30):
            await serve.wait()
    assert await wait_all_gone(lambda: _session_processes(env.marker)) == []
