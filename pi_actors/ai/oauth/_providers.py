"""The subscription logins pi 0.73.1 offers, written from its documented flows: Anthropic
(Claude Pro/Max), OpenAI Codex (ChatGPT Plus/Pro) and GitHub Copilot; Google's two (Gemini CLI,
Antigravity), which pi offered before 0.73, are in ``_google``.

Each ``OAuthProvider`` has ``login(io) -> credentials`` (blocking; run it in a thread) and
``refresh(credentials) -> credentials``; credentials are pi's auth.json entry without its
``type``: ``access``, ``refresh``, ``expires`` (epoch milliseconds) and the provider's extras
(``accountId`` for Codex, ``enterpriseUrl`` for Copilot Enterprise). Both raise ``OAuthError``
with one line. Endpoints go through ``_http.endpoint`` so a scripted server can stand in.

- Anthropic: authorization code + PKCE (S256, the verifier doubles as ``state``), browser
  redirect to ``http://localhost:53692/callback`` or a pasted code; JSON token requests to
  platform.claude.com; ``expires`` is 5 minutes early.
- OpenAI Codex: authorization code + PKCE with a random state, redirect to
  ``http://localhost:1455/auth/callback`` or a pasted code; form-encoded token requests to
  auth.openai.com; the access token (a JWT) must carry a ChatGPT account id.
- GitHub Copilot: device code (the user enters a code at github.com/login/device), then the
  GitHub token is exchanged for a short-lived Copilot token; "refresh" is that exchange again
  with the GitHub token (stored as ``refresh``).
"""

from __future__ import annotations

import base64
import json
import secrets
import time
import urllib.parse
from typing import Any

from ._base import Credentials, LoginIO, OAuthProvider, _await_code, _now_ms, _refresh_failed, _tokens
from ._google import GoogleAntigravityOAuth, GoogleGeminiCliOAuth
from ._http import CallbackServer, OAuthError, callback_port, endpoint, pkce_pair, request_json

__all__ = ["LoginIO", "OAuthProvider", "OAUTH_PROVIDERS", "get_oauth_provider", "copilot_base_url", "copilot_request_headers"]



class AnthropicOAuth(OAuthProvider):
    id, name = "anthropic", "Anthropic (Claude Pro/Max)"
    client_id = base64.b64decode("OWQxYzI1MGEtZTYxYi00NGQ5LTg4ZWQtNTk0NGQxOTYyZjVl").decode()
    authorize_url = "https://claude.ai/oauth/authorize"
    token_url = "https://platform.claude.com/v1/oauth/token"
    scopes = "org:create_api_key user:profile user:inference user:sessions:claude_code user:mcp_servers user:file_upload"

    def login(self, io: LoginIO) -> Credentials:
        verifier, challenge = pkce_pair()
        with CallbackServer(callback_port(53692), "/callback", verifier, "Anthropic") as server:
            redirect = f"http://localhost:{server.port}/callback"
            query = urllib.parse.urlencode({
                "code": "true", "client_id": self.client_id, "response_type": "code", "redirect_uri": redirect,
                "scope": self.scopes, "code_challenge": challenge, "code_challenge_method": "S256", "state": verifier,
            })  # fmt: skip
            io.show(f"{endpoint(self.authorize_url)}?{query}",
                    "Complete login in your browser. If the browser is on another machine, paste the final redirect URL here.")
            code, state = _await_code(server, io)
        if state is not None and state != verifier:
            raise OAuthError("OAuth state mismatch")
        if not code:
            raise OAuthError("Missing authorization code")
        io.progress("Exchanging authorization code for tokens...")
        try:
            data = request_json(self.token_url, json_body={
                "grant_type": "authorization_code", "client_id": self.client_id, "code": code, "state": state or verifier,
                "redirect_uri": redirect, "code_verifier": verifier,
            })  # fmt: skip
        except OAuthError as exc:
            raise OAuthError(f"Anthropic token exchange failed: {exc}") from None
        return self._credentials(data, "Anthropic token exchange")

    def refresh(self, credentials: Credentials) -> Credentials:
        try:
            data = request_json(self.token_url, json_body={
                "grant_type": "refresh_token", "client_id": self.client_id, "refresh_token": credentials["refresh"],
            })  # fmt: skip
        except OAuthError as exc:
            raise _refresh_failed("Anthropic", exc) from None
        return self._credentials(data, "Anthropic token refresh")

    @staticmethod
    def _credentials(data: dict[str, Any], what: str) -> Credentials:
        access, refresh, expires_in = _tokens(data, what)
        return {"access": access, "refresh": refresh, "expires": _now_ms() + int(expires_in * 1000) - 5 * 60 * 1000}


