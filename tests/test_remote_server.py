"""The server actor over real sockets on 127.0.0.1 and a unix socket: auth, hello, sessions,
attachment fencing, subscriptions (snapshot then contiguous updates), disconnects."""

from __future__ import annotations

import os
import signal
import stat
from contextlib import asynccontextmanager

import pytest
import trio
from conftest import actor_config, served_credentials
from support.wire import raw_exchange
from trio_websocket import ConnectionRejected, open_websocket_url

from pi_actors.runtime import ConnectionLost, RemoteError
from pi_actors.runtime import protocol as P
from pi_actors.server import Server
from pi_actors.server.client import ConnectionRefused, RemoteSession, connect
from pi_actors.testing.scripted_server import Reply

TOKEN = "tok"  # the client "tester" of served_credentials


@pytest.fixture
async def server(scripted, tmp_path, nursery):
    served = tmp_path / "served"
    served.mkdir()
    # A long liveness timeout: tests stop a coordinator (SIGSTOP) to show who answers a call.
    settings = {"retry": {"enabled": False}, "supervision": {"heartbeatTimeout": 120}}
    srv = Server(
        lambda cwd: actor_config(scripted, cwd, settings=settings), default_cwd=str(served), shutdown_grace=1.0,
        credentials=served_credentials(),
    )
    cm = srv.running()
    await cm.__aenter__()
    ws = await nursery.start(srv.serve_websocket, "127.0.0.1", 0, None)
    sock_dir = tmp_path / "sock"
    await nursery.start(srv.serve_unix, str(sock_dir / "server.sock"))
    srv.url = f"ws://127.0.0.1:{ws.port}/"
    srv.unix = f"unix:{sock_dir / 'server.sock'}"
    yield srv
    await cm.__aexit__(None, None, None)


async def _collect(session: RemoteSession, into: list, ready: trio.Event, until: str = "agent_end") -> dict:
    async with session.open_call("subscribe") as call:
        snapshot = None
        async for chunk in call:
            if snapshot is None:
                snapshot = chunk["snapshot"]
                ready.set()
                continue
            into.append(chunk)
            if chunk["event"]["type"] == until:
                break
    return snapshot


async def _prompt(session: RemoteSession, text: str) -> list[dict]:
    events = []
    async with session.open_call("prompt", {"text": text}) as call:
        async for e in call:
            events.append(e)
        await call.result()
    return events


async def test_websocket_upgrade_needs_the_bearer_token(server):
    for headers in ([], [(b"authorization", b"Bearer wrong")]):
        with pytest.raises(ConnectionRejected) as info:
            async with open_websocket_url(server.url, extra_headers=headers):
                pass
        assert info.value.status_code == 401
    with pytest.raises(ConnectionRefused) as refused:
        async with connect(server.url, token="nope"):
            pass
    assert refused.value.status == 401
    async with connect(server.url, token=TOKEN) as peer:
        assert peer.peer_role == "server"
        assert (await peer.call("list"))["sessions"] == []


async def test_unix_socket_is_0600_in_a_0700_directory(server):
    path = server.unix[len("unix:"):]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    async with connect(server.unix) as peer:
        assert (await peer.call("list"))["sessions"] == []




async def test_a_version_mismatch_gets_hello_error_version_and_the_server_goes_on(server):
    stream = await trio.open_unix_socket(server.unix[5:])
    hello = P.Hello(protocol=P.PROTOCOL_NAME, min_version=90, max_version=99, role="ui", name="old")
    frames = await raw_exchange(stream, P.encode_frame(P.encode_message(hello)))
    assert len(frames) == 1 and isinstance(frames[0], P.HelloError) and frames[0].code == "version"
    async with connect(server.url, token=TOKEN) as peer:
        assert (await peer.call("list"))["sessions"] == []


