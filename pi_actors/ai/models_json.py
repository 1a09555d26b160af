"""models.json in pi's format: custom providers and models, overrides of built-ins.

Shape: ``{"providers": {"<name>": {baseUrl?, apiKey?, api?, headers?, compat?, authHeader?,
models?: [ModelDef], modelOverrides?: {"<modelId>": {...}}}}}``. A ModelDef has ``id`` and
optionally ``name`` (default id), ``api`` (default the provider's), ``baseUrl`` (default the
provider's), ``reasoning`` (False), ``thinkingLevelMap`` (level -> provider value, or null: not offered),
``input`` (["text"]), ``cost`` (zeros, per million tokens), ``contextWindow`` (128000),
``maxTokens`` (16384), ``headers``, ``compat``. ``compat`` (on a provider, model or override)
takes pi's keys — the chat-completions ones (``supportsStore``, ``supportsDeveloperRole``,
``supportsReasoningEffort``, ``supportsUsageInStreaming``, ``maxTokensField``,
``requiresToolResultName``, ``requiresAssistantAfterToolResult``, ``requiresThinkingAsText``,
``requiresReasoningContentOnAssistantMessages``, ``thinkingFormat``, ``cacheControlFormat``,
``openRouterRouting``, ``vercelGatewayRouting``, ``supportsStrictMode``), the Responses and
Messages ones (``sendSessionIdHeader``, ``supportsLongCacheRetention``,
``supportsEagerToolInputStreaming``) and those pi-ai's catalog uses
(``sendSessionAffinityHeaders``, ``zaiToolStream``); a known key of the wrong type or value is
an error, an unknown key is kept as it is.

Contract:
- ``read_models_json(path)`` never raises. A missing file is empty and not an error. Any error
  (bad JSON, a provider with models but no ``baseUrl``/``apiKey``, a provider without models and
  without ``baseUrl``/``compat``/``modelOverrides``, a model without ``api``, a non-positive
  ``contextWindow``/``maxTokens``, a wrongly typed field, a ``compat`` value pi would refuse,
  a ``thinkingLevelMap`` naming an unknown level, an ``api`` no provider implements)
  is reported in ``errors`` — one line naming the file, the place in it and, for an unknown
  ``api``, the valid ones — and **all** custom models are dropped, as pi does; built-ins stay
  usable. The valid APIs are the built-in providers' and those registered in this process
  (``ai.registry``), plus ``extra_apis`` a caller knows of.
- ``load_models_json(path) -> (models, errors)``: the custom models only.
- ``merge_models(builtins, config)``: built-ins with provider-level baseUrl/headers/compat and
  ``modelOverrides`` applied, then custom models replacing same provider+id or appended. A
  built-in nothing applies to is reused as it was passed, not copied (the catalog is ~1000
  models: copying them all cost more than reading them).
- ``resolve_config_value(v)``: ``!command`` runs a shell command and gives its trimmed stdout
  (cached for the process, failures too; a failure gives None); otherwise the environment
  variable named ``v`` if set; otherwise ``v`` itself. Header values and ``apiKey`` use it.
  Headers are resolved when the file is read; API keys are kept raw in ``api_keys`` and resolved
  when needed (``resolve_api_key``).
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Literal

import msgspec

from .types import Model

__all__ = ["ModelsJson", "read_models_json", "load_models_json", "merge_models", "resolve_config_value"]

_command_cache: dict[str, str | None] = {}


def resolve_config_value(value: str) -> str | None:
    if value.startswith("!"):
        command = value[1:]
        if command not in _command_cache:
            try:
                done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=10)
                out = done.stdout.strip()
                _command_cache[command] = out if done.returncode == 0 and out else None
            except (OSError, subprocess.SubprocessError):
                _command_cache[command] = None
        return _command_cache[command]
    env = os.environ.get(value)
    return env if env else value


class ModelsJson(msgspec.Struct, kw_only=True):
    models: list[Model] = []
    api_keys: dict[str, str] = {}  # provider -> raw apiKey config value
    provider_settings: dict[str, dict[str, Any]] = {}  # provider -> {baseUrl?, headers?, compat?}
    model_overrides: dict[str, dict[str, dict[str, Any]]] = {}  # provider -> model id -> override
    errors: list[str] = []

    def resolve_api_key(self, provider: str) -> str | None:
        raw = self.api_keys.get(provider)
        return resolve_config_value(raw) if raw else None


class _Invalid(Exception):
    pass


class _Compat(msgspec.Struct, rename="camel", kw_only=True):
    """The compat keys pi knows, with their types (all optional; others pass unchecked)."""

    supports_store: bool | None = None
    supports_developer_role: bool | None = None
    supports_reasoning_effort: bool | None = None
    reasoning_effort_map: dict[str, str] | None = None
    supports_usage_in_streaming: bool | None = None
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None
    requires_tool_result_name: bool | None = None
    requires_assistant_after_tool_result: bool | None = None
    requires_thinking_as_text: bool | None = None
    requires_reasoning_content_on_assistant_messages: bool | None = None
    thinking_format: Literal["openai", "openrouter", "deepseek", "zai", "qwen", "qwen-chat-template"] | None = None
    cache_control_format: Literal["anthropic"] | None = None
    open_router_routing: dict[str, Any] | None = None
    vercel_gateway_routing: dict[str, Any] | None = None
    supports_strict_mode: bool | None = None
    supports_long_cache_retention: bool | None = None
    send_session_id_header: bool | None = None
    supports_eager_tool_input_streaming: bool | None = None
    send_session_affinity_headers: bool | None = None
    zai_tool_stream: bool | None = None


#: pi's thinking levels, the keys a ``thinkingLevelMap`` may have.
THINKING_LEVEL_KEYS = ("off", "minimal", "low", "medium", "high", "xhigh")


def _check_compat(value: Any, where: str) -> dict[str, Any]:
    """``value`` (a compat object) once its known keys have pi's types; raises _Invalid."""
    compat = _check_dict(value, where)
    try:
        msgspec.convert(compat, _Compat)
    except msgspec.ValidationError as exc:
        raise _Invalid(f"{where}: {exc}") from None
    return compat


