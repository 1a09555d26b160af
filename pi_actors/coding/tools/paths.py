"""Path handling for tool arguments (pi spec §1.2).

- :func:`expand_path`: drop one leading ``@``, turn exotic Unicode spaces into ASCII spaces,
  expand ``~`` and ``~/...`` (``~user`` is left alone).
- :func:`resolve_to_cwd`: expand, keep absolute paths as given, resolve relative ones
  against ``cwd`` (normalised, like Node's ``path.resolve``). A path with a NUL character
  (which no file system call accepts) is the ToolError Node's ``fs`` gives for it.
- :func:`resolve_read_path`: like :func:`resolve_to_cwd`, but when the file does not exist
  try the spellings macOS uses in screenshot names (narrow no-break space before AM/PM, NFD,
  curly apostrophe, NFD + curly apostrophe) and return the first that exists; otherwise the
  plain resolved path.
"""

from __future__ import annotations

import os
import re
import unicodedata

_UNICODE_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
_AM_PM = re.compile(r" (AM|PM)\.")
_NARROW_NBSP = "\u202f"


def expand_path(path: str) -> str:
    if path.startswith("@"):
        path = path[1:]
    path = _UNICODE_SPACES.sub(" ", path)
    if path == "~":
        return os.path.expanduser("~")
    if path.startswith("~/"):
        return os.path.expanduser("~") + path[1:]
    return path


def resolve_to_cwd(path: str, cwd: str) -> str:
    if "\0" in path:
        from .base import ToolError

        shown = path.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\x00")
        raise ToolError(
            f"The argument 'path' must be a string, Uint8Array, or URL without null bytes. Received '{shown}'"
        )
    expanded = expand_path(path)
    if os.path.isabs(expanded):
        return expanded
    return os.path.abspath(os.path.join(cwd, expanded))


def _exists(path: str) -> bool:
    # Like Node's access(F_OK): follows symlinks, so a dangling link does not exist.
    return os.path.exists(path)


def resolve_read_path(path: str, cwd: str) -> str:
    resolved = resolve_to_cwd(path, cwd)
    if _exists(resolved):
        return resolved
    am_pm = _AM_PM.sub(_NARROW_NBSP + r"\1.", resolved)
    nfd = unicodedata.normalize("NFD", resolved)
    curly = resolved.replace("'", "\u2019")
    nfd_curly = nfd.replace("'", "\u2019")
    for candidate in (am_pm, nfd, curly, nfd_curly):
        if candidate != resolved and _exists(candidate):
            return candidate
    return resolved
