"""The session store actor: the single writer of one session file.

Calls served (from the coordinator):

``open {cwd, agentDir, sessionDir?, noSession?, resume?: path, forkFrom?: path}``
    Creates a new session (pi's JSONL v3; unlike pi the file appears with the first entry, so
    that every acknowledged entry is on disk),
    resumes the file ``resume`` (repairing a torn last line), or forks ``forkFrom`` into a
    new file. Returns ``{header, path, context: {messages, thinkingLevel, model}, warnings}``
    (``path`` is None for ``--no-session``, whose tree is kept in memory only). ``warnings``
    are one-line texts for the user: damaged lines left out of the context (they stay in the
    file), a torn last line dropped. The session the store had open before is closed once
    the new one is open (if the new one fails, the old one stays).
    One writer per file: the store holds the file's lock (``<file>.lock``) while it has the
    file open; a file another process (or writer) holds fails the call with code
    ``session_locked`` and the one-line message "session <id> is open in another pi-actors
    process (pid N); close it or use --fork <id>". The pid recorded for others is the store
    configuration's ``ownerPid``, else the process that started the store (the CLI or the
    server), which is what a user can recognise and close.
``append {message}``
    Appends a ``message`` entry as a child of the leaf. Answers only once the line is written
    and fsynced, returning ``{id}``. A write error fails the call with code ``write_failed`` and a clear message.
``append_entry {entry}``
    Appends another entry type (model_change, thinking_level_change, compaction, label, ...),
    same durability.
``entries {}``      → ``{entries, leafId, labels}``: the whole tree, for navigation.
``context {}``      → the LLM context along the current branch (as ``open`` returns it).
``branch {entryId | null}`` → moves the leaf (null: the next entry is a new root); nothing is
                      written until the next append.
``fork {entryId | null}`` → the path root→entry becomes a new session file
                      (``parentSession`` = this one; null: an empty one), which this store
                      writes from then on; returns as ``open``.
``label {targetId, label | null}`` → labels an entry (null clears); ``{id}``.
"""

from __future__ import annotations

from typing import Any

import trio

from ..runtime import IncomingCall, RemoteError, open_peer

__all__ = ["run_session_store", "SessionStore"]


