"""A session's workspace, made where the session runs.

A :class:`~._api.SessionJob` names its working directory in one of two ways, and whichever
placement runs it turns that into a directory of the machine it runs on:

- ``cwd`` relative to a *workspace root* (``job.root`` on the driver, ``job.node_root`` on
  the node, by default the same path): :func:`session_cwd` resolves it under the node's root
  (``_paths.from_root``), so a node whose checkouts live elsewhere still finds the task's
  directory; a ``cwd`` with no root is an absolute directory of the node, as given.
- a git ``workspace`` (:class:`Checkout`: repository and ref): :func:`checkout` clones it into
  a fresh directory and detaches at the ref — the local placement in the job's
  ``Checkout.directory`` (kept after the run, so it can be looked at), the Ray placement in a
  per-task temporary directory on the node (removed when the task ends).

The session file's header records the directory the session ran in — a node's path. So
that the file resumes on the driver, :func:`rewrite_header_cwd` replaces it with the driver's
path (the root mapping's inverse) once the session has ended.

Repositories: a URL (``https://``, ``ssh://``, ``git://``, ``file://``, or git's
``user@host:path``) is cloned as given; a plain path is a directory of the driver
(:func:`is_url` tells them apart) and is reachable by a local placement only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from typing import Annotated

import msgspec
import trio

from ..coding.session.format import encode_line
from ._paths import from_root

__all__ = ["Checkout", "checkout", "is_url", "rewrite_header_cwd", "session_cwd"]


class Checkout(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A git repository (URL, or a path on the driver) and the ref to check out into a fresh
    workspace. ``directory``: where a local placement makes it (removed first if it exists);
    None — and always on a Ray node — a temporary directory removed after the session."""

    repo: Annotated[str, msgspec.Meta(min_length=1)]
    ref: Annotated[str, msgspec.Meta(min_length=1)] = "HEAD"
    directory: str | None = None


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCP = re.compile(r"^[^/:]+:")  # git's "user@host:path" (a colon before any slash)


def is_url(repo: str) -> bool:
    """Whether ``repo`` names a repository by URL (reachable from any machine that can reach
    its host) rather than by a path of this machine."""
    return bool(_SCHEME.match(repo) or _SCP.match(repo))


async def checkout(repo: str, ref: str, directory: str) -> str | None:
    """Clone ``repo`` into ``directory`` (removed first if it exists; its parent is made) and
    check out ``ref`` detached. Returns None, or one line saying which step failed and what
    git said last. Cancellation kills git (``trio.run_process``)."""
    try:
        if os.path.lexists(directory):
            shutil.rmtree(directory)
        os.makedirs(os.path.dirname(directory) or ".", exist_ok=True)
    except OSError as exc:
        return f"cannot prepare {directory}: {exc.strerror or exc}"
    for argv in (
        ["git", "clone", "--quiet", "--no-checkout", "--", repo, directory],
        ["git", "-C", directory, "checkout", "--quiet", "--detach", ref, "--"],
    ):
        try:
            done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, stdin=b"")
        except OSError as exc:
            return f"cannot run git: {exc.strerror or exc}"
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            step = "clone" if argv[1] == "clone" else f"checkout {ref}"
            return f"{step} failed: {said[-1].strip() if said else f'exit code {done.returncode}'}"
    return None


def session_cwd(cwd: str, root: str | None, node_root: str | None) -> str:
    """The directory a job's session works in on this machine: ``cwd`` resolved under
    ``node_root`` (default ``root``) when the job has a root, else ``cwd`` as given. Raises
    ValueError for a relative ``cwd`` that leaves its root, or one without a root."""
    if root is None:
        if not os.path.isabs(cwd):
            raise ValueError(f"a working directory without a workspace root must be absolute: {cwd!r}")
        return cwd
    return from_root(cwd, node_root or root)


def rewrite_header_cwd(path: str, cwd: str) -> None:
    """Set the ``cwd`` of the session file at ``path``'s header (its first line) to ``cwd``,
    leaving every other byte as it was; the file is replaced atomically. A file whose first
    line is not a session header is left alone. Raises OSError when it cannot be rewritten."""
    with open(path, "rb") as f:
        first = f.readline()
        rest = f.read()
    try:
        header = json.loads(first)
    except ValueError:
        return
    if not isinstance(header, dict) or header.get("type") != "session" or header.get("cwd") == cwd:
        return
    header["cwd"] = cwd
    directory = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".cwd-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(encode_line(header) + rest)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, os.stat(path).st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
