"""The stateful coding layer: tools, session files (and, later, compaction, settings).

Subpackages are the units to import from: :mod:`pi_actors.coding.tools` (the tools run in
tool workers) and :mod:`pi_actors.coding.session` (pi-compatible session files). Their main
names are re-exported here for convenience.
"""

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
