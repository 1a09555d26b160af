"""A tool worker process: runs one tool call at a time for the pool.

It serves :data:`pi_actors.protocol.pool.WORKER` (``run``) to its pool: chunks are the
tool's partial results (bash output so far; none for a call with ``updates: false``), the result is ``{content, details, isError}``. A tool
failure is a normal result with ``isError: true`` (the text the model sees). A ``cancel``
cancels the tool, which kills its whole process group before the call answers ``cancelled``;
for ``bash`` the cancel is an abort instead: the command's group is killed the same way and
the call answers with an error result holding the output so far and ``Command aborted``.

Configuration: ``{"sandboxed": bool, "limits": {...}, "mode", "workspace", "refusal"?}``
(``refusal``: the zygote could not confine it — every call is refused with that text).

Sandboxed, a result is annotated (:mod:`pi_actors.coding.sandbox.notes`) when it ran into a
sandbox limit (no space in ``/tmp``, memory) or a ``write``/``edit`` was refused outside the
workspace; a ``bash`` call with ``watchTmp`` also reports ``tmpWritten`` (whether the command
changed the private ``/tmp`` or ``/dev/shm``), which the pool turns into a one-time notice.

The worker is forked by the pool's zygote (:mod:`._zygote`), which has set it up before it
runs :func:`run_tool_worker`.

- Unsandboxed, the worker dies with the zygote, which dies with the pool: its parent-death
  signal is SIGTERM, on which it kills every live tool process group (so a bash call's
  background children go too) and exits.
- Sandboxed (forked inside bubblewrap into PID and mount namespaces of its own), the worker
  first checks that it really is the init (PID 1) of a PID namespace — it refuses every
  call otherwise, never running unconfined — then lowers its resource limits (inherited by every command), reaps orphans
  as they exit, and after every call kills whatever the call left running in the namespace
  before answering. It installs no SIGTERM handler: as init it receives only signals it
  handles, so tools cannot stop it; it dies at end-of-file on its link, or by SIGKILL from
  its zygote (or with it), which ends the whole namespace.
"""

from __future__ import annotations

import os
import re
import signal
from typing import Any

import msgspec
import trio

from ..protocol.pool import WORKER, WORKER_RUN, ToolUpdate, WorkerResult, WorkerRunArgs
from ..runtime import ConnectionLost, Router, TypedCall, implements, open_peer
from ..runtime.protocol import SIBLING_HANDSHAKE_TIMEOUT

__all__ = ["run_tool_worker"]

# bash's own full-output file, named in its result (compiled once, in the zygote).
_SPILL_FILE = re.compile(r"Full output: (/tmp/pi-bash-[0-9a-f]+\.log)")


def _install_termination_handler() -> None:
    from ..coding.tools import kill_all_process_groups

    def on_term(signum: int, frame: Any) -> None:
        kill_all_process_groups(signal.SIGKILL)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)


