"""Issue 20, the server half: ``pi-actors serve --web`` on 127.0.0.1 — the page and its files
with a strict CSP, signing in with a token (an HttpOnly cookie; the token nowhere else),
cookie-authenticated WebSocket upgrades from the page's own origin only, and the JSON codec
a browser speaks (one envelope per text message) carrying a prompt to the scripted model."""

from __future__ import annotations

import json
import ssl

import pytest
import trio
from conftest import actor_config
from hypothesis import given, settings
from hypothesis import strategies as st
from support.web import form, http, serve_web, sign_in
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from pi_actors.runtime import open_peer
from pi_actors.runtime.transports import JSON_SUBPROTOCOL, WebSocketStream
from pi_actors.server import Server
from pi_actors.server.client import RemoteSession
from pi_actors.server.web import CSP
from pi_actors.testing.scripted_server import Reply

FORM = ("content-type", "application/x-www-form-urlencoded")


def _security_headers_ok(answer) -> None:
    assert answer.header("content-security-policy") == CSP, answer.headers
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "frame-ancestors 'none'" in CSP
    assert answer.header("x-content-type-options") == "nosniff"
    assert answer.header("referrer-policy") == "no-referrer"


async def test_serve_web_serves_the_page_and_its_files_with_a_strict_csp_and_nothing_else(nursery, env, tmp_path):
    served = await serve_web(nursery, env, tmp_path)
    assert served.url.startswith("ws://127.0.0.1:")
    page = await http(served.port, "GET", "/")
    assert page.status == 200 and page.header("content-type") == "text/html; charset=utf-8"
    assert b"/static/app.js" in page.body and b"<script>" not in page.body
    assert page.header("cache-control") == "no-store"
    _security_headers_ok(page)
    script = await http(served.port, "GET", "/static/app.js")
    assert script.status == 200 and script.header("content-type") == "text/javascript; charset=utf-8"
    assert b"pi-actors.json" in script.body
    _security_headers_ok(script)
    head = await http(served.port, "HEAD", "/static/app.js")
    assert head.status == 200 and head.body == b"" and head.header("content-length") == str(len(script.body))
    # Only the package's files: no traversal, no directory listing, no other methods.
    for target in ("/static/../_front.py", "/static/%2e%2e/_front.py", "/static/..%2f_front.py", "/static/", "/static",
                   "/static//etc/passwd", "/../../etc/passwd", "/_front.py", "/static/app.js/", "/etc/passwd"):
        refused = await http(served.port, "GET", target)
        assert refused.status in (400, 404), (target, refused.status)
        assert b"import" not in refused.body and b"root:" not in refused.body
        _security_headers_ok(refused) if refused.status == 404 else None
    assert (await http(served.port, "DELETE", "/")).status == 405
    assert (await http(served.port, "POST", "/static/app.js", body=b"x")).status == 405
    lone = await env.run("serve", "--web", "--unix", str(tmp_path / "s.sock"))
    assert lone.returncode != 0 and b"--web needs --listen" in lone.stderr, lone.stderr


async def _only_own_origin_upgrades_with_the_cookie(served, cookie: str) -> None:
    async def upgrade(headers: list[tuple[bytes, bytes]]) -> int:
        try:
            async with open_websocket_url(served.url, subprotocols=[JSON_SUBPROTOCOL], extra_headers=headers):
                return 101
        except ConnectionRejected as exc:
            return exc.status_code

    with trio.fail_after(30):
        own = served.origin.encode()
        assert await upgrade([(b"cookie", cookie.encode()), (b"origin", own)]) == 101
        # Cross-site WebSocket hijacking: another site's page carries the cookie, not our Origin.
        assert await upgrade([(b"cookie", cookie.encode()), (b"origin", b"http://evil.example")]) == 403
        assert await upgrade([(b"cookie", cookie.encode()), (b"origin", own.replace(b"http:", b"https:"))]) == 403
        assert await upgrade([(b"cookie", cookie.encode()), (b"origin", own + b"0")]) == 403
        assert await upgrade([(b"cookie", cookie.encode())]) == 403
        assert await upgrade([(b"origin", own)]) == 401  # no cookie, no token
        assert await upgrade([(b"cookie", b"pi_actors_session=forged"), (b"origin", own)]) == 401
        # Programs and `attach` keep using the bearer token, with or without an Origin.
        assert await upgrade([(b"authorization", f"Bearer {served.token}".encode())]) == 101
        assert await upgrade([(b"authorization", b"Bearer wrong"), (b"cookie", cookie.encode()), (b"origin", own)]) == 401


