"""The built-in model catalog and cost arithmetic (pi's packages/ai, docs/architecture.md §7).

The catalog is every provider and model pi-ai 0.73.1 ships (31 providers, 969 models over 9
APIs), kept as data in ``catalog.json`` next to this module and regenerated from pi-ai's npm
package by ``scripts/generate_catalog.py`` (never edited by hand). The file is read and
decoded on first use, not at import: importing ``pi_actors.ai`` stays cheap.

Contract: ``get_model(provider, id)`` returns a fresh copy of a catalog Model or None;
``get_models(provider)`` a list of copies (``[]`` for an unknown provider); ``get_providers()``
the provider names, in the catalog's order; ``builtin_models()`` copies of all. Copies, so a
caller may change one without touching the catalog. ``calculate_cost(model, usage)`` sets
``usage.cost`` from the per-million prices, in place, and returns it. ``models_are_equal``
compares id and provider.

``find_model("provider/id")`` looks a model up by reference (None when unknown) and
``unknown_model_message(ref)`` says what was missing: the provider or the model id.
``unsupported_api_message(model)`` is None when some registered provider serves the model's
``api``, else the one line saying which API it needs.

Raises: :class:`CatalogError` (a ``ValueError``), one line naming the file and the place in it,
when the data file is unreadable or an entry does not have the Model shape.
"""

from __future__ import annotations

import os

import msgspec

from .types import Model, Usage, UsageCost

__all__ = ["get_model", "get_models", "get_providers", "calculate_cost", "models_are_equal", "builtin_models",
           "find_model", "unknown_model_message", "unsupported_api_message", "parse_catalog", "CatalogError",
           "CATALOG_PATH"]

#: The data file (JSON: ``{"source": "...", "models": [Model, ...], "added": [{"source", "models"}]}``,
#: pi's camelCase keys). ``added`` holds models from another source than the main one, each
#: block naming its own (the Google Code Assist models of an older pi-ai, which 0.73.1 dropped).
CATALOG_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog.json")


class CatalogError(ValueError):
    """The catalog data file is missing or malformed (one line naming the file)."""


class _AddedModels(msgspec.Struct, forbid_unknown_fields=True):
    source: str
    models: list[Model]


class _CatalogFile(msgspec.Struct, forbid_unknown_fields=True):
    source: str
    models: list[Model]
    added: list[_AddedModels] = []


_raw: bytes | None = None
_by_provider: dict[str, dict[str, Model]] | None = None


def parse_catalog(data: bytes, path: str) -> list[Model]:
    """The models of catalog file contents ``data``; raises CatalogError naming ``path``."""
    try:
        catalog = msgspec.json.decode(data, type=_CatalogFile)
        models = catalog.models + [m for block in catalog.added for m in block.models]
    except msgspec.DecodeError as exc:  # ValidationError included: it names the place ($.models[3].cost)
        raise CatalogError(f"{path}: malformed model catalog: {exc}") from None
    seen: set[tuple[str, str]] = set()
    for i, m in enumerate(models):
        if not m.id or not m.provider or not m.api:
            raise CatalogError(f"{path}: malformed model catalog: `$.models[{i}]` needs id, provider and api")
        if (m.provider, m.id) in seen:
            raise CatalogError(f"{path}: malformed model catalog: `$.models[{i}]` repeats {m.provider}/{m.id}")
        seen.add((m.provider, m.id))
    return models


def _read() -> bytes:
    global _raw
    if _raw is None:
        try:
            with open(CATALOG_PATH, "rb") as f:
                _raw = f.read()
        except OSError as exc:
            raise CatalogError(f"{CATALOG_PATH}: cannot read the model catalog: {exc.strerror or exc}") from None
    return _raw


def _load() -> dict[str, dict[str, Model]]:
    global _by_provider
    if _by_provider is None:
        index: dict[str, dict[str, Model]] = {}
        for m in parse_catalog(_read(), CATALOG_PATH):
            index.setdefault(m.provider, {})[m.id] = m
        _by_provider = index
    return _by_provider


_COPY = msgspec.json.Encoder()


def _copy(model: Model) -> Model:
    return msgspec.json.decode(_COPY.encode(model), type=Model)


def get_providers() -> list[str]:
    return list(_load())


def get_models(provider: str) -> list[Model]:
    return [_copy(m) for m in _load().get(provider, {}).values()]


def get_model(provider: str, model_id: str) -> Model | None:
    found = _load().get(provider, {}).get(model_id)
    return _copy(found) if found is not None else None


#: Providers that make the models they serve: a bare id several providers list means theirs.
_FIRST_PARTY = ("anthropic", "openai", "google", "mistral", "xai", "deepseek", "moonshotai", "zai", "minimax")


def _split_ref(ref: str) -> tuple[str, str]:
    provider, sep, model_id = ref.partition("/")
    return (provider, model_id) if sep else ("", ref)


def find_model(ref: str) -> Model | None:
    """The catalog model named ``"provider/id"``, or a bare id if exactly one provider has it
    (or, among several, exactly one of the makers in ``_FIRST_PARTY``).
    An id may itself hold slashes (``openrouter/openai/gpt-5``): the first part names the
    provider when it is one."""
    provider, model_id = _split_ref(ref)
    index = _load()
    if provider in index:
        return get_model(provider, model_id)
    found = [by_id[ref] for by_id in index.values() if ref in by_id]
    if len(found) > 1:  # resellers list the same id: the maker's own provider wins
        found = [m for m in found if m.provider in _FIRST_PARTY]
    return _copy(found[0]) if len(found) == 1 else None


def unknown_model_message(ref: str) -> str:
    provider, model_id = _split_ref(ref)
    index = _load()
    if provider and provider not in index:
        return (f'Unknown model "{ref}": provider "{provider}" is not in the model catalog '
                f"(known: {', '.join(index)})")
    where = f'provider "{provider}"' if provider else "any provider"
    return f'Unknown model "{ref}": model id "{model_id}" is not in the model catalog for {where}'


def unsupported_api_message(model: Model) -> str | None:
    """None when a registered provider serves ``model.api``; else the one line saying so."""
    from .registry import get_api_provider

    if get_api_provider(model.api) is not None:
        return None
    return f'{model.provider}/{model.id} needs API "{model.api}", which is not supported yet'


def builtin_models() -> list[Model]:
    """Copies of every catalog model, in the catalog's order (decoded afresh from the file's
    bytes: the fastest deep copy, and the index is not needed for it)."""
    return parse_catalog(_read(), CATALOG_PATH)


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