class SessionStore:
    def __init__(self, owner_pid: int | None = None) -> None:
        self._owner_pid = owner_pid  # None: this process
        self._writer: Any = None
        self._header: dict | None = None
        self._session_dir: str | None = None
        self._warnings: list[str] = []

    async def handle(self, call: IncomingCall) -> Any:
        args = call.args or {}
        method = call.method
        if method == "open":
            return await self._guard(self._open, args)
        if method == "append":
            return await self._append("message", args.get("message"))
        if method == "append_entry":
            return await self._append("entry", args.get("entry"))
        if self._header is None:
            raise RemoteError("not_open", "session store: no session is open")
        if method == "context":
            return self._describe()
        if method == "entries":
            writer = self._writer
            return {
                "entries": writer.entries if writer else [],
                "leafId": writer.leaf_id if writer else None,
                "labels": writer.labels() if writer else {},
            }
        if method == "branch":
            return self._branch(args.get("entryId"))
        if method == "fork":
            return await self._guard(self._fork, args)
        if method == "label":
            return await self._guard(self._label, args)
        raise RemoteError("not_found", f"session store: unknown method {method!r}")

    async def _guard(self, fn: Any, args: dict) -> Any:
        from ..coding.session import SessionLoadError, SessionLocked, SessionWriteError

        try:
            return await fn(args)
        except SessionLocked as exc:
            raise RemoteError("session_locked", str(exc)) from None
        except (OSError, SessionWriteError) as exc:
            raise RemoteError("write_failed", f"session: {exc}") from None
        except SessionLoadError as exc:
            raise RemoteError("invalid_session", str(exc)) from None
        except KeyError as exc:
            raise RemoteError("not_found", str(exc.args[0]) if exc.args else "not found") from None

    def _describe(self) -> dict:
        from ..coding.session import session_context

        ctx = session_context(self._writer.entries, self._writer.leaf_id) if self._writer else None
        return {
            "header": self._header,
            "path": self._writer.path if self._writer and not self._writer.in_memory else None,
            "context": {
                "messages": ctx.messages if ctx else [],
                "thinkingLevel": ctx.thinking_level if ctx else "off",
                "model": ctx.model if ctx else None,
            },
            "warnings": list(self._warnings),
        }

    async def _open(self, args: dict) -> dict:
        import os

        from ..coding.session import SessionWriter, default_session_dir

        cwd = args.get("cwd") or "."
        old = self._writer
        owner = self._owner_pid
        if args.get("noSession"):
            # The tree lives in memory only (branching and compaction still work).
            writer = SessionWriter.create("", cwd, in_memory=True)
            session_dir = self._session_dir
        else:
            session_dir = args.get("sessionDir") or default_session_dir(args["agentDir"], cwd)
            resume, fork_from = args.get("resume"), args.get("forkFrom")
            if resume:
                if old is not None and not old.in_memory and os.path.realpath(old.path) == os.path.realpath(resume):
                    # Reopening the file we hold: let go of it first, or we would lock ourselves out.
                    old.close()
                    self._writer = self._header = old = None
                writer = await trio.to_thread.run_sync(lambda: SessionWriter.resume(resume, owner_pid=owner, cwd=cwd))
            elif fork_from:
                writer = await trio.to_thread.run_sync(
                    lambda: SessionWriter.fork_from(fork_from, session_dir, cwd, owner_pid=owner)
                )
            else:
                # Not pi's lazy creation: DESIGN wants every entry durable before it is
                # acknowledged, the user's prompt included, so the file starts with it.
                writer = SessionWriter.create(session_dir, cwd, lazy=False, owner_pid=owner)
        if old is not None:
            old.close()
        self._writer = writer
        self._session_dir = session_dir
        self._warnings = list(writer.load_warnings)
        self._header = writer.header
        return self._describe()

    def _branch(self, entry_id: Any) -> dict:
        try:
            if entry_id is None:
                self._writer.reset_leaf()
            else:
                self._writer.branch(str(entry_id))
        except KeyError as exc:
            raise RemoteError("not_found", str(exc.args[0])) from None
        return self._describe()

    async def _fork(self, args: dict) -> dict:
        from ..coding.session import SessionWriter

        old = self._writer
        if old.in_memory:
            raise RemoteError("not_supported", "forking into a new file needs a saved session (not --no-session)")
        entry_id = args.get("entryId")
        if entry_id is None:  # fork before the first entry: an empty session naming its parent
            self._writer = SessionWriter.create(
                self._session_dir, old.header.get("cwd") or "", parent_session=old.path, lazy=False, owner_pid=self._owner_pid
            )
        else:
            self._writer = await trio.to_thread.run_sync(old.create_branched_session, str(entry_id), self._session_dir)
        old.close()
        self._header = self._writer.header
        self._warnings = []
        return self._describe()

    async def _label(self, args: dict) -> dict:
        entry = await trio.to_thread.run_sync(self._writer.append_label, str(args.get("targetId")), args.get("label"))
        return {"id": entry["id"]}

    async def _append(self, kind: str, payload: Any) -> dict:
        from ..coding.session import SessionWriteError

        if not isinstance(payload, dict):
            raise RemoteError("invalid_args", f"session store: {kind} must be an object")
        if self._header is None:
            raise RemoteError("not_open", "session store: no session is open")
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
    """Actor entry: serve the coordinator link until it closes. ``config``: a
    ``protocol.config.StoreConfig`` (or its dict form); its ``owner_pid`` is the pid a refused
    second writer is told about (default: the process that started this one)."""
    import os

    from ..protocol.config import StoreConfig, read_part

    owner = read_part(config, StoreConfig).owner_pid
    store = SessionStore(owner_pid=owner if owner is not None and owner > 0 else os.getppid())
    try:
        async with open_peer(links["coordinator"], side="server", role="session-store", name="session-store", handler=store.handle) as peer:
            await peer.closed_event.wait()
    finally:
        store.close()
