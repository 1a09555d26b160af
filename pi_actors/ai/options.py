"""Options of one LLM call, and the helpers ``stream_simple`` uses (pi's packages/ai, docs/architecture.md §7).

``StreamOptions`` carries the unified options. Provider-native options for ``stream`` go in
``extra`` under snake_case names (camelCase is accepted too, see ``extra_option``):

- anthropic-messages: ``thinking_enabled``, ``thinking_budget_tokens``, ``effort``,
  ``interleaved_thinking`` (default True), ``tool_choice``, ``metadata``;
- openai-completions: ``tool_choice``, ``reasoning_effort``;
- openai-responses: ``reasoning_effort``, ``reasoning_summary``, ``service_tier``, ``tool_choice``;
- all: ``on_payload`` (``(payload, model) -> payload | None``, may be async; a non-None result
  replaces the request body); ``first_byte_timeout_ms`` / ``idle_timeout_ms`` (how long the
  response headers, then each read of the body, may take before the call ends as ``Provider
  stalled``; default 120000, 0 = none); ``max_retry_delay_ms`` (the longest ``Retry-After``
  a failed call reports as a delay to wait; default 60000, 0 = none — see ``ai.retry_after``);
  ``timeout_ms`` / ``max_retries`` (pi's ``retry.provider.timeoutMs`` / ``.maxRetries``: the
  SDK client's own request timeout and retries, for the APIs that use an SDK client —
  anthropic-messages, openai-completions, openai-responses, azure-openai-responses; unset:
  the SDK's timeout and no SDK retries, the agent retries — see :func:`sdk_client_options`).

``reasoning``/``thinking_budgets`` are read only by ``stream_simple``. ``cache_retention``
(``none``/``short``/``long``; default short, ``PI_CACHE_RETENTION=long`` upgrades it) is read by
providers that cache. ``signal`` is an :class:`AbortSignal`; it never crosses a process
boundary, so ``to_plain`` works only while it is None. On a wire the field names are
camelCase like every other Struct here (``apiKey``, ``maxTokens``, ``sessionId``), so
``msgspec.convert(plain, StreamOptions)`` reads what ``to_plain`` wrote.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import msgspec

from ..choices import THINKING_LEVELS
from .abort import AbortSignal
from .types import AssistantMessage, AssistantMessageEvent, Context, Model, ThinkingLevel

__all__ = [
    "StreamOptions",
    "Emit",
    "StreamFunction",
    "CacheRetention",
    "DEFAULT_THINKING_BUDGETS",
    "DEFAULT_FIRST_BYTE_TIMEOUT_MS",
    "DEFAULT_IDLE_TIMEOUT_MS",
    "extra_option",
    "resolve_cache_retention",
    "build_base_options",
    "clamp_reasoning",
    "adjust_max_tokens_for_thinking",
    "supports_xhigh",
    "ALL_THINKING_LEVELS",
    "supported_thinking_levels",
    "clamp_thinking_level",
    "sdk_client_options",
    "with_sdk_client_options",
]

CacheRetention = Literal["none", "short", "long"]
#: How long a provider stream may wait for its response headers, then for each read of its
#: body, before it ends as stalled (``extra`` ``first_byte_timeout_ms``/``idle_timeout_ms``).
DEFAULT_FIRST_BYTE_TIMEOUT_MS = 120_000
DEFAULT_IDLE_TIMEOUT_MS = 120_000


class StreamOptions(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    api_key: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    signal: AbortSignal | None = None
    headers: dict[str, str] | None = None
    session_id: str | None = None
    reasoning: ThinkingLevel | None = None
    thinking_budgets: dict[str, int] | None = None
    cache_retention: CacheRetention | None = None
    extra: dict[str, Any] = {}
    #: False lets the provider bring the streamed block of ``partial`` up to date lazily:
    #: during a run of deltas the block may lag behind (text, thinking, tool arguments); it is
    #: complete at every other event and in the final message. For consumers that read only
    #: ``delta`` from delta events, such as the provider actor forwarding them to another
    #: process; it makes a long reply linear instead of quadratic in its length.
    live_partial: bool = True


Emit = Callable[[AssistantMessageEvent], Awaitable[None]]
StreamFunction = Callable[[Model, Context, "StreamOptions | None", Emit], Awaitable[AssistantMessage]]

DEFAULT_THINKING_BUDGETS: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def extra_option(options: StreamOptions | None, name: str, default: Any = None) -> Any:
    """``options.extra[name]``, also found under its camelCase spelling (``toolChoice``)."""
    if options is None or not options.extra:
        return default
    if name in options.extra:
        return options.extra[name]
    head, *rest = name.split("_")
    camel = head + "".join(p.title() for p in rest)
    return options.extra.get(camel, default)


def resolve_cache_retention(options: StreamOptions | None) -> CacheRetention:
    if options is not None and options.cache_retention is not None:
        return options.cache_retention
    return "long" if os.environ.get("PI_CACHE_RETENTION") == "long" else "short"


def build_base_options(model: Model, options: StreamOptions | None, api_key: str | None) -> StreamOptions:
    """The options ``stream_simple`` hands a provider: key filled in, ``max_tokens`` defaulted
    to ``min(model.max_tokens, 32000)`` (a falsy value also falls back)."""
    base = msgspec.structs.replace(options) if options is not None else StreamOptions()
    base.api_key = api_key or base.api_key
    base.max_tokens = base.max_tokens or min(model.max_tokens, 32000)
    base.extra = dict(base.extra)
    return base


def clamp_reasoning(level: ThinkingLevel | None) -> ThinkingLevel | None:
    return "high" if level == "xhigh" else level


def adjust_max_tokens_for_thinking(
    base_max_tokens: int,
    model_max_tokens: int,
    level: ThinkingLevel,
    custom_budgets: dict[str, int] | None = None,
) -> tuple[int, int]:
    """``(max_tokens, thinking_budget)`` for a budget-thinking model (spec §1.9)."""
    budgets = {**DEFAULT_THINKING_BUDGETS, **(custom_budgets or {})}
    budget = budgets[clamp_reasoning(level) or "high"]
    max_tokens = min(base_max_tokens + budget, model_max_tokens)
    if max_tokens <= budget:
        budget = max(0, max_tokens - 1024)
    return max_tokens, budget


def supports_xhigh(model: Model) -> bool:
    """Whether ``model`` offers the "xhigh" level: as its ``thinkingLevelMap`` says when it has
    one (pi-ai 0.73: a string value for xhigh), else known by its id."""
    if model.thinking_level_map is not None:
        return model.thinking_level_map.get("xhigh") is not None
    return any(s in model.id for s in ("gpt-5.2", "gpt-5.3", "gpt-5.4", "opus-4-6", "opus-4.6"))


#: pi's thinking levels in order, "off" first (pi-ai's EXTENDED_THINKING_LEVELS).
ALL_THINKING_LEVELS = THINKING_LEVELS


def supported_thinking_levels(model: Model) -> list[str]:
    """The thinking levels ``model`` offers, in order (pi-ai's ``getSupportedThinkingLevels``):
    only "off" without reasoning; a level its ``thinkingLevelMap`` maps to null is left out;
    "xhigh" only where :func:`supports_xhigh`. What /thinking, Shift+Tab, RPC
    ``cycle_thinking_level`` and ``--thinking`` offer or accept."""
    if not model.reasoning:
        return ["off"]
    level_map = model.thinking_level_map or {}
    return [
        lv
        for lv in ALL_THINKING_LEVELS
        if not (lv in level_map and level_map[lv] is None) and (lv != "xhigh" or supports_xhigh(model))
    ]


def clamp_thinking_level(model: Model, level: str) -> str:
    """``level`` made one ``model`` offers, as pi-ai's ``clampThinkingLevel``: kept when
    offered, else the nearest offered level above it, else the nearest below (DeepSeek V4,
    whose map drops minimal/low/medium, turns "low" into "high"); an unknown level gives the
    first offered one."""
    offered = supported_thinking_levels(model)
    if level in offered:
        return level
    if level not in ALL_THINKING_LEVELS:
        return offered[0]
    at = ALL_THINKING_LEVELS.index(level)
    above = [lv for lv in ALL_THINKING_LEVELS[at:] if lv in offered]
    below = [lv for lv in reversed(ALL_THINKING_LEVELS[:at]) if lv in offered]
    return (above or below or offered)[0]


def sdk_client_options(options: StreamOptions | None) -> dict[str, Any]:
    """``with_options`` arguments for an Anthropic/OpenAI SDK client from ``extra``
    ``timeout_ms`` (-> ``timeout`` in seconds) and ``max_retries``, as pi passes
    ``retry.provider.timeoutMs`` / ``.maxRetries`` to the SDK; only those set. Raises
    ValueError (one line naming the option) for a value that is not a number of 0 or more."""
    out: dict[str, Any] = {}
    for name in ("timeout_ms", "max_retries"):
        value = extra_option(options, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{name} must be a number of 0 or more, not {value!r}")
        if name == "timeout_ms":
            out["timeout"] = value / 1000
        else:
            out["max_retries"] = int(value)
    return out


def with_sdk_client_options(client: Any, options: StreamOptions | None) -> Any:
    """``client`` (an Anthropic/OpenAI SDK client) with :func:`sdk_client_options` applied
    (a copy sharing its connection pool), or ``client`` itself when none is set."""
    chosen = sdk_client_options(options)
    return client.with_options(**chosen) if chosen else client
