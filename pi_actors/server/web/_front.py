"""The web front of ``pi-actors serve --web``: static page, sign-in, cookie-authenticated upgrades.

:class:`WebFront` answers the plain HTTP requests that reach the WebSocket port
(``runtime._http`` reads them; ``respond`` is pure: request in, response out):

=========================  ====================================================================
``GET /``                  ``static/index.html`` (``Cache-Control: no-store``)
``GET /static/<path>``     a file of the package's ``static/`` directory, from the allow-list made
                           when the front starts (every regular file under it whose suffix has a
                           known Content-Type); anything else — ``..``, ``%2e``, a directory, a
                           symlink, an unknown suffix — is ``404``. ``Cache-Control: no-cache``.
``GET /api/whoami``        ``200 {"name", "role"}`` (JSON) for a signed-in browser, else ``401``.
``POST /login``            form body ``token=<token>`` (``application/x-www-form-urlencoded``, at
                           most 8 KiB): ``303`` to ``/`` with a fresh session cookie; a wrong or
                           missing token: ``401`` page, no cookie.
``POST /logout``           forgets the sign-in, ``303`` to ``/`` with the cookie cleared.
=========================  ====================================================================

``HEAD`` works wherever ``GET`` does; other methods are ``405``. A ``POST`` from another site
is ``403`` (no sign-in forged from another site): with ``Sec-Fetch-Site`` (every current
browser) it must be ``same-origin``; without it, an ``Origin`` header must be this server's.

The cookie (:data:`COOKIE`; ``__Host-`` prefixed over TLS) holds a random session id
(``_sessions``), never the token: ``HttpOnly; SameSite=Strict; Path=/; Max-Age=…``, plus
``Secure`` over TLS. Every response carries :data:`SECURITY_HEADERS` (a strict CSP: no
inline script or style, nothing from another origin; ``nosniff``; ``no-referrer``; no
framing).

``upgrade_identity(headers, host)`` decides a WebSocket upgrade that carries no bearer token: with
the session cookie, it is accepted only when ``Origin`` is exactly this server's own origin
(``http[s]://`` + the request's ``Host``) — a foreign or missing ``Origin`` is ``403`` (a page
of another site cannot ride on the cookie: cross-site WebSocket hijacking) — and the sign-in
is live and its token still valid (a revoked token ends its sign-ins). No cookie: ``401``.

The token is never logged, never put in a URL or a response; sign-ins are logged by name.
"""

from __future__ import annotations

import html
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs

from ...runtime._http import HttpRequest, HttpResponse
from .._auth import Identity
from ._sessions import SESSION_LIFETIME, WebSessions

__all__ = ["WebFront", "COOKIE", "SECURITY_HEADERS", "CSP", "STATIC_DIR", "UpgradeRefused", "load_static"]

log = logging.getLogger("pi_actors.server")

#: The package directory the page is served from.
STATIC_DIR = Path(__file__).resolve().parent / "static"

#: The session cookie's name (over TLS: ``__Host-`` + this, which browsers bind to the origin).
COOKIE = "pi_actors_session"

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS: list[tuple[str, str]] = [
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cross-origin-opener-policy", "same-origin"),
]

#: Content-Type by file suffix: only these files are served.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".txt": "text/plain; charset=utf-8",
}

#: ``(identity, token digest)`` for a token, or None: the server's credentials.
Authenticate = Callable[[str], "tuple[Identity, str] | None"]
#: The identity a token digest still stands for, or None (revoked).
Revalidate = Callable[[str], "Identity | None"]


