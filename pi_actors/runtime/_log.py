"""Structured logs: one JSON object per line, appended by every process of a session.

``JsonLog(path, actor)`` opens ``path`` for appending (``O_APPEND``: lines from several
processes never interleave within a line, since each line is written with one ``write``).
``log.event(name, **fields)`` writes ``{"ts", "actor", "pid", "event", ...fields}``; fields
that are None are left out, so a line names exactly the session id, request id, tool call
id and provider that apply to it. ``JsonLog.disabled()`` is a logger that writes nothing.
A write error disables the log with one message on stderr; it never stops the session.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["JsonLog"]


class JsonLog:
    def __init__(self, path: str | None, actor: str) -> None:
        self.actor = actor
        self._fd: int | None = None
        if path:
            try:
                self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                print(f"Warning: cannot open log file {path}: {exc.strerror or exc}", file=sys.stderr)

    @classmethod
    def disabled(cls) -> JsonLog:
        return cls(None, "")

    @property
    def enabled(self) -> bool:
        return self._fd is not None

    def event(self, name: str, **fields: Any) -> None:
        if self._fd is None:
            return
        record = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "actor": self.actor,
            "pid": os.getpid(),
            "event": name,
        }
        record.update({k: v for k, v in fields.items() if v is not None})
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
        try:
            os.write(self._fd, line)
        except OSError as exc:
            print(f"Warning: log file write failed, logging stops: {exc.strerror or exc}", file=sys.stderr)
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
