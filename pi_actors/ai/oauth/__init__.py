"""Subscription logins (pi's ``/login``) and ``auth.json``, the credentials they leave.

- ``AuthStore`` (``_store``): read/write ``auth.json`` in pi's shape, 0600, refresh under a
  file lock; ``AuthFileError``, ``LoginExpiredError``.
- ``OAUTH_PROVIDERS`` / ``get_oauth_provider`` (``_providers``): the login flows of Anthropic,
  OpenAI Codex, GitHub Copilot and Google (``_google``: Gemini CLI and Antigravity, with
  Code Assist project discovery); ``LoginIO`` is how a flow talks to the user.
- ``code_assist_credentials(key)``: ``(token, projectId)`` from a Google login's key.
- ``pkce_pair``, ``request_json``, ``parse_pasted_code`` (``_http``): the HTTP pieces.
- ``auth_api_key(provider)``: the key auth.json gives ``provider`` (pi checks it before the
  environment and models.json); ``is_expired_login(entry)``: whether an entry's key needs a
  refresh (network) first.

Endpoints follow ``PI_ACTORS_OAUTH_URL`` and ``PI_ACTORS_OAUTH_CALLBACK_PORT`` when set
(tests point them at ``pi_actors.testing.oauth_server``).
"""

from __future__ import annotations

from ._google import code_assist_credentials
from ._http import OAuthError, parse_pasted_code, pkce_pair, request_json
from ._providers import (
    CODEX_JWT_CLAIM,
    OAUTH_PROVIDERS,
    LoginIO,
    OAuthProvider,
    codex_account_id,
    copilot_base_url,
    copilot_request_headers,
    get_oauth_provider,
)
from ._store import AuthFileError, AuthStore, LoginExpiredError, default_auth_path, is_expired_login

__all__ = ["AuthStore", "AuthFileError", "LoginExpiredError", "OAuthError", "OAUTH_PROVIDERS", "OAuthProvider",
           "LoginIO", "get_oauth_provider", "parse_pasted_code", "pkce_pair", "request_json", "default_auth_path", "auth_api_key", "is_expired_login", "copilot_base_url", "copilot_request_headers", "codex_account_id", "CODEX_JWT_CLAIM",
           "code_assist_credentials"]


def auth_api_key(provider: str, path: str | None = None) -> str | None:
    """The key auth.json gives ``provider`` (refreshing an expired login), or None. Raises
    AuthFileError or LoginExpiredError (one line each)."""
    return AuthStore(path).api_key(provider)
