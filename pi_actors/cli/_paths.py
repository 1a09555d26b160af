"""Where the CLI's files live, without importing anything heavy (the provider is started
ahead before the CLI's other imports: ``_early``)."""

from __future__ import annotations

import os

__all__ = ["agent_dir"]


def agent_dir() -> str:
    """The agent directory: ``$PI_ACTORS_DIR``, else ``~/.pi-actors``."""
    return os.path.expanduser(os.environ.get("PI_ACTORS_DIR") or "~/.pi-actors")
