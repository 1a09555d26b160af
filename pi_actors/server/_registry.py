"""Served sessions on disk: one directory per session under ``<state dir>/sessions``.

Layout (every directory 0700, every file 0600)::

    <state dir>/sessions/<session id>/<timestamp>_<session id>.jsonl   the session file
    <state dir>/sessions/<session id>/owner.json                       this module's sidecar

The session id is the session file's own id (its header's ``id``): :meth:`SessionIndex.create`
writes the header line itself (exclusively, fsynced) so that the id is known before any actor
starts, and every session — new or reopened — is started by resuming its file. The sidecar
``owner.json`` = ``{id, owner, cwd, toolHost, file, created, cwdInRoot}`` keeps what the server must
know after a restart: who owns the session (ownership survives restarts), where it works,
which tool host runs its tools, and which file in the directory is current (``fork`` moves
a session to a new file). It is replaced atomically (write, fsync, rename).

``SessionIndex`` loads every sidecar at start (a malformed one is reported through
``warnings`` and skipped, never deleted) and looks sessions up by id only through its map:
a caller-supplied id never becomes a path.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass

from ._files import write_json_private

__all__ = ["SessionRecord", "SessionIndex"]

SIDECAR = "owner.json"


@dataclass
class SessionRecord:
    id: str
    owner: str
    cwd: str
    toolHost: str | None
    file: str
    created: float
    #: ``cwd`` relative to the server's root when it was inside it (``placement._paths``):
    #: reopened under the root of now, so a moved workspace (another node, another
    #: absolute root) keeps its sessions. None in older sidecars: ``cwd`` as it is.
    cwdInRoot: str | None = None

    def directory(self, root: str) -> str:
        return os.path.join(root, self.id)


class SessionIndex:
    """The sessions kept under ``state_dir/sessions`` (see the module docstring)."""

    def __init__(self, state_dir: str) -> None:
        self.root = os.path.join(state_dir, "sessions")
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        os.chmod(self.root, 0o700)
        self.records: dict[str, SessionRecord] = {}
        self.warnings: list[str] = []
        for name in sorted(os.listdir(self.root)):
            sidecar = os.path.join(self.root, name, SIDECAR)
            if not os.path.isfile(sidecar):
                continue
            try:
                with open(sidecar, encoding="utf-8") as f:
                    data = json.load(f)
                record = SessionRecord(
                    **{k: data[k] for k in ("id", "owner", "cwd", "toolHost", "file", "created")}, cwdInRoot=data.get("cwdInRoot")
                )
                if record.id != name or os.sep in record.file:
                    raise ValueError("id or file does not match its directory")
            except (OSError, ValueError, KeyError, TypeError) as exc:
                self.warnings.append(f"skipping session {name}: bad {SIDECAR}: {exc}")
                continue
            self.records[record.id] = record

    def get(self, session_id: object) -> SessionRecord | None:
        return self.records.get(session_id) if isinstance(session_id, str) else None

    def directory(self, record: SessionRecord) -> str:
        return os.path.join(self.root, record.id)

    def file_path(self, record: SessionRecord) -> str:
        return os.path.join(self.root, record.id, record.file)

    def create(self, owner: str, cwd: str, tool_host: str | None, cwd_in_root: str | None = None) -> SessionRecord:
        """A new session directory with its header-only session file and sidecar;
        ``cwd_in_root``: ``cwd`` relative to the server's root (see ``SessionRecord``)."""
        from ..coding.session import SessionWriter
        from ..coding.session.format import encode_line

        writer = SessionWriter.create("", cwd, lazy=False)  # only for its header and file name
        header = writer.header
        session_id = header["id"]
        directory = os.path.join(self.root, session_id)
        os.mkdir(directory, 0o700)
        name = os.path.basename(writer.path)
        fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        if cwd_in_root is not None:
            header = {**header, "cwd": cwd_in_root or "."}  # as the store keeps it (``StoreConfig.root``)
        try:
            os.write(fd, encode_line(header))
            os.fsync(fd)
        finally:
            os.close(fd)
        record = SessionRecord(session_id, owner, cwd, tool_host, name, time.time(), cwd_in_root)
        write_json_private(os.path.join(directory, SIDECAR), asdict(record))
        self.records[session_id] = record
        return record

    def set_file(self, record: SessionRecord, path: str) -> None:
        """The session now writes ``path`` (a fork in its directory)."""
        if os.path.dirname(os.path.abspath(path)) != self.directory(record):
            return
        record.file = os.path.basename(path)
        write_json_private(os.path.join(self.directory(record), SIDECAR), asdict(record))

    def delete(self, record: SessionRecord) -> None:
        self.records.pop(record.id, None)
        shutil.rmtree(self.directory(record), ignore_errors=False)
