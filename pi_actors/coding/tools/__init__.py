"""The coding tools: stateless functions that run inside (sandboxed) tool worker processes.

``run_tool(name, args, cwd=..., on_update=...)`` runs one call and returns pi's result shape
``{"content": [text/image blocks], "details": json or None}``; every failure the model should
see is raised as :class:`ToolError` with pi's exact text. Cancelling the caller's trio scope
cancels the call (child processes are terminated and waited for) and ``trio.Cancelled``
propagates; ``abort`` (bash only) ends a command but keeps its output in the error result. :func:`kill_all_process_groups` is for a worker's signal handler / exit path.

The seven tools of pi: ``read``, ``write``, ``edit``, ``bash``, ``grep``, ``find``, ``ls``
(:data:`TOOL_SPECS` in that order); :data:`DEFAULT_TOOLS` is pi's default active set.
:data:`MUTATING_TOOLS` names the tools that change the file named by their ``path``
argument (the pool runs such calls on one path one after another).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .base import ToolError, ToolSpec
from .bash import BASH_SPEC, AbortFlag, run_bash
from .edit import EDIT_SPEC, run_edit
from .find import FIND_SPEC, run_find
from .grep import GREP_SPEC, run_grep
from .ls import LS_SPEC, run_ls
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
from .write import WRITE_SPEC, run_write

OnUpdate = Callable[[dict], Awaitable[None]]

TOOL_SPECS: dict[str, ToolSpec] = {
    spec.name: spec for spec in (READ_SPEC, BASH_SPEC, EDIT_SPEC, WRITE_SPEC, GREP_SPEC, FIND_SPEC, LS_SPEC)
}

# pi's default active tool set (sdk.ts / agent-session.ts).
DEFAULT_TOOLS = ("read", "bash", "edit", "write")
MUTATING_TOOLS = frozenset({"edit", "write"})

_RUNNERS: dict[str, Callable[..., Awaitable[dict]]] = {
    "read": run_read,
    "bash": run_bash,
    "edit": run_edit,
    "write": run_write,
    "grep": run_grep,
    "find": run_find,
    "ls": run_ls,
}


async def run_tool(
    name: str,
    args: dict[str, Any],
    *,
    cwd: str,
    on_update: OnUpdate | None = None,
    abort: AbortFlag | None = None,
    auto_resize_images: bool = True,
    shell_path: str | None = None,
    shell_command_prefix: str | None = None,
) -> dict:
    """Run tool ``name`` with ``args`` in ``cwd``; see the module docstring. ``abort`` is for
    ``bash`` (ignored by the other tools): once set, the command is ended and the call fails
    with its output so far followed by ``Command aborted``. ``auto_resize_images`` is for
    ``read``: False returns image files unresized (setting ``images.autoResize``).
    ``shell_path`` / ``shell_command_prefix`` are for ``bash`` (settings ``shellPath``,
    ``shellCommandPrefix``; see ``run_bash``)."""
    runner = _RUNNERS.get(name)
    if runner is None:
        raise ToolError(f"Tool {name} not found")
    if not isinstance(args, dict):
        raise ToolError(f'Validation failed for tool "{name}":\n  - root: must be object')
    if name == "bash":
        return await run_bash(
            args, cwd=cwd, on_update=on_update, abort=abort, shell_path=shell_path, command_prefix=shell_command_prefix
        )
    if name == "read":
        return await run_read(args, cwd=cwd, on_update=on_update, auto_resize_images=auto_resize_images)
    return await runner(args, cwd=cwd, on_update=on_update)


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "DEFAULT_TOOLS",
    "GREP_MAX_LINE_LENGTH",
    "MUTATING_TOOLS",
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
