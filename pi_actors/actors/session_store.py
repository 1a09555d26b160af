"""The session store actor: the single writer of one session file.

It serves :data:`pi_actors.protocol.store.STORE` to the coordinator (argument and result
types, error codes and one line per method are declared there). What the declaration does
not say:

``open``
    Creates a new session (pi's JSONL v3; unlike pi the file appears with the first entry, so
    that every acknowledged entry is on disk), resumes the file ``resume`` (repairing a torn
    last line), or forks ``forkFrom`` into a new file. ``path`` is None for
    ``--no-session``, whose tree is kept in memory only. ``warnings`` are one-line texts for
    the user: damaged lines left out of the context (they stay in the file), a torn last line
    dropped. The session the store had open before is closed once the new one is open (if the
    new one fails, the old one stays).
    One writer per file: the store holds the file's lock (``<file>.lock``) while it has the
    file open; a file another process (or writer) holds fails the call with code
    ``session_locked`` and the one-line message "session <id> is open in another pi-actors
    process (pid N); close it or use --fork <id>". The pid recorded for others is the store
    configuration's ``ownerPid``, else the process that started the store (the CLI or the
    server), which is what a user can recognise and close.
``append`` / ``append_entry`` / ``append_messages``
    Answer only once the line (lines) is written and fsynced; ``append_messages`` writes its
    lines with one write and one fsync (a group commit). A write error fails the call with code
    ``write_failed`` and a clear message.
``fork``
    The new file's header names this one as ``parentSession``; a null ``entryId`` gives an
    empty session.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar, cast

import trio

from .._ready import ReadyLimiter
from ..protocol.store import (
    APPEND,
    APPEND_ENTRY,
    APPEND_MESSAGES,
    BRANCH,
    CONTEXT,
    ENTRIES,
    FORK,
    LABEL,
    OPEN,
    STORE,
    AppendArgs,
    AppendEntryArgs,
    AppendMessagesArgs,
    EntryId,
    EntryIds,
    EntryRef,
    LabelArgs,
    OpenArgs,
    SessionContext,
    SessionInfo,
    SessionModel,
    SessionTree,
)
from ..runtime import Empty, RemoteError, Router, TypedCall, implements, open_peer
from ..runtime.protocol import SIBLING_HANDSHAKE_TIMEOUT

__all__ = ["run_session_store", "SessionStore"]

T = TypeVar("T")


class SessionStore:
    def __init__(self, owner_pid: int | None = None, root: str | None = None) -> None:
        self._owner_pid = owner_pid  # None: this process
        self._root = root  # the workspace root of the headers' paths (StoreConfig.root)
        self._writer: Any = None
        self._header: dict[str, Any] | None = None
        self._session_dir: str | None = None
        self._warnings: list[str] = []

    @classmethod
    def from_config(cls, config: Any) -> SessionStore:
        """The store for ``config``: a ``protocol.config.StoreConfig`` (or its dict form); its
        ``owner_pid`` is the pid a refused second writer is told about (default: the process
        that started this one)."""
        import os

        from ..protocol.config import StoreConfig, read_part

        part = read_part(config, StoreConfig)
        owner = part.owner_pid
        return cls(owner_pid=owner if owner is not None and owner > 0 else os.getppid(), root=part.root)

    # -- methods (see pi_actors.protocol.store) ------------------------------------------------

    @implements(OPEN)
    async def open(self, args: OpenArgs, call: TypedCall[OpenArgs, None]) -> SessionInfo:
        return await self._guard(self._open(args))

    @implements(APPEND)
    async def append(self, args: AppendArgs, call: TypedCall[AppendArgs, None]) -> EntryId:
        return await self._append("message", args.message)

    @implements(APPEND_ENTRY)
    async def append_entry(self, args: AppendEntryArgs, call: TypedCall[AppendEntryArgs, None]) -> EntryId:
        return await self._append("entry", args.entry)

    @implements(APPEND_MESSAGES)
    async def append_messages(self, args: AppendMessagesArgs, call: TypedCall[AppendMessagesArgs, None]) -> EntryIds:
        from ..coding.session import SessionWriteError

        writer = self._open_writer()
        entries = [{"type": "message", "message": message} for message in args.messages]
        try:
            stored = await trio.to_thread.run_sync(writer.append_entries, entries)
        except (OSError, SessionWriteError) as exc:
            raise RemoteError("write_failed", f"session write failed: {exc}") from None
        except ValueError as exc:  # not JSON-serialisable, or a duplicate id
            raise RemoteError("invalid_args", f"session store: bad message: {exc}") from None
        return EntryIds(ids=[entry["id"] for entry in stored])

    @implements(CONTEXT)
    async def context(self, args: Empty, call: TypedCall[Empty, None]) -> SessionInfo:
        self._open_writer()
        return self._describe()

    @implements(ENTRIES)
    async def entries(self, args: Empty, call: TypedCall[Empty, None]) -> SessionTree:
        writer = self._open_writer()
        return SessionTree(entries=self._all_entries(writer), leaf_id=writer.leaf_id, labels=writer.labels())

    @implements(BRANCH)
    async def branch(self, args: EntryRef, call: TypedCall[EntryRef, None]) -> SessionInfo:
        writer = self._open_writer()
        try:
            if args.entry_id is None:
                writer.reset_leaf()
            else:
                writer.branch(args.entry_id)
        except KeyError as exc:
            raise RemoteError("not_found", str(exc.args[0])) from None
        return self._describe()

    @implements(FORK)
    async def fork(self, args: EntryRef, call: TypedCall[EntryRef, None]) -> SessionInfo:
        self._open_writer()
        return await self._guard(self._fork(args.entry_id))

    @implements(LABEL)
    async def label(self, args: LabelArgs, call: TypedCall[LabelArgs, None]) -> EntryId:
        writer = self._open_writer()
        entry = await self._guard(trio.to_thread.run_sync(writer.append_label, args.target_id, args.label))
        return EntryId(id=entry["id"])

    # -- the work ------------------------------------------------------------------------------

    def _open_writer(self) -> Any:
        """The open session's writer; RemoteError ``not_open`` when none is open."""
        if self._header is None or self._writer is None:
            raise RemoteError("not_open", "session store: no session is open")
        return self._writer

    @staticmethod
    def _all_entries(writer: Any) -> list[dict[str, Any]]:
        """Every entry of ``writer`` (read back from its file); an unreadable file is the
        ``invalid_session`` refusal naming it."""
        from ..coding.session import SessionLoadError

        try:
            entries: list[dict[str, Any]] = writer.entries
        except SessionLoadError as exc:
            raise RemoteError("invalid_session", str(exc)) from None
        return entries

    async def _guard(self, work: Awaitable[T]) -> T:
        """``await work``, its session errors turned into the declared refusals."""
        from ..coding.session import SessionLoadError, SessionLocked, SessionWriteError

        try:
            return await work
        except SessionLocked as exc:
            raise RemoteError("session_locked", str(exc)) from None
        except (OSError, SessionWriteError) as exc:
            raise RemoteError("write_failed", f"session: {exc}") from None
        except SessionLoadError as exc:
            raise RemoteError("invalid_session", str(exc)) from None
        except KeyError as exc:
            raise RemoteError("not_found", str(exc.args[0]) if exc.args else "not found") from None

    def _describe(self) -> SessionInfo:
        from ..coding.session import session_context

        writer = self._writer
        ctx = session_context(self._all_entries(writer), writer.leaf_id) if writer else None
        model = ctx.model if ctx else None
        return SessionInfo(
            header=self._header,
            path=writer.path if writer and not writer.in_memory else None,
            context=SessionContext(
                messages=ctx.messages if ctx else [],
                thinking_level=ctx.thinking_level if ctx else "off",
                model=SessionModel(provider=model.get("provider"), model_id=model.get("modelId")) if model else None,
            ),
            warnings=list(self._warnings),
        )

    async def _open(self, args: OpenArgs) -> SessionInfo:
        import os

        from ..coding.session import SessionWriter, default_session_dir

        cwd = args.cwd or "."
        old = self._writer
        owner, root = self._owner_pid, self._root
        if args.no_session:
            # The tree lives in memory only (branching and compaction still work).
            writer = SessionWriter.create("", cwd, in_memory=True)
            session_dir = self._session_dir
        else:
            if args.session_dir:
                session_dir = args.session_dir
            elif args.agent_dir:
                session_dir = default_session_dir(args.agent_dir, cwd)
            else:
                raise RemoteError("invalid_request", "open: $.agentDir is required without $.sessionDir")
            resume, fork_from = args.resume, args.fork_from
            if resume:
                if old is not None and not old.in_memory and os.path.realpath(old.path) == os.path.realpath(resume):
                    # Reopening the file we hold: let go of it first, or we would lock ourselves out.
                    old.close()
                    self._writer = self._header = old = None
                writer = await trio.to_thread.run_sync(lambda: SessionWriter.resume(resume, owner_pid=owner, cwd=cwd, root=root))
            elif fork_from:
                writer = await trio.to_thread.run_sync(
                    lambda: SessionWriter.fork_from(fork_from, session_dir, cwd, owner_pid=owner, root=root)
                )
            else:
                # Not pi's lazy creation: every entry must be durable (docs/architecture.md §5) before it is
                # acknowledged, the user's prompt included, so the file starts with it.
                writer = SessionWriter.create(session_dir, cwd, lazy=False, owner_pid=owner, root=root)
        if old is not None:
            old.close()
        self._writer = writer
        self._session_dir = session_dir
        self._warnings = list(writer.load_warnings)
        self._header = writer.header
        return self._describe()

    async def _fork(self, entry_id: str | None) -> SessionInfo:
        from ..coding.session import SessionWriter

        old = self._writer
        if old.in_memory:
            raise RemoteError("not_supported", "forking into a new file needs a saved session (not --no-session)")
        assert self._session_dir is not None  # set by every open of a saved session
        if entry_id is None:  # fork before the first entry: an empty session naming its parent
            self._writer = SessionWriter.create(
                self._session_dir, old.header.get("cwd") or "", parent_session=old.path, lazy=False, owner_pid=self._owner_pid,
                root=self._root,
            )  # fmt: skip
        else:
            self._writer = await trio.to_thread.run_sync(old.create_branched_session, entry_id, self._session_dir)
        old.close()
        self._header = self._writer.header
        self._warnings = []
        return self._describe()

    async def _append(self, kind: str, payload: dict[str, Any]) -> EntryId:
        from ..coding.session import SessionWriteError

        writer = self._open_writer()
        try:
            # The write and its fsync in a thread (a stalled disk must not stop the event loop),
            # started without a trip through the scheduler first (ReadyLimiter).
            limiter = cast(trio.CapacityLimiter, ReadyLimiter())
            if kind == "message":
                entry = await trio.to_thread.run_sync(writer.append_message, payload, limiter=limiter)
            else:
                entry = await trio.to_thread.run_sync(writer.append_entry, payload, limiter=limiter)
        except (OSError, SessionWriteError) as exc:
            raise RemoteError("write_failed", f"session write failed: {exc}") from None
        except ValueError as exc:  # not JSON-serialisable, or a duplicate id
            raise RemoteError("invalid_args", f"session store: bad {kind}: {exc}") from None
        return EntryId(id=entry["id"])

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


async def run_session_store(links: dict[str, trio.SocketStream], config: Any) -> None:
    """Actor entry: serve the coordinator link until it closes. ``config``: see
    :meth:`SessionStore.from_config`."""
    store = SessionStore.from_config(config)
    try:
        async with open_peer(
            links["coordinator"], side="server", role="session-store", name="session-store", handler=Router.serving(store, STORE),
            handshake_timeout=SIBLING_HANDSHAKE_TIMEOUT,
        ) as peer:
            await peer.closed_event.wait()
    finally:
        store.close()