async def test_sessions_attach_fencing_and_forwarded_calls(server, scripted):
    scripted.script += [Reply(text="hello there")]
    async with connect(server.url, token=TOKEN) as a, connect(server.unix) as b:
        sid = (await a.call("create", {}))["sessionId"]
        listed = (await b.call("list"))["sessions"]
        assert [s["id"] for s in listed] == [sid]
        sa = await RemoteSession.attach(a, sid)
        again = await RemoteSession.attach(a, sid)
        assert again.attachment_id == sa.attachment_id  # re-attaching is a no-op
        # b has no attachment; a's id does not work from b's connection
        with pytest.raises(RemoteError) as info:
            await b.call("get_state", {"attachmentId": sa.attachment_id}, target=sid)
        assert info.value.code == "session_not_attached"
        sb = await RemoteSession.attach(b, sid)
        assert sb.attachment_id != sa.attachment_id
        events = await _prompt(sa, "hi")
        assert events[0]["type"] == "agent_start" and events[-1]["type"] == "agent_end"
        msgs = (await sb.call("get_messages"))["messages"]
        assert [m["role"] for m in msgs] == ["user", "assistant"]
        state = await sb.call("get_state")
        assert state["messageCount"] == 2 and state["isStreaming"] is False
        await sb.call("steer", {"text": "later"})
        await sb.call("follow_up", {"text": "later too"})
        await sb.call("abort")
        # detach: the old id is stale
        await b.call("detach")
        with pytest.raises(RemoteError) as info:
            await sb.call("get_state")
        assert info.value.code == "session_not_attached"
        # a new attachment gets a new id; the stale one stays refused
        sb2 = await RemoteSession.attach(b, sid)
        assert sb2.attachment_id != sb.attachment_id
        with pytest.raises(RemoteError):
            await sb.call("get_state")
        await sb2.call("get_state")
        await a.call("remove", {"sessionId": sid})
        assert (await a.call("list"))["sessions"] == []
        with pytest.raises(RemoteError) as info:
            await sa.call("get_state")
        assert info.value.code in ("session_terminated", "session_not_attached")


async def test_two_clients_see_the_same_contiguous_sequence_and_a_late_joiner_gets_the_partial(server, scripted):
    scripted.script += [Reply(text="streamed to everyone in pieces", chunks=10, hang_after_start=True)]
    async with connect(server.url, token=TOKEN) as a, connect(server.unix) as b, connect(server.url, token=TOKEN) as c:
        sid = (await a.call("create", {}))["sessionId"]
        sa, sb, sc = [await RemoteSession.attach(p, sid) for p in (a, b, c)]
        got = {"a": [], "b": [], "c": []}
        snaps = {}
        async with trio.open_nursery() as nursery:
            ready = {k: trio.Event() for k in got}

            async def run(name, s):
                snaps[name] = await _collect(s, got[name], ready[name])

            nursery.start_soon(run, "a", sa)
            nursery.start_soon(run, "b", sb)
            await ready["a"].wait()
            await ready["b"].wait()
            async with sa.open_call("prompt", {"text": "talk"}) as call:
                joined = False
                async for data in call:
                    if not joined and data["type"] == "message_update" and data["assistantMessageEvent"]["type"] == "text_delta":
                        joined = True
                        nursery.start_soon(run, "c", sc)
                        await ready["c"].wait()
                        await sc.call("abort")
                await call.result()
        for name in "abc":
            seqs = [u["seq"] for u in got[name]]
            assert seqs == list(range(snaps[name]["seq"] + 1, snaps[name]["seq"] + 1 + len(seqs)))
        assert [u["event"] for u in got["a"]] == [u["event"] for u in got["b"]]
        assert got["c"] == got["a"][len(got["a"]) - len(got["c"]):]
        partial = snaps["c"]["streamMessage"]
        assert snaps["c"]["isStreaming"] and partial["role"] == "assistant" and partial["content"]


