"""Issue 19 (3): served sessions placed through the placement interface. A session placed on
another node (here ``ProcessNodes``: a node stood in by a process of its own, the same path
Ray takes without a cluster) answers through the server; its store stays on the server, so
an acknowledged entry is on the head's disk when the node dies; the session is then reopened
on a new node from its file, and the old node leaves nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess

import msgspec
import pytest
import trio
from conftest import CLI, actor_config
from hypothesis import given, settings
from hypothesis import strategies as st
from support.wire import Lines

from pi_actors.coding.session import SessionWriter
from pi_actors.coding.session.roots import resolved_header, stored_header
from pi_actors.placement import NodeSessions, ProcessNodes, from_root, in_root, rebase_paths, rebase_prompt_cwd
from pi_actors.runtime import RemoteError
from pi_actors.server import Credentials, Server
from pi_actors.server.client import RemoteSession, connect
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (its children, theirs, ...)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            children = open(f"/proc/{pid}/task/{task}/children").read().split()
        except OSError:
            continue
        for child in map(int, children):
            found += [child, *_descendants(child)]
    return found


async def _gone(pids: list[int]) -> None:
    """Wait until every process of ``pids`` has exited (a pidfd each: no polling)."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            await trio.lowlevel.wait_readable(fd)
        finally:
            os.close(fd)


def _file_texts(path: str) -> list[str]:
    texts = []
    for line in open(path, encoding="utf-8"):
        entry = json.loads(line)
        message = entry.get("message") or {}
        for part in message.get("content") or []:
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(f"{message['role']}: {part['text']}")
    return texts


@pytest.fixture
async def placed(scripted, tmp_path, nursery):
    """A server keeping its sessions in ``tmp_path/state`` whose sessions run on process nodes."""
    served = tmp_path / "served"
    served.mkdir()
    creds = Credentials()
    creds.add("alice", "client", token="tok")
    nodes = ProcessNodes()
    srv = Server(
        lambda cwd: actor_config(scripted, cwd), default_cwd=str(served), shutdown_grace=1.0, credentials=creds,
        state_dir=str(tmp_path / "state"), placement=NodeSessions(nodes),
    )  # fmt: skip
    srv.nodes = nodes
    cm = srv.running()
    await cm.__aenter__()
    ws = await nursery.start(srv.serve_websocket, "127.0.0.1", 0, None)
    srv.url = f"ws://127.0.0.1:{ws.port}/"
    yield srv
    await cm.__aexit__(None, None, None)
    assert nodes.nodes == []  # every node stopped with the server


