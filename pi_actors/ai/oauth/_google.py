"""The Google subscription logins pi offered before 0.73 (``google-gemini-cli``: Gemini CLI's
Cloud Code Assist; ``google-antigravity``: Antigravity's), written from the public flow.

Both are Google's installed-app flow: authorization code + PKCE (S256, the verifier doubles as
``state``), ``access_type=offline`` and ``prompt=consent`` so Google hands out a refresh token,
a local redirect (``http://localhost:8085/oauth2callback`` for Gemini CLI,
``http://localhost:51121/oauth-callback`` for Antigravity; ``PI_ACTORS_OAUTH_CALLBACK_PORT``
overrides the port) or a pasted redirect URL; form-encoded token requests to
``oauth2.googleapis.com/token`` with the app's public client id and secret.

After the exchange the flow finds the Code Assist project the requests are billed to:
- Gemini CLI: ``POST cloudcode-pa.googleapis.com/v1internal:loadCodeAssist``. A user with a
  tier and a project uses it. A user with a tier but no project needs ``GOOGLE_CLOUD_PROJECT``
  (or ``GOOGLE_CLOUD_PROJECT_ID``). A user without a tier is onboarded on the default tier:
  ``v1internal:onboardUser`` starts a long-running operation polled (every 5 s,
  ``io.sleep``) at ``v1internal/<operation>`` until done; its response names the project. A
  tier other than free needs the environment's project. An account under a VPC-SC policy
  (loadCodeAssist refused with ``SECURITY_POLICY_VIOLATED``) counts as the standard tier.
- Antigravity: loadCodeAssist on the production, then the sandbox endpoint; without a project
  the public default one (``rising-fact-p41fc``) is used, as pi did.

Credentials (pi's auth.json entry): ``access``, ``refresh``, ``expires`` (epoch ms, 5 minutes
early), ``projectId`` and ``email`` (from ``oauth2/v1/userinfo``; best effort). A refresh keeps
the refresh token (Google answers none) and the project. ``api_key(credentials)`` is pi's
``{"token", "projectId"}`` JSON: the Code Assist provider needs both. Every endpoint goes
through ``_http.endpoint`` (``PI_ACTORS_OAUTH_URL``); every failure is one ``OAuthError`` line.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.parse
from typing import Any

from ._base import Credentials, LoginIO, OAuthProvider, _await_code, _now_ms, _refresh_failed
from ._http import CallbackServer, HttpError, OAuthError, callback_port, endpoint, pkce_pair, request_json

__all__ = ["GoogleGeminiCliOAuth", "GoogleAntigravityOAuth", "CODE_ASSIST_ENDPOINT", "ANTIGRAVITY_ENDPOINT",
           "code_assist_credentials"]

AUTH_URL = "https://accounts.google.com/o/oauth2/v2/auth"
TOKEN_URL = "https://oauth2.googleapis.com/token"
USERINFO_URL = "https://www.googleapis.com/oauth2/v1/userinfo?alt=json"
CODE_ASSIST_ENDPOINT = "https://cloudcode-pa.googleapis.com"
ANTIGRAVITY_ENDPOINT = "https://daily-cloudcode-pa.sandbox.googleapis.com"
_BASE_SCOPES = ("https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/userinfo.email",
                "https://www.googleapis.com/auth/userinfo.profile")
_METADATA = {"ideType": "IDE_UNSPECIFIED", "platform": "PLATFORM_UNSPECIFIED", "pluginType": "GEMINI"}
_NEEDS_PROJECT = ("This account requires setting the GOOGLE_CLOUD_PROJECT or GOOGLE_CLOUD_PROJECT_ID environment "
                  "variable. See https://goo.gle/gemini-cli-auth-docs#workspace-gca")
_FREE_TIER, _LEGACY_TIER, _STANDARD_TIER = "free-tier", "legacy-tier", "standard-tier"
_POLL_SECONDS = 5.0
_MAX_POLLS = 60


def _decode(text: str) -> str:
    return base64.b64decode(text).decode()


def code_assist_credentials(api_key: str) -> tuple[str, str]:
    """``(token, projectId)`` from the key a Google login gives (pi's ``{"token",
    "projectId"}`` JSON); raises OAuthError (one line) for anything else."""
    try:
        parsed = json.loads(api_key)
    except ValueError:
        raise OAuthError("Invalid Google Cloud Code Assist credentials. Use /login to re-authenticate.") from None
    token = parsed.get("token") if isinstance(parsed, dict) else None
    project = parsed.get("projectId") if isinstance(parsed, dict) else None
    if not isinstance(token, str) or not token or not isinstance(project, str) or not project:
        raise OAuthError("Missing token or projectId in Google Cloud credentials. Use /login to re-authenticate.")
    return token, project


class _GoogleOAuth(OAuthProvider):
    client_id = ""
    client_secret = ""
    port = 0
    path = ""
    scopes: tuple[str, ...] = _BASE_SCOPES
    discovery_headers: dict[str, str] = {}

    def login(self, io: LoginIO) -> Credentials:
        verifier, challenge = pkce_pair()
        with CallbackServer(callback_port(self.port), self.path, verifier, "Google") as server:
            redirect = f"http://localhost:{server.port}{self.path}"
            query = urllib.parse.urlencode({
                "client_id": self.client_id, "response_type": "code", "redirect_uri": redirect,
                "scope": " ".join(self.scopes), "code_challenge": challenge, "code_challenge_method": "S256",
                "state": verifier, "access_type": "offline", "prompt": "consent",
            })  # fmt: skip
            io.show(f"{endpoint(AUTH_URL)}?{query}", "Complete the sign-in in your browser. If the browser is on "
                    "another machine, paste the final redirect URL here.")
            io.progress("Waiting for OAuth callback...")
            code, state = _await_code(server, io)
        if state is not None and state != verifier:
            raise OAuthError("OAuth state mismatch - possible CSRF attack")
        if not code:
            raise OAuthError("No authorization code received")
        io.progress("Exchanging authorization code for tokens...")
        try:
            data = request_json(TOKEN_URL, form={
                "client_id": self.client_id, "client_secret": self.client_secret, "code": code,
                "grant_type": "authorization_code", "redirect_uri": redirect, "code_verifier": verifier,
            })  # fmt: skip
        except OAuthError as exc:
            raise OAuthError(f"{self.name} token exchange failed: {exc}") from None
        access, refresh, expires_in = data.get("access_token"), data.get("refresh_token"), data.get("expires_in")
        if not isinstance(access, str) or not isinstance(expires_in, int | float):
            raise OAuthError(f"{self.name} token exchange response is missing access_token or expires_in")
        if not isinstance(refresh, str) or not refresh:
            raise OAuthError("No refresh token received. Please try again.")
        io.progress("Getting user info...")
        email = _user_email(access)
        project = self.discover_project(access, io)
        out: Credentials = {"access": access, "refresh": refresh, "projectId": project,
                            "expires": _now_ms() + int(float(expires_in) * 1000) - 5 * 60 * 1000}
        if email:
            out["email"] = email
        return out

    def refresh(self, credentials: Credentials) -> Credentials:
        try:
            data = request_json(TOKEN_URL, form={
                "client_id": self.client_id, "client_secret": self.client_secret,
                "refresh_token": credentials["refresh"], "grant_type": "refresh_token",
            })  # fmt: skip
        except OAuthError as exc:
            raise _refresh_failed(self.name, exc) from None
        access, expires_in = data.get("access_token"), data.get("expires_in")
        if not isinstance(access, str) or not isinstance(expires_in, int | float):
            raise OAuthError(f"{self.name} token refresh response is missing access_token or expires_in")
        fresh = data.get("refresh_token")
        out = {k: v for k, v in credentials.items() if k not in ("access", "refresh", "expires")}
        out.update(access=access, refresh=fresh if isinstance(fresh, str) and fresh else credentials["refresh"],
                   expires=_now_ms() + int(float(expires_in) * 1000) - 5 * 60 * 1000)
        return out

    def api_key(self, credentials: Credentials) -> str:
        return json.dumps({"token": credentials["access"], "projectId": credentials.get("projectId", "")})

    def discover_project(self, access: str, io: LoginIO) -> str:
        raise NotImplementedError

    def _headers(self, access: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {access}", **self.discovery_headers}


def _user_email(access: str) -> str | None:
    try:
        data = request_json(USERINFO_URL, method="GET", headers={"Authorization": f"Bearer {access}"})
    except OAuthError:
        return None  # the email is only shown to the user; the login does not need it
    email = data.get("email")
    return email if isinstance(email, str) else None


def _policy_violated(exc: HttpError) -> bool:
    try:
        details = json.loads(exc.body).get("error", {}).get("details", [])
    except (ValueError, AttributeError):
        return False
    return isinstance(details, list) and any(isinstance(d, dict) and d.get("reason") == "SECURITY_POLICY_VIOLATED"
                                             for d in details)


def _project_of(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get("id"), str) and value["id"]:
        return str(value["id"])
    return None


class GoogleGeminiCliOAuth(_GoogleOAuth):
    id, name = "google-gemini-cli", "Google Cloud Code Assist (Gemini CLI)"
    client_id = _decode("NjgxMjU1ODA5Mzk1LW9vOGZ0Mm9wcmRybnA5ZTNhcWY2YXYzaG1kaWIxMzVqLmFwcHMuZ29vZ2xldXNlcmNvbnRlbnQuY29t")
    client_secret = _decode("R09DU1BYLTR1SGdNUG0tMW83U2stZ2VWNkN1NWNsWEZzeGw=")
    port, path = 8085, "/oauth2callback"
    discovery_headers = {"User-Agent": "google-api-nodejs-client/9.15.1", "X-Goog-Api-Client": "gl-node/22.17.0"}

    def discover_project(self, access: str, io: LoginIO) -> str:
        env_project = os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GOOGLE_CLOUD_PROJECT_ID") or None
        headers = self._headers(access)
        io.progress("Checking for existing Cloud Code Assist project...")
        load: dict[str, Any] = {"metadata": {**_METADATA}}
        if env_project:
            load["cloudaicompanionProject"] = env_project
            load["metadata"]["duetProject"] = env_project
        try:
            data = request_json(f"{CODE_ASSIST_ENDPOINT}/v1internal:loadCodeAssist", json_body=load, headers=headers)
        except HttpError as exc:
            if not _policy_violated(exc):
                raise OAuthError(f"loadCodeAssist failed: {exc}") from None
            data = {"currentTier": {"id": _STANDARD_TIER}}
        if data.get("currentTier"):
            project = _project_of(data.get("cloudaicompanionProject")) or env_project
            if project is None:
                raise OAuthError(_NEEDS_PROJECT)
            return project
        tiers = data.get("allowedTiers")
        default = next((t for t in tiers if isinstance(t, dict) and t.get("isDefault")), None) \
            if isinstance(tiers, list) else None
        tier = str((default or {}).get("id") or _LEGACY_TIER)
        if tier != _FREE_TIER and not env_project:
            raise OAuthError(_NEEDS_PROJECT)
        io.progress("Provisioning Cloud Code Assist project (this may take a moment)...")
        onboard: dict[str, Any] = {"tierId": tier, "metadata": {**_METADATA}}
        if tier != _FREE_TIER and env_project:
            onboard["cloudaicompanionProject"] = env_project
            onboard["metadata"]["duetProject"] = env_project
        try:
            operation = request_json(f"{CODE_ASSIST_ENDPOINT}/v1internal:onboardUser", json_body=onboard,
                                     headers=headers)
            polls = 0
            while not operation.get("done") and isinstance(operation.get("name"), str):
                polls += 1
                if polls > _MAX_POLLS:
                    raise OAuthError("the Cloud Code Assist project was not provisioned in time; try again later")
                io.progress(f"Waiting for project provisioning (attempt {polls + 1})...")
                if polls > 1:
                    io.sleep(_POLL_SECONDS)
                operation = request_json(f"{CODE_ASSIST_ENDPOINT}/v1internal/{operation['name']}", method="GET",
                                         headers=headers)
        except HttpError as exc:
            raise OAuthError(f"onboardUser failed: {exc}") from None
        response = operation.get("response")
        project = _project_of(response.get("cloudaicompanionProject") if isinstance(response, dict) else None)
        if project or env_project:
            return str(project or env_project)
        raise OAuthError("Could not discover or provision a Google Cloud project. Try setting the GOOGLE_CLOUD_PROJECT "
                         "or GOOGLE_CLOUD_PROJECT_ID environment variable. "
                         "See https://goo.gle/gemini-cli-auth-docs#workspace-gca")


class GoogleAntigravityOAuth(_GoogleOAuth):
    id, name = "google-antigravity", "Antigravity (Gemini 3, Claude, GPT-OSS)"
    client_id = _decode("MTA3MTAwNjA2MDU5MS10bWhzc2luMmgyMWxjcmUyMzV2dG9sb2poNGc0MDNlcC5hcHBzLmdvb2dsZXVzZXJjb250ZW50LmNvbQ==")
    client_secret = _decode("R09DU1BYLUs1OEZXUjQ4NkxkTEoxbUxCOHNYQzR6NnFEQWY=")
    port, path = 51121, "/oauth-callback"
    scopes = (*_BASE_SCOPES, "https://www.googleapis.com/auth/cclog",
              "https://www.googleapis.com/auth/experimentsandconfigs")
    discovery_headers = {"User-Agent": "google-api-nodejs-client/9.15.1",
                         "X-Goog-Api-Client": "google-cloud-sdk vscode_cloudshelleditor/0.1",
                         "Client-Metadata": json.dumps(_METADATA, separators=(",", ":"))}
    default_project = "rising-fact-p41fc"

    def discover_project(self, access: str, io: LoginIO) -> str:
        io.progress("Checking for existing project...")
        for base in (CODE_ASSIST_ENDPOINT, ANTIGRAVITY_ENDPOINT):
            try:
                data = request_json(f"{base}/v1internal:loadCodeAssist", json_body={"metadata": {**_METADATA}},
                                    headers=self._headers(access))
            except OAuthError:
                continue  # the next endpoint, then the default project
            project = _project_of(data.get("cloudaicompanionProject"))
            if project:
                return project
        io.progress("Using default project...")
        return self.default_project
