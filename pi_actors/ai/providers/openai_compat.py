"""Compatibility flags of OpenAI-compatible chat-completions servers (pi's packages/ai, docs/architecture.md §7).

Contract: ``get_compat(model)`` returns an :class:`OpenAICompletionsCompat` with every field
set: the defaults detected from the provider name and base URL, overridden field by field by
``model.compat`` (camelCase keys, as in models.json). Unknown keys in ``model.compat`` are
ignored; a wrongly typed value falls back to the detected one (models.json refuses those
when it is read). Detection follows pi-ai 0.73.1: non-standard servers (Cerebras, xAI,
chutes, DeepSeek, zAI, Moonshot, opencode, Cloudflare) get neither ``store`` nor the
developer role; DeepSeek gets its ``thinking`` switch and ``reasoning_content`` on every
assistant message; OpenRouter its ``reasoning`` object, and Anthropic cache markers for
``anthropic/`` models.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ..types import Model

__all__ = ["OpenAICompletionsCompat", "detect_compat", "get_compat"]


class OpenAICompletionsCompat(msgspec.Struct, rename="camel", kw_only=True):
    supports_store: bool = True
    supports_developer_role: bool = True
    supports_reasoning_effort: bool = True
    reasoning_effort_map: dict[str, str] = {}
    supports_usage_in_streaming: bool = True
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"
    requires_tool_result_name: bool = False
    requires_assistant_after_tool_result: bool = False
    requires_thinking_as_text: bool = False
    requires_reasoning_content_on_assistant_messages: bool = False
    thinking_format: Literal["openai", "openrouter", "deepseek", "zai", "qwen", "qwen-chat-template"] = "openai"
    open_router_routing: dict[str, Any] = {}
    vercel_gateway_routing: dict[str, Any] = {}
    supports_strict_mode: bool = True
    cache_control_format: Literal["anthropic"] | None = None
    supports_long_cache_retention: bool = True
    send_session_affinity_headers: bool = False
    zai_tool_stream: bool = False


def detect_compat(model: Model) -> OpenAICompletionsCompat:
    url, provider = model.base_url or "", model.provider
    is_zai = provider == "zai" or "api.z.ai" in url
    is_grok = provider == "xai" or "api.x.ai" in url
    is_groq = provider == "groq" or "groq.com" in url
    is_moonshot = provider in ("moonshotai", "moonshotai-cn") or "api.moonshot." in url
    is_deepseek = provider == "deepseek" or "deepseek.com" in url
    is_openrouter = provider == "openrouter" or "openrouter.ai" in url
    is_workers_ai = provider == "cloudflare-workers-ai" or "api.cloudflare.com" in url
    is_ai_gateway = provider == "cloudflare-ai-gateway" or "gateway.ai.cloudflare.com" in url
    non_standard = (
        provider == "cerebras" or "cerebras.ai" in url or is_grok or "chutes.ai" in url
        or is_deepseek or is_zai or is_moonshot or provider == "opencode" or "opencode.ai" in url
        or is_workers_ai or is_ai_gateway
    )
    effort_map: dict[str, str] = {}
    if is_groq and model.id == "qwen/qwen3-32b":
        effort_map = {level: "default" for level in ("minimal", "low", "medium", "high", "xhigh")}
    thinking_format: Literal["openai", "openrouter", "deepseek", "zai"] = (
        "deepseek" if is_deepseek else "zai" if is_zai else "openrouter" if is_openrouter else "openai"
    )
    return OpenAICompletionsCompat(
        supports_store=not non_standard,
        supports_developer_role=not non_standard,
        supports_reasoning_effort=not (is_grok or is_zai or is_moonshot or is_ai_gateway),
        reasoning_effort_map=effort_map,
        max_tokens_field="max_tokens" if ("chutes.ai" in url or is_moonshot or is_ai_gateway) else "max_completion_tokens",
        requires_reasoning_content_on_assistant_messages=is_deepseek,
        thinking_format=thinking_format,
        supports_strict_mode=not (is_moonshot or is_ai_gateway),
        cache_control_format="anthropic" if provider == "openrouter" and model.id.startswith("anthropic/") else None,
        supports_long_cache_retention=not (is_workers_ai or is_ai_gateway),
    )


_FIELDS = {f.encode_name: f.name for f in msgspec.structs.fields(OpenAICompletionsCompat)}


def get_compat(model: Model) -> OpenAICompletionsCompat:
    compat = detect_compat(model)
    for key, value in (model.compat or {}).items():
        name = _FIELDS.get(key) or (key if key in _FIELDS.values() else None)
        if name is None or value is None:
            continue
        trial = msgspec.to_builtins(compat)
        trial[key if key in _FIELDS else _camel(name)] = value
        try:
            compat = msgspec.convert(trial, OpenAICompletionsCompat)
        except msgspec.ValidationError:
            continue
    return compat


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)
