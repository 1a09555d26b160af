"""Where configuration lives and how a model is chosen (pi's rules, first cut).

Config and sessions live under ``$PI_ACTORS_DIR`` (default ``~/.pi-actors``): ``models.json``
(pi's format: custom providers and models) and ``sessions/``.

Model choice: ``--model`` accepts ``provider/id``, a unique id, or an id under
``--provider``; an optional ``:thinking`` suffix sets the thinking level. Without
``--model``, the first provider with a key available (anthropic, openai, then the providers
of models.json) gives its default model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..choices import THINKING_LEVELS
from ._paths import agent_dir

__all__ = ["agent_dir", "ConfigError", "DEFAULT_MODEL_IDS", "ModelChoice", "load_model_registry", "choose_model", "THINKING_LEVELS"]

#: The model each built-in provider gives when only its key is known.
DEFAULT_MODEL_IDS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5.1"}


class ConfigError(Exception):
    """A user mistake in flags or configuration files: shown as one line, exit code 1."""


@dataclass
class ModelRegistry:
    models: list[Any] = field(default_factory=list)
    key_sources: dict[str, str] = field(default_factory=dict)  # provider -> unresolved apiKey
    errors: list[str] = field(default_factory=list)

    def providers(self) -> list[str]:
        seen: list[str] = []
        for m in self.models:
            if m.provider not in seen:
                seen.append(m.provider)
        return seen


@dataclass
class ModelChoice:
    model: Any
    thinking: str | None = None


def load_model_registry(directory: str | None = None) -> ModelRegistry:
    """Built-in catalog with models.json applied (overrides, custom models, raw apiKeys)."""
    from ..ai import builtin_models, merge_models, read_models_json

    cfg = read_models_json(os.path.join(directory or agent_dir(), "models.json"))
    return ModelRegistry(
        models=merge_models(builtin_models(), cfg),
        key_sources=dict(cfg.api_keys),
        errors=[f"models.json error: {e}" for e in cfg.errors],
    )


def _has_key(reg: ModelRegistry, provider: str, runtime_key: str | None) -> bool:
    from ..ai import get_env_api_key

    return bool(runtime_key or get_env_api_key(provider) or reg.key_sources.get(provider))


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
        return ModelChoice(sorted(candidates, key=lambda m: (len(m.id), m.id))[0], thinking)
    order = [provider] if provider else ["anthropic", "openai"] + [p for p in providers if p not in ("anthropic", "openai")]
    for p in order:
        if not _has_key(reg, p, api_key):
            continue
        models = [m for m in reg.models if m.provider == p]
        if not models:
            continue
        default = next((m for m in models if m.id == DEFAULT_MODEL_IDS.get(p)), models[0])
        return ModelChoice(default, thinking)
    raise ConfigError(
        "No models available. Set ANTHROPIC_API_KEY or OPENAI_API_KEY, "
        f"or add a provider with an apiKey to {os.path.join(agent_dir(), 'models.json')}."
    )
