"""What the sandbox adds to a tool's result, so that no limit or discarded write is silent.

Used by a sandboxed tool worker (which sees the sandbox from inside) and by the pool:

- :func:`limit_notes`: a result that says "No space left on device" gets the sizes of the
  private ``/tmp`` and ``/dev/shm`` and the settings that set them; one that says "Cannot
  allocate memory" / ``MemoryError`` gets the per-process memory limit and its setting.
- :func:`write_refused_note`: a ``write``/``edit`` refused with ``EROFS`` gets where writes
  are allowed.
- :func:`tmp_snapshot` / :func:`tmp_changed`: whether a command changed ``/tmp`` or
  ``/dev/shm`` (private to the sandbox, discarded with it); the pool then gives
  :func:`tmp_notice` once per session.
- :func:`oom_note`: a process of the call was killed by the sandbox's memory cgroup.
"""

from __future__ import annotations

import os

from . import Limits

__all__ = ["limit_notes", "write_refused_note", "tmp_snapshot", "tmp_changed", "tmp_notice", "oom_note", "append_note"]

_PRIVATE = ("/tmp", "/dev/shm")
_SNAPSHOT_LIMIT = 20000  # entries; beyond it a snapshot compares as "changed"


def _mib(size: int) -> str:
    return f"{size / 1024**2:g} MiB"


def limit_notes(text: str, limits: Limits) -> list[str]:
    notes = []
    if "No space left on device" in text:
        free = []
        for path in _PRIVATE:
            try:
                stat = os.statvfs(path)
                free.append(f"{path} has {_mib(stat.f_bavail * stat.f_frsize)} free")
            except OSError:
                continue
        notes.append(
            f"[Sandbox limit: /tmp holds at most {_mib(limits.tmp_size)} (settings.json sandbox.tmpSize) and /dev/shm "
            f"{_mib(limits.shm_size)} (sandbox.shmSize); now {', '.join(free)}.]"
        )
    if "Cannot allocate memory" in text or "MemoryError" in text:
        notes.append(
            f"[Sandbox limit: a process may use at most {_mib(limits.memory)} of memory (settings.json sandbox.memory).]"
        )
    return notes


def write_refused_note(mode: str, workspace: str) -> str:
    if mode == "workspace-write":
        return (
            f"[Sandbox: writes are allowed only in the workspace {workspace} and in /tmp (private to this session, "
            "discarded when it ends).]"
        )
    return "[Sandbox: read-only mode; writes are allowed only in /tmp (private to this session, discarded when it ends).]"


def tmp_notice(workspace: str, mode: str) -> str:
    kept = f"only files in the workspace {workspace} are kept" if mode == "workspace-write" else "nothing written is kept"
    return (
        "[Sandbox: /tmp and /dev/shm are private to this session's sandbox and discarded when it ends; "
        f"{kept}. Elsewhere the file system is read-only.]"
    )


def oom_note(memory_limit: int) -> str:
    return f"[Sandbox: a process of this call was killed: memory limit {_mib(memory_limit)} reached (settings.json sandbox.memory).]"


def tmp_snapshot() -> frozenset[tuple[str, int, int]] | None:
    """``(path, size, mtime_ns)`` of everything in the ``/tmp`` and ``/dev/shm`` tmpfs, other
    mounts below them left out (None: too many entries to tell)."""
    entries: list[tuple[str, int, int]] = []
    for root in _PRIVATE:
        try:
            device = os.stat(root).st_dev
        except OSError:
            continue
        stack = [root]
        while stack:
            directory = stack.pop()
            try:
                scan = os.scandir(directory)
            except OSError:
                continue
            with scan:
                for entry in scan:
                    try:
                        stat = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.st_dev != device:
                        continue  # another mount (a workspace under /tmp): not the private tmpfs
                    entries.append((entry.path, stat.st_size, stat.st_mtime_ns))
                    if len(entries) > _SNAPSHOT_LIMIT:
                        return None
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
    return frozenset(entries)


def tmp_changed(before: frozenset | None, after: frozenset | None, ignore: set[str]) -> bool:
    """True if something other than the ``ignore`` paths changed between two snapshots."""
    if before is None or after is None:
        return before != after or before is None
    return any(path not in ignore for path, _size, _mtime in before ^ after)


def append_note(result: dict, note: str) -> dict:
    """``result`` (a ``{content, details, isError}`` tool result) with ``note`` added at the
    end of its text."""
    content = list(result.get("content") or [])
    if content and content[-1].get("type") == "text":
        last = dict(content[-1])
        text = last.get("text") or ""
        last["text"] = f"{text}{'' if not text else chr(10) if text.endswith(chr(10)) else chr(10) * 2}{note}"
        content[-1] = last
    else:
        content.append({"type": "text", "text": note})
    return {**result, "content": content}
