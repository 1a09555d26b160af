"""Issue 12 items 6–9 against a real server (WebSocket on 127.0.0.1 and a unix socket), real
session processes and real bubblewrap: each test performs an attack a hostile model or a
curious token holder would try, and checks that it fails with a clear error while normal use
goes on working.

The server's private paths live under /var/tmp, not /tmp: every sandbox has a private /tmp,
which would hide them whatever the server did."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sysconfig
import tempfile
from pathlib import Path

import pytest
import trio
from conftest import actor_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_actors.runtime import RemoteError
from pi_actors.server import Credentials, Server
from pi_actors.server.client import ConnectionRefused, RemoteSession, connect
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptToolCall


@pytest.fixture
def base():
    path = Path(tempfile.mkdtemp(prefix="pi-containment-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def served(scripted, base, nursery):
    """A server whose root is ``base/root`` (the agent dir ``base/root/agent`` inside it),
    default cwd ``base/root/proj``, state (credentials, sessions) in ``base/state``, a unix
    socket in ``base/run``; clients alice and bob, an admin; at most 2 sessions per client."""
    root = base / "root"
    (root / "proj").mkdir(parents=True)
    (root / "agent").mkdir()
    state = base / "state"
    state.mkdir(mode=0o700)
    creds = Credentials(str(state / "credentials.json"))
    tokens = {name: creds.add(name, role) for name, role in (("alice", "client"), ("bob", "client"), ("boss", "admin"))}
    srv = Server(
        lambda cwd: actor_config(scripted, cwd), default_cwd=str(root / "proj"), root=str(root), shutdown_grace=1.0,
        credentials=creds, state_dir=str(state), agent_dir=str(root / "agent"), max_sessions=2,
    )
    cm = srv.running()
    await cm.__aenter__()
    ws = await nursery.start(srv.serve_websocket, "127.0.0.1", 0, None)
    await nursery.start(srv.serve_unix, str(base / "run" / "server.sock"))
    srv.url = f"ws://127.0.0.1:{ws.port}/"
    srv.unix = str(base / "run" / "server.sock")
    srv.tokens = tokens
    srv.state = state
    srv.root_dir = root
    yield srv
    await cm.__aexit__(None, None, None)


async def _run(session: RemoteSession, text: str) -> list[dict]:
    events = []
    with trio.fail_after(90):
        async with session.open_call("prompt", {"text": text}) as call:
            async for e in call:
                events.append(e)
            await call.result()
    return events


async def _code(awaitable) -> RemoteError:
    with pytest.raises(RemoteError) as info:
        await awaitable
    return info.value


# -- item 6: the server's paths are out of every sandbox's reach ------------------------------


async def test_a_sandboxed_tool_cannot_reach_the_servers_socket_token_files_or_sessions(served, scripted):
    probe = (
        f"python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{served.unix}'); print('CONNECTED')\"; "
        f"cat {served.state}/credentials.json; cat {served.state}/tokens/*; ls {served.state}/sessions; "
        f"ls {os.path.dirname(served.unix)}; echo PROBE-DONE"
    )
    scripted.script += [
        Reply(text="", tool_calls=[ScriptToolCall(name="bash", arguments={"command": probe})]),
        Reply(text="probed"),
    ]
    async with connect(served.url, token=served.tokens["alice"]) as peer:
        sid = (await peer.call("create", {}))["sessionId"]
        session = await RemoteSession.attach(peer, sid)
        events = await _run(session, "probe")
    end = next(e for e in events if e["type"] == "tool_execution_end")
    output = end["result"]["content"][0]["text"]
    assert "PROBE-DONE" in output  # the command ran, in the sandbox
    assert "CONNECTED" not in output
    assert "sha256" not in output and sid not in output
    assert not any(token in output for token in served.tokens.values())


# -- item 7: methods allow-listed; export_html writes only its own new file ---------------------


async def test_a_remote_client_cannot_choose_where_export_html_writes(served):
    site = sysconfig.get_paths()["purelib"]
    targets = [os.path.join(site, "zz_pi_actors_owned.pth"), str(served.root_dir / "proj" / "x.html"), "/var/tmp/../tmp/owned.html"]
    async with connect(served.url, token=served.tokens["alice"]) as peer:
        sid = (await peer.call("create", {}))["sessionId"]
        session = await RemoteSession.attach(peer, sid)
        for target in targets:
            refused = await _code(session.call("export_html", {"outputPath": target}))
            assert refused.code == "invalid_args" and "output path" in refused.message
            assert not os.path.exists(target)
        # Without a path: a new file in the session's own directory, never an overwrite.
        directory = served.state / "sessions" / sid
        first = (await session.call("export_html"))["path"]
        assert os.path.dirname(first) == str(directory) and first.endswith(".html")
        decoy = directory / "decoy"
        os.symlink(decoy, first[: -len(".html")] + "-1.html")  # a link planted where the next export goes
        second = (await session.call("export_html"))["path"]
        assert second not in (first, first[: -len(".html")] + "-1.html") and os.path.dirname(second) == str(directory)
        assert not decoy.exists()
        assert stat.S_IMODE(os.stat(second).st_mode) == 0o600


async def test_methods_outside_the_session_allow_list_are_refused(served, tmp_path):
    other = tmp_path / "other.jsonl"
    async with connect(served.url, token=served.tokens["alice"]) as peer:
        sid = (await peer.call("create", {}))["sessionId"]
        session = await RemoteSession.attach(peer, sid)
        for method, args in (("switch_session", {"sessionPath": str(other)}), ("new_session", {})):
            refused = await _code(session.call(method, args))
            assert refused.code == "method_not_allowed", (method, refused)
        refused = await _code(session.call("shutdown", {}))  # the coordinator declares no such method
        assert refused.code == "not_found", refused
        assert (await session.call("get_state"))["messageCount"] == 0  # the session is unharmed
        refused = await _code(peer.call("register_tool_host", {"tools": ["bash"]}))
        assert refused.code == "method_not_allowed"
        unknown = await _code(peer.call("no_such_method"))
        assert unknown.code == "not_found"


# -- item 8: session working directories are confined to the root ------------------------------


async def test_create_refuses_a_cwd_outside_the_root_or_around_the_servers_private_paths(served, base):
    root = served.root_dir
    os.symlink("/etc", root / "proj" / "link-out")
    async with connect(served.url, token=served.tokens["alice"]) as peer:
        for cwd in ("/", "..", "../..", str(root / "proj" / "link-out"), str(root / "agent"), str(root), str(served.state), str(base)):
            refused = await _code(peer.call("create", {"cwd": cwd}))
            assert refused.code == "invalid_request", cwd
            assert str(root) in refused.message, refused.message
        assert (await peer.call("list"))["sessions"] == []
        (root / "proj" / "sub").mkdir()
        sid = (await peer.call("create", {"cwd": "proj/sub"}))["sessionId"]
        assert [s["cwd"] for s in (await peer.call("list"))["sessions"] if s["id"] == sid] == [str(root / "proj" / "sub")]


def test_a_server_rooted_at_slash_does_not_start():
    from pi_actors.server._confine import CwdRefused

    with pytest.raises(CwdRefused, match="root cannot be /"):
        Server(lambda cwd: {}, root="/")


# -- item 9: ownership, admin, quotas, credentials ---------------------------------------------


async def test_a_client_cannot_see_attach_read_or_remove_another_clients_session(served, scripted):
    scripted.script += [Reply(text="alice's secret plan")]
    async with connect(served.url, token=served.tokens["alice"]) as alice, connect(served.url, token=served.tokens["bob"]) as bob:
        sid = (await alice.call("create", {}))["sessionId"]
        mine = await RemoteSession.attach(alice, sid)
        await _run(mine, "plan")
        assert (await bob.call("list"))["sessions"] == []
        for method in ("attach", "remove"):
            refused = await _code(bob.call(method, {"sessionId": sid}))
            assert refused.code == "forbidden" and sid in refused.message
        refused = await _code(bob.call("get_messages", {"attachmentId": mine.attachment_id}, target=sid))
        assert refused.code == "session_not_attached"
        listed = (await alice.call("list"))["sessions"]
        assert [(s["id"], s["owner"], s["live"]) for s in listed] == [(sid, "alice", True)]
    # an admin token (and the local unix socket) sees and uses every session
    async with connect(served.url, token=served.tokens["boss"]) as boss, connect(f"unix:{served.unix}") as local:
        assert [s["id"] for s in (await boss.call("list"))["sessions"]] == [sid]
        seen = await RemoteSession.attach(boss, sid)
        assert [m["role"] for m in (await seen.call("get_messages"))["messages"]] == ["user", "assistant"]
        await local.call("remove", {"sessionId": sid})
        assert (await boss.call("list"))["sessions"] == []
        assert not (served.state / "sessions" / sid).exists()


async def test_a_wrong_or_missing_token_is_refused_and_tokens_are_stored_only_as_hashes(served):
    for token in (None, "", "alice", served.tokens["alice"] + "x"):
        with pytest.raises(ConnectionRefused) as info:
            async with connect(served.url, token=token):
                pass
        assert info.value.status == 401
    creds_file = served.state / "credentials.json"
    assert stat.S_IMODE(os.stat(creds_file).st_mode) == 0o600
    text = creds_file.read_text()
    assert not any(token in text for token in served.tokens.values())
    assert {e["name"]: e["role"] for e in json.loads(text)["tokens"]} == {"alice": "client", "bob": "client", "boss": "admin"}
    # a token minted while the server runs works at once; a revoked one stops working
    new = served.credentials.add("carol", "client")
    async with connect(served.url, token=new) as carol:
        assert (await carol.call("list"))["sessions"] == []
    served.credentials.remove("carol")
    with pytest.raises(ConnectionRefused):
        async with connect(served.url, token=new):
            pass


async def test_a_client_past_its_session_quota_gets_quota_exceeded(served):
    async with connect(served.url, token=served.tokens["alice"]) as alice, connect(served.url, token=served.tokens["bob"]) as bob:
        created, refused = [], []

        async def create() -> None:
            try:
                created.append((await alice.call("create", {}))["sessionId"])
            except RemoteError as exc:
                refused.append(exc)

        async with trio.open_nursery() as nursery:  # three at once: the quota holds under concurrency
            for _ in range(3):
                nursery.start_soon(create)
        assert len(created) == 2 and [e.code for e in refused] == ["quota_exceeded"] and "2" in refused[0].message
        first = created[0]
        await bob.call("create", {})  # a quota per identity: bob is not affected
        await alice.call("remove", {"sessionId": first})
        await alice.call("create", {})


async def test_serve_token_add_writes_a_0600_token_file_and_prints_only_its_path(env, tmp_path):
    state = tmp_path / "state"
    done = await env.run("serve", "token", "add", "builder", "--role", "tool-host", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    path = done.stdout.decode().strip()
    assert path == str(state / "tokens" / "builder.token")
    token = Path(path).read_text().strip()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and token not in done.stdout.decode()
    assert token not in (state / "credentials.json").read_text()
    assert Credentials(str(state / "credentials.json")).authenticate(token).tool_host == "builder"
    again = await env.run("serve", "token", "add", "builder", "--state-dir", str(state))
    assert again.returncode == 1 and b"exists already" in again.stderr
    listed = await env.run("serve", "token", "list", "--state-dir", str(state))
    assert listed.stdout.decode().split() == ["builder", "tool-host", "builder"]


# -- hostile input to the parsers ---------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from([b"authorization", b"Authorization", b"x"]), st.binary(max_size=40)), max_size=4))
def test_bearer_token_parsing_never_fails_on_hostile_headers(headers):
    from pi_actors.server._auth import bearer_token

    token = bearer_token(headers)
    assert token is None or (isinstance(token, str) and token and " " not in token.strip())


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=70), lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=5), max_leaves=20))
def test_a_hostile_credentials_file_is_refused_with_one_clear_error(tmp_path_factory, data):
    from pi_actors.server import CredentialsError

    path = tmp_path_factory.mktemp("creds") / "credentials.json"
    path.write_text(json.dumps(data))
    path.chmod(0o600)
    try:
        creds = Credentials(str(path))
    except CredentialsError as exc:
        assert str(path) in str(exc)
        return
    assert creds.authenticate("anything") is None


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(["/", ".", "..", "a", "b", "~", "\x00", "-", "/etc", "agent", "link", "root"]), max_size=12).map("".join))
def test_confine_cwd_returns_only_directories_inside_the_root(tmp_path_factory, cwd):
    from pi_actors.server._confine import CwdRefused, confine_cwd

    base = tmp_path_factory.getbasetemp() / "confine"
    root = base / "root"
    if not root.exists():
        (root / "a" / "b").mkdir(parents=True)
        (root / "agent").mkdir()
        os.symlink("/etc", root / "link")
    try:
        got = confine_cwd(cwd, str(root), [str(root / "agent")])
    except CwdRefused as exc:
        assert str(root) in str(exc) or "NUL" in str(exc)
        return
    assert got.startswith(str(root) + os.sep) and os.path.isdir(got)
    assert not got.startswith(str(root / "agent"))