#: The claim of a Codex access token (a JWT) that holds the ChatGPT account.
CODEX_JWT_CLAIM = "https://api.openai.com/auth"


def codex_account_id(token: str) -> str | None:
    """The ChatGPT account id in a Codex access token (a JWT of three parts), or None when
    the token is not one or carries none. The one parser of that claim: the login stores
    it, and the Codex provider sends it as ``chatgpt-account-id``."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        found = claims[CODEX_JWT_CLAIM]["chatgpt_account_id"]
    except (ValueError, KeyError, TypeError):
        return None
    return found if isinstance(found, str) and found else None


class OpenAICodexOAuth(OAuthProvider):
    id, name = "openai-codex", "ChatGPT Plus/Pro (Codex Subscription)"
    client_id = "app_EMoamEEZ73f0CkXaXp7hrann"
    authorize_url = "https://auth.openai.com/oauth/authorize"
    token_url = "https://auth.openai.com/oauth/token"

    def login(self, io: LoginIO) -> Credentials:
        verifier, challenge = pkce_pair()
        state = secrets.token_hex(16)
        with CallbackServer(callback_port(1455), "/auth/callback", state, "OpenAI") as server:
            redirect = f"http://localhost:{server.port}/auth/callback"
            query = urllib.parse.urlencode({
                "response_type": "code", "client_id": self.client_id, "redirect_uri": redirect,
                "scope": "openid profile email offline_access", "code_challenge": challenge,
                "code_challenge_method": "S256", "state": state, "id_token_add_organizations": "true",
                "codex_cli_simplified_flow": "true", "originator": "pi",
            })  # fmt: skip
            io.show(f"{endpoint(self.authorize_url)}?{query}", "A browser window should open. Complete login to finish.")
            code, got_state = _await_code(server, io)
        if got_state is not None and got_state != state:
            raise OAuthError("State mismatch")
        if not code:
            raise OAuthError("Missing authorization code")
        io.progress("Exchanging authorization code for tokens...")
        try:
            data = request_json(self.token_url, form={
                "grant_type": "authorization_code", "client_id": self.client_id, "code": code,
                "code_verifier": verifier, "redirect_uri": redirect,
            })  # fmt: skip
        except OAuthError as exc:
            raise OAuthError(f"OpenAI Codex token exchange failed: {exc}") from None
        return self._credentials(data, "OpenAI Codex token exchange")

    def refresh(self, credentials: Credentials) -> Credentials:
        try:
            data = request_json(self.token_url, form={
                "grant_type": "refresh_token", "refresh_token": credentials["refresh"], "client_id": self.client_id,
            })  # fmt: skip
        except OAuthError as exc:
            raise _refresh_failed("OpenAI Codex", exc) from None
        return self._credentials(data, "OpenAI Codex token refresh")

    @staticmethod
    def _credentials(data: dict[str, Any], what: str) -> Credentials:
        access, refresh, expires_in = _tokens(data, what)
        account = codex_account_id(access)
        if account is None:
            raise OAuthError("Failed to extract accountId from token")
        return {"access": access, "refresh": refresh, "expires": _now_ms() + int(expires_in * 1000), "accountId": account}


_COPILOT_HEADERS = {
    "User-Agent": "GitHubCopilotChat/0.35.0", "Editor-Version": "vscode/1.107.0",
    "Editor-Plugin-Version": "copilot-chat/0.35.0", "Copilot-Integration-Id": "vscode-chat",
}  # fmt: skip


def normalize_domain(text: str) -> str | None:
    """The host of a GitHub Enterprise URL or domain, or None when it is not one."""
    value = text.strip()
    if not value:
        return None
    try:
        host = urllib.parse.urlsplit(value if "://" in value else f"https://{value}").hostname
    except ValueError:
        return None
    return host or None


def copilot_base_url(token: str, enterprise: str | None = None) -> str:
    """The API base URL a Copilot token points at (its ``proxy-ep``), pi's rule."""
    for part in token.split(";"):
        if part.startswith("proxy-ep="):
            host = part[len("proxy-ep="):]
            return "https://" + ("api." + host[len("proxy."):] if host.startswith("proxy.") else host)
    if enterprise:
        return f"https://copilot-api.{enterprise}"
    return "https://api.individual.githubcopilot.com"


