"""The ``bash`` tool (pi spec §1.7).

Runs ``/bin/bash -c <command>`` (else the first ``bash`` on PATH, else ``sh``) in ``cwd``, in
its own process group (see :mod:`.process`), stdin from /dev/null, stdout and stderr merged
in arrival order. Output is kept in a rolling buffer of recent chunks (old chunks dropped
from the front only while the rest still holds at least 100 KiB, so the buffer always holds
the last 100 KiB, or everything); once more than 50KB has been seen, everything is also
written to ``<tmp>/pi-bash-<16 hex>.log``. Every chunk produces an ``on_update`` with the
accumulated, tail-truncated text (not a delta). Memory stays bounded whatever the command
writes; the size of the whole output (bytes, lines, the last line's length) is counted as it
passes.

Output is never cut silently: whenever the text returned is less than the command wrote, a
notice in pi's words follows it, with the real totals and the file that holds every byte —
``[Showing lines S-E of N. Full output: P]``, ``[Showing lines S-E of N (50.0KB limit). Full
output: P]``, or, when the last line alone is over 50KB, ``[Showing last 50.0KB of line N
(line is SIZE). Full output: P]``. N and SIZE count the whole output (pi counts only its
rolling buffer), and ``details.truncation.totalBytes``/``totalLines`` are the whole output's.
If the file cannot be written (a full /tmp), the notice says so instead of naming it.

Outcome:

- exit 0 (or killed by a signal, as in pi) → ``{"content": [text], "details": ...}``;
- exit N ≠ 0 → ``ToolError(text + "\\n\\nCommand exited with code N")``;
- ``timeout`` seconds elapsed → the group is terminated (SIGTERM, 2 s grace, SIGKILL) and
  ``ToolError(text + "\\n\\nCommand timed out after T seconds")``;
- ``abort`` (a ``trio.Event``, or any :class:`AbortFlag`) set → the group is terminated the same way and
  ``ToolError(text + "\\n\\nCommand aborted")``: the output produced before the abort is kept,
  as in pi (just ``Command aborted`` if there was none);
- cancellation of the caller's trio scope → the group is terminated the same way, the leader
  is waited for, and ``trio.Cancelled`` propagates (a cancelled call has no result in trio;
  a caller that wants the output of an aborted command sets ``abort`` instead);
- the working directory missing → ``ToolError("Working directory does not exist: ...")``.

A call's background children die with the call: when the shell exits, whatever is left of
its process group is SIGKILLed, then the remaining output is drained (for at most
``_DRAIN_LIMIT`` seconds, in case something that left the group still holds the pipe).

Differences from pi, deliberately:

- When the output is truncated but never passed 50KB (many short lines), pi names no file
  (its notice says ``Full output: undefined``); here the file is then written from the
  buffer, which still holds everything, so the notice always names a real file.
- The timeout text carries the truncated output and notice, not the raw rolling buffer.
- Background children are killed when the shell exits (pi leaves them running).
- No ``<agentDir>/bin`` on PATH. The shell (``shell_path``, setting ``shellPath``) and a
  prefix line (``command_prefix``, setting ``shellCommandPrefix``) are the caller's choice.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO, Protocol

import trio

from ... import _ready
from .base import ToolError, ToolSpec
from .process import GroupProcess
from .truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, TruncationResult, format_size, truncate_tail

BASH_SPEC = ToolSpec(
    name="bash",
    label="bash",
    description=(
        "Execute a bash command in the current working directory. Returns stdout and stderr. "
        f"Output is truncated to last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB "
        "(whichever is hit first). If truncated, full output is saved to a temp file. "
        "Optionally provide a timeout in seconds. "
        # Where writes go (issue 12): said up front, and again in the first result of a
        # session whose command wrote to /tmp (see pi_actors.coding.sandbox.notes).
        "When tools run sandboxed (the default), only the working directory is writable and kept; "
        "/tmp is private to the session and discarded when it ends; everything else, $HOME included, "
        "is read-only, and most of $HOME is hidden."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "Bash command to execute"},
            "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"},
        },
        "required": ["command"],
    },
)

_ROLLING_MAX_BYTES = DEFAULT_MAX_BYTES * 2
_READ_SIZE = 65536
# Seconds between SIGTERM and SIGKILL when a call is cancelled or times out.
_TERM_GRACE = 2.0
# Seconds to keep reading after the shell exited and its group was killed.
_DRAIN_LIMIT = 1.0

_shell_path: str | None = None


class AbortFlag(Protocol):
    """What ``abort`` may be: a ``trio.Event``; a flag that also has ``on_set(callback) ->
    take_back`` (the runtime's ``Trigger``: a tool worker's ``cancel_requested``) is told
    through a callback instead of a watcher task per command."""

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


def _shell() -> str:
    global _shell_path
    if _shell_path is None:
        if os.path.exists("/bin/bash"):
            _shell_path = "/bin/bash"
        else:
            _shell_path = shutil.which("bash") or "sh"
    return _shell_path


def _js_number(value: float) -> str:
    """A number as JavaScript would print it in a template string (``1``, ``0.5``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class _Output:
    """Rolling buffer of raw chunks, the full-output spill file, and the whole output's size.

    The buffer drops chunks from the front only while what remains still holds
    ``_ROLLING_MAX_BYTES``: it always holds the last 100 KiB of the output, or all of it
    (:attr:`complete`). A failure to write the spill file is kept (:attr:`spill_error`) and
    reported in the notice; the command goes on.
    """

    def __init__(self) -> None:
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self.total_bytes = 0
        self.newlines = 0
        #: Bytes after the last newline so far: the length of the last line.
        self.last_line_bytes = 0
        self.full_output_path: str | None = None
        self.spill_error: str | None = None
        self._file: BinaryIO | None = None

    @property
    def complete(self) -> bool:
        """Whether the buffer still holds every byte of the output."""
        return self._buffered == self.total_bytes

    @property
    def total_lines(self) -> int:
        return self.newlines + 1

    def add(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        count = chunk.count(b"\n")
        if count:
            self.newlines += count
            self.last_line_bytes = len(chunk) - chunk.rindex(b"\n") - 1
        else:
            self.last_line_bytes += len(chunk)
        if self.total_bytes > DEFAULT_MAX_BYTES and self._file is None and self.spill_error is None:
            self._open_spill()
        if self._file is not None:
            self._write(chunk)
        self._chunks.append(chunk)
        self._buffered += len(chunk)
        while len(self._chunks) > 1 and self._buffered - len(self._chunks[0]) >= _ROLLING_MAX_BYTES:
            self._buffered -= len(self._chunks.popleft())

    def ensure_spill(self) -> str | None:
        """The full-output file, created from the buffer if it does not exist yet; None if it
        could not be written (:attr:`spill_error` says why).

        Called only when the output is truncated; if no file exists then at most 50KB were
        seen, so the buffer still holds every byte.
        """
        if self._file is None and self.spill_error is None:
            self._open_spill()
        return self.full_output_path if self.spill_error is None else None

    def _open_spill(self) -> None:
        path = os.path.join(tempfile.gettempdir(), f"pi-bash-{secrets.token_hex(8)}.log")
        self.full_output_path = path
        try:
            self._file = open(path, "wb")
        except OSError as exc:
            self._spill_failed(exc)
            return
        for chunk in self._chunks:
            self._write(chunk)

    def _write(self, chunk: bytes) -> None:
        if self._file is None:
            return
        try:
            self._file.write(chunk)
            self._file.flush()
        except OSError as exc:
            self._spill_failed(exc)

    def _spill_failed(self, exc: OSError) -> None:
        """Stop writing the file and remove what was written (a full /tmp gets its space
        back); the notice says why there is no file."""
        self.spill_error = f"cannot write {self.full_output_path}: {exc.strerror or exc}"
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
            try:
                os.unlink(self.full_output_path)  # type: ignore[arg-type]
            except OSError:
                pass

    def text(self) -> str:
        return b"".join(self._chunks).decode("utf-8", "replace")

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                self._spill_failed(exc)


def _truncation(output: _Output) -> TruncationResult:
    """``truncate_tail`` of the buffer, with the whole output's totals.

    When the buffer no longer holds everything it holds at least 100 KiB, more than the 50KB
    kept, so the result is truncated and its kept lines are whole lines of the output (or the
    last line's tail)."""
    truncation = truncate_tail(output.text(), max_lines=DEFAULT_MAX_LINES, max_bytes=DEFAULT_MAX_BYTES)
    if not truncation.truncated and output.complete:
        return truncation
    return dataclasses.replace(
        truncation, truncated=True, total_bytes=output.total_bytes, total_lines=output.total_lines
    )


def _details(truncation: TruncationResult, path: str | None) -> dict:
    details: dict[str, Any] = {}
    if truncation.truncated:
        details["truncation"] = truncation.to_json()
    if path is not None:
        details["fullOutputPath"] = path
    return details


def _partial_result(output: _Output) -> dict:
    truncation = _truncation(output)
    path = output.ensure_spill() if truncation.truncated else output.full_output_path
    return {
        "content": [{"type": "text", "text": truncation.content}],
        "details": _details(truncation, path),
    }


def _final_text(output: _Output, empty_text: str) -> tuple[str, dict | None]:
    truncation = _truncation(output)
    text = truncation.content or empty_text
    if not truncation.truncated:
        return text, None
    path = output.ensure_spill()
    where = f"Full output: {path}" if path is not None else f"Full output not saved: {output.spill_error}"
    first = truncation.total_lines - truncation.output_lines + 1
    last = truncation.total_lines
    if truncation.last_line_partial:
        notice = (
            f"[Showing last {format_size(truncation.output_bytes)} of line {last} "
            f"(line is {format_size(output.last_line_bytes)}). {where}]"
        )
    elif truncation.truncated_by == "lines":
        notice = f"[Showing lines {first}-{last} of {truncation.total_lines}. {where}]"
    else:
        notice = (
            f"[Showing lines {first}-{last} of {truncation.total_lines} "
            f"({format_size(DEFAULT_MAX_BYTES)} limit). {where}]"
        )
    return text + "\n\n" + notice, _details(truncation, path)


def _with_status(text: str, status: str) -> str:
    return f"{text}\n\n{status}" if text else status


class _Pump:
    """Reads the merged output into ``output`` and reports each chunk to ``on_update``.

    A failure while doing so (``on_update`` raising, the spill file failing) is kept in
    :attr:`failure` and stops the call, so it can be raised bare rather than wrapped in the
    nursery's exception group.
    """

    def __init__(self, output: _Output, on_update: Callable[[dict], Awaitable[None]] | None) -> None:
        self.output = output
        self.on_update = on_update
        self.eof = trio.Event()
        self.failure: Exception | None = None

    async def run(self, proc: GroupProcess, stop: trio.CancelScope) -> None:
        try:
            while True:
                chunk = await proc.read_output(_READ_SIZE)
                if not chunk:
                    break
                self.output.add(chunk)
                if self.on_update is not None:
                    await self.on_update(_partial_result(self.output))
        except Exception as exc:  # noqa: BLE001 - re-raised by _supervise
            self.failure = exc
            stop.cancel()
            return
        self.eof.set()


def _parse_args(args: dict[str, Any]) -> tuple[str, float | None]:
    command = args.get("command")
    if not isinstance(command, str):
        raise ToolError('Validation failed for tool "bash":\n  - command: must be string')
    timeout = args.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout):
            raise ToolError('Validation failed for tool "bash":\n  - timeout: must be number')
    return command, timeout


async def run_bash(
    args: dict[str, Any],
    *,
    cwd: str,
    on_update: Callable[[dict], Awaitable[None]] | None = None,
    abort: AbortFlag | None = None,
    shell_path: str | None = None,
    command_prefix: str | None = None,
) -> dict:
    """Run ``args.command`` (module docstring). ``shell_path`` (setting ``shellPath``): the
    shell run as ``<shell_path> -c``, instead of bash; one that does not exist here is the
    ToolError ``Custom shell path not found: <path>`` (pi's). ``command_prefix`` (setting
    ``shellCommandPrefix``): put on its own line before the command, as pi's."""
    command, timeout = _parse_args(args)
    await trio.lowlevel.checkpoint_if_cancelled()
    if not os.path.exists(cwd):
        raise ToolError(f"Working directory does not exist: {cwd}\nCannot execute bash commands.")
    if command_prefix:
        command = f"{command_prefix}\n{command}"
    if shell_path and not os.path.exists(shell_path):
        raise ToolError(f"Custom shell path not found: {shell_path}")
    shell = shell_path or _shell()
    try:
        proc = GroupProcess.spawn([shell, "-c", command], cwd=cwd)
    except OSError as exc:
        raise ToolError(f"spawn {shell} {errno.errorcode.get(exc.errno or 0, str(exc))}") from None
    except subprocess.SubprocessError as exc:
        raise ToolError(f"spawn {shell} failed: {exc}") from None

    output = _Output()
    try:
        ending = await _supervise(proc, output, timeout, on_update, abort)
        output.close()
        if ending == "timeout":
            assert timeout is not None  # only a timeout that was set can elapse
            text, _ = _final_text(output, "")
            raise ToolError(_with_status(text, f"Command timed out after {_js_number(timeout)} seconds"))
        if ending == "abort":
            text, _ = _final_text(output, "")
            raise ToolError(_with_status(text, "Command aborted"))
        text, details = _final_text(output, "(no output)")
    finally:
        output.close()

    code = proc.returncode
    if code is not None and code > 0:
        raise ToolError(_with_status(text, f"Command exited with code {code}"))
    return {"content": [{"type": "text", "text": text}], "details": details}


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def _supervise(
    proc: GroupProcess,
    output: _Output,
    timeout: float | None,
    on_update: Callable[[dict], Awaitable[None]] | None,
    abort: AbortFlag | None = None,
) -> str:
    """Collect output until the shell exits, times out or ``abort`` is set; always leaves the
    group dead and the shell reaped, also when cancelled. Returns ``"exit"``, ``"timeout"``
    or ``"abort"``. After a timeout or an abort the output the group still had in the pipe
    is read too (up to ``_DRAIN_LIMIT``), so nothing it wrote before it died is lost."""
    ending = "exit"
    pump = _Pump(output, on_update)
    deadline = math.inf
    if timeout is not None and timeout > 0:
        deadline = trio.current_time() + timeout
    timer = trio.CancelScope(deadline=deadline)
    aborted = False
    take_back: Callable[[], None] | None = None

    def on_abort() -> None:
        nonlocal aborted
        aborted = True
        timer.cancel()

    async def watch_abort(event: AbortFlag) -> None:
        await event.wait()
        on_abort()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump.run, proc, nursery.cancel_scope)
            if abort is not None:
                on_set = getattr(abort, "on_set", None)
                if on_set is not None:  # told when it is set: no watcher task per command
                    take_back = on_set(on_abort)
                else:
                    nursery.start_soon(watch_abort, abort)
            with timer:
                await proc.wait_exited()
            if timer.cancelled_caught:
                ending = "abort" if aborted else "timeout"
                await proc.terminate(_TERM_GRACE)
            # Background children die with the call.
            proc.signal_group(signal.SIGKILL)
            with trio.move_on_after(_DRAIN_LIMIT):
                await _ready.wait(pump.eof)
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # Cancelled in both tasks arrives as a group; hand the caller a plain Cancelled.
        cancelled, rest = group.split(trio.Cancelled)
        if rest is None and cancelled is not None:
            raise _first_leaf(cancelled) from None
        raise
    finally:
        if take_back is not None:
            take_back()
        with trio.CancelScope(shield=True):
            await proc.shutdown(_TERM_GRACE)
    if pump.failure is not None:
        raise pump.failure
    return ending
