"""``pi-actors batch TASKS.jsonl --out RESULTS.jsonl [--local N]``: run many headless
sessions, one per task line, and write a result line for each (README "Running many
sessions"; the formats: ``_batch_tasks``, ``_batch_run.result_line``).

Exit code: 0 when every task run by this invocation ended ok, 1 when one failed or the input
was bad (one line on stderr naming the file, the line and the field), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from ._usage import CliParser

    p = CliParser(prog="pi-actors batch", description="Run one headless session per task line; append a result line per task.")
    p.add_argument("tasks", metavar="TASKS.jsonl", help="the tasks, one JSON object per line")
    p.add_argument("--out", required=True, metavar="RESULTS.jsonl", help="where result lines are appended (re-running skips ids done)")
    p.add_argument("--local", type=int, default=None, metavar="N", help="run N sessions at once on this machine (default: 1)")
    p.add_argument("--ray", metavar="ADDRESS", help="place sessions on a Ray cluster (not available yet)")
    p.add_argument("--max-retries", type=int, default=2, metavar="N", help="attempts after an infrastructure failure (default: 2)")
    p.add_argument("--session-dir", metavar="DIR", help="where session files go, one folder per task (default: RESULTS.jsonl.sessions)")
    p.add_argument("--workspace-dir", metavar="DIR", help="where git workspaces are checked out (default: RESULTS.jsonl.workspaces)")
    return p


def main(argv: Sequence[str]) -> int:
    """Run the batch the arguments describe; the exit code (module docstring)."""
    import trio

    from ..placement import PlacementError, make_placement
    from ._batch_results import ResultLog
    from ._batch_run import run_batch
    from ._batch_tasks import TaskFileError, read_tasks

    args = _parser().parse_args(list(argv))
    if args.local is not None and args.ray is not None:
        return _fail("give one of --local or --ray")
    if args.local is not None and args.local < 1:
        return _fail(f"--local needs at least 1 session at once, not {args.local}")
    if args.max_retries < 0:
        return _fail(f"--max-retries cannot be negative ({args.max_retries})")
    try:
        placement = make_placement("ray", address=args.ray) if args.ray else make_placement("local", slots=args.local or 1)
        tasks = read_tasks(args.tasks)
        log = ResultLog.open(args.out)
    except (PlacementError, TaskFileError, ValueError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot open the result file {args.out}: {exc.strerror or exc}")
    out = os.path.abspath(args.out)
    session_dir = os.path.abspath(args.session_dir or out + ".sessions")
    workspace_dir = os.path.abspath(args.workspace_dir or out + ".workspaces")
    try:
        _ok, failed = trio.run(
            lambda: run_batch(tasks, placement, log, session_dir=session_dir, workspace_dir=workspace_dir, max_retries=args.max_retries)
        )
    except KeyboardInterrupt:
        print("Interrupted; re-run the same command to finish the batch.", file=sys.stderr)
        return 130
    finally:
        log.close()
    return 1 if failed else 0


def _fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1
