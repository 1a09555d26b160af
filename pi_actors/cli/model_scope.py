"""Model scoping as pi's: ``--models`` / settings ``enabledModels`` patterns turned into the
models Ctrl+P / Shift+Ctrl+P and RPC ``cycle_model`` cycle among.

A pattern (comma-separated on the command line) is one of:

- a glob (has ``*``, ``?`` or ``[``), matched case-insensitively against ``provider/id`` and
  against the bare id (``anthropic/*``, ``*sonnet*``); every matching model is in scope;
- otherwise a model reference: exact ``provider/id`` or a unique bare id (case-insensitive),
  else the models whose id or name contains it, preferring an alias id (no ``-YYYYMMDD``
  suffix, highest sort) over dated ones (the latest);

each with an optional ``:level`` thinking suffix (``*sonnet*:high``); a colon that is not a
thinking level is part of the id (OpenRouter's ``:exacto``) or, when nothing matches that way,
a warning. A pattern matching nothing is a warning, not an error (pi's). Only models whose
provider has credentials may be in scope (the caller passes those).

Python's ``fnmatch`` stands in for pi's minimatch: ``*`` also crosses ``/`` here, which only
widens a glob that already matched the id part.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from typing import Any, cast

from ..choices import THINKING_LEVELS
from ..protocol.config import ScopedModel

__all__ = ["parse_model_pattern", "resolve_model_scope", "split_patterns", "cycle_target"]

_DATED = re.compile(r"-\d{8}$")


def split_patterns(text: str) -> list[str]:
    """``--models`` text as its patterns (comma-separated, blanks dropped)."""
    return [p.strip() for p in text.split(",") if p.strip()]


def _is_alias(model_id: str) -> bool:
    return model_id.endswith("-latest") or not _DATED.search(model_id)


def _exact(ref: str, models: Sequence[Any]) -> Any | None:
    """The one model ``ref`` names exactly (``provider/id`` or a bare id); None when none or
    several do."""
    ref = ref.strip().lower()
    if not ref:
        return None
    full = [m for m in models if f"{m.provider}/{m.id}".lower() == ref]
    if full:
        return full[0] if len(full) == 1 else None
    bare = [m for m in models if m.id.lower() == ref]
    return bare[0] if len(bare) == 1 else None


def _match(pattern: str, models: Sequence[Any]) -> Any | None:
    exact = _exact(pattern, models)
    if exact is not None:
        return exact
    word = pattern.lower()
    hits = [m for m in models if word in m.id.lower() or word in (m.name or "").lower()]
    if not hits:
        return None
    aliases = [m for m in hits if _is_alias(m.id)]
    return max(aliases or hits, key=lambda m: m.id)


def parse_model_pattern(pattern: str, models: Sequence[Any]) -> tuple[Any | None, str | None, str | None]:
    """``(model, thinking level or None, warning or None)`` for one non-glob pattern (see the
    module docstring): the whole pattern first, then split at its last colon."""
    found = _match(pattern, models)
    if found is not None:
        return found, None, None
    head, colon, suffix = pattern.rpartition(":")
    if not colon:
        return None, None, None
    model, level, warning = parse_model_pattern(head, models)
    if model is None:
        return None, None, warning
    if suffix in THINKING_LEVELS:
        return model, (None if warning else suffix), warning
    return model, None, f'Invalid thinking level "{suffix}" in pattern "{pattern}". Using default instead.'


def resolve_model_scope(patterns: Sequence[str], models: Sequence[Any]) -> tuple[list[ScopedModel], list[str]]:
    """The scoped models ``patterns`` name among ``models`` (those with credentials), in
    pattern order without duplicates, and pi's warnings (``Warning: No models match pattern
    "x"`` ...) for the caller to print."""
    scoped: list[ScopedModel] = []
    warnings: list[str] = []

    def add(model: Any, level: str | None) -> None:
        if not any(s.provider == model.provider and s.model_id == model.id for s in scoped):
            scoped.append(ScopedModel(provider=model.provider, model_id=model.id, thinking_level=cast(Any, level)))

    for pattern in patterns:
        if any(c in pattern for c in "*?["):
            glob, level = pattern, None
            head, colon, suffix = pattern.rpartition(":")
            if colon and suffix in THINKING_LEVELS:
                glob, level = head, suffix
            glob = glob.lower()
            hits = [
                m for m in models if fnmatch.fnmatchcase(f"{m.provider}/{m.id}".lower(), glob) or fnmatch.fnmatchcase(m.id.lower(), glob)
            ]
            if not hits:
                warnings.append(f'Warning: No models match pattern "{pattern}"')
            for m in hits:
                add(m, level)
            continue
        model, level, warning = parse_model_pattern(pattern, models)
        if warning:
            warnings.append(f"Warning: {warning}")
        if model is None:
            warnings.append(f'Warning: No models match pattern "{pattern}"')
            continue
        add(model, level)
    return scoped, warnings


def cycle_target(
    scoped: Sequence[ScopedModel], available: Sequence[dict[str, Any]], current: dict[str, Any], backward: bool = False
) -> tuple[dict[str, Any], str | None, bool] | None:
    """Where Ctrl+P (Shift+Ctrl+P: ``backward``) or RPC ``cycle_model`` goes, as pi's
    ``cycleModel``: ``(model, the scoped entry's thinking level or None to keep the current
    one, whether a scope applied)``, or None when at most one model is a candidate (pi:
    "Only one model in scope" / "available").

    ``available``: the models with credentials (plain dicts, RPC ``get_available_models``);
    with a scope the candidates are the scoped ones among them, in scope order, else all of
    them. A current model not among the candidates counts as the first."""
    by_key = {(m.get("provider"), m.get("id")): m for m in available}
    if scoped:
        pairs = [(by_key[(s.provider, s.model_id)], s.thinking_level) for s in scoped if (s.provider, s.model_id) in by_key]
    else:
        pairs = [(m, None) for m in available]
    if len(pairs) <= 1:
        return None
    keys = [(m.get("provider"), m.get("id")) for m, _ in pairs]
    here = (current.get("provider"), current.get("id"))
    index = keys.index(here) if here in keys else 0
    model, level = pairs[(index + (-1 if backward else 1)) % len(pairs)]
    return model, level, bool(scoped)