async def test_signing_in_sets_a_strict_session_cookie_which_upgrades_only_from_the_own_origin_and_the_token_appears_nowhere(nursery, env, tmp_path):
    served = await serve_web(nursery, env, tmp_path)
    token = served.token
    seen: list[bytes] = []

    async def ask(method: str, target: str, **kw):
        answer = await http(served.port, method, target, **kw)
        seen.append(repr(answer.headers).encode() + answer.body)
        return answer

    assert (await ask("GET", "/api/whoami")).status == 401
    wrong = await ask("POST", "/login", headers=[FORM, ("origin", served.origin)], body=form(token + "x"))
    assert wrong.status == 401 and wrong.header("set-cookie") is None
    assert b"not valid" in wrong.body and wrong.header("content-type") == "text/html; charset=utf-8"
    _security_headers_ok(wrong)
    assert (await ask("POST", "/login", headers=[FORM], body=b"")).status == 401
    assert (await ask("POST", "/login", headers=[("content-type", "application/json")], body=b'{"token":"x"}')).status == 415
    # A sign-in posted from another site's page is refused (login CSRF).
    forged = await ask("POST", "/login", headers=[FORM, ("origin", "http://evil.example")], body=form(token))
    assert forged.status == 403 and forged.header("set-cookie") is None
    assert (await ask("GET", "/login")).status == 405  # a token never travels in a URL

    good = await ask("POST", "/login", headers=[FORM, ("origin", served.origin)], body=form(token))
    assert good.status == 303 and good.header("location") == "/"
    cookie = good.header("set-cookie")
    name, _, rest = cookie.partition("=")
    value, *attributes = [part.strip() for part in rest.split(";")]
    assert name == "pi_actors_session" and len(value) >= 40 and value != token
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes)
    assert "Secure" not in attributes  # plain HTTP on loopback: the browser would drop a Secure cookie
    assert any(a.startswith("Max-Age=") and int(a.split("=")[1]) > 0 for a in attributes)
    who = await ask("GET", "/api/whoami", headers=[("cookie", f"{name}={value}")])
    assert who.status == 200 and json.loads(who.body) == {"name": "admin", "role": "admin"}
    assert who.header("cache-control") == "no-store"

    await _only_own_origin_upgrades_with_the_cookie(served, f"{name}={value}")

    out = await ask("POST", "/logout", headers=[("cookie", f"{name}={value}"), ("origin", served.origin)])
    assert out.status == 303 and "Max-Age=0" in out.header("set-cookie")
    assert (await ask("GET", "/api/whoami", headers=[("cookie", f"{name}={value}")])).status == 401

    served.proc.terminate()
    with trio.fail_after(20):
        await served.proc.wait()
    log = served.stderr_file.read_bytes()
    assert b"sign-in with a missing or wrong token was refused" in log  # the refusal is logged ...
    assert token.encode() not in log and (token + "x").encode() not in log  # ... never the token
    assert b"Traceback" not in log
    assert not any(token.encode() in answer for answer in seen)


async def _raw_json_exchange(served, cookie: str) -> dict:
    headers = [(b"cookie", cookie.encode()), (b"origin", served.origin.encode())]
    async with open_websocket_url(served.url, subprotocols=[JSON_SUBPROTOCOL], extra_headers=headers) as ws:
        assert ws.subprotocol == JSON_SUBPROTOCOL
        hello = {"type": "hello", "protocol": "pi-actors", "min_version": 1, "max_version": 2, "role": "ui",
                 "name": "raw", "codecs": ["json"]}
        await ws.send_message(json.dumps(hello))
        answer = await ws.get_message()
        assert isinstance(answer, str)  # one envelope per text message, no length header
        await ws.send_message(json.dumps({"type": "call", "id": 1, "method": "list"}))
        listed = json.loads(await ws.get_message())
        assert listed["type"] == "result" and listed["id"] == 1 and listed["ok"] is True
        assert listed["value"]["sessions"] == []
    async with open_websocket_url(served.url, subprotocols=[JSON_SUBPROTOCOL], extra_headers=headers) as ws:
        await ws.send_message(b"\x00\x00\x00\x02{}")  # a binary message: not this subprotocol's framing
        with pytest.raises(ConnectionClosed):
            await ws.get_message()
    return json.loads(answer)