class _Worker:
    def __init__(self, sandboxed: bool, config: dict[str, Any]) -> None:
        self.sandboxed = sandboxed
        self.refusal: str | None = None
        self.mode = str(config.get("mode") or "workspace-write")
        self.workspace = str(config.get("workspace") or "")
        self.limits: Any = None

    @implements(WORKER_RUN)
    async def run(self, args: WorkerRunArgs, call: TypedCall[WorkerRunArgs, ToolUpdate]) -> WorkerResult:
        """Run one tool call (see the module docstring). A bash call is cooperative: its
        cancel is an abort answered with the output so far; any other call is cancelled."""
        from ..coding.tools import ToolError, run_tool

        name, tool_args, cwd = args.name, args.args, args.cwd
        if self.refusal is not None:
            return _as_result(_error(self.refusal))

        async def on_update(partial: dict[str, Any]) -> None:
            await call.send(msgspec.convert(partial, ToolUpdate))

        abort = None
        if name == "bash":  # an abort keeps the output produced so far (pi does)
            call.incoming.cooperative = True  # this call only: the method is not cooperative
            abort = call.cancel_requested
        watch_tmp = self.sandboxed and name == "bash" and args.watch_tmp
        if watch_tmp:
            from ..coding.sandbox.notes import tmp_snapshot

            # In this thread: a scan of two small tmpfs (bounded), in a loop that serves this
            # call alone; a thread per worker cost more (its start) than the scan.
            before = tmp_snapshot()
        try:
            result = await run_tool(
                name, tool_args, cwd=cwd, on_update=on_update if args.updates else None, abort=abort, auto_resize_images=args.auto_resize_images,
                shell_path=args.shell_path, shell_command_prefix=args.shell_command_prefix,
            )  # fmt: skip
            out = {"content": result.get("content", []), "details": result.get("details"), "isError": False}
        except ToolError as exc:
            out = _error(str(exc))
        finally:
            if self.sandboxed:
                from ..coding.sandbox.init import end_strays

                with trio.CancelScope(shield=True):
                    await end_strays()
        if self.sandboxed:
            out = self._annotate(name, out)
            if watch_tmp:
                from ..coding.sandbox.notes import tmp_changed

                after = tmp_snapshot()
                # bash's own full-output file is no write of the command's.
                text = "".join(b.get("text", "") for b in out.get("content") or [] if isinstance(b, dict))
                spilled = set(_SPILL_FILE.findall(text))
                out["tmpWritten"] = tmp_changed(before, after, spilled)
        return _as_result(out)

    def _annotate(self, name: str, out: dict[str, Any]) -> dict[str, Any]:
        """Say which sandbox limit or rule a failure ran into (:mod:`pi_actors.coding.sandbox.notes`)."""
        from ..coding.sandbox.notes import append_note, limit_notes, write_refused_note

        text = "".join(b.get("text", "") for b in out.get("content") or [] if isinstance(b, dict))
        notes: list[str] = []
        refused = out.get("isError") and name in ("write", "edit")
        # Only where the text is the tools' own: read, grep and friends return file contents.
        if self.limits is not None and (name == "bash" or (refused and "ENOSPC" in text)):
            notes += limit_notes(text.replace("ENOSPC: no space left on device", "No space left on device"), self.limits)
        if refused and "EROFS" in text:
            notes.append(write_refused_note(self.mode, self.workspace))
        for note in notes:
            out = append_note(out, note)
        return out


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": None, "isError": True}


def _as_result(out: dict[str, Any]) -> WorkerResult:
    """A result built as plain data (the tools' and the sandbox notes' shape) as the declared
    Struct; raises msgspec.ValidationError for a tool that broke pi's result shape (a bug)."""
    return msgspec.convert(out, WorkerResult)


async def run_tool_worker(links: dict[str, trio.SocketStream], config: Any) -> None:
    """Actor entry: serve the pool link until it closes, then kill leftover process groups."""
    from ..coding.tools import kill_all_process_groups

    config = config or {}
    worker = _Worker(bool(config.get("sandboxed")), config)
    async with trio.open_nursery() as nursery:
        if config.get("refusal"):
            worker.refusal = str(config["refusal"])
        elif worker.sandboxed:
            from ..coding.sandbox import Limits
            from ..coding.sandbox.init import is_namespace_init, serve_reaper
            from ..coding.sandbox.limits import apply_rlimits

            if not is_namespace_init():
                worker.refusal = "Tool worker refused the call: it was told it runs in a sandbox, but it does not"
            else:
                from ..coding.tools.process import spawn_as_namespace_init

                worker.limits = Limits.from_config(config.get("limits"))
                apply_rlimits(worker.limits)
                spawn_as_namespace_init()
                nursery.start_soon(serve_reaper)
        else:
            _install_termination_handler()
        try:
            async with open_peer(
                links["pool"], side="server", role="tool-worker", name="tool-worker", handler=Router.serving(worker, WORKER),
                handshake_timeout=SIBLING_HANDSHAKE_TIMEOUT,
            ) as peer:
                await peer.closed_event.wait()
        except ConnectionLost:
            pass  # the pool went away before the handshake finished: nothing to serve
        finally:
            kill_all_process_groups(signal.SIGKILL)
            nursery.cancel_scope.cancel()
