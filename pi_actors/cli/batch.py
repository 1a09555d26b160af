"""``pi-actors batch TASKS.jsonl --out RESULTS.jsonl [--local N | --ray ADDRESS]``: run many
headless sessions, one per task line, and write a result line for each (README "Running many
sessions"; the formats: ``_batch_tasks``, ``_batch_run.result_line``). ``--local`` runs them
on this machine; ``--ray`` places each on a node of a Ray cluster (the ``ray`` extra) with
the resources ``--per-session-cpus``/``--per-session-memory``/``--resources`` declare.
A task's ``cwd`` lies under ``--workspace-root`` (default: the current directory) and is
resolved where the session runs under ``--node-workspace-root`` (default: the same path);
a git ``workspace`` is checked out where the session runs (``placement._workspace``).

Exit code: 0 when every task run by this invocation ended ok, 1 when one failed or the input
was bad (one line on stderr naming the file, the line and the field), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from ._usage import CliParser

    p = CliParser(prog="pi-actors batch", description="Run one headless session per task line; append a result line per task.")
    p.add_argument("tasks", metavar="TASKS.jsonl", help="the tasks, one JSON object per line")
    p.add_argument("--out", required=True, metavar="RESULTS.jsonl", help="where result lines are appended (re-running skips ids done)")
    p.add_argument("--local", type=int, default=None, metavar="N", help="run N sessions at once on this machine (default: 1)")
    p.add_argument("--ray", metavar="ADDRESS", help="place sessions on the Ray cluster at ADDRESS (host:port, or auto); needs pi-actors[ray]")
    p.add_argument("--per-session-cpus", type=float, default=None, metavar="N", help="--ray: CPUs each session reserves (default: 1)")
    p.add_argument("--per-session-memory", default=None, metavar="SIZE", help="--ray: memory each session reserves, e.g. 2G or 512M")
    p.add_argument("--resources", default=None, metavar="JSON", help='--ray: custom resources each session needs, e.g. \'{"tool_host": 1}\'')
    p.add_argument("--max-retries", type=int, default=2, metavar="N", help="attempts after an infrastructure failure (default: 2)")
    p.add_argument("--session-dir", metavar="DIR", help="where session files go, one folder per task (default: RESULTS.jsonl.sessions)")
    p.add_argument("--workspace-dir", metavar="DIR", help="--local: where git workspaces are checked out (default: RESULTS.jsonl.workspaces)")
    p.add_argument("--workspace-root", metavar="DIR",
                   help="task cwds must lie under DIR and are sent relative to it (default: the current directory)")  # fmt: skip
    p.add_argument("--node-workspace-root", metavar="DIR",
                   help="where the workspace root is where sessions run (default: the same path); with --ray, on every node")  # fmt: skip
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
    ray_only = [flag for flag, value in (("--per-session-cpus", args.per_session_cpus), ("--per-session-memory", args.per_session_memory),
                                         ("--resources", args.resources)) if value is not None]  # fmt: skip
    if ray_only and args.ray is None:
        return _fail(f"{ray_only[0]} needs --ray ADDRESS")
    remote = args.ray is not None
    root = os.path.abspath(os.path.expanduser(args.workspace_root or "."))
    node_root = os.path.abspath(os.path.expanduser(args.node_workspace_root)) if args.node_workspace_root else None
    if not remote:  # for Ray, the roots are directories of the nodes
        for flag, directory in (("--workspace-root", root), ("--node-workspace-root", node_root)):
            if directory is not None and not os.path.isdir(directory):
                return _fail(f"{flag}: {directory} is not a directory")
    try:
        tasks = read_tasks(args.tasks, root=root, remote=remote)
        if args.ray is not None:
            placement = make_placement("ray", **_ray_options(args))
        else:
            placement = make_placement("local", slots=args.local or 1)
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
            lambda: run_batch(tasks, placement, log, session_dir=session_dir, workspace_dir=workspace_dir, max_retries=args.max_retries,
                              root=root, node_root=node_root)
        )
    except KeyboardInterrupt:
        print("Interrupted; re-run the same command to finish the batch.", file=sys.stderr)
        return 130
    finally:
        log.close()
    return 1 if failed else 0


def _ray_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ray`` placement's options from the flags; ValueError (one line) for a bad one."""
    options: dict[str, Any] = {"address": args.ray}
    if args.per_session_cpus is not None:
        options["per_session_cpus"] = args.per_session_cpus
    if args.per_session_memory is not None:
        options["per_session_memory"] = parse_size(args.per_session_memory)
    if args.resources is not None:
        try:
            resources = json.loads(args.resources)
        except ValueError:
            resources = None
        if not isinstance(resources, dict) or not all(
            isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for k, v in resources.items()
        ):
            raise ValueError(f"--resources must be a JSON object of positive amounts, like '{{\"tool_host\": 1}}', not {args.resources!r}")
        options["resources"] = {k: float(v) for k, v in resources.items()}
    return options


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``"2G"``, ``"512M"``, ``"1.5G"``, ``"4096"`` (bytes) as bytes; ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if match is None or float(match[1]) <= 0:
        raise ValueError(f"--per-session-memory must be a size like 2G, 512M or a number of bytes, not {text!r}")
    return int(float(match[1]) * _UNITS[match[2].upper()])


def _fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1
