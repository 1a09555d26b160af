"""Finding the few shared libraries the sandbox loads, without running ``ldconfig``.

``ctypes.util.find_library(name)`` on Linux runs ``/sbin/ldconfig -p`` (a fork and an exec,
2-3 ms of CPU each time) and answers the library's soname. The tool pool and the zygote
call it through their imports: trio (``pthread``, at import), pyseccomp (``c`` and
``seccomp``, at import) — several ``ldconfig`` runs on the way to the first tool call.

:func:`without_ldconfig` is a context manager during which ``find_library`` answers those
names with their soname directly when the dynamic loader can load it (the same answer
``ldconfig -p`` gives on a glibc system), and asks the real ``find_library`` for anything
else or when the soname does not load (musl, an unusual layout). Nothing is loaded that
would not have been: the library found is the one ``dlopen`` finds by that soname.

Thread-safe and re-entrant: the real function is put back when the last user leaves.

A leaf module (it imports nothing of pi_actors): the zygote enters it before its first import
of trio, which ``pi_actors.coding``'s package imports.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["without_ldconfig", "SONAMES"]

#: Library name (as given to ``find_library``) → its soname on glibc Linux.
SONAMES = {"c": "libc.so.6", "pthread": "libpthread.so.0", "seccomp": "libseccomp.so.2"}

_lock = threading.Lock()
_users = 0
_real: Any = None  # the real find_library while replaced


def _find(name: str) -> str | None:
    soname = SONAMES.get(name)
    if soname is not None:
        try:
            ctypes.CDLL(soname)
        except OSError:
            pass
        else:
            return soname
    real = _real or ctypes.util.find_library  # kept past the block: the real one is back
    return real(name)


@contextmanager
def without_ldconfig() -> Iterator[None]:
    """Within it, ``ctypes.util.find_library`` answers the names in :data:`SONAMES` without
    running ``ldconfig`` (see the module docstring)."""
    global _users, _real
    with _lock:
        if _users == 0:
            _real = ctypes.util.find_library
            ctypes.util.find_library = _find
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                assert _real is not None
                ctypes.util.find_library = _real
                _real = None
