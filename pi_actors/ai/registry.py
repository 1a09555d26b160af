"""The API provider registry: which stream functions serve which ``model.api`` (spec §1.10).

Contract:
- ``register_api_provider(provider, source_id=None)`` replaces any entry for the same api;
  ``unregister_api_providers(source_id)`` removes every entry registered with that id;
  ``clear_api_providers()`` empties the registry; ``reset_api_providers()`` restores the
  built-ins. ``get_api_provider(api)`` / ``get_api_providers()`` look entries up.
- Built-in providers are registered *lazily*: the entry exists from import time, but the
  provider module (and with it the ``anthropic`` / ``openai`` SDK) is imported on first use, in a
  worker thread so the trio loop keeps running (one such import at a time; a module another
  thread is still importing is waited for, never used half-initialised). A failed import
  becomes an ``error`` event carrying the import error's message.
- A registered function called with a model of another api emits an ``error`` event
  ``Mismatched api: <model.api> expected <api>`` (pi raises here).
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any

import msgspec

from .options import Emit, StreamFunction, StreamOptions
from .types import AssistantMessage, Context, ErrorEvent, Model, new_assistant_message

__all__ = [
    "ApiProvider",
    "BUILTIN_PROVIDER_MODULES",
    "register_api_provider",
    "get_api_provider",
    "get_api_providers",
    "unregister_api_providers",
    "clear_api_providers",
    "reset_api_providers",
    "error_message",
    "models_of_provider_config",
]

BUILTIN_PROVIDER_MODULES: dict[str, str] = {
    "anthropic-messages": "pi_actors.ai.providers.anthropic_messages",
    "openai-completions": "pi_actors.ai.providers.openai_completions",
    "openai-responses": "pi_actors.ai.providers.openai_responses",
    # Needs the optional extra: pip install 'pi-actors[google]'.
    "google-generative-ai": "pi_actors.ai.providers.google_generative_ai",
    "mistral-conversations": "pi_actors.ai.providers.mistral_conversations",
    "azure-openai-responses": "pi_actors.ai.providers.azure_openai_responses",
    "openai-codex-responses": "pi_actors.ai.providers.openai_codex_responses",
    "google-vertex": "pi_actors.ai.providers.google_vertex",  # the [google] extra too
    "bedrock-converse-stream": "pi_actors.ai.providers.bedrock_converse_stream",  # the [bedrock] extra
    "google-gemini-cli": "pi_actors.ai.providers.google_gemini_cli",  # Cloud Code Assist (a Google login)
}


class ApiProvider(msgspec.Struct, kw_only=True):
    api: str
    stream: StreamFunction
    stream_simple: StreamFunction


_registry: dict[str, tuple[ApiProvider, str | None]] = {}


def error_message(model: Model, text: str) -> AssistantMessage:
    """An empty assistant message for ``model`` that failed with ``text``."""
    msg = new_assistant_message(model)
    msg.stop_reason = "error"
    msg.error_message = text
    return msg


async def _emit_error(model: Model, text: str, emit: Emit) -> AssistantMessage:
    msg = error_message(model, text)
    try:
        await emit(ErrorEvent(reason="error", error=msg))
    except Exception:
        pass
    return msg


def _checked(api: str, fn: StreamFunction) -> StreamFunction:
    async def call(model: Model, context: Context, options: StreamOptions | None, emit: Emit) -> AssistantMessage:
        if model.api != api:
            return await _emit_error(model, f"Mismatched api: {model.api} expected {api}", emit)
        return await fn(model, context, options, emit)

    call.__name__ = getattr(fn, "__name__", "stream")
    return call


def register_api_provider(provider: ApiProvider, source_id: str | None = None) -> None:
    wrapped = ApiProvider(api=provider.api, stream=_checked(provider.api, provider.stream),
                          stream_simple=_checked(provider.api, provider.stream_simple))
    _registry[provider.api] = (wrapped, source_id)


def get_api_provider(api: str) -> ApiProvider | None:
    entry = _registry.get(api)
    return entry[0] if entry else None


def get_api_providers() -> list[ApiProvider]:
    return [p for p, _ in _registry.values()]


def unregister_api_providers(source_id: str) -> None:
    for api in [a for a, (_, sid) in _registry.items() if sid == source_id]:
        del _registry[api]


def clear_api_providers() -> None:
    _registry.clear()


_import_lock = threading.Lock()


def _import(path: str) -> Any:
    with _import_lock:  # one provider import at a time: the SDKs share dependencies
        return importlib.import_module(path)


async def _load_module(path: str) -> Any:
    module = sys.modules.get(path)
    spec = getattr(module, "__spec__", None)
    if module is not None and not getattr(spec, "_initializing", False):
        return module
    # Not imported yet, or being imported by another thread right now: import_module waits
    # for that import to finish instead of handing out a half-initialised module.
    import trio  # not at module level: importing pi_actors.ai must not cost trio's import

    return await trio.to_thread.run_sync(_import, path)


def _lazy(path: str, attr: str) -> StreamFunction:
    async def call(model: Model, context: Context, options: StreamOptions | None, emit: Emit) -> AssistantMessage:
        try:
            module = await _load_module(path)
            fn = getattr(module, attr)
        except Exception as exc:
            return await _emit_error(model, f"Failed to load provider {path}: {exc}", emit)
        return await fn(model, context, options, emit)

    call.__name__ = f"lazy_{attr}"
    return call


def reset_api_providers() -> None:
    clear_api_providers()
    for api, path in BUILTIN_PROVIDER_MODULES.items():
        register_api_provider(ApiProvider(api=api, stream=_lazy(path, "stream"),
                                          stream_simple=_lazy(path, "stream_simple")), source_id="builtin")


def models_of_provider_config(name: str, config: Any) -> tuple[list[Model], str | None]:
    """A model provider given in pi's ``registerProvider`` config form (the shape of one
    provider of models.json: ``baseUrl``, ``apiKey`` — an environment variable's name, a
    ``!command`` or the key —, ``api`` among :data:`BUILTIN_PROVIDER_MODULES` and the
    registered apis, ``headers``, ``authHeader``, ``compat``, ``models``): its models and
    its raw ``apiKey``. Raises ValueError (one line) for a config that models.json would
    refuse. A provider registered by an extension streams through its ``api``'s built-in
    stream function; a stream function of the extension's own is not supported."""
    from .models_json import ModelsJson, _Invalid, _parse_provider, known_apis

    if not isinstance(config, dict):
        raise ValueError("the config must be an object")
    if not config.get("models"):
        raise ValueError("the config lists no models")
    if callable(config.get("streamSimple")) or callable(config.get("stream")):
        raise ValueError("a stream function of the extension's own is not supported; give api")
    cfg = ModelsJson()
    try:
        models = _parse_provider(cfg, name, config, known_apis())
    except _Invalid as exc:
        raise ValueError(str(exc).removeprefix(f"providers.{name}").lstrip(".: ") or str(exc)) from None
    return models, cfg.api_keys.get(name)


reset_api_providers()
