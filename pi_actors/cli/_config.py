"""Where configuration lives and how a model is chosen (pi's rules, first cut).

Config and sessions live under ``$PI_ACTORS_DIR`` (default ``~/.pi-actors``): ``models.json``
(pi's format: custom providers and models) and ``sessions/``.

Model choice: ``--model`` accepts ``provider/id``, a unique id, or an id under
``--provider``; an optional ``:thinking`` suffix sets the thinking level. Without
``--model``, the first provider with credentials and a supported API (anthropic, openai, then
the catalog's other providers and those of models.json) gives its default model (pi's).

Credentials: a provider has them when ``--api-key`` is given for it, auth.json holds a login
or key for it (``pi-actors login``, ``/login``), its environment variable is set
(``ai.env_keys``) or models.json gives it an ``apiKey``. Only those providers' models
are *available* (``--list-models``, ``/model``, RPC ``get_available_models``); choosing a
model of another provider, or one whose API is not one pi-actors implements, is a
ConfigError saying what to set or what is missing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..choices import THINKING_LEVELS
from ._paths import agent_dir

__all__ = ["agent_dir", "ConfigError", "DEFAULT_MODEL_IDS", "ModelChoice", "load_model_registry", "choose_model", "THINKING_LEVELS",
           "no_models_message", "no_key_message"]

#: The model each built-in provider gives when only its key is known: pi 0.73.1's defaults,
#: except anthropic's and openai's, kept from before the full catalog, and the two Google Code
#: Assist logins', pi-coding-agent 0.70.6's (the last that had them).
DEFAULT_MODEL_IDS = {
    "anthropic": "claude-sonnet-4-5", "openai": "gpt-5.1",
    "amazon-bedrock": "us.anthropic.claude-opus-4-6-v1", "azure-openai-responses": "gpt-5.4",
    "openai-codex": "gpt-5.5", "deepseek": "deepseek-v4-pro", "google": "gemini-3.1-pro-preview",
    "google-vertex": "gemini-3.1-pro-preview", "google-gemini-cli": "gemini-3.1-pro-preview",
    "google-antigravity": "gemini-3.1-pro-high", "github-copilot": "gpt-5.4", "openrouter": "moonshotai/kimi-k2.6",
    "vercel-ai-gateway": "zai/glm-5.1", "xai": "grok-4.20-0309-reasoning", "groq": "openai/gpt-oss-120b",
    "cerebras": "zai-glm-4.7", "zai": "glm-5.1", "mistral": "devstral-medium-latest", "minimax": "MiniMax-M2.7",
    "minimax-cn": "MiniMax-M2.7", "moonshotai": "kimi-k2.6", "moonshotai-cn": "kimi-k2.6",
    "huggingface": "moonshotai/Kimi-K2.6", "fireworks": "accounts/fireworks/models/kimi-k2p6",
    "opencode": "kimi-k2.6", "opencode-go": "kimi-k2.6", "kimi-coding": "kimi-for-coding",
    "cloudflare-workers-ai": "@cf/moonshotai/kimi-k2.6", "cloudflare-ai-gateway": "workers-ai/@cf/moonshotai/kimi-k2.6",
    "xiaomi": "mimo-v2.5-pro", "xiaomi-token-plan-cn": "mimo-v2.5-pro", "xiaomi-token-plan-ams": "mimo-v2.5-pro",
    "xiaomi-token-plan-sgp": "mimo-v2.5-pro",
}  # fmt: skip


class ConfigError(Exception):
    """A user mistake in flags or configuration files: shown as one line, exit code 1."""


@dataclass
class ModelRegistry:
    models: list[Any] = field(default_factory=list)
    key_sources: dict[str, str] = field(default_factory=dict)  # provider -> unresolved apiKey
    errors: list[str] = field(default_factory=list)

    def providers(self) -> list[str]:
        seen: dict[str, None] = {}
        for m in self.models:
            seen.setdefault(m.provider)
        return list(seen)

    def has_credentials(self, provider: str, runtime_keys: dict[str, str] | None = None) -> bool:
        """Whether ``provider`` has a key: ``runtime_keys`` (``--api-key``), its environment
        variable(s) or ambient credentials, or an ``apiKey`` in models.json."""
        return _has_key(self, provider, (runtime_keys or {}).get(provider))

    def available(self, runtime_keys: dict[str, str] | None = None, keep: tuple[Any, ...] = ()) -> list[Any]:
        """The models whose provider has credentials, in the registry's order, plus the models
        in ``keep`` (the session's own, whatever gave its key)."""
        with_keys = {p for p in self.providers() if self.has_credentials(p, runtime_keys)}
        kept = {(m.provider, m.id) for m in keep}
        out = [m for m in self.models if m.provider in with_keys or (m.provider, m.id) in kept]
        listed = {(m.provider, m.id) for m in out}
        return out + [m for m in keep if (m.provider, m.id) not in listed]


@dataclass
class ModelChoice:
    model: Any
    thinking: str | None = None


def load_model_registry(directory: str | None = None) -> ModelRegistry:
    """Built-in catalog with models.json applied (overrides, custom models, raw apiKeys).
    Raises ConfigError (one line naming the file) when the catalog data file is malformed."""
    from ..ai import CatalogError, builtin_models, merge_models, read_models_json

    cfg = read_models_json(os.path.join(directory or agent_dir(), "models.json"))
    try:
        builtins = builtin_models()
    except CatalogError as exc:
        raise ConfigError(str(exc)) from None
    return ModelRegistry(
        models=merge_models(builtins, cfg),
        key_sources=dict(cfg.api_keys),
        errors=[f"models.json error: {e}" for e in cfg.errors],
    )


def _has_key(reg: ModelRegistry, provider: str, runtime_key: str | None) -> bool:
    from ..ai import get_env_api_key

    return bool(runtime_key or _in_auth_json(provider) or get_env_api_key(provider) or reg.key_sources.get(provider))


def _in_auth_json(provider: str) -> bool:
    """Whether auth.json holds a login or key for ``provider`` (pi's hasAuth: an expired login
    still counts; its refresh happens when a request needs the key). A malformed auth.json is
    a ConfigError naming the file."""
    path = os.path.join(agent_dir(), "auth.json")
    if not os.path.exists(path):
        # No file, no login (as AuthStore reads it), without importing the OAuth flows
        # (http.server, email, ...: ~0.1 s of the CLI's start-up before the actors start).
        return False
    from ..ai.oauth import AuthFileError, AuthStore

    try:
        return AuthStore(path).get(provider) is not None
    except AuthFileError as exc:
        raise ConfigError(str(exc)) from None


def no_models_message() -> str:
    """What to say when no provider has credentials: how to add one (one line)."""
    return (
        "No models available. Set a provider's API key variable (ANTHROPIC_API_KEY, OPENAI_API_KEY, "
        "OPENROUTER_API_KEY, GROQ_API_KEY, XAI_API_KEY, DEEPSEEK_API_KEY, ...), "
        f"or add a provider with an apiKey to {os.path.join(agent_dir(), 'models.json')}."
    )


def no_key_message(provider: str) -> str:
    """The one line for a chosen model whose ``provider`` has no credentials (pi's opening)."""
    from ..ai import credential_hint

    return (
        f"No API key found for {provider}: {credential_hint(provider)}, "
        f"or give it an apiKey in {os.path.join(agent_dir(), 'models.json')}"
    )


def _usable(reg: ModelRegistry, model: Any, api_key: str | None) -> Any:
    """``model``, once its API is implemented and its provider has credentials; else ConfigError."""
    from ..ai import unsupported_api_message

    unsupported = unsupported_api_message(model)
    if unsupported is not None:
        raise ConfigError(unsupported)
    if not _has_key(reg, model.provider, api_key):
        raise ConfigError(no_key_message(model.provider))
    return model


def choose_model(reg: ModelRegistry, *, provider: str | None, model: str | None, api_key: str | None) -> ModelChoice:
    """Resolve ``--provider``/``--model`` against the registry; raises ConfigError."""
    thinking: str | None = None
    if model and ":" in model:
        base, _, level = model.rpartition(":")
        if level in THINKING_LEVELS:
            model, thinking = base, level
    providers = reg.providers()
    if provider is not None:
        match = [p for p in providers if p.lower() == provider.lower()]
        if not match:
            raise ConfigError(f'Unknown provider "{provider}". Known providers: {", ".join(providers) or "(none)"}')
        provider = match[0]
    if model:
        if "/" in model and provider is None:
            head, _, tail = model.partition("/")
            if any(p.lower() == head.lower() for p in providers):
                provider = next(p for p in providers if p.lower() == head.lower())
                model = tail
        candidates = [m for m in reg.models if m.id.lower() == model.lower() and (provider is None or m.provider == provider)]
        if not candidates:
            candidates = [
                m for m in reg.models if model.lower() in m.id.lower() and (provider is None or m.provider == provider)
            ]
        if not candidates:
            raise ConfigError(f'Model "{model}" not found. Use --list-models to see available models.')
        chosen = sorted(candidates, key=lambda m: (len(m.id), m.id))[0]
        return ModelChoice(_usable(reg, chosen, api_key), thinking)
    if provider is not None:
        models = [m for m in reg.models if m.provider == provider]
        default = next((m for m in models if m.id == DEFAULT_MODEL_IDS.get(provider)), models[0])
        return ModelChoice(_usable(reg, default, api_key), thinking)
    from ..ai import unsupported_api_message

    order = ["anthropic", "openai"] + [p for p in providers if p not in ("anthropic", "openai")]
    for p in order:
        if not _has_key(reg, p, api_key):
            continue
        models = [m for m in reg.models if m.provider == p and unsupported_api_message(m) is None]
        if not models:
            continue
        default = next((m for m in models if m.id == DEFAULT_MODEL_IDS.get(p)), models[0])
        return ModelChoice(default, thinking)
    raise ConfigError(no_models_message())
