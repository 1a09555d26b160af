"""A scripted OAuth server for the login flows' tests: it speaks the endpoints of Anthropic's,
OpenAI's and GitHub's logins on 127.0.0.1 (point ``PI_ACTORS_OAUTH_URL`` at ``url``).

What it checks and does:
- ``GET /oauth/authorize`` (the "browser" step): records the PKCE ``code_challenge`` (S256 only)
  and answers 302 to ``redirect_uri?code=...&state=...`` as a consenting user would.
- ``POST /v1/oauth/token`` (JSON, Anthropic) and ``/oauth/token`` (form, OpenAI):
  ``authorization_code`` needs a known code, the same ``redirect_uri`` and a
  ``code_verifier`` whose SHA-256 is the recorded challenge; ``refresh_token`` needs a live
  refresh token, which is then spent (single use, as real servers rotate them). Tokens live
  ``expires_in`` seconds (settable; 0 makes logins that are already expired). A refused grant
  is ``400 {"error": "invalid_grant"}``. OpenAI access tokens are JWTs with a ChatGPT account
  id, as the Codex provider requires.
- GitHub device flow: ``POST /login/device/code``, then ``/login/oauth/access_token`` answers
  ``authorization_pending`` ``pending_polls`` times before the GitHub token;
  ``deny_device`` makes it answer ``access_denied`` instead;
  ``GET /copilot_internal/v2/token`` exchanges a live GitHub token for a Copilot token.
- Google (Gemini CLI / Antigravity): ``GET /o/oauth2/v2/auth`` as ``/oauth/authorize``;
  ``POST /token`` (form) also needs the ``client_secret`` of an installed app; a Google refresh
  answers no new refresh token and does not spend the old one (Google keeps it until revoked).
  ``GET /oauth2/v1/userinfo`` names ``GOOGLE_EMAIL``. Code Assist: ``POST
  /v1internal:loadCodeAssist`` answers the user's tier and ``google_project`` when set; when
  it is None the user has no project yet: it lists ``allowed_tiers`` and
  ``POST /v1internal:onboardUser`` starts a long-running operation that ``GET
  /v1internal/operations/...`` reports done, with ``ONBOARDED_PROJECT``, after
  ``onboard_polls`` polls. Each needs a live access token (else 401); ``onboard_bodies``
  keeps what onboardUser was sent.
- ``revoke_all()`` kills every refresh token; ``refreshes`` counts successful refreshes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OAuthServer", "ACCOUNT_ID", "GOOGLE_EMAIL", "ONBOARDED_PROJECT"]

ACCOUNT_ID = "acct-scripted-1"
GOOGLE_EMAIL = "someone@example.com"
ONBOARDED_PROJECT = "onboarded-project-1"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jwt(claims: dict[str, Any]) -> str:
    return ".".join([_b64(b'{"alg":"none"}'), _b64(json.dumps(claims).encode()), _b64(b"sig")])


class OAuthServer:
    def __init__(self, expires_in: int = 3600, pending_polls: int = 1) -> None:
        self.expires_in = expires_in
        self.pending_polls = pending_polls
        #: When set, the device-code user declines: polls answer ``access_denied``.
        self.deny_device = False
        self.refreshes = 0
        #: Google Code Assist: the user's project (None: onboarding needed), the tiers offered
        #: to a user without one, and how many polls the onboarding operation takes.
        self.google_project: str | None = "scripted-project"
        self.allowed_tiers: list[dict[str, Any]] = [{"id": "free-tier", "isDefault": True}]
        self.onboard_polls = 1
        self.onboard_bodies: list[dict[str, Any]] = []
        self._operations: dict[str, int] = {}
        self._access: set[str] = set()
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._codes: dict[str, tuple[str, str]] = {}  # code -> (challenge, redirect_uri)
        self._refresh: set[str] = set()
        self._github: set[str] = set()
        self._devices: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._handle(self, "GET", b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                server._handle(self, "POST", self.rfile.read(length))

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> OAuthServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    def revoke_all(self) -> None:
        with self._lock:
            self._refresh.clear()
            self._github.clear()

    # -- handlers ---------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler, method: str, body: bytes) -> None:
        url = urllib.parse.urlsplit(h.path)
        self.requests.append(f"{method} {url.path}")
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        if (h.headers.get("Content-Type") or "").startswith("application/json"):
            fields = json.loads(body or b"{}")
        else:
            fields = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode()).items()}
        with self._lock:
            status, answer, location = self._route(method, url.path, query, fields, h.headers.get("Authorization"))
        h.send_response(status)
        if location:
            h.send_header("Location", location)
        data = json.dumps(answer).encode()
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _route(self, method: str, path: str, query: dict[str, str], fields: dict[str, Any],
               auth: str | None) -> tuple[int, Any, str | None]:
        if method == "GET" and path == "/oauth/authorize":
            if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
                return 400, {"error": "invalid_request", "error_description": "PKCE S256 required"}, None
            code = "code-" + secrets.token_hex(8)
            self._codes[code] = (query["code_challenge"], query.get("redirect_uri", ""))
            target = query["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": query.get("state", "")})
            return 302, {}, target
        if method == "GET" and path == "/o/oauth2/v2/auth":
            return self._route(method, "/oauth/authorize", query, fields, auth)
        if method == "POST" and path in ("/v1/oauth/token", "/oauth/token"):
            return self._token(fields, jwt=path == "/oauth/token")
        if path == "/token" or path == "/oauth2/v1/userinfo" or path.startswith("/v1internal"):
            return self._google(method, path, fields, auth)
        if method == "POST" and path == "/login/device/code":
            device = "dev-" + secrets.token_hex(8)
            self._devices[device] = 0
            return 200, {"device_code": device, "user_code": "ABCD-1234", "verification_uri": "https://github.com/login/device",
                         "interval": 0, "expires_in": 900}, None
        if method == "POST" and path == "/login/oauth/access_token":
            device = fields.get("device_code", "")
            if device not in self._devices:
                return 200, {"error": "expired_token", "error_description": "unknown device code"}, None
            self._devices[device] += 1
            if self.deny_device:
                return 200, {"error": "access_denied", "error_description": "the user said no"}, None
            if self._devices[device] <= self.pending_polls:
                return 200, {"error": "authorization_pending"}, None
            del self._devices[device]
            token = "gho_" + secrets.token_hex(8)
            self._github.add(token)
            return 200, {"access_token": token, "token_type": "bearer", "scope": "read:user"}, None
        if method == "GET" and path == "/copilot_internal/v2/token":
            token = (auth or "").removeprefix("Bearer ")
            if token not in self._github:
                return 401, {"message": "Bad credentials"}, None
            self.refreshes += 1
            copilot = f"tid={secrets.token_hex(4)};exp=1;proxy-ep=proxy.individual.githubcopilot.com"
            return 200, {"token": copilot, "expires_at": int(time.time()) + self.expires_in}, None
        return 404, {"error": "not_found"}, None

    def _google(self, method: str, path: str, fields: dict[str, Any], auth: str | None) -> tuple[int, Any, str | None]:
        if method == "POST" and path == "/token":
            if not fields.get("client_secret"):
                return 401, {"error": "invalid_client", "error_description": "client_secret missing"}, None
            return self._token(fields, jwt=False, google=True)
        if (auth or "").removeprefix("Bearer ") not in self._access:
            return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                                   "status": "UNAUTHENTICATED"}}, None
        if path == "/oauth2/v1/userinfo":
            return 200, {"email": GOOGLE_EMAIL, "verified_email": True}, None
        if method == "POST" and path == "/v1internal:loadCodeAssist":
            if self.google_project is not None:
                return 200, {"currentTier": {"id": "free-tier"}, "cloudaicompanionProject": self.google_project}, None
            return 200, {"allowedTiers": self.allowed_tiers}, None
        if method == "POST" and path == "/v1internal:onboardUser":
            self.onboard_bodies.append(fields)
            name = "operations/onboard-" + secrets.token_hex(4)
            self._operations[name] = 0
            return 200, {"name": name, "done": False}, None
        name = path.removeprefix("/v1internal/")
        if method == "GET" and name in self._operations:
            self._operations[name] += 1
            if self._operations[name] < self.onboard_polls:
                return 200, {"name": name, "done": False}, None
            return 200, {"name": name, "done": True,
                         "response": {"cloudaicompanionProject": {"id": ONBOARDED_PROJECT}}}, None
        return 404, {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}, None

    def _token(self, fields: dict[str, Any], jwt: bool, google: bool = False) -> tuple[int, Any, str | None]:
        grant = fields.get("grant_type")
        if grant == "authorization_code":
            found = self._codes.pop(fields.get("code", ""), None)
            if found is None:
                return 400, {"error": "invalid_grant", "error_description": "unknown code"}, None
            challenge, redirect = found
            verifier = fields.get("code_verifier", "")
            if _b64(hashlib.sha256(verifier.encode()).digest()) != challenge:
                return 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}, None
            if fields.get("redirect_uri") != redirect:
                return 400, {"error": "invalid_grant", "error_description": "redirect_uri mismatch"}, None
        elif grant == "refresh_token":
            token = fields.get("refresh_token", "")
            if token not in self._refresh:
                return 400, {"error": "invalid_grant", "error_description": "refresh token revoked or already used"}, None
            self.refreshes += 1
            if google:  # Google keeps the refresh token and answers none
                access = "ya29." + secrets.token_hex(8)
                self._access.add(access)
                return 200, {"access_token": access, "expires_in": self.expires_in, "token_type": "Bearer",
                             "scope": "https://www.googleapis.com/auth/cloud-platform"}, None
            self._refresh.discard(token)
        else:
            return 400, {"error": "unsupported_grant_type"}, None
        refresh = "rt-" + secrets.token_hex(8)
        self._refresh.add(refresh)
        access = "at-" + secrets.token_hex(8)
        if google:
            access = "ya29." + access
            self._access.add(access)
        elif jwt:
            access = _jwt({"https://api.openai.com/auth": {"chatgpt_account_id": ACCOUNT_ID}, "n": access})
        else:
            access = "sk-ant-oat01-" + access
        return 200, {"access_token": access, "refresh_token": refresh, "expires_in": self.expires_in, "token_type": "Bearer"}, None
