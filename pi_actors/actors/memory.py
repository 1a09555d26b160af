"""Memory hygiene for a long-lived actor: hand the C allocator's free pages back to the system.

Why: a session's coordinator lives as long as the session. Each run allocates and frees a
lot of short-lived memory (frames, encoded lines, tool output, decoded events); blocks of
more than 512 bytes come from the C allocator (glibc malloc, one arena per thread that
allocated), which keeps freed pages mapped as long as a live block sits above them. Over a
long session that shows as resident memory growing faster than what is kept (measured in
rpc mode: ~1.5-2x the bytes still alive; benchmarks/NOTES-r7-perf-mem.md).
``malloc_trim(0)`` returns the free pages of every arena (``madvise``), not only the top of
the main heap. It takes well under a millisecond for a coordinator's heap, so the
coordinator calls it once per run, when the run ends — never per turn or per event.

This is hygiene, not a way to keep less: what the coordinator keeps per message is made
small where it is kept (the transcript's Structs, the session writer's index).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

__all__ = ["release_free_memory"]

_trim: Callable[[int], int] | None = None
_looked_up = False


def release_free_memory() -> bool:
    """Return the C allocator's free pages to the system (glibc ``malloc_trim(0)``).

    Returns True if memory was released, False if there was none to release or the C
    library has no ``malloc_trim`` (musl, macOS: nothing to do there). Never raises; does
    not block on anything but the allocator's own locks (other threads' allocations wait
    for it, briefly)."""
    global _trim, _looked_up
    if not _looked_up:
        _looked_up = True
        try:
            function = ctypes.CDLL(None).malloc_trim
        except (AttributeError, OSError):
            _trim = None
        else:
            function.argtypes = [ctypes.c_size_t]
            function.restype = ctypes.c_int
            _trim = function
    if _trim is None:
        return False
    return bool(_trim(0))
