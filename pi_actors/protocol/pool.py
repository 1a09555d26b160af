"""The tool pool's contract (``POOL``), its workers' (``WORKER``) and a remote tool host's
(``TOOL_HOST``).

Who calls what:

- the coordinator calls ``POOL`` on its tool pool — the local pool actor
  (:mod:`pi_actors.actors.tool_pool`) or, for a session hosted by ``pi-actors serve`` with
  ``--tool-host NAME``, the server's proxy, which forwards ``run_tool`` to that host;
- the server calls ``TOOL_HOST`` (``run_tool`` only, the same Method as the pool's) on a
  connected ``pi-actors tool-host``, which forwards it to a pool of its own;
- the pool calls ``WORKER`` on each of its worker processes (one call at a time).

A tool's own arguments (``args``) are a free JSON object here: the tool validates them and a
bad one is an ordinary error *result* the model sees, never a refused call. What the router
validates is the envelope: ``toolCallId``, ``name``, ``args``, ``cwd``.

Results are tool results in pi's shape: ``{content, details, isError}``, where ``content``
is a list of text/image blocks (:data:`pi_actors.ai.types.ToolResultContent`). A tool that
fails, a sandbox that cannot be set up, a worker that crashed and a cancelled call are all
*results* with ``isError: true`` and a one-line text — ``run_tool`` never fails as a call for
those.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from ..ai.types import ToolResultContent
from ..runtime import Empty, Interface, Method, WireStruct

__all__ = [
    "RunToolArgs",
    "shell_settings",
    "ToolUpdate",
    "ToolResult",
    "WorkerRunArgs",
    "WorkerResult",
    "RUN_TOOL",
    "WARM",
    "EXPECT_CALLS",
    "ExpectCallsArgs",
    "WORKER_RUN",
    "POOL",
    "WORKER",
    "TOOL_HOST",
]


class RunToolArgs(WireStruct, kw_only=True):
    """One tool call, run at once in its own worker (the caller orders calls that must not
    overlap: the agent loop's ``exclusive_key``). ``sessionId`` is for logs.
    ``autoResizeImages`` (setting ``images.autoResize``): ``read`` brings an image within
    pi's size limits before returning it. ``shellPath`` / ``shellCommandPrefix`` (settings
    ``shellPath``, ``shellCommandPrefix``): ``bash`` runs ``<shellPath> -c`` (a path that does
    not exist where the tool runs — inside the sandbox — is the tool error ``Custom shell path
    not found: …``) and puts the prefix on its own line before the command. ``updates``: False
    when the caller reads no partial result (``-p`` without a listener): the call then streams
    no chunk, and the tool builds none."""

    tool_call_id: str
    name: str
    cwd: str
    args: dict[str, Any] = {}
    session_id: str | None = None
    auto_resize_images: bool = True
    shell_path: str | None = None
    shell_command_prefix: str | None = None
    updates: bool = True


def shell_settings(settings: Any) -> dict[str, str]:
    """The ``run_tool`` arguments settings ``shellPath`` / ``shellCommandPrefix`` give (a
    ``protocol.config.Settings``; only those set)."""
    out = {}
    if settings.shell_path:
        out["shellPath"] = settings.shell_path
    if settings.shell_command_prefix:
        out["shellCommandPrefix"] = settings.shell_command_prefix
    return out


class ToolUpdate(WireStruct):
    """A partial result while the tool runs (bash: the output so far)."""

    content: list[ToolResultContent] = []
    details: Any = None


class ToolResult(WireStruct):
    """A tool's result; ``details`` is tool-specific (always on the wire, null for none)."""

    content: list[ToolResultContent]
    details: Any
    is_error: bool


class WorkerRunArgs(RunToolArgs):
    """``run_tool``'s arguments as the pool hands them to a worker. ``watchTmp`` (sandboxed
    ``bash`` only): report in ``tmpWritten`` whether the command wrote to the private /tmp."""

    watch_tmp: bool = False


class WorkerResult(ToolResult):
    """A worker's result: ``tmpWritten`` is answered to ``watchTmp`` and removed by the pool."""

    tmp_written: bool | None = None


RUN_TOOL: Method[RunToolArgs, ToolUpdate, ToolResult] = Method(
    "run_tool",
    args=RunToolArgs,
    result=ToolResult,
    chunk=ToolUpdate,
    cooperative=True,
    errors={
        "tool_host_unavailable": "(server proxy) the session's tool host is not connected",
        "tool_host_lost": "(server proxy) the tool host disconnected during the call",
        "tool_pool_lost": "(tool host) the tool host's own pool process exited",
    },
    doc="Run one tool call in a sandboxed worker; chunks are partial results. A cancel ends "
    "the call with the result `Command aborted` (bash, after the output so far) or "
    "`Operation aborted`.",
)


WARM: Method[Empty, None, Empty] = Method(
    "warm",
    args=Empty,
    result=Empty,
    doc="Start the pool's warm workers if they are not started yet (no effect otherwise).",
)


class ExpectCallsArgs(WireStruct, kw_only=True):
    """``expect_calls``: the reply the model is streaming holds ``calls`` tool calls so far,
    to run in ``cwd`` (absent: the pool's workspace)."""

    calls: Annotated[int, msgspec.Meta(ge=0)] = 0
    cwd: str = ""


EXPECT_CALLS: Method[ExpectCallsArgs, None, Empty] = Method(
    "expect_calls",
    args=ExpectCallsArgs,
    result=Empty,
    doc="The reply being streamed holds `calls` tool calls so far: start workers until that many "
    "are idle or starting for `cwd`'s sandbox (absent: the pool's workspace), within the pool's "
    "limit, so that they are forked while the model still answers. Answered at once.",
)


WORKER_RUN: Method[WorkerRunArgs, ToolUpdate, WorkerResult] = Method(
    "run",
    args=WorkerRunArgs,
    result=WorkerResult,
    chunk=ToolUpdate,
    doc="Run one tool call in this worker. A cancel kills the call's process groups and "
    "answers `cancelled`; for bash it is an abort instead, answered with the output so far.",
)

POOL = Interface("tool-pool", [RUN_TOOL, WARM, EXPECT_CALLS], doc="The tool executor pool, as the coordinator calls it.")
WORKER = Interface("tool-worker", [WORKER_RUN], doc="One tool worker process, as its pool calls it.")
TOOL_HOST = Interface("tool-host", [RUN_TOOL], doc="A remote `pi-actors tool-host`, as the server calls it.")