async def test_disconnect_fails_in_flight_calls_as_outcome_unknown(server, scripted):
    scripted.script += [Reply(text="never finishes", chunks=4, hang_after_start=True)]
    async with connect(server.url, token=TOKEN) as a:
        sid = (await a.call("create", {}))["sessionId"]
    outcome = {}
    with trio.fail_after(30):
        async with connect(server.url, token=TOKEN) as b:
            sb = await RemoteSession.attach(b, sid)
            try:
                async with sb.open_call("prompt", {"text": "go"}) as call:
                    async for data in call:
                        if data["type"] == "message_update":
                            await b._stream.aclose()  # the transport drops under the call
                    await call.result()
            except ConnectionLost as exc:
                outcome["error"] = exc
    assert "outcome of the call is unknown" in str(outcome["error"])
    async with connect(server.unix) as c:
        sc = await RemoteSession.attach(c, sid)  # a new attachment; nothing was replayed
        with trio.fail_after(30):
            while (await sc.call("get_state"))["isStreaming"]:
                await sc.call("abort")
        assert (await sc.call("get_state"))["isStreaming"] is False


async def test_set_model_and_thinking_level_are_forwarded_to_the_coordinator(server, scripted):
    async with connect(server.url, token=TOKEN) as a:
        sid = (await a.call("create", {}))["sessionId"]
        s = await RemoteSession.attach(a, sid)
        model = (await s.call("get_state"))["model"]
        changed = await s.call("set_model", {"model": {**model, "id": "another-model", "reasoning": True}})
        assert changed["id"] == "another-model"
        assert (await s.call("set_thinking_level", {"level": "high"}))["level"] == "high"
        state = await s.call("get_state")
        assert state["model"]["id"] == "another-model" and state["thinkingLevel"] == "high"
        with pytest.raises(RemoteError) as info:
            await s.call("set_thinking_level", {"level": "extreme"})
        assert info.value.code == "invalid_args"


async def test_a_cancelled_prompt_is_relayed_to_the_coordinator_as_an_abort(server, scripted):
    scripted.script += [Reply(text="this goes on and on", chunks=8, hang_after_start=True)]
    async with connect(server.url, token=TOKEN) as a:
        sid = (await a.call("create", {}))["sessionId"]
        s = await RemoteSession.attach(a, sid)
        with trio.fail_after(30):
            async with s.open_call("prompt", {"text": "go"}) as call:
                async for data in call:
                    if data["type"] == "message_update":
                        await call.cancel()
                await call.result()
        messages = (await s.call("get_messages"))["messages"]
        assert messages[-1]["stopReason"] == "aborted"
        assert (await s.call("get_state"))["isStreaming"] is False


async def test_a_draining_server_refuses_create_and_attach(server):
    async with connect(server.url, token=TOKEN) as a:
        sid = (await a.call("create", {}))["sessionId"]
        server.draining = True
        for method, args in (("create", {}), ("attach", {"sessionId": sid})):
            with pytest.raises(RemoteError) as info:
                await a.call(method, args)
            assert info.value.code == "server_draining"


async def test_attaching_another_session_makes_the_old_attachment_stale(server):
    async with connect(server.unix) as a:
        one = (await a.call("create", {}))["sessionId"]
        two = (await a.call("create", {}))["sessionId"]
        s1 = await RemoteSession.attach(a, one)
        s2 = await RemoteSession.attach(a, two)
        with pytest.raises(RemoteError) as info:
            await s1.call("get_state")
        assert info.value.code == "session_not_attached"
        await s2.call("get_state")
        counts = {s["id"]: s["attachments"] for s in (await a.call("list"))["sessions"]}
        assert counts == {one: 0, two: 1}


async def test_the_unix_listener_refuses_a_live_socket_a_plain_file_and_an_open_directory(server, tmp_path):
    from pi_actors.runtime.transports import ListenError, open_unix_listener

    with pytest.raises(ListenError, match="in use"):
        await open_unix_listener(server.unix[len("unix:"):])
    plain = tmp_path / "sock" / "plain"
    plain.write_text("x")
    with pytest.raises(ListenError, match="not a socket"):
        await open_unix_listener(str(plain))
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    os.chmod(open_dir, 0o755)
    with pytest.raises(ListenError, match="other users"):
        await open_unix_listener(str(open_dir / "s.sock"))