async def test_a_signed_in_page_speaks_json_over_its_own_origin_and_a_prompt_round_trips(nursery, env, tmp_path, scripted):
    scripted.script += [Reply(text="hello from the scripted model")]
    served = await serve_web(nursery, env, tmp_path)
    cookie = await sign_in(served)
    ok = await _raw_json_exchange(served, cookie)
    assert ok["type"] == "hello_ok" and ok["codec"] == "json" and ok["version"] == 2

    headers = [(b"cookie", cookie.encode()), (b"origin", served.origin.encode())]
    with trio.fail_after(60):
        async with open_websocket_url(served.url, subprotocols=[JSON_SUBPROTOCOL], extra_headers=headers) as ws:
            async with open_peer(WebSocketStream(ws, text=True), side="client", role="ui", name="web-test", codecs=("json",)) as peer:
                sid = (await peer.call("create", {}))["sessionId"]
                session = await RemoteSession.attach(peer, sid)
                events = []
                async with session.open_call("prompt", {"text": "hi"}) as call:
                    async for event in call:
                        events.append(event)
                    await call.result()
                messages = (await session.call("get_messages"))["messages"]
    assert events[0]["type"] == "agent_start" and events[-1]["type"] == "agent_end"
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert "hello from the scripted model" in json.dumps(messages[-1])
    assert scripted.requests, "the prompt reached the model"


@pytest.fixture
def certificate(tmp_path):
    import shutil
    import subprocess

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return cert, key


async def test_over_tls_the_page_is_https_and_the_cookie_is_secure_and_host_bound(nursery, scripted, tmp_path, certificate):
    cert, key = certificate
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(str(cert), str(key))
    client_context = ssl.create_default_context(cafile=str(cert))
    (tmp_path / "work").mkdir()
    server = Server(lambda cwd: actor_config(scripted, cwd), default_cwd=str(tmp_path / "work"), shutdown_grace=1.0)
    async with server.running():
        listening = await nursery.start(lambda task_status: server.serve_websocket(
            "127.0.0.1", 0, "secret-token", ssl_context=server_context, web=True, task_status=task_status))
        port = listening.port
        page = await http(port, "GET", "/", ssl_context=client_context)
        assert page.status == 200 and b"app.js" in page.body
        _security_headers_ok(page)
        origin = f"https://127.0.0.1:{port}"
        good = await http(port, "POST", "/login", headers=[FORM, ("origin", origin)], body=form("secret-token"), ssl_context=client_context)
        cookie = good.header("set-cookie")
        assert good.status == 303 and cookie.startswith("__Host-pi_actors_session=")
        assert "Secure" in cookie.split("; ") and "HttpOnly" in cookie.split("; ")
        plain_origin = await http(port, "POST", "/login", headers=[FORM, ("origin", f"http://127.0.0.1:{port}")],
                                  body=form("secret-token"), ssl_context=client_context)
        assert plain_origin.status == 403
        server.disconnect_clients()
        nursery.cancel_scope.cancel()


async def test_without_web_plain_http_requests_are_still_refused(nursery, scripted, tmp_path):
    (tmp_path / "work").mkdir()
    server = Server(lambda cwd: actor_config(scripted, cwd), default_cwd=str(tmp_path / "work"), shutdown_grace=1.0)
    async with server.running():
        listening = await nursery.start(server.serve_websocket, "127.0.0.1", 0, "secret-token")
        for method, target in (("GET", "/"), ("GET", "/static/app.js"), ("POST", "/login")):
            answer = await http(listening.port, method, target, headers=[FORM], body=form("secret-token") if method == "POST" else b"")
            assert answer.status == 400 and answer.header("set-cookie") is None, (method, target, answer)
        assert server.web is None
        nursery.cancel_scope.cancel()


# -- the front's logic, in process -------------------------------------------------------------


def _front(tls: bool = False, now=None):
    from pi_actors.server import Credentials, token_digest
    from pi_actors.server.web import WebFront, WebSessions

    credentials = Credentials()
    alice = credentials.add("alice", "client")

    def by_token(token: str):
        identity = credentials.authenticate(token)
        return None if identity is None else (identity, token_digest(token))

    sessions = WebSessions(lifetime=100, now=now) if now else None
    static = {"index.html": (b"<!doctype html>", "text/html; charset=utf-8"), "app.js": (b"main()", "text/javascript; charset=utf-8")}
    front = WebFront(by_token, credentials.authenticate_digest, tls=tls, sessions=sessions, static=static)
    return front, credentials, alice


def _request(method: str, target: str, headers=(), body: bytes = b""):
    from pi_actors.runtime.transports import HttpRequest

    return HttpRequest(method, target, [(k.encode(), v.encode()) for k, v in headers], body)


def _signed_in(front, token: str, origin: str = "http://127.0.0.1:1") -> str:
    answer = front.respond(_request("POST", "/login", [FORM, ("origin", origin), ("host", "127.0.0.1:1")], form(token)))
    assert answer.status == 303
    return dict(answer.headers)["set-cookie"].split(";", 1)[0]


