"""The built-in model catalog and cost arithmetic (pi's packages/ai, docs/architecture.md §7).

Contract: ``get_model(provider, id)`` returns a fresh copy of a catalog Model or None;
``get_models(provider)`` a list of copies (``[]`` for an unknown provider); ``get_providers()``
the provider names. Copies, so a caller may change one without touching the catalog.
``calculate_cost(model, usage)`` sets ``usage.cost`` from the per-million prices, in place,
and returns it. ``models_are_equal`` compares id and provider.

``find_model("provider/id")`` looks a model up by reference (None when unknown) and
``unknown_model_message(ref)`` says what was missing: the provider or the model id.

The catalog is deliberately small: current Anthropic and OpenAI models, prices in USD per
million tokens. The OpenAI models use ``openai-responses``, as pi's do. models.json adds or
overrides models (models_json.py).
"""

from __future__ import annotations

import msgspec

from .types import Model, ModelCost, Usage, UsageCost

__all__ = ["get_model", "get_models", "get_providers", "calculate_cost", "models_are_equal", "builtin_models",
           "find_model", "unknown_model_message"]

_ANTHROPIC_URL = "https://api.anthropic.com"
_OPENAI_URL = "https://api.openai.com/v1"


def _anthropic(id: str, name: str, price: tuple[float, float, float, float], ctx: int, max_out: int,
               reasoning: bool = True) -> Model:
    return Model(id=id, name=name, api="anthropic-messages", provider="anthropic", base_url=_ANTHROPIC_URL,
                 reasoning=reasoning, input=["text", "image"], cost=ModelCost(
                     input=price[0], output=price[1], cache_read=price[2], cache_write=price[3]),
                 context_window=ctx, max_tokens=max_out)


def _openai(id: str, name: str, price: tuple[float, float, float], ctx: int, max_out: int,
            reasoning: bool) -> Model:
    return Model(id=id, name=name, api="openai-responses", provider="openai", base_url=_OPENAI_URL,
                 reasoning=reasoning, input=["text", "image"], cost=ModelCost(
                     input=price[0], output=price[1], cache_read=price[2]),
                 context_window=ctx, max_tokens=max_out)


_CATALOG: dict[str, list[Model]] = {
    "anthropic": [
        _anthropic("claude-opus-4-6", "Claude Opus 4.6", (5, 25, 0.5, 6.25), 200_000, 128_000),
        _anthropic("claude-sonnet-4-6", "Claude Sonnet 4.6", (3, 15, 0.3, 3.75), 200_000, 64_000),
        _anthropic("claude-opus-4-5", "Claude Opus 4.5", (5, 25, 0.5, 6.25), 200_000, 64_000),
        _anthropic("claude-sonnet-4-5", "Claude Sonnet 4.5", (3, 15, 0.3, 3.75), 200_000, 64_000),
        _anthropic("claude-haiku-4-5", "Claude Haiku 4.5", (1, 5, 0.1, 1.25), 200_000, 64_000),
        _anthropic("claude-opus-4-1", "Claude Opus 4.1", (15, 75, 1.5, 18.75), 200_000, 32_000),
        _anthropic("claude-sonnet-4-0", "Claude Sonnet 4", (3, 15, 0.3, 3.75), 200_000, 64_000),
    ],
    "openai": [
        _openai("gpt-5.2", "GPT-5.2", (1.75, 14, 0.175), 400_000, 128_000, True),
        _openai("gpt-5.1", "GPT-5.1", (1.25, 10, 0.125), 400_000, 128_000, True),
        _openai("gpt-5", "GPT-5", (1.25, 10, 0.125), 400_000, 128_000, True),
        _openai("gpt-5-mini", "GPT-5 Mini", (0.25, 2, 0.025), 400_000, 128_000, True),
        _openai("gpt-5-nano", "GPT-5 Nano", (0.05, 0.4, 0.005), 400_000, 128_000, True),
        _openai("o4-mini", "o4-mini", (1.1, 4.4, 0.275), 200_000, 100_000, True),
        _openai("gpt-4.1", "GPT-4.1", (2, 8, 0.5), 1_047_576, 32_768, False),
        _openai("gpt-4.1-mini", "GPT-4.1 mini", (0.4, 1.6, 0.1), 1_047_576, 32_768, False),
        _openai("gpt-4o", "GPT-4o", (2.5, 10, 1.25), 128_000, 16_384, False),
    ],
}


def _copy(model: Model) -> Model:
    return msgspec.convert(msgspec.to_builtins(model), Model)


def get_providers() -> list[str]:
    return list(_CATALOG)


def get_models(provider: str) -> list[Model]:
    return [_copy(m) for m in _CATALOG.get(provider, [])]


def get_model(provider: str, model_id: str) -> Model | None:
    for m in _CATALOG.get(provider, []):
        if m.id == model_id:
            return _copy(m)
    return None


def _split_ref(ref: str) -> tuple[str, str]:
    provider, sep, model_id = ref.partition("/")
    return (provider, model_id) if sep else ("", ref)


def find_model(ref: str) -> Model | None:
    """The catalog model named ``"provider/id"`` (or a bare id, if exactly one provider has it)."""
    provider, model_id = _split_ref(ref)
    if provider:
        return get_model(provider, model_id)
    found = [m for models in _CATALOG.values() for m in models if m.id == model_id]
    return _copy(found[0]) if len(found) == 1 else None


def unknown_model_message(ref: str) -> str:
    provider, model_id = _split_ref(ref)
    if provider and provider not in _CATALOG:
        return (f'Unknown model "{ref}": provider "{provider}" is not in the model catalog '
                f"(known: {', '.join(_CATALOG)})")
    where = f'provider "{provider}"' if provider else "any provider"
    return f'Unknown model "{ref}": model id "{model_id}" is not in the model catalog for {where}'


def builtin_models() -> list[Model]:
    return [_copy(m) for models in _CATALOG.values() for m in models]


def calculate_cost(model: Model, usage: Usage) -> UsageCost:
    cost = usage.cost
    cost.input = model.cost.input / 1_000_000 * usage.input
    cost.output = model.cost.output / 1_000_000 * usage.output
    cost.cache_read = model.cost.cache_read / 1_000_000 * usage.cache_read
    cost.cache_write = model.cost.cache_write / 1_000_000 * usage.cache_write
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write
    return cost


def models_are_equal(a: Model | None, b: Model | None) -> bool:
    if a is None or b is None:
        return False
    return a.id == b.id and a.provider == b.provider
