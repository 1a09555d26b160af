"""The command line: argument parsing, the print/json/rpc modes, the terminal UI, and the
``serve`` / ``attach`` / ``tool-host`` commands (``pi-actors --help``).

Public names for programs that embed the CLI's configuration handling:

- ``load_settings(cwd)`` / ``parse_settings(doc)`` — pi's ``settings.json`` (global, then the
  project's) checked against the typed ``pi_actors.protocol.config.Settings``;
- ``ConfigError`` — a configuration mistake, one line naming the file and the key (the CLI
  prints it as ``Error: …`` and exits 1);
- ``load_model_registry()`` / ``choose_model(...)`` / ``DEFAULT_MODEL_IDS`` — the model catalog
  with models.json applied, which of its models have credentials, and the choice of one.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "load_settings", "parse_settings", "stream_limits", "load_model_registry", "choose_model",
           "DEFAULT_MODEL_IDS"]


def __getattr__(name: str) -> Any:
    # Imported on first use: ``pi-actors`` imports this package first, and its start-up
    # starts the provider before the settings' imports (the coding layer, trio) run.
    if name in ("ConfigError", "load_model_registry", "choose_model", "DEFAULT_MODEL_IDS"):
        from . import _config

        return getattr(_config, name)
    if name in ("load_settings", "parse_settings", "stream_limits"):
        from . import _settings

        return getattr(_settings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
