"""The batch result file: one JSON object per finished task, appended and fsynced.

A line is written when a task is finished — ok, an ``agent`` failure, or an ``infra``
failure after its last retry — and is on disk (``fsync``) before the runner counts the task
done, so a driver killed at any moment loses at most the tasks it was running.

Resuming (:meth:`ResultLog.open`): the ids with a line that is ok or an ``agent`` failure
are done and skipped; an id whose line is an ``infra`` failure runs again (a reader takes
an id's last line). A last line without its newline (the driver died while writing it) is
cut off: that task was not recorded.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["ResultLog"]


class ResultLog:
    """An open result file. ``done``: ids already finished (module docstring)."""

    def __init__(self, path: str, fd: int, done: set[str]) -> None:
        self.path = path
        self._fd = fd
        self.done = done

    @classmethod
    def open(cls, path: str) -> ResultLog:
        """Open (create) ``path`` for appending, reading what earlier runs finished. Raises
        OSError, or ValueError naming the line of a complete line that is not a result."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
            complete = data[: data.rfind(b"\n") + 1]
            if len(complete) != len(data):
                os.ftruncate(fd, len(complete))
                os.fsync(fd)
            done: set[str] = set()
            for number, line in enumerate(complete.split(b"\n")[:-1], start=1):
                if not line.strip():
                    continue
                try:
                    result = json.loads(line)
                    rid = result["id"]
                except (ValueError, KeyError, TypeError):
                    raise ValueError(f"{path} line {number}: not a result line of pi-actors batch") from None
                if result.get("ok") or result.get("error_kind") == "agent":
                    done.add(str(rid))
                else:
                    done.discard(str(rid))
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, done)

    def append(self, result: dict[str, Any]) -> None:
        """Write ``result`` as one line and fsync it; then its id counts as done (if it is)."""
        line = json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)
        if result.get("ok") or result.get("error_kind") == "agent":
            self.done.add(result["id"])

    def close(self) -> None:
        os.close(self._fd)
