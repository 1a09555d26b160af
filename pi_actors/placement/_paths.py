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
- :func:`rebase_prompt_cwd` — a system prompt whose last line names the working directory
  (``Current working directory: …``, as ``coding.system_prompt`` ends it) told the moved one.

(``in_root`` and ``from_root`` live with the session files, ``coding.session.roots``, which
store their header's paths the same way.) Pure functions, no I/O: roots are compared as given after ``os.path.normpath`` (a caller
that wants symlinks resolved passes ``realpath``'d roots).
"""

from __future__ import annotations

import os
from typing import Any

from ..coding.session.roots import from_root, in_root

__all__ = ["from_root", "in_root", "rebase_paths", "rebase_prompt_cwd"]


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


#: The last line of a built system prompt (``coding.system_prompt``): where the session works.
_CWD_LINE = "Current working directory: "


def rebase_prompt_cwd(prompt: str, old_cwd: str, new_cwd: str) -> str:
    """``prompt`` with its last line ``Current working directory: OLD`` made to name
    ``new_cwd``, so the model is told where its tools really run; any other prompt (a custom
    one that does not end so, or one naming another directory) is returned unchanged."""
    head, sep, last = prompt.rpartition("\n")
    if last != _CWD_LINE + old_cwd.replace(os.sep, "/") or old_cwd == new_cwd:
        return prompt
    return head + sep + _CWD_LINE + new_cwd.replace(os.sep, "/")