# -- the typed contract (protocol/server.py): checked by the server, before anything runs ------


async def test_a_mistyped_argument_to_a_server_method_is_invalid_request_naming_the_field_and_the_client_stays_connected(server):
    async with connect(server.url, token=TOKEN) as client, connect(server.unix) as admin:
        for peer, method, args, field in (
            (client, "create", {"cwd": 5}, "$.cwd"),
            (client, "create", {"toolHost": ["h1"]}, "$.toolHost"),
            (client, "attach", {"sessionId": 7}, "$.sessionId"),
            (client, "remove", {}, "sessionId"),
            (admin, "register_tool_host", {"tools": "bash"}, "$.tools"),
        ):
            with pytest.raises(RemoteError) as info:
                await peer.call(method, args)
            assert info.value.code == "invalid_request", (method, info.value)
            assert field in info.value.message, (method, info.value.message)
        # nothing was created, and both connections go on
        assert (await client.call("list"))["sessions"] == []
        assert (await admin.call("list"))["toolHosts"] == []


@asynccontextmanager
async def _coordinator_stopped(server, session_id: str):
    """The session's coordinator process is stopped (SIGSTOP) for the block: a call that
    reached it could not be answered, so an answer inside the block is the server's own."""
    pid = server.sessions[session_id].processes["coordinator"].pid
    os.kill(pid, signal.SIGSTOP)
    try:
        with trio.fail_after(10):  # a safety net: a forwarded call would hang here
            yield
    finally:
        os.kill(pid, signal.SIGCONT)


async def test_a_session_method_the_coordinator_does_not_declare_is_refused_by_the_server_as_not_found(server):
    async with connect(server.url, token=TOKEN) as peer:
        sid = (await peer.call("create", {}))["sessionId"]
        session = await RemoteSession.attach(peer, sid)
        async with _coordinator_stopped(server, sid):
            for method in ("shutdown", "run_tool", "list"):
                with pytest.raises(RemoteError) as info:
                    await session.call(method)
                assert info.value.code == "not_found" and repr(method) in info.value.message, info.value
        assert (await session.call("get_state"))["messageCount"] == 0


async def test_a_forwarded_call_with_a_bad_argument_never_reaches_the_coordinator(server, scripted):
    scripted.script += [Reply(text="should never be asked")]
    async with connect(server.url, token=TOKEN) as peer:
        sid = (await peer.call("create", {}))["sessionId"]
        session = await RemoteSession.attach(peer, sid)
        async with _coordinator_stopped(server, sid):
            with pytest.raises(RemoteError) as info:
                await session.call("prompt", {"text": 5})
            assert info.value.code == "invalid_request" and "$.text" in info.value.message, info.value
            with pytest.raises(RemoteError) as info:
                await peer.call("prompt", {"attachmentId": 5, "text": "hi"}, target=sid)
            assert info.value.code == "invalid_request" and "$.attachmentId" in info.value.message, info.value
        # the session is unharmed and never saw the prompt
        assert (await session.call("get_messages"))["messages"] == []
        assert scripted.requests == []


def test_the_server_forwards_exactly_the_coordinators_methods_less_those_it_keeps_and_roles_name_declared_methods():
    from pi_actors.protocol.coordinator import COORDINATOR
    from pi_actors.protocol.server import FORWARDED, NOT_FORWARDED, ROLES, SERVER, SESSION_ROLES

    declared = {m.name for m in COORDINATOR}
    assert set(NOT_FORWARDED) <= declared
    assert set(FORWARDED) == declared - set(NOT_FORWARDED)
    assert all(FORWARDED[name] is COORDINATOR.methods[name] for name in FORWARDED)
    assert set().union(*ROLES.values()) == set(SERVER.methods)  # every method callable by someone
    assert ROLES["admin"] == set(SERVER.methods) and SESSION_ROLES <= set(ROLES)
