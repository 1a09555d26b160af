"""The command lines that print something and exit without a session: ``--list-models
[SEARCH]`` and ``--export SESSION.jsonl [OUTPUT.html]``.
"""

from __future__ import annotations

import argparse
import os
import sys

from ._session_choice import _with_extension_providers

__all__ = ["_list_models", "_export"]


def _list_models(search: str, args: argparse.Namespace | None = None) -> int:
    """``--list-models [SEARCH]``: the models whose provider has credentials, as pi lists them
    (sorted by provider and id; context and max output as 200K / 1M); when none has, how to
    add one."""
    from ._config import load_model_registry, no_models_message

    reg = load_model_registry()
    for err in reg.errors:
        print(f"Warning: {err}", file=sys.stderr)
    if args is not None:
        _with_extension_providers(reg, args.extension_look)
    models = reg.available()
    if not models:
        print(no_models_message())
        return 0
    words = search.lower().split()
    rows = [m for m in models if all(w in f"{m.provider}/{m.id} {m.provider} {m.id}".lower() for w in words)]
    if not rows:
        print(f'No models matching "{search}"')
        return 0
    rows.sort(key=lambda m: (m.provider, m.id))
    table = [("provider", "model", "context", "max-out", "thinking", "images")] + [
        (m.provider, m.id, _tokens(m.context_window), _tokens(m.max_tokens), "yes" if m.reasoning else "no",
         "yes" if "image" in m.input else "no")
        for m in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(6)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def _tokens(count: int) -> str:
    """A token count as pi shows it: 200K, 1M, 1.5M, 4096 stays 4.1K."""
    for size, unit in ((1_000_000, "M"), (1_000, "K")):
        if count >= size:
            value = count / size
            return f"{value:g}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return str(count)


def _export(paths: list[str]) -> int:
    from ..coding.export_html import default_export_name, export_html
    from ..coding.session import SessionLoadError, load_session
    from ._config import ConfigError

    if len(paths) > 2:
        raise ConfigError("--export takes a session file and optionally an output path")
    source = paths[0]
    try:
        loaded = load_session(source)
    except FileNotFoundError:
        raise ConfigError(f"File not found: {os.path.abspath(source)}") from None
    except (SessionLoadError, OSError) as exc:
        raise ConfigError(f"Cannot export {source}: {exc}") from None
    for warning in loaded.warnings:  # damaged lines are not in the page: say so
        print(f"Warning: {warning}", file=sys.stderr)
    # pi's default: pi-session-<file name>.html in the current directory (also /export's name).
    target = paths[1] if len(paths) == 2 else default_export_name(source)
    try:
        written = export_html(loaded.header, loaded.entries, target)
    except OSError as exc:
        raise ConfigError(f"Cannot write {target}: {exc.strerror or exc}") from None
    print(f"Exported to: {written}")
    return 0
