"""Local placement: each session is a headless ``pi-actors --mode json`` process on this
machine — the CLI's own print path, with its usual actor runtime (provider, tool pool,
coordinator, store) under it.

The process is forked from the trio thread (not a worker thread: Linux sends the
parent-death signal when the forking *thread* ends) and dies with this process, as its
actors die with it: a driver killed with SIGKILL leaves no session running. Its stdout
events are folded as they come (:class:`EventFold`), so limits are enforced live: a turn
past ``limits.turns`` or tokens past ``limits.tokens`` stop it at once; ``wall_time`` bounds
the whole run.

The working directory is made before the session starts (:meth:`LocalPlacement.run`,
``_workspace``): a git checkout, or a ``cwd`` resolved under the job's node root; after the
session the file's header is given the driver's path of that directory.

How an end is judged (``_judge``): every prompt's run ended and the last reply is not an
error -> ok; the last reply's error -> ``classify_model_error``; a process that died (a
signal, or a non-zero exit after the session started) -> ``infra``; a process that refused
the task before starting (one ``Error:`` line: unknown model, bad option) -> ``agent``.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import msgspec
import trio

from ..runtime.child import set_parent_death_signal
from ._api import Limits, SessionJob, SessionOutcome
from ._events import EventFold
from ._paths import from_root
from ._workspace import checkout, rewrite_header_cwd, session_cwd

__all__ = ["LocalPlacement", "default_command"]

#: How long a stopped session may take to exit after SIGTERM before it is killed.
_STOP_GRACE = 5.0


def default_command() -> list[str]:
    """The CLI of this installation: ``pi-actors`` beside the running interpreter."""
    return [str(Path(sys.executable).with_name("pi-actors"))]


class _Stop(Exception):
    """A limit was reached: the session is stopped with an ``agent`` failure."""


class LocalPlacement:
    """Runs sessions as local processes, at most ``slots`` at once (the runner's limit).

    ``command``: the argv prefix of the headless CLI (default :func:`default_command`);
    ``env``: the base environment of every session (default: ours), to which a job's
    ``env`` is added."""

    name = "local"

    def __init__(self, slots: int, *, command: Sequence[str] | None = None, env: dict[str, str] | None = None) -> None:
        if slots < 1:
            raise ValueError(f"a local placement needs at least one slot, not {slots}")
        self.slots = slots
        self.command = list(command or default_command())
        self.env = dict(os.environ if env is None else env)
        self.node = socket.gethostname()

    async def aclose(self) -> None:
        """Nothing is held between sessions."""

    def open_session(self, config: Any, **options: Any) -> Any:
        """A served session on this machine (``placement._serve.open_local_session``: the
        ``SessionHost`` side of this placement, for ``pi-actors serve``)."""
        from ._serve import open_local_session

        return open_local_session(config, **options)

    def argv(self, job: SessionJob) -> list[str]:
        """The command line of ``job``'s session: JSON events, its session directory, its
        model and tools, then ``--`` and the prompts (a prompt may start with ``-``)."""
        argv = [*self.command, "--mode", "json", "--session-dir", job.session_dir]
        if job.model:
            argv += ["--model", job.model]
        if job.tools is not None:
            argv += ["--tools", ",".join(job.tools)] if job.tools else ["--no-tools"]
        return [*argv, "--", *job.prompts]

    async def run(self, job: SessionJob) -> SessionOutcome:
        """Run ``job`` to its end (module docstring); never raises for the session's failure.

        Its working directory is made here first (``_workspace``): a git ``workspace`` is
        checked out into ``job.workspace.directory`` (or a temporary directory removed
        afterwards), a ``cwd`` under a root is resolved under ``job.node_root``. A checkout
        that fails, or a working directory that does not exist, is an ``infra`` outcome."""
        started = time.time()
        if job.workspace is None:
            try:
                cwd = session_cwd(job.cwd, job.root, job.node_root)
            except ValueError as exc:
                return self._outcome(EventFold(), started, "agent", str(exc))
            if not os.path.isdir(cwd):
                return self._outcome(EventFold(), started, "infra", f"the working directory {cwd} does not exist on {self.node}")
            outcome = await self._run_in(job, cwd, started)
            if job.root is not None and outcome.session_file is not None:
                try:  # the header names the driver's directory, so the file resumes there
                    rewrite_header_cwd(outcome.session_file, from_root(job.cwd, job.root))
                except OSError as exc:
                    error = f"cannot rewrite the session file's header {outcome.session_file}: {exc.strerror or exc}"
                    return msgspec.structs.replace(outcome, ok=False, error_kind="infra", error=error)
            return outcome
        if job.workspace.directory is not None:
            return await self._run_checkout(job, job.workspace.directory, started)
        with tempfile.TemporaryDirectory(prefix="pi-actors-workspace-") as private:
            return await self._run_checkout(job, os.path.join(private, "workspace"), started)

    async def _run_checkout(self, job: SessionJob, directory: str, started: float) -> SessionOutcome:
        """Check ``job.workspace`` out into ``directory`` and run the session there."""
        assert job.workspace is not None
        failed = await checkout(job.workspace.repo, job.workspace.ref, directory)
        if failed is not None:
            return self._outcome(EventFold(), started, "infra", f"workspace: {failed}")
        return await self._run_in(job, directory, started)

    async def _run_in(self, job: SessionJob, cwd: str, started: float) -> SessionOutcome:
        """Run the session of ``job`` in the directory ``cwd``."""
        fold = EventFold()
        try:
            os.makedirs(job.session_dir, exist_ok=True)
        except OSError as exc:
            return self._outcome(fold, started, "infra", f"cannot make the session directory {job.session_dir}: {exc}")
        with tempfile.TemporaryFile() as errors:
            try:
                proc, stdout = self._spawn(job, cwd, errors)
            except OSError as exc:
                return self._outcome(fold, started, "infra", f"cannot start the session: {exc}", job)
            stopped: str | None = None
            try:
                with trio.move_on_after(job.limits.wall_time or float("inf")) as timer:
                    try:
                        await _read_events(stdout, fold, job.limits)
                    except _Stop as exc:
                        stopped = str(exc)
                if timer.cancelled_caught:
                    stopped = f"wall time limit ({job.limits.wall_time:g} s) reached"
                if stopped is not None:
                    proc.terminate()
                    with trio.move_on_after(_STOP_GRACE):
                        await _reap(proc)
                    if proc.returncode is None:
                        proc.kill()
                code = await _reap(proc)
            finally:
                # Also when cancelled (Ctrl-C): no session outlives its run.
                if proc.returncode is None:
                    proc.kill()
                    with trio.CancelScope(shield=True):
                        await _reap(proc)
                stdout.close()
            if stopped is not None:
                return self._outcome(fold, started, "agent", stopped, job)
            errors.seek(0)
            stderr = errors.read().decode(errors="replace")
        kind, message = _judge(fold, code, stderr, len(job.prompts))
        return self._outcome(fold, started, kind, message, job)

    def _spawn(self, job: SessionJob, cwd: str, errors: IO[bytes]) -> tuple[subprocess.Popen[bytes], trio.lowlevel.FdStream]:
        """Fork the session in ``cwd`` from this thread, its stdout on a pipe we read, stderr into
        ``errors``; it gets the parent-death signal."""
        read_end, write_end = os.pipe()
        parent = os.getpid()

        def die_with_parent() -> None:
            set_parent_death_signal(signal.SIGKILL)
            if os.getppid() != parent:  # the parent died before the signal was armed
                os._exit(1)

        try:
            proc = subprocess.Popen(
                self.argv(job), cwd=cwd, env={**self.env, **job.env}, stdin=subprocess.DEVNULL,
                stdout=write_end, stderr=errors, close_fds=True, preexec_fn=die_with_parent,
            )  # fmt: skip
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        return proc, trio.lowlevel.FdStream(read_end)

    def _outcome(
        self, fold: EventFold, started: float, kind: str | None, error: str | None, job: SessionJob | None = None
    ) -> SessionOutcome:
        return SessionOutcome(
            ok=kind is None,
            text=fold.text,
            usage=dict(fold.usage),
            cost=round(fold.cost, 10),
            turns=fold.turns,
            session_file=_session_file(job.session_dir, fold.session_id) if job is not None else None,
            node=self.node,
            started=started,
            ended=time.time(),
            error_kind=kind,  # type: ignore[arg-type]
            error=error,
        )


async def _read_events(stream: trio.lowlevel.FdStream, fold: EventFold, limits: Limits) -> None:
    """Fold every line of ``stream`` until end of file; raise :class:`_Stop` once a limit is
    passed (a turn started past ``limits.turns``, or ``limits.tokens`` exceeded). A line that
    is not JSON is skipped (the CLI writes only events there)."""
    pending = b""
    while True:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            fold.feed(event)
            if limits.turns is not None and fold.turns > limits.turns:
                raise _Stop(f"turn limit ({limits.turns}) reached")
            if limits.tokens is not None and fold.usage["totalTokens"] > limits.tokens:
                raise _Stop(f"token limit ({limits.tokens}) reached: {fold.usage['totalTokens']} tokens used")


async def _reap(proc: subprocess.Popen[bytes]) -> int:
    """Wait for ``proc`` to exit without blocking the loop (a pidfd); its return code."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except OSError:  # already reaped
        return proc.wait()
    try:
        while proc.poll() is None:
            try:
                await trio.lowlevel.wait_readable(pidfd)
            except BaseException:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                raise
    finally:
        os.close(pidfd)
    return proc.returncode


def _judge(fold: EventFold, code: int, stderr: str, prompts: int) -> tuple[str | None, str | None]:
    """The outcome's (error_kind, error) from how the process ended (module docstring)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    said = lines[-1].strip() if lines else ""
    if code < 0:
        return "infra", f"the session process was killed by {signal.Signals(-code).name}" + (f" ({said})" if said else "")
    if code != 0 or fold.runs_ended < prompts:
        if fold.session_id is None and said.startswith("Error:"):
            return "agent", said.removeprefix("Error:").strip()
        return "infra", f"the session process exited with code {code} before the end" + (f": {said}" if said else "")
    error = fold.model_error()
    if error is not None:
        return error
    return None, None


def _session_file(directory: str, session_id: str | None) -> str | None:
    """The session file of ``session_id`` in ``directory`` (``<time>_<id>.jsonl``), if any."""
    if session_id is None:
        return None
    found = glob.glob(os.path.join(glob.escape(directory), f"*_{glob.escape(session_id)}.jsonl"))
    return found[0] if found else None
