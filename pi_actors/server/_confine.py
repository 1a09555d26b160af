"""Where a served session may work: inside the server's root, away from its secrets.

``confine_cwd(cwd, root, hidden)`` resolves ``cwd`` (relative to ``root``; ``realpath``, so
every symlink is followed) and returns it if it is an existing directory inside ``root``
(``root`` itself included), is not ``/``, is neither inside nor a parent of any ``hidden``
path (the server's state directory, socket directories, credential files, the agent
directory). Otherwise it raises :class:`CwdRefused` with a one-line reason naming the root.

``check_root(root)`` refuses a root of ``/`` (every path would be allowed).
"""

from __future__ import annotations

import os

__all__ = ["CwdRefused", "confine_cwd", "check_root"]


class CwdRefused(ValueError):
    pass


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip(os.sep) + os.sep)


def check_root(root: str) -> str:
    real = os.path.realpath(root)
    if real == os.sep:
        raise CwdRefused("the server's root cannot be / (choose the directory sessions may work in with --root)")
    if not os.path.isdir(real):
        raise CwdRefused(f"the server's root {root} is not a directory")
    return real


def confine_cwd(cwd: str, root: str, hidden: list[str] | tuple[str, ...] | set[str]) -> str:
    real_root = os.path.realpath(root)
    if "\x00" in cwd:
        raise CwdRefused(f"cwd {cwd!r} contains a NUL byte")
    real = os.path.realpath(os.path.join(real_root, cwd))
    where = f"(sessions must work inside the server's root {real_root})"
    if real == os.sep:
        raise CwdRefused(f"cwd {cwd!r} resolves to /, which is never allowed {where}")
    if not _inside(real, real_root):
        raise CwdRefused(f"cwd {cwd!r} resolves to {real}, outside the server's root {real_root}")
    for path in hidden:
        secret = os.path.realpath(path)
        if _inside(real, secret):
            raise CwdRefused(f"cwd {cwd!r} resolves to {real}, inside the server's private {secret} {where}")
        if _inside(secret, real):
            raise CwdRefused(f"cwd {cwd!r} resolves to {real}, which contains the server's private {secret} {where}")
    if not os.path.isdir(real):
        raise CwdRefused(f"cwd {cwd!r} ({real}) is not a directory {where}")
    return real
