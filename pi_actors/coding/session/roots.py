"""Workspace roots: paths kept relative to a root, so that what names them survives a move.

A session's working directory and the files derived from it are absolute paths of the
machine that wrote them. A server that keeps its sessions under a workspace root (``serve
--root``) stores them relative to that root instead, and resolves them against the root of
wherever the session is opened next (another node, a moved workspace):

- :func:`in_root` — ``path`` as stored: relative to ``root`` (``""`` for the root itself),
  or None when it is not inside ``root``.
- :func:`from_root` — a stored relative path resolved under ``root``; a path that is
  absolute or climbs out of the root (``..``) is refused (ValueError).
- :func:`stored_header` / :func:`resolved_header` — a session file's header as written (its
  ``cwd`` and ``parentSession`` relative to the root when inside it) and as read back (made
  absolute again); with no root, or a path outside it, the header is unchanged, so a
  session written without a root (the plain CLI) is byte for byte what it was, and a
  header written before (absolute) still reads.

Pure functions, no I/O: paths are compared after ``os.path.normpath`` (no symlinks resolved).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["HEADER_PATHS", "from_root", "in_root", "resolved_header", "stored_header"]

#: The header fields that name paths.
HEADER_PATHS = ("cwd", "parentSession")


def in_root(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` (both absolute), or None when it is outside ``root``."""
    path, root = os.path.normpath(path), os.path.normpath(root)
    if path == root:
        return ""
    prefix = root.rstrip(os.sep) + os.sep
    return path[len(prefix) :] if path.startswith(prefix) else None


def from_root(relative: str, root: str) -> str:
    """The absolute path of ``relative`` (as :func:`in_root` gave it) under ``root``.
    Raises ValueError for an absolute path or one that leaves the root."""
    if os.path.isabs(relative):
        raise ValueError(f"a workspace-relative path cannot be absolute: {relative!r}")
    resolved = os.path.normpath(os.path.join(root, relative))
    if in_root(resolved, root) is None:
        raise ValueError(f"a workspace-relative path leaves its root: {relative!r}")
    return resolved


def stored_header(header: dict[str, Any], root: str | None) -> dict[str, Any]:
    """``header`` as written to the file: its path fields inside ``root`` made relative
    (``"."`` for the root itself). The same dict when nothing changes."""
    if root is None:
        return header
    changed: dict[str, Any] = {}
    for name in HEADER_PATHS:
        value = header.get(name)
        if isinstance(value, str) and os.path.isabs(value):
            relative = in_root(value, root)
            if relative is not None:
                changed[name] = relative or "."
    return {**header, **changed} if changed else header


def resolved_header(header: dict[str, Any], root: str | None) -> dict[str, Any]:
    """``header`` as read from a file, its relative path fields resolved under ``root``
    (absolute ones, from a header written without a root, are kept). Without a root a
    relative path is left as it is. Raises ValueError for a relative path that leaves the
    root."""
    if root is None:
        return header
    changed = {
        name: from_root(value, root)
        for name in HEADER_PATHS
        if isinstance(value := header.get(name), str) and value and not os.path.isabs(value)
    }
    return {**header, **changed} if changed else header
