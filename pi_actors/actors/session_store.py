"""The session store actor: the single writer of one session file.

Calls served (from the coordinator):

``open {cwd, sessionDir?, agentDir, noSession}``
    Creates the session (pi's JSONL v3; the file appears with the first assistant message)
    and returns ``{header, path}`` (``path`` is None for ``--no-session``).
``append {message}``
    Appends a ``message`` entry as a child of the leaf. Answers only once the line is written
    and fsynced (or buffered, before the first assistant message, as pi does), returning
    ``{id}``. A write error fails the call with code ``write_failed`` and a clear message.
``append_entry {entry}``
    Appends another entry type (model_change, thinking_level_change, ...), same durability.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

import trio

from ..runtime import IncomingCall, RemoteError, open_peer

__all__ = ["run_session_store", "SessionStore"]


def _iso_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SessionStore:
    def __init__(self) -> None:
        self._writer: Any = None
        self._header: dict | None = None

    async def handle(self, call: IncomingCall) -> Any:
        args = call.args or {}
        if call.method == "open":
            return await self._open(args)
        if call.method == "append":
            return await self._append("message", args.get("message"))
        if call.method == "append_entry":
            return await self._append("entry", args.get("entry"))
        raise RemoteError("not_found", f"session store: unknown method {call.method!r}")

    async def _open(self, args: dict) -> dict:
        from ..coding.session import SessionWriteError, SessionWriter, default_session_dir

        cwd = args.get("cwd") or "."
        if args.get("noSession"):
            self._writer = None
            self._header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": _iso_now(), "cwd": cwd}
            return {"header": self._header, "path": None}
        try:
            session_dir = args.get("sessionDir") or default_session_dir(args["agentDir"], cwd)
            self._writer = await trio.to_thread.run_sync(lambda: SessionWriter.create(session_dir, cwd))
        except (OSError, SessionWriteError) as exc:
            raise RemoteError("write_failed", f"cannot create the session: {exc}") from None
        self._header = self._writer.header
        return {"header": self._header, "path": self._writer.path}

    async def _append(self, kind: str, payload: Any) -> dict:
        from ..coding.session import SessionWriteError

        if not isinstance(payload, dict):
            raise RemoteError("invalid_args", f"session store: {kind} must be an object")
        if self._header is None:
            raise RemoteError("not_open", "session store: no session is open")
        if self._writer is None:  # --no-session: nothing to write
            return {"id": None}
        writer = self._writer
        try:
            if kind == "message":
                entry = await trio.to_thread.run_sync(writer.append_message, payload)
            else:
                entry = await trio.to_thread.run_sync(writer.append_entry, payload)
        except (OSError, SessionWriteError) as exc:
            raise RemoteError("write_failed", f"session write failed: {exc}") from None
        except ValueError as exc:  # not JSON-serialisable, or a duplicate id
            raise RemoteError("invalid_args", f"session store: bad {kind}: {exc}") from None
        return {"id": entry.get("id")}

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


async def run_session_store(links: dict[str, trio.SocketStream], config: Any) -> None:
    """Actor entry: serve the coordinator link until it closes."""
    store = SessionStore()
    try:
        async with open_peer(links["coordinator"], side="server", role="session-store", name="session-store", handler=store.handle) as peer:
            await peer.closed_event.wait()
    finally:
        store.close()
