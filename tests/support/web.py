"""``pi-actors serve --web`` as a real process, and a tiny HTTP client, for the web tests.

``served = await serve_web(nursery, env, tmp_path, *extra)`` starts ``serve --listen
127.0.0.1:0 --web`` against the scripted model (no session files, no sandbox), its stderr in
``served.stderr_file``; ``served.token`` is its admin token, ``served.origin`` its own origin
(``http://127.0.0.1:PORT``). The process is stopped when the nursery ends.

``await http(port, "GET", "/", headers=[...], body=b"", ssl_context=None)`` makes one HTTP/1.1
request with h11 and returns an :class:`Answer` (status, headers with lower-case names, body).
``await sign_in(served)`` posts the token to ``/login`` and returns the ``Cookie`` header value.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11
import trio

from support.wire import Lines

__all__ = ["Answer", "WebServe", "form", "http", "serve_web", "sign_in"]

CLI = str(Path(sys.executable).with_name("pi-actors"))


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]


@dataclass
class WebServe:
    proc: Any
    port: int
    url: str  #: the WebSocket URL printed by serve
    token: str
    stderr_file: Path
    scheme: str = "http"

    @property
    def origin(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"


async def serve_web(nursery: trio.Nursery, env: Any, tmp_path: Path, *extra: str) -> WebServe:
    stderr_file = tmp_path / "serve.stderr"
    err = open(stderr_file, "wb")  # noqa: SIM115 - the child writes it for the whole test
    argv = [CLI, "serve", "--listen", "127.0.0.1:0", "--web", "--model", "scripted/scripted-model",
            "--no-session", "--sandbox", "off", "--tools", "read", *extra]
    proc = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE, stderr=err, env=env.env, cwd=env.work)
    err.close()

    async def stop() -> None:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                proc.terminate()
                with trio.move_on_after(20):
                    await proc.wait()
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    nursery.start_soon(stop)
    out = Lines(proc.stdout)
    with trio.fail_after(60):
        token_file = (await out.next()).removeprefix("admin token file: ")
        line = (await out.next()).removeprefix("listening: ")
    url = line.split(" ", 1)[0]
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    scheme = "https" if url.startswith("wss://") else "http"
    return WebServe(proc, port, url, Path(token_file).read_text().strip(), stderr_file, scheme)


async def http(
    port: int, method: str, target: str, *, headers: list[tuple[str, str]] | None = None, body: bytes = b"",
    ssl_context: Any = None, host: str | None = None,
) -> Answer:
    """One request to 127.0.0.1:``port``; the answer (the server closes after it)."""
    with trio.fail_after(20):
        stream: trio.abc.Stream = await trio.open_tcp_stream("127.0.0.1", port)
        if ssl_context is not None:
            stream = trio.SSLStream(stream, ssl_context, server_hostname="127.0.0.1", https_compatible=True)
        conn = h11.Connection(h11.CLIENT)
        sent = [("host", host or f"127.0.0.1:{port}"), *(headers or [])]
        if body or method == "POST":
            sent.append(("content-length", str(len(body))))
        try:
            await stream.send_all(conn.send(h11.Request(method=method, target=target, headers=sent)) or b"")
            if body:
                await stream.send_all(conn.send(h11.Data(data=body)) or b"")
            await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
            status, got, data = 0, [], bytearray()
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    got = [(k.decode().lower(), v.decode()) for k, v in event.headers]
                elif isinstance(event, h11.Data):
                    data += event.data
                elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                    return Answer(status, got, bytes(data))
        finally:
            await trio.aclose_forcefully(stream)


def form(token: str) -> bytes:
    from urllib.parse import urlencode

    return urlencode({"token": token}).encode()


async def sign_in(served: WebServe, *, ssl_context: Any = None) -> str:
    """Sign in with the admin token; the ``Cookie`` header value to send from then on."""
    answer = await http(
        served.port, "POST", "/login", body=form(served.token), ssl_context=ssl_context,
        headers=[("content-type", "application/x-www-form-urlencoded"), ("origin", served.origin)],
    )
    assert answer.status == 303, answer
    cookie = answer.header("set-cookie")
    assert cookie is not None
    return cookie.split(";", 1)[0]
