"""A tool worker process: runs one tool call at a time for the pool.

Calls served (from the pool): ``run {name, args, cwd, toolCallId}`` → chunks are the tool's
partial results (bash output so far), the result is ``{content, details, isError}``. A tool
failure is a normal result with ``isError: true`` (the text the model sees). A ``cancel``
cancels the tool, which kills its whole process group before the call answers ``cancelled``.

The worker dies with the pool: its parent-death signal is SIGTERM, on which it kills every
live tool process group (so a bash call's background children go too) and exits.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import trio

from ..runtime import IncomingCall, RemoteError, open_peer

__all__ = ["run_tool_worker"]


def _install_termination_handler() -> None:
    from ..coding.tools import kill_all_process_groups

    def on_term(signum: int, frame: Any) -> None:
        kill_all_process_groups(signal.SIGKILL)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)


async def _handle(call: IncomingCall) -> Any:
    from ..coding.tools import ToolError, run_tool

    if call.method != "run":
        raise RemoteError("not_found", f"tool worker: unknown method {call.method!r}")
    args = call.args or {}
    try:
        name = args["name"]
        tool_args = args.get("args") or {}
        cwd = args["cwd"]
    except (KeyError, TypeError) as exc:
        raise RemoteError("invalid_args", f"tool worker: bad arguments: {exc}") from None

    async def on_update(partial: dict) -> None:
        await call.send_chunk(partial)

    try:
        result = await run_tool(name, tool_args, cwd=cwd, on_update=on_update)
    except ToolError as exc:
        return {"content": [{"type": "text", "text": str(exc)}], "details": None, "isError": True}
    return {"content": result.get("content", []), "details": result.get("details"), "isError": False}


async def run_tool_worker(links: dict[str, trio.SocketStream], config: Any) -> None:
    """Actor entry: serve the pool link until it closes, then kill leftover process groups."""
    _install_termination_handler()
    from ..coding.tools import kill_all_process_groups

    try:
        async with open_peer(links["pool"], side="server", role="tool-worker", name="tool-worker", handler=_handle) as peer:
            await peer.closed_event.wait()
    finally:
        kill_all_process_groups(signal.SIGKILL)
