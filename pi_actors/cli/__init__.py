"""The command line: argument parsing, the print/json/rpc modes, the terminal UI, and the
``serve`` / ``attach`` / ``tool-host`` commands (``pi-actors --help``).

Public names for programs that embed the CLI's configuration handling:

- ``load_settings(cwd)`` / ``parse_settings(doc)`` — pi's ``settings.json`` (global, then the
  project's) checked against the typed ``pi_actors.protocol.config.Settings``;
- ``ConfigError`` — a configuration mistake, one line naming the file and the key (the CLI
  prints it as ``Error: …`` and exits 1).
"""

from ._config import ConfigError
from ._settings import load_settings, parse_settings, stream_limits

__all__ = ["ConfigError", "load_settings", "parse_settings", "stream_limits"]
