"""The coding tools: stateless functions that run inside (sandboxed) tool worker processes.

``run_tool(name, args, cwd=..., on_update=...)`` runs one call and returns pi's result shape
``{"content": [text/image blocks], "details": json or None}``; every failure the model should
see is raised as :class:`ToolError` with pi's exact text. Cancelling the caller's trio scope
cancels the call (child processes are terminated and waited for) and ``trio.Cancelled``
propagates. :func:`kill_all_process_groups` is for a worker's signal handler / exit path.

Available now: ``read``, ``bash``. (``write``, ``edit``, ``grep``, ``find``, ``ls`` follow.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .base import ToolError, ToolSpec
from .bash import BASH_SPEC, run_bash
from .process import kill_all_process_groups
from .read import READ_SPEC, run_read
from .truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    GREP_MAX_LINE_LENGTH,
    TruncationResult,
    format_size,
    truncate_head,
    truncate_line,
    truncate_tail,
)

OnUpdate = Callable[[dict], Awaitable[None]]

TOOL_SPECS: dict[str, ToolSpec] = {
    READ_SPEC.name: READ_SPEC,
    BASH_SPEC.name: BASH_SPEC,
}

# pi's default active tool set (sdk.ts / agent-session.ts).
DEFAULT_TOOLS = ("read", "bash", "edit", "write")

_RUNNERS: dict[str, Callable[..., Awaitable[dict]]] = {
    "read": run_read,
    "bash": run_bash,
}


async def run_tool(name: str, args: dict[str, Any], *, cwd: str, on_update: OnUpdate | None = None) -> dict:
    """Run tool ``name`` with ``args`` in ``cwd``; see the module docstring."""
    runner = _RUNNERS.get(name)
    if runner is None:
        raise ToolError(f"Tool {name} not found")
    if not isinstance(args, dict):
        raise ToolError(f'Validation failed for tool "{name}":\n  - root: must be object')
    return await runner(args, cwd=cwd, on_update=on_update)


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "DEFAULT_TOOLS",
    "GREP_MAX_LINE_LENGTH",
    "TOOL_SPECS",
    "ToolError",
    "ToolSpec",
    "TruncationResult",
    "format_size",
    "kill_all_process_groups",
    "run_tool",
    "truncate_head",
    "truncate_line",
    "truncate_tail",
]
