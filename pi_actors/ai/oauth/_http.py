"""The small HTTP pieces of the login flows: JSON/form requests, PKCE, endpoint overrides and
the local callback server (stdlib only, blocking: flows run in a thread).

Contract:
- ``endpoint(url)`` is ``url``, or, when ``PI_ACTORS_OAUTH_URL`` is set (tests, a scripted
  OAuth server), the same path and query on that origin instead: no test reaches the network.
- ``callback_port(default)`` is ``PI_ACTORS_OAUTH_CALLBACK_PORT`` when set (``0`` picks a free
  port), else pi's fixed port for the flow.
- ``request_json(url, ...)`` returns the decoded JSON object of a 2xx answer; raises
  ``HttpError`` (status, body) otherwise and ``OAuthError`` for a body that is not JSON.
- ``CallbackServer`` listens on 127.0.0.1, accepts one ``GET <path>?code=&state=`` whose state
  matches, and hands the code to whoever waits (``wait``), racing a pasted code (``offer``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import secrets
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OAuthError", "HttpError", "endpoint", "callback_port", "request_json", "pkce_pair", "CallbackServer",
           "parse_pasted_code"]


class OAuthError(Exception):
    """A login or refresh that did not succeed: the message is one line for the user."""


class HttpError(OAuthError):
    def __init__(self, status: int, url: str, body: str) -> None:
        super().__init__(f"HTTP {status} from {url}: {body.strip()[:300]}")
        self.status = status
        self.body = body


def endpoint(url: str) -> str:
    base = os.environ.get("PI_ACTORS_OAUTH_URL")
    if not base:
        return url
    parts = urllib.parse.urlsplit(url)
    origin = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit((origin.scheme, origin.netloc, parts.path, parts.query, ""))


def callback_port(default: int) -> int:
    value = os.environ.get("PI_ACTORS_OAUTH_CALLBACK_PORT")
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise OAuthError(f"PI_ACTORS_OAUTH_CALLBACK_PORT is not a port number: {value!r}") from None


def request_json(url: str, *, method: str = "POST", json_body: dict[str, Any] | None = None,
                 form: dict[str, str] | None = None, headers: dict[str, str] | None = None,
                 timeout: float = 30.0) -> dict[str, Any]:
    url = endpoint(url)
    data: bytes | None = None
    all_headers = {"Accept": "application/json", **(headers or {})}
    if json_body is not None:
        data = json.dumps(json_body).encode()
        all_headers["Content-Type"] = "application/json"
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
        all_headers["Content-Type"] = "application/x-www-form-urlencoded"
    req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            text = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        raise HttpError(exc.code, url, exc.read().decode("utf-8", "replace")) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OAuthError(f"cannot reach {url}: {reason}") from None
    try:
        value = json.loads(text)
    except ValueError:
        raise OAuthError(f"{url} answered with something that is not JSON: {text.strip()[:200]!r}") from None
    if not isinstance(value, dict):
        raise OAuthError(f"{url} answered with JSON that is not an object")
    return value


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge), both base64url without padding (RFC 7636)."""
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def parse_pasted_code(text: str) -> tuple[str | None, str | None]:
    """(code, state) from what a user pasted: a redirect URL, ``code#state``, a query string or
    a bare code."""
    value = text.strip()
    if not value:
        return None, None
    parts = urllib.parse.urlsplit(value)
    if parts.scheme and parts.netloc:
        return _code_state(urllib.parse.parse_qs(parts.query))
    if "#" in value:
        code, _, state = value.partition("#")
        return code or None, state or None
    if "code=" in value:
        return _code_state(urllib.parse.parse_qs(value))
    return value, None


def _first(q: dict[str, list[str]], key: str) -> str | None:
    values = q.get(key)
    return values[0] if values else None


def _code_state(q: dict[str, list[str]]) -> tuple[str | None, str | None]:
    return _first(q, "code"), _first(q, "state")


_PAGE = "<!doctype html><html><body><p>{}</p></body></html>"


class CallbackServer:
    """The local redirect target of a browser login (module docstring). Use as a context
    manager; ``port`` is the bound port, ``wait()`` the first (code, state) to arrive."""

    def __init__(self, port: int, path: str, expected_state: str, what: str) -> None:
        self._results: queue.Queue[tuple[str | None, str | None, str | None]] = queue.Queue()
        results, expected = self._results, expected_state

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                q = urllib.parse.parse_qs(url.query)
                code, state, error = (_first(q, k) for k in ("code", "state", "error"))
                if url.path != path:
                    self._answer(404, "Callback route not found.")
                elif error:
                    self._answer(400, f"{what} authentication did not complete: {error}")
                elif not code or state != expected:
                    self._answer(400, "Missing code or state mismatch.")
                else:
                    self._answer(200, f"{what} authentication completed. You can close this window.")
                    results.put((code, state, None))

            def _answer(self, status: int, text: str) -> None:
                body = _PAGE.format(text).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        try:
            self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        except OSError as exc:
            raise OAuthError(f"cannot listen for the login callback on 127.0.0.1:{port}: {exc.strerror or exc}") from None
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> CallbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def offer(self, pasted: str) -> None:
        """A code (or redirect URL) the user pasted instead of the browser's redirect."""
        code, state = parse_pasted_code(pasted)
        self._results.put((code, state, "pasted"))

    def wait(self, timeout: float | None = None) -> tuple[str | None, str | None]:
        try:
            code, state, _ = self._results.get(timeout=timeout)
        except queue.Empty:
            raise OAuthError("timed out waiting for the browser login") from None
        return code, state