def test_a_sign_in_ends_when_it_expires_or_its_token_is_revoked():
    from pi_actors.server.web import UpgradeRefused

    clock = [0.0]
    front, credentials, alice = _front(now=lambda: clock[0])
    upgrade = [(b"host", b"127.0.0.1:1"), (b"origin", b"http://127.0.0.1:1")]
    cookie = _signed_in(front, alice)
    assert front.upgrade_identity([(b"cookie", cookie.encode()), *upgrade], b"127.0.0.1:1").name == "alice"
    clock[0] = 99.0
    assert front.upgrade_identity([(b"cookie", cookie.encode()), *upgrade], b"127.0.0.1:1").name == "alice"
    clock[0] = 100.0
    with pytest.raises(UpgradeRefused) as info:
        front.upgrade_identity([(b"cookie", cookie.encode()), *upgrade], b"127.0.0.1:1")
    assert info.value.status == 401 and b"expired" in info.value.body
    cookie = _signed_in(front, alice)
    credentials.remove("alice")
    with pytest.raises(UpgradeRefused) as info:
        front.upgrade_identity([(b"cookie", cookie.encode()), *upgrade], b"127.0.0.1:1")
    assert info.value.status == 401 and b"no longer valid" in info.value.body
    assert front.respond(_request("GET", "/api/whoami", [("cookie", cookie)])).status == 401
    assert len(front.sessions) == 0


header_names = st.sampled_from(["host", "origin", "cookie", "content-type", "authorization", "x-other"])
header_values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60)


@settings(max_examples=80, deadline=None)
@given(
    method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"]),
    target=st.one_of(
        st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=40).map(lambda t: "/" + t),
        st.sampled_from(["/static/../index.html", "/static/./app.js", "/static//app.js", "/static/%61pp.js", "/static/",
                         "/static/app.js?../../x", "/static/app.js#x", "http://evil/static/app.js", "*"]),
    ),
    headers=st.lists(st.tuples(header_names, header_values), max_size=5),
    body=st.binary(max_size=100),
)
def test_hostile_requests_get_an_answer_with_the_security_headers_and_only_allow_listed_files(method, target, headers, body):
    front, _, alice = _front()
    answer = front.respond(_request(method, target, headers, body))
    got = dict(answer.headers)
    assert got["content-security-policy"] == CSP and got["x-content-type-options"] == "nosniff"
    assert 200 <= answer.status < 600
    if answer.status == 200 and method in ("GET", "HEAD") and not target.startswith("/api/"):
        path = target.split("?", 1)[0].split("#", 1)[0]
        assert path in ("/", "/index.html", "/static/app.js", "/static/index.html"), target
    assert "set-cookie" not in got or got["set-cookie"].endswith("Max-Age=0")  # only sign-out: nobody guessed the token


@settings(max_examples=80, deadline=None)
@given(headers=st.lists(st.tuples(header_names.map(str.encode), header_values.map(str.encode)), max_size=6),
       host=st.none() | header_values.map(str.encode))
def test_hostile_upgrade_headers_are_refused_with_401_or_403_never_an_error(headers, host):
    from pi_actors.server.web import UpgradeRefused

    front, _, alice = _front()
    _signed_in(front, alice)
    try:
        front.upgrade_identity(headers, host)
    except UpgradeRefused as refused:
        assert refused.status in (401, 403)
    else:
        raise AssertionError("a forged cookie was accepted")


def test_a_sign_in_form_counts_as_ours_by_sec_fetch_site_or_else_by_origin():
    front, _, alice = _front()
    here = ("host", "127.0.0.1:1")

    def post(*headers: tuple[str, str]) -> int:
        return front.respond(_request("POST", "/login", [FORM, here, *headers], form(alice))).status

    # What Chromium sends from our own page (Referrer-Policy: no-referrer makes its Origin "null").
    assert post(("origin", "null"), ("sec-fetch-site", "same-origin")) == 303
    assert post(("origin", "http://127.0.0.1:1"), ("sec-fetch-site", "cross-site")) == 403
    assert post(("origin", "http://127.0.0.1:1"), ("sec-fetch-site", "same-site")) == 403
    assert post(("sec-fetch-site", "none")) == 403
    # Without Sec-Fetch-Site (not a current browser): the Origin, when there is one.
    assert post(("origin", "http://127.0.0.1:1")) == 303
    assert post(("origin", "null")) == 403
    assert post(("origin", "http://evil.example")) == 403
    assert post() == 303
