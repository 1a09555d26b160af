"""Workspace roots: the paths that tie a session to one host, made portable.

A session's working directory, and the paths derived from it (its sandbox's workspace, the
paths it hides or mounts read-only, its extensions' directory), are absolute paths of the
machine that opened it. To resume it on another node — or on the same server after its
workspace moved — they are kept *relative to a workspace root* and resolved against the root
of wherever it runs now:

- :func:`in_root` — a path as stored: relative to the root (``"proj/sub"``; ``""`` for the
  root itself), or None when it is not inside the root (then it stays absolute).
- :func:`from_root` — a stored relative path resolved under a root; a relative path that
  would climb out of the root (``..``) or is absolute is refused (ValueError).
- :func:`rebase_paths` — every string of a configuration document (JSON-like: dicts, lists)
  that is the old root or a path inside it, moved under the new root; everything else
  (session files on the head, the agent directory) is left as it is.

(``in_root`` and ``from_root`` live with the session files, ``coding.session.roots``, which
store their header's paths the same way.) Pure functions, no I/O: roots are compared as given after ``os.path.normpath`` (a caller
that wants symlinks resolved passes ``realpath``'d roots).
"""

from __future__ import annotations

import os
from typing import Any

from ..coding.session.roots import from_root, in_root

__all__ = ["from_root", "in_root", "rebase_paths"]


def rebase_paths(doc: Any, old_root: str, new_root: str) -> Any:
    """A copy of ``doc`` with every string that is ``old_root`` or inside it moved under
    ``new_root`` (module docstring)."""
    if isinstance(doc, str):
        relative = in_root(doc, old_root) if os.path.isabs(doc) else None
        return doc if relative is None else os.path.join(new_root, relative) if relative else os.path.normpath(new_root)
    if isinstance(doc, dict):
        return {key: rebase_paths(value, old_root, new_root) for key, value in doc.items()}
    if isinstance(doc, list):
        return [rebase_paths(value, old_root, new_root) for value in doc]
    return doc
