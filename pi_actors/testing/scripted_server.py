"""A scripted LLM server: a real HTTP/1.1 server that speaks the OpenAI and Anthropic wires.

This is not a mock of our code. The official SDKs connect to it over TCP on 127.0.0.1 and get
genuine SSE streams, HTTP errors, dropped connections and hangs, chosen by a script:

- ``POST /v1/chat/completions`` answers in OpenAI chat-completions SSE;
- ``POST /v1/responses`` answers in OpenAI Responses SSE;
- ``POST /v1/messages`` answers in Anthropic messages SSE;
- ``POST /v1beta/models/MODEL:streamGenerateContent`` (or ``/v1/...``) answers in Google
  Gemini SSE (``base_url_gemini``; the model named in the path when the reply names none);
- ``POST /v1/[projects/P/locations/L/]publishers/google/models/M:streamGenerateContent``
  (Vertex AI) answers in Gemini SSE too (``base_url_vertex``);
- ``POST /v1internal:streamGenerateContent`` answers in Cloud Code Assist SSE (the
  google-gemini-cli API: Gemini events wrapped as ``{"response": ...}``; ``base_url_code_assist``);
- ``POST /model/<model id>/converse-stream`` answers in Bedrock's ConverseStream wire: AWS
  event-stream binary messages (``testing.aws_eventstream``; ``base_url_bedrock``) (the
  recorded path is as sent: the model id URL-encoded);
- ``POST /token`` answers an OAuth2 token refresh (``SCRIPTED_ACCESS_TOKEN``, an hour), as
  Google's token endpoint would (application default credentials whose ``token_uri`` is here);
- ``POST /backend-api/codex/responses`` answers in OpenAI Responses SSE too (ChatGPT's Codex
  backend; ``base_url_codex``);
- ``POST /mistral/v1/chat/completions`` answers in Mistral's chat SSE (``base_url_mistral``:
  Mistral's path is OpenAI's, so its wire is told apart by this prefix);
- anything else is a 404.

Contract:
- ``ScriptedLLM(replies)``: a list gives one :class:`Reply` per request in order, and a request
  past its end gets HTTP 500 ``script exhausted``; the list is read live, so a test may append
  replies after the server started. A callable computes the Reply from the request's JSON body
  (an exception in it is answered with HTTP 500 naming it).
- ``requests`` holds every request received, as ``{"path", "headers", "body", "received"}``
  (header names lower-case, body the parsed JSON or None, received the ``time.time()`` at
  which its last byte had been read, before parsing; also ``method``, ``target`` — the path
  with its query — and ``raw``, the body's bytes), appended before the reply is computed;
  ``await wait_requests(n)`` returns once ``n`` requests have arrived.
- ``ScriptedLLM(..., on_replied=f)``: ``f(record)`` is called with a request's record once its
  response has been written to the end (the last byte handed to the socket; not for a reply
  that hangs or is cut off without its end), so a benchmark can time the client's side of a turn:
  from the end of one reply to the arrival of the next request. An exception in ``f``
  propagates (it is the caller's bug, not the client's).
- A reply's ``headers`` go out with its response (an error's, or a stream's), e.g.
  ``retry-after: 5`` on a 429.
- ``await nursery.start(server.serve)`` binds the port (0 → ephemeral) and returns once it
  listens; ``port``, ``base_url_openai`` and ``base_url_anthropic`` are valid from then on.
- ``hang_after_start`` / ``hang_before_headers`` replies wait until the client disconnects;
  ``hung_up`` counts those disconnects and ``await wait_hung_up(n)`` waits for the n-th.
- Keep-alive is supported; each connection is served by its own task.
- A whole reply goes out in writes of up to 64 KiB (many SSE events per write, as a fast real
  server's would arrive) unless its ``delivery`` says one event per write or small byte slices;
  and the frames of a reply object are generated once and reused for
  later requests answered with the same object (a cycling script, a benchmark).

Command line: ``python -m pi_actors.testing.scripted_server --script FILE.json [--port N]``
prints the port on the first stdout line and serves until killed. The file holds a list of
replies or ``{"replies": [...], "cycle": true}`` (cycle: start over at the end).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, Literal

import h11
import msgspec
import trio

from .aws_eventstream import BAD_CHECKSUM_MESSAGE, bedrock_error_body, bedrock_error_type, bedrock_frames
from .wire_formats import (
    Frames,
    Reply,
    anthropic_frames,
    code_assist_frames,
    error_body,
    gemini_frames,
    mistral_frames,
    openai_frames,
    responses_frames,
)

__all__ = ["ScriptedLLM", "Reply", "load_script", "main", "SCRIPTED_ACCESS_TOKEN"]

_MAX_BODY = 64 * 1024 * 1024
_OPENAI_PATH = "/v1/chat/completions"
_RESPONSES_PATH = "/v1/responses"
_ANTHROPIC_PATH = "/v1/messages"
_MISTRAL_PREFIX = "/mistral"
_CODEX_PATH = "/backend-api/codex/responses"
_Api = Literal["openai", "responses", "anthropic", "gemini", "mistral", "bedrock", "code-assist"]
_API_BY_PATH: dict[str, _Api] = {
    _OPENAI_PATH: "openai", _RESPONSES_PATH: "responses", _ANTHROPIC_PATH: "anthropic",
    _MISTRAL_PREFIX + _OPENAI_PATH: "mistral", _CODEX_PATH: "responses",
    "/v1internal:streamGenerateContent": "code-assist"}
_FRAME_MAKERS = {"openai": openai_frames, "responses": responses_frames, "anthropic": anthropic_frames,
                 "gemini": gemini_frames, "mistral": mistral_frames, "bedrock": bedrock_frames,
                 "code-assist": code_assist_frames}
_GEMINI_PREFIXES = ("/v1beta/models/", "/v1/models/")
_GEMINI_SUFFIX = ":streamGenerateContent"
#: Vertex AI: ``/v1/[projects/P/locations/L/]publishers/google/models/M:streamGenerateContent``.
_VERTEX_PATH = re.compile(r"^/v1/(?:projects/[^/]+/locations/[^/]+/)?publishers/google/models/([^/:]+)"
                          r":streamGenerateContent$")
_TOKEN_PATH = "/token"
#: Bedrock runtime: ``/model/<url-encoded model id>/converse-stream``.
_BEDROCK_PATH = re.compile(r"^/model/([^/]+)/converse-stream$")
#: The access token ``POST /token`` hands out (an OAuth2 refresh, as Google's token endpoint).
SCRIPTED_ACCESS_TOKEN = "scripted-access-token"


def _api_of(path: str) -> tuple[_Api | None, str | None]:
    """The wire a request path speaks, and the model the path names (Gemini puts it there)."""
    api = _API_BY_PATH.get(path)
    if api is not None:
        return api, None
    for prefix in _GEMINI_PREFIXES:
        if path.startswith(prefix) and path.endswith(_GEMINI_SUFFIX):
            return "gemini", path[len(prefix):-len(_GEMINI_SUFFIX)] or None
    bedrock = _BEDROCK_PATH.match(path)
    if bedrock is not None:
        return "bedrock", urllib.parse.unquote(bedrock.group(1))
    vertex = _VERTEX_PATH.match(path)
    if vertex is not None:
        return "gemini", vertex.group(1)
    return None, None
_WRITE_SIZE = 65536
_CACHE_SIZE = 16


class _ClientGone(Exception):
    pass


class ScriptedLLM:
    def __init__(self, replies: list[Reply] | Callable[[dict], Reply], *, port: int = 0,
                 on_replied: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._replies = replies
        self._on_replied = on_replied
        self._next = 0
        self._want_port = port
        self.port: int = 0
        self.requests: list[dict[str, Any]] = []
        self.hung_up = 0
        self._hung_up_changed = trio.Event()
        self._request_seen = trio.Event()
        self._frames_cache: dict[tuple[int, str, str], tuple[Reply, Frames]] = {}
        self._raw_cache: dict[str, Frames] = {}  # raw_sse body -> its events
        self._writes_cache: dict[int, tuple[list[bytes], list[bytes], list[bytes]]] = {}

    @property
    def base_url_openai(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def base_url_anthropic(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url_gemini(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1beta"

    @property
    def base_url_vertex(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def base_url_code_assist(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url_bedrock(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url_codex(self) -> str:
        return f"http://127.0.0.1:{self.port}/backend-api"

    @property
    def base_url_mistral(self) -> str:
        return f"http://127.0.0.1:{self.port}{_MISTRAL_PREFIX}"

    async def wait_requests(self, n: int = 1) -> None:
        """Return once ``n`` requests have been received (their reply may still be going)."""
        while len(self.requests) < n:
            await self._request_seen.wait()

    async def wait_hung_up(self, n: int = 1) -> None:
        """Return once ``n`` hanging replies have seen their client disconnect."""
        while self.hung_up < n:
            await self._hung_up_changed.wait()

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self._want_port, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started(self.port)
        await trio.serve_listeners(self._serve_connection, listeners)

    # -----------------------------------------------------------------------------------------

    def _reply_for(self, body: Any) -> Reply | None:
        if callable(self._replies):
            return self._replies(body if isinstance(body, dict) else {})
        if self._next >= len(self._replies):
            return None
        reply = self._replies[self._next]
        self._next += 1
        return reply

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = await _read_request(conn, stream)
                if request is None:
                    return
                keep = await self._respond(conn, stream, request, body)
                if not keep or conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (_ClientGone, trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            return
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _respond(self, conn: h11.Connection, stream: trio.SocketStream,
                       request: h11.Request, raw: bytes) -> bool:
        """Record the request, send its response; return False when the connection must be
        dropped afterwards. ``on_replied`` hears of a response written to its end."""
        received = time.time()  # the request has just been read in full
        path = request.target.decode("latin-1").split("?", 1)[0]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = {"path": path, "headers": headers, "body": body, "raw": raw, "received": received,
                  "method": request.method.decode("latin-1"), "target": request.target.decode("latin-1")}
        self.requests.append(record)
        self._request_seen.set()
        self._request_seen = trio.Event()
        keep = await self._answer(conn, stream, request, path, body)
        if self._on_replied is not None and conn.our_state in (h11.DONE, h11.MUST_CLOSE):
            self._on_replied(record)
        return keep

    async def _answer(self, conn: h11.Connection, stream: trio.SocketStream,
                      request: h11.Request, path: str, body: Any) -> bool:
        """The response the script chose for ``body``; False: drop the connection after it."""
        api, path_model = _api_of(path)
        if request.method == b"POST" and path == _TOKEN_PATH:
            token = {"access_token": SCRIPTED_ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"}
            await _send_simple(conn, stream, 200, json.dumps(token).encode())
            return True
        if request.method != b"POST" or api is None:
            await _send_simple(conn, stream, 404, b'{"error": {"message": "not found"}}')
            return True
        try:
            reply = self._reply_for(body)
        except Exception as exc:  # a broken script callable: say so on the wire
            await _send_simple(conn, stream, 500, *_error(Reply(status=500), api, f"script error: {exc!r}"))
            return True
        if reply is None:
            await _send_simple(conn, stream, 500, *_error(Reply(status=500), api, "script exhausted"))
            return True
        if reply.hang_before_headers:
            await self._hang(stream, [])
            return False
        if reply.status != 200:
            body, headers = _error(reply, api)
            await _send_simple(conn, stream, reply.status, body, {**headers, **reply.headers})
            return True

        model = str(reply.model or path_model or (body or {}).get("model") or "scripted-model")
        if reply.raw_sse is not None:
            frames = self._raw_frames(reply.raw_sse)
        else:
            frames = self._frames(reply, api, model)
        return await self._send_stream(conn, stream, reply, frames, api)

    def _writes(self, frames: Frames, everything: list[bytes], reply: Reply) -> list[bytes]:
        """``_writes(everything, reply)``, kept for the next reply of the same cached frames
        in the default delivery (the 50,000 frames of the (d) benchmark took ~13 ms to group
        at every request)."""
        if reply.malformed or reply.delivery != "batched":
            return _writes(everything, reply)
        hit = self._writes_cache.get(id(frames.content))
        if hit is not None and hit[0] is frames.content and hit[1] is frames.closing:
            return hit[2]
        writes = _writes(everything, reply)
        if len(self._writes_cache) >= _CACHE_SIZE:
            self._writes_cache.pop(next(iter(self._writes_cache)))
        self._writes_cache[id(frames.content)] = (frames.content, frames.closing, writes)  # kept: ids stay unique
        return writes

    def _raw_frames(self, raw: str) -> Frames:
        """A ``raw_sse`` body's events, cut once per body (a benchmark's 10 MB body took
        ~55 ms to cut at every request, inside the client's measured time)."""
        hit = self._raw_cache.get(raw)
        if hit is None:
            hit = Frames(_raw_events(raw.encode()), [])
            if len(self._raw_cache) >= _CACHE_SIZE:
                self._raw_cache.pop(next(iter(self._raw_cache)))
            self._raw_cache[raw] = hit
        return hit

    def _frames(self, reply: Reply, api: str, model: str) -> Frames:
        key = (id(reply), api, model)
        hit = self._frames_cache.get(key)
        if hit is not None and hit[0] is reply:
            return hit[1]
        frames = _FRAME_MAKERS[api](reply, model)
        if len(self._frames_cache) >= _CACHE_SIZE:
            self._frames_cache.pop(next(iter(self._frames_cache)))
        self._frames_cache[key] = (reply, frames)  # the reply is kept, so its id stays unique
        return frames

    async def _send_stream(self, conn: h11.Connection, stream: trio.SocketStream,
                           reply: Reply, frames: Frames, api: str) -> bool:
        ctype = "application/vnd.amazon.eventstream" if api == "bedrock" else "text/event-stream"
        await _send(conn, stream, h11.Response(status_code=200, headers=[
            ("content-type", ctype), ("cache-control", "no-cache"),
            ("transfer-encoding", "chunked"), *reply.headers.items(),
        ]))
        content = list(frames.content)
        if reply.malformed:
            bad = b'data: {"this is": not json\n\n'
            if api == "anthropic":
                bad = b"event: content_block_delta\n" + bad
            elif api == "responses":
                bad = b"event: response.output_text.delta\n" + bad
            elif api == "bedrock":
                bad = BAD_CHECKSUM_MESSAGE
            content.insert(max(1, len(content) // 2), bad)
        everything = content + frames.closing

        if reply.truncate:
            cut = everything[: max(1, len(everything) // 2)]
            for frame in cut:
                await _send(conn, stream, h11.Data(data=frame))
            if reply.truncate_style == "clean":
                await _send(conn, stream, h11.EndOfMessage())
                return False
            return False  # dropped mid-body: the client sees an incomplete chunked message

        if reply.hang_after_start:
            await self._hang(stream, [conn.send(h11.Data(data=frame)) for frame in content])
            return False

        for data in self._writes(frames, everything, reply):
            await _send(conn, stream, h11.Data(data=data))
        await _send(conn, stream, h11.EndOfMessage())
        return True


    async def _hang(self, stream: trio.SocketStream, payloads: list[bytes]) -> None:
        """Send ``payloads``, then wait for the client to go away and count it."""
        try:
            for data in payloads:
                await stream.send_all(data)
            await _wait_until_gone(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # gone while we were still sending: the same outcome
        self.hung_up += 1
        self._hung_up_changed.set()
        self._hung_up_changed = trio.Event()


# ---------------------------------------------------------------------------------------------
# h11 plumbing


def _error(reply: Reply, api: _Api, message: str | None = None) -> tuple[bytes, dict[str, str]]:
    """An HTTP error reply's body and extra headers in ``api``'s shape."""
    if api == "bedrock":
        return bedrock_error_body(reply, message), {"x-amzn-errortype": bedrock_error_type(reply.status)}
    return error_body(reply, "gemini" if api == "code-assist" else api, message), {}


def _raw_events(body: bytes) -> list[bytes]:
    """A verbatim event-stream body cut after each blank line (one SSE event per piece)."""
    pieces = [p + b"\n\n" for p in body.split(b"\n\n")]
    pieces[-1] = pieces[-1][:-2]
    return [p for p in pieces if p]


def _writes(frames: list[bytes], reply: Reply) -> list[bytes]:
    """The socket writes for ``frames`` as ``reply.delivery`` asks."""
    if reply.delivery == "event":
        return list(frames)
    if reply.delivery == "slices":
        body, size = b"".join(frames), max(1, reply.slice_bytes)
        return [body[i:i + size] for i in range(0, len(body), size)]
    return _batched(frames)


def _batched(frames: list[bytes]) -> list[bytes]:
    """Whole frames joined into writes of at most ``_WRITE_SIZE`` bytes (a larger frame alone)."""
    out: list[bytes] = []
    group: list[bytes] = []
    size = 0
    for frame in frames:
        if group and size + len(frame) > _WRITE_SIZE:
            out.append(b"".join(group))
            group, size = [], 0
        group.append(frame)
        size += len(frame)
    if group:
        out.append(b"".join(group))
    return out


async def _read_request(conn: h11.Connection, stream: trio.SocketStream) -> tuple[h11.Request | None, bytes]:
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data and request is None and conn.their_state is h11.IDLE:
                return None, b""
            conn.receive_data(data)
            continue
        if isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > _MAX_BODY:
                raise _ClientGone("request body too large")
        elif isinstance(event, h11.EndOfMessage):
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None, b""


async def _send(conn: h11.Connection, stream: trio.SocketStream, event: Any) -> None:
    data = conn.send(event)
    if data:
        await stream.send_all(data)


async def _send_simple(conn: h11.Connection, stream: trio.SocketStream, status: int, body: bytes,
                       extra_headers: dict[str, str] | None = None) -> None:
    ctype = "application/json" if body[:1] in (b"{", b"[") else "text/plain"
    await _send(conn, stream, h11.Response(status_code=status, headers=[
        ("content-type", ctype), ("content-length", str(len(body))), *(extra_headers or {}).items(),
    ]))
    if body:
        await _send(conn, stream, h11.Data(data=body))
    await _send(conn, stream, h11.EndOfMessage())


async def _wait_until_gone(stream: trio.SocketStream) -> None:
    """Read and discard until the peer closes (EOF) or resets the connection."""
    try:
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


# ---------------------------------------------------------------------------------------------
# Command line


def load_script(path: str) -> tuple[list[Reply], bool]:
    """Read a script file: a JSON list of replies, or ``{"replies": [...], "cycle": bool}``."""
    with open(path, "rb") as f:
        data = json.load(f)
    cycle = False
    if isinstance(data, dict):
        cycle = bool(data.get("cycle", False))
        data = data.get("replies", [])
    return msgspec.convert(data, list[Reply]), cycle


def _cycling(replies: list[Reply]) -> Callable[[dict], Reply]:
    state = {"i": 0}

    def pick(_body: dict) -> Reply:
        reply = replies[state["i"] % len(replies)]
        state["i"] += 1
        return reply

    return pick


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pi_actors.testing.scripted_server")
    parser.add_argument("--script", required=True, help="JSON file: list of replies or {replies, cycle}")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    replies, cycle = load_script(args.script)
    if cycle and not replies:
        parser.error("a cycling script needs at least one reply")
    server = ScriptedLLM(_cycling(replies) if cycle else replies, port=args.port)

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(server.serve)
            print(port, flush=True)

    try:
        trio.run(run)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
