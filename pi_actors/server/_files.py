"""Private files of the server's state directory, written whole or not at all.

``write_json_private(path, data)`` writes ``data`` as JSON to a fresh 0600 file beside
``path`` (created exclusively), syncs it and renames it over ``path``, so a reader sees the
old content or the new, never half of it, and nobody else can read it. Raises ``OSError``;
the temporary file is removed on any failure.
"""

from __future__ import annotations

import json
import os
import secrets
from typing import Any

__all__ = ["write_json_private"]


def write_json_private(path: str, data: Any, *, indent: int | None = None) -> None:
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=indent)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