async def test_a_session_whose_node_dies_is_reopened_elsewhere_at_once_and_its_attached_client_goes_on(
    placed, scripted, tmp_path
):
    scripted.script += [
        Reply(text="first answer"),
        Reply(text="an answer the dying node never finishes", hang_after_start=True),
        Reply(text="third answer"),
    ]
    with trio.fail_after(120):
        async with connect(placed.url, token="tok") as peer:
            sid = (await peer.call("create", {}))["sessionId"]
            session = placed.sessions[sid]
            (node,) = placed.nodes.nodes
            assert session.node == f"{socket.gethostname()}/pid {node.process.pid}"
            # Only the store runs here, on the head; the coordinator, provider and pool on the node.
            assert set(session.processes) == {"session-store"}
            on_node = _descendants(node.process.pid)
            assert len(on_node) >= 3
            s = await RemoteSession.attach(peer, sid)
            done = await s.call("prompt", {"text": "first question"})
            assert done is None or isinstance(done, dict)
            (name,) = [f for f in os.listdir(tmp_path / "state" / "sessions" / sid) if f.endswith(".jsonl")]
            head_file = str(tmp_path / "state" / "sessions" / sid / name)
            assert _file_texts(head_file) == ["user: first question", "assistant: first answer"]

            failed: list[RemoteError] = []
            async with trio.open_nursery() as nursery:

                async def in_flight() -> None:
                    with pytest.raises(RemoteError) as info:
                        await s.call("prompt", {"text": "second question"})
                    failed.append(info.value)

                nursery.start_soon(in_flight)
                await scripted.wait_requests(2)  # the second prompt is streaming on the node
                acknowledged = _file_texts(head_file)
                node.kill()  # the node dies with everything on it
            # The prompt in flight: outcome unknown, not re-sent; the session is not over.
            assert failed[0].code == "actor_died" and "the outcome of the prompt is unknown" in failed[0].message
            await _gone([node.process.pid, *on_node])  # nothing stray
            assert _file_texts(head_file)[: len(acknowledged)] == acknowledged  # acknowledged entries on the head's disk

            # No attach: the same attachment reaches the session reopened on a new node.
            await s.call("prompt", {"text": "third question"})
            (new_node,) = placed.nodes.nodes
            assert new_node is not node and placed.sessions[sid] is session
            assert session.node.endswith(f"pid {new_node.process.pid}")
            assert len(scripted.requests) == 3  # the second prompt was never sent again
            sent = [m.get("content") for m in scripted.requests[-1]["body"]["messages"]]
            texts = [c if isinstance(c, str) else c[0]["text"] for c in sent]
            assert [t for t in texts if "question" in t or "answer" in t][:2] == ["first question", "first answer"]
            assert texts[-1] == "third question"
            assert _file_texts(head_file)[-2:] == ["user: third question", "assistant: third answer"]
            assert (await s.call("get_state"))["sessionId"] == sid


