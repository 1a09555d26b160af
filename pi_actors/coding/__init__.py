"""The stateful coding layer: tools, session files (and, later, compaction, settings).

Subpackages are the units to import from: :mod:`pi_actors.coding.tools` (the tools run in
tool workers) and :mod:`pi_actors.coding.session` (pi-compatible session files). Their main
names are re-exported here for convenience, imported on first use (PEP 562): importing one
subpackage — ``coding.sandbox`` in the tool pool, ``coding.tools`` in the tool zygote — does
not import the others (the session code, and trio through the tools, are a large part of an
actor's start-up on a busy machine).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import (
        LoadedSession,
        SessionLoadError,
        SessionWriteError,
        SessionWriter,
        build_session_context,
        default_session_dir,
        load_session,
        new_entry_id,
    )
    from .tools import DEFAULT_TOOLS, TOOL_SPECS, ToolError, ToolSpec, kill_all_process_groups, run_tool

#: Where each re-exported name lives.
_HOMES = {
    **dict.fromkeys(
        ("LoadedSession", "SessionLoadError", "SessionWriteError", "SessionWriter", "build_session_context",
         "default_session_dir", "load_session", "new_entry_id"),
        ".session",
    ),
    **dict.fromkeys(("DEFAULT_TOOLS", "TOOL_SPECS", "ToolError", "ToolSpec", "kill_all_process_groups", "run_tool"), ".tools"),
}  # fmt: skip

__all__ = [
    "DEFAULT_TOOLS",
    "LoadedSession",
    "SessionLoadError",
    "SessionWriteError",
    "SessionWriter",
    "TOOL_SPECS",
    "ToolError",
    "ToolSpec",
    "build_session_context",
    "default_session_dir",
    "kill_all_process_groups",
    "load_session",
    "new_entry_id",
    "run_tool",
]


def __getattr__(name: str) -> Any:
    """A re-exported name, from its subpackage (imported now if it is not yet)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