def _check_level_map(value: Any, where: str) -> None:
    """Refuse a ``thinkingLevelMap`` that is not {level: string or null} over pi's levels."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise _Invalid(f"{where} must be an object")
    for level, mapped in value.items():
        if level not in THINKING_LEVEL_KEYS:
            raise _Invalid(f'{where}: unknown thinking level "{level}" (valid: {", ".join(THINKING_LEVEL_KEYS)})')
        if mapped is not None and not isinstance(mapped, str):
            raise _Invalid(f"{where}.{level} must be a string or null")


def _resolved_headers(headers: Any, where: str) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise _Invalid(f"{where}: headers must be an object of strings")
    out = {}
    for k, v in headers.items():
        resolved = resolve_config_value(v)
        if resolved is not None:
            out[k] = resolved
    return out


def _check_dict(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Invalid(f"{where} must be an object")
    return value


def known_apis(extra: tuple[str, ...] = ()) -> list[str]:
    """The APIs a model may name: the built-in providers', the registered ones, ``extra``."""
    from .registry import BUILTIN_PROVIDER_MODULES, get_api_providers

    names = [*BUILTIN_PROVIDER_MODULES, *(p.api for p in get_api_providers()), *extra]
    return sorted(set(names))


def _check_api(api: Any, where: str, valid: list[str]) -> None:
    """Refuse an ``api`` that is set but not one of ``valid`` (one line listing them)."""
    if api is not None and api not in valid:
        raise _Invalid(f'{where}: unknown api "{api}" (valid: {", ".join(valid)})')


def _build_model(provider: str, spec: dict[str, Any], idx: int) -> Model:
    where = f"providers.{provider}.models[{idx}]"
    if not isinstance(spec, dict):
        raise _Invalid(f"{where} must be an object")
    if not isinstance(spec.get("id"), str) or not spec["id"]:
        raise _Invalid(f"{where}: id is required")
    where = f"providers.{provider}.models[{idx}] ({spec['id']})"
    for key in ("contextWindow", "maxTokens"):
        if key in spec and (not isinstance(spec[key], int) or isinstance(spec[key], bool) or spec[key] <= 0):
            raise _Invalid(f"{where}: {key} must be a positive integer")
    _check_level_map(spec.get("thinkingLevelMap"), f"{where}.thinkingLevelMap")
    data = {k: v for k, v in spec.items() if v is not None}
    data["provider"] = provider
    data.setdefault("name", spec["id"])
    try:
        return msgspec.convert(data, Model)
    except msgspec.ValidationError as exc:
        raise _Invalid(f"{where}: {exc}") from None


