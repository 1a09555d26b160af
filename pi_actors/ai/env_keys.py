"""API keys from the environment (pi's packages/ai, docs/architecture.md §7).

Contract: ``get_env_api_key(provider)`` returns the key for ``provider`` from ``os.environ`` or
None. Empty variables count as unset. ``anthropic`` prefers ``ANTHROPIC_OAUTH_TOKEN`` over
``ANTHROPIC_API_KEY``; ``github-copilot`` takes the first of ``COPILOT_GITHUB_TOKEN``,
``GH_TOKEN``, ``GITHUB_TOKEN``; ``amazon-bedrock`` and ``google-vertex`` return the sentinel
``"<authenticated>"`` when ambient credentials exist; other providers use a fixed variable
(pi-ai 0.73.1's table, ``ENV_KEY_VARIABLES``).

``credential_hint(provider)`` is the part of a sentence telling a user how to give
``provider`` credentials: the variable(s) to set, the ambient credentials it reads, or the
subscription login it needs (and, for the providers with one, that `/login` works too).
"""

from __future__ import annotations

import os

__all__ = ["get_env_api_key", "credential_hint", "AUTHENTICATED", "ENV_KEY_VARIABLES"]

AUTHENTICATED = "<authenticated>"

ENV_KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"),
    "github-copilot": ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"),
    "openai": ("OPENAI_API_KEY",),
    "azure-openai-responses": ("AZURE_OPENAI_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "google": ("GEMINI_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "minimax": ("MINIMAX_API_KEY",),
    "minimax-cn": ("MINIMAX_CN_API_KEY",),
    "moonshotai": ("MOONSHOT_API_KEY",),
    "moonshotai-cn": ("MOONSHOT_API_KEY",),
    "huggingface": ("HF_TOKEN",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "opencode": ("OPENCODE_API_KEY",),
    "opencode-go": ("OPENCODE_API_KEY",),
    "kimi-coding": ("KIMI_API_KEY",),
    "cloudflare-workers-ai": ("CLOUDFLARE_API_KEY",),
    "cloudflare-ai-gateway": ("CLOUDFLARE_API_KEY",),
    "xiaomi": ("XIAOMI_API_KEY",),
    "xiaomi-token-plan-cn": ("XIAOMI_TOKEN_PLAN_CN_API_KEY",),
    "xiaomi-token-plan-ams": ("XIAOMI_TOKEN_PLAN_AMS_API_KEY",),
    "xiaomi-token-plan-sgp": ("XIAOMI_TOKEN_PLAN_SGP_API_KEY",),
}

#: Ambient credentials read instead of (or besides) one variable.
_AMBIENT = {
    "google-vertex": "set GOOGLE_CLOUD_API_KEY, or GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION with "
                     "application default credentials (gcloud auth application-default login)",
    "amazon-bedrock": "set AWS_PROFILE, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK",
}
#: Providers reached only through a subscription login (pi's /login).
_LOGIN_ONLY = {"openai-codex": "a ChatGPT Plus/Pro login", "google-gemini-cli": "a Google (Gemini CLI) login",
               "google-antigravity": "a Google (Antigravity) login"}

_vertex_adc_seen = False


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value or None


def _vertex_has_adc() -> bool:
    global _vertex_adc_seen
    if _vertex_adc_seen:
        return True
    path = _env("GOOGLE_APPLICATION_CREDENTIALS") or os.path.join(
        os.path.expanduser("~"), ".config", "gcloud", "application_default_credentials.json"
    )
    if os.path.exists(path):
        _vertex_adc_seen = True  # cached only once found, as pi does
    return _vertex_adc_seen


def get_env_api_key(provider: str) -> str | None:
    for name in ENV_KEY_VARIABLES.get(provider, ()):
        value = _env(name)
        if value:
            return value
    if provider == "google-vertex":
        key = _env("GOOGLE_CLOUD_API_KEY")
        if key:
            return key
        project = _env("GOOGLE_CLOUD_PROJECT") or _env("GCLOUD_PROJECT")
        if project and _env("GOOGLE_CLOUD_LOCATION") and _vertex_has_adc():
            return AUTHENTICATED
        return None
    if provider == "amazon-bedrock":
        if (
            _env("AWS_PROFILE")
            or (_env("AWS_ACCESS_KEY_ID") and _env("AWS_SECRET_ACCESS_KEY"))
            or _env("AWS_BEARER_TOKEN_BEDROCK")
            or _env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
            or _env("AWS_CONTAINER_CREDENTIALS_FULL_URI")
            or _env("AWS_WEB_IDENTITY_TOKEN_FILE")
        ):
            return AUTHENTICATED
    return None


def credential_hint(provider: str) -> str:
    """How to give ``provider`` credentials, e.g. ``"set GROQ_API_KEY"`` (module docstring)."""
    if provider in _AMBIENT:
        return _AMBIENT[provider]
    if provider in _LOGIN_ONLY:
        return f"it needs {_LOGIN_ONLY[provider]}: run /login {provider} (or pi-actors login {provider})"
    names = ENV_KEY_VARIABLES.get(provider)
    if not names:
        return "give the provider an apiKey in models.json"
    login = f" (or /login {provider})" if provider in ("anthropic", "github-copilot") else ""
    if len(names) == 1:
        return f"set {names[0]}{login}"
    return f"set {' or '.join(names)}{login}"