class GitHubCopilotOAuth(OAuthProvider):
    id, name = "github-copilot", "GitHub Copilot"
    client_id = base64.b64decode("SXYxLmI1MDdhMDhjODdlY2ZlOTg=").decode()

    def login(self, io: LoginIO) -> Credentials:
        answer = io.ask("GitHub Enterprise URL/domain (blank for github.com)")
        enterprise = normalize_domain(answer)
        if answer.strip() and not enterprise:
            raise OAuthError("Invalid GitHub Enterprise URL/domain")
        domain = enterprise or "github.com"
        ua = {"User-Agent": _COPILOT_HEADERS["User-Agent"]}
        device = request_json(f"https://{domain}/login/device/code", form={"client_id": self.client_id, "scope": "read:user"},
                              headers=ua)
        code, user_code, uri = device.get("device_code"), device.get("user_code"), device.get("verification_uri")
        interval, expires_in = device.get("interval"), device.get("expires_in")
        if not (isinstance(code, str) and isinstance(user_code, str) and isinstance(uri, str)
                and isinstance(interval, int | float) and isinstance(expires_in, int | float)):
            raise OAuthError("Invalid device code response fields")
        io.show(uri, f"Enter code: {user_code}")
        deadline = time.monotonic() + float(expires_in)
        wait = float(interval) * 1.2
        slowed = False
        while True:
            if time.monotonic() >= deadline:
                raise OAuthError("Device flow timed out" + (" after slow_down responses (check the clock)" if slowed else ""))
            io.sleep(wait)
            raw = request_json(f"https://{domain}/login/oauth/access_token", headers=ua, form={
                "client_id": self.client_id, "device_code": code, "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
            })  # fmt: skip
            if isinstance(raw.get("access_token"), str):
                github_token: str = raw["access_token"]
                break
            error = raw.get("error")
            if error == "authorization_pending":
                continue
            if error == "slow_down":
                slowed = True
                new = raw.get("interval")
                wait = float(new) * 1.4 if isinstance(new, int | float) and new > 0 else wait + 5
                continue
            detail = raw.get("error_description")
            raise OAuthError(f"Device flow failed: {error}" + (f": {detail}" if detail else ""))
        io.progress("Exchanging the GitHub token for a Copilot token...")
        return self._exchange(github_token, enterprise)

    def refresh(self, credentials: Credentials) -> Credentials:
        try:
            return self._exchange(credentials["refresh"], credentials.get("enterpriseUrl"))
        except OAuthError as exc:
            raise _refresh_failed("GitHub Copilot", exc) from None

    @staticmethod
    def _exchange(github_token: str, enterprise: str | None) -> Credentials:
        raw = request_json(f"https://api.{enterprise or 'github.com'}/copilot_internal/v2/token", method="GET",
                           headers={"Authorization": f"Bearer {github_token}", **_COPILOT_HEADERS})
        token, expires_at = raw.get("token"), raw.get("expires_at")
        if not isinstance(token, str) or not isinstance(expires_at, int | float):
            raise OAuthError("Invalid Copilot token response fields")
        out: Credentials = {"refresh": github_token, "access": token, "expires": int(expires_at * 1000) - 5 * 60 * 1000}
        if enterprise:
            out["enterpriseUrl"] = enterprise
        return out


OAUTH_PROVIDERS: dict[str, OAuthProvider] = {p.id: p for p in (
    AnthropicOAuth(), GitHubCopilotOAuth(), GoogleGeminiCliOAuth(), GoogleAntigravityOAuth(), OpenAICodexOAuth())}


def get_oauth_provider(provider: str) -> OAuthProvider:
    """The login of ``provider``; raises OAuthError naming the ones there are."""
    found = OAUTH_PROVIDERS.get(provider)
    if found is None:
        raise OAuthError(f'No subscription login for "{provider}". Available: {", ".join(OAUTH_PROVIDERS)}')
    return found


def copilot_request_headers(messages: list[Any]) -> dict[str, str]:
    """The headers Copilot wants on each request (pi's dynamic headers): ``X-Initiator``
    (``user`` when the last message is the user's, else ``agent``), ``Openai-Intent``, and
    ``Copilot-Vision-Request`` when a user message or tool result carries an image."""
    last = messages[-1] if messages else None
    headers = {"X-Initiator": "user" if last is None or getattr(last, "role", None) == "user" else "agent",
               "Openai-Intent": "conversation-edits"}
    for msg in messages:
        content = getattr(msg, "content", None)
        if getattr(msg, "role", None) in ("user", "toolResult") and isinstance(content, list):
            if any(getattr(block, "type", None) == "image" for block in content):
                headers["Copilot-Vision-Request"] = "true"
                break
    return headers