def _parse_provider(cfg: ModelsJson, name: str, p: Any, apis: list[str]) -> list[Model]:
    where = f"providers.{name}"
    if not isinstance(p, dict):
        raise _Invalid(f"{where} must be an object")
    models = p.get("models") or []
    if not isinstance(models, list):
        raise _Invalid(f"{where}.models must be a list")
    for key in ("baseUrl", "apiKey", "api"):
        if key in p and not isinstance(p[key], str):
            raise _Invalid(f"{where}.{key} must be a string")
    _check_api(p.get("api"), where, apis)
    headers = _resolved_headers(p.get("headers"), where)
    compat = _check_compat(p.get("compat"), f"{where}.compat")
    overrides = _check_dict(p.get("modelOverrides"), f"{where}.modelOverrides")
    for model_id, override in overrides.items():
        if isinstance(override, dict):
            _check_api(override.get("api"), f"{where}.modelOverrides.{model_id}", apis)
            _check_compat(override.get("compat"), f"{where}.modelOverrides.{model_id}.compat")
            _check_level_map(override.get("thinkingLevelMap"), f"{where}.modelOverrides.{model_id}.thinkingLevelMap")
    _check_provider_says_enough(p, where, bool(models), bool(compat or overrides))
    if p.get("apiKey"):
        cfg.api_keys[name] = p["apiKey"]
        if p.get("authHeader"):
            resolved = resolve_config_value(p["apiKey"])
            if resolved:
                headers["Authorization"] = f"Bearer {resolved}"
    settings = {k: v for k, v in (("baseUrl", p.get("baseUrl")), ("headers", headers), ("compat", compat)) if v}
    if settings:
        cfg.provider_settings[name] = settings
    if overrides:
        cfg.model_overrides[name] = {k: _check_dict(v, f"{where}.modelOverrides.{k}") for k, v in overrides.items()}

    return [_build_model(name, _with_provider_defaults(spec, p, headers, compat, f"{where}.models[{i}]", apis), i)
            for i, spec in enumerate(models)]


def _check_provider_says_enough(p: dict[str, Any], where: str, has_models: bool, customizes: bool) -> None:
    """A provider defining models needs ``baseUrl`` and ``apiKey``; one without models must
    at least change something (``baseUrl``, ``compat`` or ``modelOverrides``)."""
    if has_models:
        if not p.get("baseUrl"):
            raise _Invalid(f"{where}: baseUrl is required when models are defined")
        if not p.get("apiKey"):
            raise _Invalid(f"{where}: apiKey is required when models are defined")
    elif not (p.get("baseUrl") or customizes):
        raise _Invalid(f"{where}: specify baseUrl, compat, modelOverrides or models")


def _with_provider_defaults(spec: Any, p: dict[str, Any], headers: dict[str, str], compat: dict[str, Any],
                            where: str, apis: list[str]) -> Any:
    """A model spec with the provider's ``api``, ``baseUrl``, headers and compat filled in
    (the model's own win); a spec that is not an object is left for ``_build_model`` to refuse."""
    if not isinstance(spec, dict):
        return spec
    spec = dict(spec)
    spec.setdefault("api", p.get("api"))
    spec.setdefault("baseUrl", p.get("baseUrl"))
    if spec.get("api") is None:
        raise _Invalid(f"{where}: api is required (on the model or the provider)")
    _check_api(spec["api"], where, apis)
    model_headers = {**headers, **_resolved_headers(spec.get("headers"), where)}
    spec["headers"] = model_headers or None
    model_compat = {**compat, **_check_compat(spec.get("compat"), f"{where}.compat")}
    spec["compat"] = model_compat or None
    return spec


def read_models_json(path: str | os.PathLike[str], extra_apis: tuple[str, ...] = ()) -> ModelsJson:
    """The models.json at ``path`` (module docstring); never raises."""
    cfg = ModelsJson()
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return cfg
    except OSError as exc:
        cfg.errors.append(f"{path}: cannot read: {exc}")
        return cfg
    try:
        data = json.loads(raw)
    except ValueError as exc:
        cfg.errors.append(f"{path}: invalid JSON: {exc}")
        return cfg
    try:
        if not isinstance(data, dict):
            raise _Invalid("the top level must be an object")
        providers = _check_dict(data.get("providers"), "providers")
        models: list[Model] = []
        apis = known_apis(extra_apis)
        for name, p in providers.items():
            models.extend(_parse_provider(cfg, name, p, apis))
        cfg.models = models
    except _Invalid as exc:
        return ModelsJson(errors=[f"{path}: {exc}"])
    return cfg


def load_models_json(path: str | os.PathLike[str]) -> tuple[list[Model], list[str]]:
    cfg = read_models_json(path)
    return cfg.models, cfg.errors


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def merge_models(builtins: list[Model], cfg: ModelsJson) -> list[Model]:
    merged: list[Model] = []
    for model in builtins:
        settings = cfg.provider_settings.get(model.provider, {})
        override = cfg.model_overrides.get(model.provider, {}).get(model.id)
        if not settings and not override:  # most of the catalog: nothing to apply
            merged.append(model)
            continue
        data = msgspec.to_builtins(model)
        if "baseUrl" in settings:
            data["baseUrl"] = settings["baseUrl"]
        for key in ("headers", "compat"):
            if key in settings:
                data[key] = {**(data.get(key) or {}), **settings[key]}
        if override:
            data = _deep_merge(data, override)
        try:
            merged.append(msgspec.convert(data, Model))
        except msgspec.ValidationError:
            merged.append(model)  # a bad override leaves the built-in as it was
    custom = {(m.provider, m.id): m for m in cfg.models}
    merged = [custom.pop((m.provider, m.id), m) for m in merged]
    return merged + list(custom.values())