async def test_serve_placement_flags_say_what_is_wrong_in_one_line(env):
    done = await env.run("serve", "--listen", "127.0.0.1:0", "--ray-address", "10.0.0.1:6379")
    assert done.returncode != 0
    assert done.stderr.decode().strip().splitlines() == ["Error: --ray-address and --ray-resources go with --placement ray"]
    done = await env.run("serve", "--listen", "127.0.0.1:0", "--node-workspace-root", "/srv/work")
    assert done.returncode != 0
    assert done.stderr.decode().strip().splitlines() == ["Error: --node-workspace-root goes with --placement ray"]
    done = await env.run("serve", "--listen", "127.0.0.1:0", "--placement", "ray", "--node-workspace-root", "srv/work")
    assert done.returncode != 0
    assert done.stderr.decode().strip().splitlines() == [
        "Error: --node-workspace-root must be an absolute path (a directory on the nodes), not 'srv/work'"]
    proc = await trio.lowlevel.open_process(
        [CLI, "serve", "--listen", "127.0.0.1:0", "--placement", "local", "--model", "scripted/scripted-model"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env.env, cwd=env.work,
    )  # fmt: skip
    try:
        out = Lines(proc.stdout)
        with trio.fail_after(60):
            assert (await out.next()).startswith("admin token file: ")
            assert (await out.next()).startswith("listening: ws://127.0.0.1:")
    finally:
        proc.terminate()
        with trio.fail_after(20):
            await proc.wait()


async def _serving(make, root, state, placement=None):
    creds = Credentials()
    creds.add("alice", "client", token="tok")
    return Server(make, root=str(root), default_cwd=str(root / "proj"), shutdown_grace=1.0, credentials=creds,
                  state_dir=str(state), placement=placement)  # fmt: skip


async def test_a_session_written_under_workspace_root_a_is_forked_and_resumed_under_root_b(scripted, tmp_path, nursery):
    """Issue 19 (4): the server keeps a session's cwd relative to its root, in its index and
    in its file's header (``cwd``, and a fork's ``parentSession``), so the session reopens
    in the same project under another absolute root (a moved workspace, another node)."""
    root_a, root_b = tmp_path / "A", tmp_path / "B"
    (root_a / "proj").mkdir(parents=True)
    (root_a / "proj" / "notes.txt").write_text("written under A\n")
    scripted.script += [
        Reply(text="a1"),
        Reply(text="a2"),
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "pwd; cat notes.txt"})]),
        Reply(text="done"),
    ]
    make = lambda cwd: actor_config(scripted, cwd)  # noqa: E731
    with trio.fail_after(120):
        server = await _serving(make, root_a, root_a / ".state")  # the session files inside the root too
        async with server.running():
            ws = await nursery.start(server.serve_websocket, "127.0.0.1", 0, None)
            async with connect(f"ws://127.0.0.1:{ws.port}/", token="tok") as peer:
                sid = (await peer.call("create", {}))["sessionId"]
                s = await RemoteSession.attach(peer, sid)
                await s.call("prompt", {"text": "q1"})
                await s.call("prompt", {"text": "q2"})
                second = [m for m in (await s.call("fork_messages"))["messages"] if m["text"] == "q2"][0]
                first_file = (await server.sessions[sid].peer.call("session"))["path"]
                forked = (await s.call("fork", {"entryId": second["entryId"]}))["path"]
        headers = {path: json.loads(open(path).readline()) for path in (first_file, forked)}
        assert headers[first_file]["cwd"] == "proj" and "parentSession" not in headers[first_file]
        assert (headers[forked]["cwd"], headers[forked]["parentSession"]) == ("proj", os.path.relpath(first_file, root_a))
        shutil.move(str(root_a), str(root_b))  # the workspace now lives under another root

        server = await _serving(make, root_b, root_b / ".state")
        async with server.running():
            ws = await nursery.start(server.serve_websocket, "127.0.0.1", 0, None)
            async with connect(f"ws://127.0.0.1:{ws.port}/", token="tok") as peer:
                (listed,) = (await peer.call("list"))["sessions"]
                assert (listed["id"], listed["cwd"]) == (sid, str(root_b / "proj"))
                again = await RemoteSession.attach(peer, sid)  # resumes the fork, under B
                opened = await server.sessions[sid].peer.call("session")
                assert opened["path"] == os.path.join(root_b, os.path.relpath(forked, root_a))
                assert opened["header"]["cwd"] == str(root_b / "proj")
                assert opened["header"]["parentSession"] == os.path.join(root_b, os.path.relpath(first_file, root_a))
                await again.call("prompt", {"text": "where are you?"})
    sent = scripted.requests[-1]["body"]["messages"]
    texts = [m["content"] if isinstance(m["content"], str) else "".join(p.get("text", "") for p in m["content"] or []) for m in sent]
    assert [t for t in texts if t in ("q1", "a1", "q2")] == ["q1", "a1"]  # the fork: before q2
    assert f"{root_b / 'proj'}\nwritten under A" in texts[-1]  # the tool ran in the project under B


def test_a_session_header_keeps_absolute_paths_without_a_root_and_reads_old_absolute_headers(tmp_path):
    """Without a root (the plain CLI) the header is what it always was; with one, an old
    header's absolute paths (and a path outside the root) are kept; a stored relative path
    that climbs out of the root is refused."""
    header = {"type": "session", "version": 3, "id": "x", "timestamp": "t", "cwd": "/w/proj", "parentSession": "/elsewhere/p.jsonl"}
    assert stored_header(header, None) is header and resolved_header(header, None) is header
    assert stored_header(header, "/w") == {**header, "cwd": "proj"}  # parentSession outside: absolute
    assert stored_header({**header, "cwd": "/w"}, "/w")["cwd"] == "."
    assert resolved_header(header, "/v") is header  # an old, absolute header
    assert resolved_header({**header, "cwd": "."}, "/v")["cwd"] == "/v"
    with pytest.raises(ValueError):
        resolved_header({**header, "cwd": "../x"}, "/v")
    plain = SessionWriter.create(str(tmp_path), str(tmp_path / "proj"), lazy=False)
    plain.append_entry({"type": "custom", "customType": "note", "data": {}})
    plain.close()
    assert json.loads(open(plain.path).readline())["cwd"] == str(tmp_path / "proj")