class UpgradeRefused(Exception):
    """An upgrade refused by ``upgrade_identity``: ``status`` (401/403) and ``body``."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(status, body)
        self.status = status
        self.body = body.encode()


def load_static(directory: Path = STATIC_DIR) -> dict[str, tuple[bytes, str]]:
    """``{"app.js": (content, content type), "vendor/x.js": …}``: every regular file (not a
    symlink) under ``directory`` with a known suffix, read once."""
    files: dict[str, tuple[bytes, str]] = {}
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(root, d)))
        for name in sorted(names):
            path = Path(root, name)
            kind = CONTENT_TYPES.get(path.suffix.lower())
            if kind is None or name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            files[path.relative_to(directory).as_posix()] = (path.read_bytes(), kind)
    return files


class WebFront:
    """See the module docstring. ``tls``: the port speaks TLS (cookie ``Secure``, origins
    ``https://``). ``static``: the files to serve (default: the package's)."""

    def __init__(
        self,
        authenticate: Authenticate,
        revalidate: Revalidate,
        *,
        tls: bool,
        sessions: WebSessions | None = None,
        static: dict[str, tuple[bytes, str]] | None = None,
    ) -> None:
        self._authenticate = authenticate
        self._revalidate = revalidate
        self.tls = tls
        self.sessions = sessions if sessions is not None else WebSessions()
        self.static = load_static() if static is None else static
        self.cookie_name = ("__Host-" + COOKIE) if tls else COOKIE

    # -- requests ------------------------------------------------------------------------------

    def respond(self, request: HttpRequest) -> HttpResponse:
        """The answer to one plain HTTP request (see the module docstring)."""
        path = request.target.split("?", 1)[0].split("#", 1)[0]
        if request.method in ("GET", "HEAD"):
            if path == "/" or path == "/index.html":
                return self._file("index.html", "no-store")
            if path.startswith("/static/"):
                return self._file(path[len("/static/"):], "no-cache")
            if path == "/api/whoami":
                return self._whoami(request)
            if path in ("/login", "/logout"):
                return _with_security(HttpResponse(405, [("allow", "POST")], b"use POST\n"))
            return _not_found()
        if request.method == "POST":
            if path not in ("/login", "/logout"):
                return _method_not_allowed() if self._known(path) else _not_found()
            if not self._posted_here(request):
                return _page(403, "Refused", "This form was sent from another site.")
            return self._login(request) if path == "/login" else self._logout(request)
        return _method_not_allowed()

    def _posted_here(self, request: HttpRequest) -> bool:
        """Whether a POST comes from this server's own page: ``Sec-Fetch-Site: same-origin``
        when the browser sends it (a page under ``Referrer-Policy: no-referrer`` posts its
        forms with ``Origin: null``), else an ``Origin`` equal to ours, or none at all (not
        a browser)."""
        site = request.header(b"sec-fetch-site")
        if site is not None:
            return site.strip().lower() == b"same-origin"
        return self._same_origin(request.header(b"origin"), request.header(b"host"), missing_ok=True)

    def _known(self, path: str) -> bool:
        return path in ("/", "/index.html", "/api/whoami") or path.startswith("/static/")

    def _file(self, name: str, cache: str) -> HttpResponse:
        found = self.static.get(name)
        if found is None:
            return _not_found()
        body, kind = found
        return _with_security(HttpResponse(200, [("content-type", kind), ("cache-control", cache)], body))

    def _whoami(self, request: HttpRequest) -> HttpResponse:
        identity = self._signed_in(request.headers)
        headers = [("content-type", "application/json"), ("cache-control", "no-store")]
        if identity is None:
            return _with_security(HttpResponse(401, headers, b'{"error":"not signed in"}'))
        body = json.dumps({"name": identity.name, "role": identity.role}).encode()
        return _with_security(HttpResponse(200, headers, body))

    def _login(self, request: HttpRequest) -> HttpResponse:
        kind = (request.header(b"content-type") or b"").split(b";", 1)[0].strip().lower()
        if kind != b"application/x-www-form-urlencoded":
            return _page(415, "Unsupported form", "Sign in with the form (application/x-www-form-urlencoded).")
        token = _form_token(request.body)
        found = self._authenticate(token) if token else None
        if found is None:
            log.warning("web: a sign-in with a missing or wrong token was refused")
            return _page(401, "Sign-in refused", "That token is not valid on this server.", back=True)
        identity, digest = found
        session_id = self.sessions.open(identity, digest)
        log.info("web: %s (%s) signed in", identity.name, identity.role)
        cookie = self._cookie(session_id, SESSION_LIFETIME)
        return _with_security(HttpResponse(303, [("location", "/"), ("set-cookie", cookie), ("cache-control", "no-store")]))

    def _logout(self, request: HttpRequest) -> HttpResponse:
        self.sessions.close(self._cookie_value(request.headers))
        return _with_security(HttpResponse(303, [("location", "/"), ("set-cookie", self._cookie("", 0)), ("cache-control", "no-store")]))

    def _cookie(self, value: str, max_age: int) -> str:
        parts = [f"{self.cookie_name}={value}", "HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={max_age}"]
        if self.tls:
            parts.append("Secure")
        return "; ".join(parts)

    # -- upgrades ------------------------------------------------------------------------------

    def upgrade_identity(self, headers: list[tuple[bytes, bytes]], host: bytes | None) -> Identity:
        """The identity of a cookie-authenticated WebSocket upgrade; ``host``: its ``Host``.

        Raises:
            UpgradeRefused: 401 without a cookie or with a dead sign-in; 403 when the
                ``Origin`` is not this server's own (whatever the cookie).
        """
        session_id = self._cookie_value(headers)
        if session_id is None:
            raise UpgradeRefused(401, "missing or wrong bearer token (or sign in at /)\n")
        origin = _header(headers, b"origin")
        if not self._same_origin(origin, host, missing_ok=False):
            shown = origin.decode("ascii", "replace")[:100] if origin else "none"
            raise UpgradeRefused(403, f"cross-origin WebSocket refused: Origin {shown} is not this server's\n")
        signin = self.sessions.lookup(session_id)
        if signin is None:
            raise UpgradeRefused(401, "this sign-in has expired or is unknown: sign in again\n")
        identity = self._revalidate(signin.digest)
        if identity is None:
            self.sessions.close(session_id)
            raise UpgradeRefused(401, "the token of this sign-in is no longer valid: sign in again\n")
        return identity

    def _signed_in(self, headers: list[tuple[bytes, bytes]]) -> Identity | None:
        signin = self.sessions.lookup(self._cookie_value(headers))
        return None if signin is None else self._revalidate(signin.digest)

    def _cookie_value(self, headers: list[tuple[bytes, bytes]]) -> str | None:
        wanted = self.cookie_name.encode()
        for name, value in headers:
            if name.lower() != b"cookie":
                continue
            for part in value.split(b";"):
                key, eq, val = part.strip().partition(b"=")
                if eq and key == wanted and val:
                    return val.decode("ascii", "replace")
        return None

    def _same_origin(self, origin: bytes | None, host: bytes | None, *, missing_ok: bool) -> bool:
        if origin is None:
            return missing_ok
        if host is None:
            return False
        scheme = b"https://" if self.tls else b"http://"
        return origin.strip().lower() == scheme + host.strip().lower()

    def security_headers(self) -> list[tuple[bytes, bytes]]:
        """:data:`SECURITY_HEADERS` as bytes, for the answers trio-websocket writes."""
        return [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS]


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


def _form_token(body: bytes) -> str | None:
    """The one ``token`` field of a urlencoded form, or None."""
    try:
        fields = parse_qs(body.decode("ascii"), keep_blank_values=False, strict_parsing=False, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return None
    values = fields.get("token", [])
    return values[0].strip() if len(values) == 1 and values[0].strip() else None


def _with_security(response: HttpResponse) -> HttpResponse:
    response.headers.extend(SECURITY_HEADERS)
    return response


def _not_found() -> HttpResponse:
    return _page(404, "Not found", "There is nothing at this address.")


def _method_not_allowed() -> HttpResponse:
    response = _page(405, "Method not allowed", "This address does not answer that method.")
    response.headers.append(("allow", "GET, HEAD, POST"))
    return response


def _page(status: int, title: str, text: str, *, back: bool = False) -> HttpResponse:
    """A small static HTML page (no script, no inline style)."""
    link = '<p><a href="/">Back to sign-in</a></p>' if back else ""
    body = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'<link rel="stylesheet" href="/static/style.css"></head>'
        f"<body><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>{link}</body></html>\n"
    ).encode()
    headers = [("content-type", "text/html; charset=utf-8"), ("cache-control", "no-store")]
    return _with_security(HttpResponse(status, headers, body))

