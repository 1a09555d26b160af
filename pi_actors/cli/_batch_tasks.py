"""The batch task file (``pi-actors batch TASKS.jsonl``): one JSON object per line.

``{"id": "t1", "prompt": "..."}`` at its simplest; the fields (unknown ones are refused, a
typo would otherwise be silently ignored):

- ``id`` (string, unique in the file) — names the task in the results;
- ``prompt`` (string) or ``prompts`` (non-empty list of strings, one run each) — exactly one;
- ``cwd`` (a directory, relative to the driver's directory; it must lie under the workspace
  root, ``batch --workspace-root``, default the driver's directory) or ``workspace``
  (``{"repo": URL-or-path, "ref": "main"}``: cloned and checked out into a fresh directory
  for each attempt, where the session runs) — at most one; default: the driver's directory.
  For a remote placement (``remote=True``: Ray) the ``cwd`` is not looked for on the driver
  (it must exist under every node's root) and a ``repo`` must be a URL — a path of the
  driver is refused, as the nodes cannot reach it (``file://`` names a shared one);
- ``model`` (``provider/id``), ``tools`` (list of tool names; ``[]`` for none);
- ``limits``: ``{"turns": N, "tokens": N, "wall_time": seconds}``, each optional and > 0.

Blank lines are skipped. :func:`read_tasks` raises :class:`TaskFileError` with one line
naming the file, the line number and the field.
"""

from __future__ import annotations

import os
import re
from typing import Annotated

import msgspec

from ..placement import Limits, in_root, is_url

__all__ = ["Task", "TaskFileError", "Workspace", "parse_task", "read_tasks"]

_Positive = Annotated[int, msgspec.Meta(gt=0)]


class _Limits(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    turns: _Positive | None = None
    tokens: _Positive | None = None
    wall_time: Annotated[float, msgspec.Meta(gt=0)] | None = None


class Workspace(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A git repository (URL or path) and the ref to check out into a fresh workspace."""

    repo: Annotated[str, msgspec.Meta(min_length=1)]
    ref: Annotated[str, msgspec.Meta(min_length=1)] = "HEAD"


class _Line(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    id: Annotated[str, msgspec.Meta(min_length=1)]
    prompt: str | None = None
    prompts: Annotated[list[str], msgspec.Meta(min_length=1)] | None = None
    cwd: str | None = None
    workspace: Workspace | None = None
    model: str | None = None
    tools: list[str] | None = None
    limits: _Limits = msgspec.field(default_factory=_Limits)


class Task(msgspec.Struct, kw_only=True):
    """One task as the runner uses it: ``cwd`` absolute (None with a ``workspace``)."""

    id: str
    prompts: list[str]
    line: int
    cwd: str | None = None
    workspace: Workspace | None = None
    model: str | None = None
    tools: list[str] | None = None
    limits: Limits = msgspec.field(default_factory=Limits)


class TaskFileError(Exception):
    """A task file that cannot be used; the message is one line for the user."""


_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$")


def _field_error(path: str, number: int, exc: msgspec.MsgspecError) -> TaskFileError:
    """msgspec's "Expected `int`, got `str` - at `$.limits.turns`" as "FILE line N: field
    limits.turns: expected `int`, got `str`"."""
    match = _AT.match(str(exc))
    assert match is not None  # the pattern matches any text
    what, where = match["what"], (match["path"] or "").lstrip(".")
    unknown = re.match(r"Object contains unknown field `([^`]*)`", what)
    if unknown:
        field = f"{where}.{unknown[1]}" if where else unknown[1]
        return TaskFileError(f"{path} line {number}: unknown field {field!r}")
    if where:
        return TaskFileError(f"{path} line {number}: field {where!r}: {what[:1].lower()}{what[1:]}")
    return TaskFileError(f"{path} line {number}: {what[:1].lower()}{what[1:]}")


def parse_task(text: str | bytes, *, path: str, number: int, base: str, root: str | None = None, remote: bool = False) -> Task:
    """One line of the file as a :class:`Task` (``base``: the directory a relative ``cwd``
    or repository path is taken from; ``root``: the workspace root a ``cwd`` must lie in,
    default ``base``; ``remote``: module docstring). Raises :class:`TaskFileError`."""
    try:
        line = msgspec.json.decode(text, type=_Line)
    except msgspec.ValidationError as exc:
        raise _field_error(path, number, exc) from None
    except msgspec.DecodeError as exc:
        raise TaskFileError(f"{path} line {number}: not a JSON object ({exc})") from None
    if (line.prompt is None) == (line.prompts is None):
        raise TaskFileError(f"{path} line {number}: field 'prompt': give exactly one of 'prompt' or 'prompts'")
    if line.cwd is not None and line.workspace is not None:
        raise TaskFileError(f"{path} line {number}: field 'workspace': give at most one of 'cwd' or 'workspace'")
    cwd = None
    workspace = line.workspace
    if workspace is None:
        cwd = os.path.abspath(os.path.join(base, os.path.expanduser(line.cwd or ".")))
        root = os.path.abspath(root if root is not None else base)
        if in_root(cwd, root) is None:
            raise TaskFileError(f"{path} line {number}: field 'cwd': {cwd} is outside the workspace root {root}")
        if not remote and not os.path.isdir(cwd):
            raise TaskFileError(f"{path} line {number}: field 'cwd': {cwd} is not a directory")
    elif not is_url(workspace.repo):
        repo = os.path.abspath(os.path.join(base, os.path.expanduser(workspace.repo)))
        if remote:
            raise TaskFileError(
                f"{path} line {number}: field 'workspace.repo': {workspace.repo} is a path on this machine, which the nodes "
                f"cannot reach; give a URL (file://{repo} if every node shares that path)"
            )
        workspace = Workspace(repo=repo, ref=workspace.ref)
    return Task(
        id=line.id,
        prompts=[line.prompt] if line.prompt is not None else list(line.prompts or []),
        line=number,
        cwd=cwd,
        workspace=workspace,
        model=line.model,
        tools=line.tools,
        limits=Limits(turns=line.limits.turns, tokens=line.limits.tokens, wall_time=line.limits.wall_time),
    )


def read_tasks(path: str, *, base: str | None = None, root: str | None = None, remote: bool = False) -> list[Task]:
    """Every task of the file at ``path``, in order (``base`` default: the current directory;
    ``root``, ``remote``: :func:`parse_task`). Raises :class:`TaskFileError` for a file that
    cannot be read, a bad line, or an id given twice (naming both lines)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise TaskFileError(f"cannot read the task file {path}: {exc.strerror or exc}") from None
    base = base if base is not None else os.getcwd()
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for number, text in enumerate(data.split(b"\n"), start=1):
        if not text.strip():
            continue
        task = parse_task(text, path=path, number=number, base=base, root=root, remote=remote)
        if task.id in seen:
            raise TaskFileError(f"{path} line {number}: field 'id': {task.id!r} was already given on line {seen[task.id]}")
        seen[task.id] = number
        tasks.append(task)
    return tasks