async def test_a_node_with_another_workspace_root_runs_the_session_in_its_own_copy(scripted, tmp_path, nursery):
    """Issue 19 (4): a node whose workspace root differs from the head's gets the session's
    paths (cwd, sandbox workspace) under its own root."""
    head_root, node_root, state = tmp_path / "head", tmp_path / "node", tmp_path / "state"
    for root in (head_root, node_root):
        (root / "proj").mkdir(parents=True)
        (root / "proj" / "where.txt").write_text(f"the copy under {root.name}\n")
    scripted.script += [
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": "pwd; cat where.txt"})]),
        Reply(text="done"),
    ]
    placement = NodeSessions(ProcessNodes(), workspace=(str(head_root), str(node_root)))
    with trio.fail_after(120):
        server = await _serving(lambda cwd: _with_cwd_line(actor_config(scripted, cwd), cwd), head_root, state, placement)
        async with server.running():
            ws = await nursery.start(server.serve_websocket, "127.0.0.1", 0, None)
            async with connect(f"ws://127.0.0.1:{ws.port}/", token="tok") as peer:
                sid = (await peer.call("create", {}))["sessionId"]
                assert (await peer.call("list"))["sessions"][0]["cwd"] == str(head_root / "proj")
                s = await RemoteSession.attach(peer, sid)
                await s.call("prompt", {"text": "where are you?"})
    result = scripted.requests[-1]["body"]["messages"][-1]
    assert f"{node_root / 'proj'}\nthe copy under node" in json.dumps(result).replace("\\n", "\n")
    system = scripted.requests[0]["body"]["messages"][0]
    assert system["role"] == "system"  # and the model is told where it really works
    assert system["content"].endswith(f"\nCurrent working directory: {node_root / 'proj'}")


def _with_cwd_line(config, cwd):
    """``config`` whose system prompt ends as a built one does: naming the working directory."""
    coordinator = msgspec.structs.replace(config.coordinator, system_prompt=f"You are a test.\nCurrent working directory: {cwd}")
    return msgspec.structs.replace(config, coordinator=coordinator)


@settings(max_examples=200, deadline=None)
@given(relative=st.text(alphabet="ab./\\~\0 ", max_size=12))
def test_a_stored_workspace_path_never_resolves_outside_its_root(relative):
    root = "/work/root"
    try:
        resolved = from_root(relative, root)
    except ValueError:
        return
    assert resolved == root or resolved.startswith(root + "/")
    assert from_root(in_root(resolved, root), root) == resolved


def test_rebasing_moves_only_the_paths_inside_the_old_root():
    doc = {"cwd": "/a/proj", "sandbox": {"workspace": "/a/proj", "hidden": ["/a/proj/.git", "/state"], "x": "/ab/c"},
           "resume": "/state/s.jsonl", "root": "/a", "text": "cd /a/proj", "n": 3}  # fmt: skip
    assert rebase_paths(doc, "/a", "/b/c") == {
        "cwd": "/b/c/proj", "sandbox": {"workspace": "/b/c/proj", "hidden": ["/b/c/proj/.git", "/state"], "x": "/ab/c"},
        "resume": "/state/s.jsonl", "root": "/b/c", "text": "cd /a/proj", "n": 3,
    }  # fmt: skip
    built = "Be terse.\nCurrent working directory: /a/proj"
    assert rebase_prompt_cwd(built, "/a/proj", "/b/c/proj") == "Be terse.\nCurrent working directory: /b/c/proj"
    for custom in ("Be terse.", "Current working directory: /a/proj\nthen more", "x\nCurrent working directory: /a/other"):
        assert rebase_prompt_cwd(custom, "/a/proj", "/b/c/proj") == custom  # only the built last line moves
