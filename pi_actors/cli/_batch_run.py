"""Running a batch: every task not yet done, on a :class:`~pi_actors.placement.Placement`,
at most ``placement.slots`` at once; a result line per task as it finishes.

Retries: a session that ends with an ``infra`` failure runs again, up to ``max_retries``
more attempts, each with a fresh workspace when the task has one (made by the placement,
where the session runs: a failed checkout is an ``infra`` failure); an ``agent`` failure is
final at once. Only the final attempt's result is written.

Cancellation (Ctrl-C) stops the running sessions; what was written stays, and the next run
of the same command picks up the rest.
"""

from __future__ import annotations

import os
import re
from typing import Any

import msgspec
import trio

from ..placement import Checkout, Placement, SessionJob, SessionOutcome, in_root
from ._batch_progress import BatchProgress
from ._batch_results import ResultLog
from ._batch_tasks import Task

__all__ = ["result_line", "run_batch"]


def _safe(task_id: str) -> str:
    """``task_id`` as a file name: anything but letters, digits, ``.-_`` becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", task_id)[:100] or "_"


def result_line(task: Task, attempt: int, outcome: SessionOutcome) -> dict[str, Any]:
    """The result file's line for ``task``'s ``attempt`` (README "Running many sessions")."""
    line: dict[str, Any] = {
        "id": task.id,
        "ok": outcome.ok,
        "text": outcome.text,
        "usage": outcome.usage,
        "cost": outcome.cost,
        "turns": outcome.turns,
        "session_file": outcome.session_file,
        "started_at": round(outcome.started, 3),
        "ended_at": round(outcome.ended, 3),
        "seconds": round(outcome.ended - outcome.started, 3),
        "node": outcome.node,
        "attempt": attempt,
        "error_kind": outcome.error_kind,
        "error": outcome.error,
    }
    return line


def _keep_session(outcome: SessionOutcome, directory: str) -> SessionOutcome:
    """A session file that came back by value (``session_content``, from another node)
    written under ``directory`` with the name it had there; the outcome then names that file.
    A file that cannot be written makes the outcome an ``infra`` failure."""
    name = os.path.basename(outcome.session_file or "") or f"session-{int(outcome.started * 1000)}.jsonl"
    path = os.path.join(directory, name)
    try:
        os.makedirs(directory, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(outcome.session_content or "")
    except OSError as exc:
        return msgspec.structs.replace(
            outcome, ok=False, session_content=None, session_file=None, error_kind="infra",
            error=f"cannot write the session file {path}: {exc.strerror or exc}",
        )  # fmt: skip
    return msgspec.structs.replace(outcome, session_file=path, session_content=None)


async def _run_task(
    task: Task, placement: Placement, log: ResultLog, progress: BatchProgress, *, session_dir: str, workspace_dir: str,
    max_retries: int, env: dict[str, str], root: str | None, node_root: str | None,
) -> bool:  # fmt: skip
    """Run ``task`` until it is finished (module docstring); True if it ended ok."""
    for attempt in range(1, max_retries + 2):
        progress.started(task.id, attempt)
        job = SessionJob(
            id=task.id, prompts=task.prompts, cwd="", session_dir=os.path.join(session_dir, _safe(task.id)),
            model=task.model, tools=task.tools, limits=task.limits, attempt=attempt, env=env,
        )  # fmt: skip
        if task.workspace is not None:  # checked out by the placement, where the session runs
            directory = os.path.join(workspace_dir, f"{_safe(task.id)}-{attempt}")
            job.workspace = Checkout(repo=task.workspace.repo, ref=task.workspace.ref, directory=directory)
        else:
            assert task.cwd is not None
            relative = in_root(task.cwd, root) if root is not None else None
            if relative is None:
                job.cwd = task.cwd
            else:
                job.cwd, job.root, job.node_root = relative, root, node_root
        outcome = await placement.run(job)
        if outcome.session_content is not None:
            outcome = _keep_session(outcome, job.session_dir)
        final = outcome.error_kind != "infra" or attempt > max_retries
        line = result_line(task, attempt, outcome)
        if final:
            log.append(line)
        progress.finished(line, final=final)
        if final:
            return outcome.ok
    raise AssertionError("unreachable")  # pragma: no cover


async def run_batch(
    tasks: list[Task], placement: Placement, log: ResultLog, *, session_dir: str, workspace_dir: str,
    max_retries: int = 2, env: dict[str, str] | None = None, live: bool | None = None,
    root: str | None = None, node_root: str | None = None,
) -> tuple[int, int]:  # fmt: skip
    """Run every task of ``tasks`` not in ``log.done``; returns (finished ok, failed) of
    this run. ``env``: extra environment of every session; ``live``: force the display's
    mode (default: a rich bar when stderr is a terminal). ``root``: the driver's workspace
    root — a task's ``cwd`` inside it is sent relative to it, to be resolved under
    ``node_root`` (default: the same path) where the session runs; None: cwds are sent as
    they are. ``workspace_dir``: where a local placement checks workspaces out."""
    todo = [t for t in tasks if t.id not in log.done]
    counts = {"ok": 0, "failed": 0}
    slots = trio.Semaphore(placement.slots)

    async def one(task: Task) -> None:
        try:
            ok = await _run_task(task, placement, log, progress, session_dir=session_dir, workspace_dir=workspace_dir,
                                 max_retries=max_retries, env=env or {}, root=root, node_root=node_root)  # fmt: skip
        finally:
            slots.release()
        counts["ok" if ok else "failed"] += 1

    with BatchProgress(len(todo), len(tasks) - len(todo), live=live) as progress:
        try:
            async with trio.open_nursery() as nursery:
                for task in todo:  # in the file's order, each once a slot is free
                    await slots.acquire()
                    nursery.start_soon(one, task)
        finally:
            await placement.aclose()
    return counts["ok"], counts["failed"]
