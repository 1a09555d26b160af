"""Durable, single-writer appends to a pi session file (pi spec §2.5, made durable).

Contract:

- One :class:`SessionWriter` per file. Each append makes the new entry a child of the
  current leaf (unless the entry names its own ``parentId``) and moves the leaf to it.
- pi's lazy creation: until the first ``message`` entry whose message has role
  ``assistant``, entries are only kept in memory and no file exists. That append writes the
  header and every entry so far; from then on each append writes exactly one line.
- Durability (better than pi): every write is followed by ``fsync`` of the file before the
  append returns, and creating the file is followed by ``fsync`` of its directory. The file
  is created exclusively (an existing file is never overwritten) with mode 0600.
- Failures raise :class:`SessionWriteError` naming the file and the cause; nothing is
  swallowed. A failed append leaves no trace: the entry is not added (the leaf does not
  move), a partly written line is cut off again, and a file whose creation failed is
  removed, so the caller can simply retry the same append. Entries accepted before the file
  existed stay buffered and are written by the next successful flush, exactly once.
- One writer per file, across processes too: a writer holds the file's lock
  (:class:`~.lock.SessionLock`, ``flock`` on ``<file>.lock``) from the moment it opens or
  creates the file until :meth:`SessionWriter.close`; a second writer for the same file —
  in another process or this one — is refused with :class:`~.lock.SessionLocked`, which
  names the holder's pid. ``owner_pid`` is the pid recorded for others to see (default: this
  process). A process that dies drops its lock with it.
- The methods block (``fsync``); an async caller runs them in a thread.
- Memory: an entry the writer has written to the file is kept as its place in the file
  (offset and length, one 64-bit integer in an array); one not written yet (buffered,
  ``in_memory``) or loaded on resume as its encoded line (bytes). Next to that a small
  index (``_index``: the id and the parent's position in arrays, an id → position hash
  table of ints) and the current labels, so that a long session costs little memory here
  (about 30 bytes per entry), and an append costs the same at entry 10 and at entry 10,000. Reading whole entries back
  (:attr:`SessionWriter.entries`, :meth:`path_to`, :meth:`get_entry`) reads and decodes
  lines: for the rare whole-tree operations (tree view, fork, compaction), never per
  append. A read failure raises :class:`SessionLoadError` naming the file.

:meth:`SessionWriter.resume` continues an existing file: it loads it (see
:func:`load_session`), cuts off a torn last line, and — for a file of an older version —
first rewrites it in version 3 (new file, fsync, atomic rename, fsync of the directory),
keeping damaged lines byte for byte where they were. It takes the lock before reading, so
what it loads is what it continues. :attr:`SessionWriter.load_warnings` keeps what loading
reported (damaged lines, a dropped torn line) for the caller to show.
"""

from __future__ import annotations

import errno
import json
import os
import uuid
from collections.abc import Container

from ._index import EntryIndex
from .format import CURRENT_VERSION, encode_line, iso_timestamp, make_private_dirs, new_entry_id, new_session_id, session_file_name
from .loader import LoadedSession, SessionLoadError, load_session
from .lock import SessionLock
from .roots import resolved_header, stored_header


class SessionWriteError(Exception):
    """Writing the session file failed; the message names the file and the cause."""


def _describe(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0)
    reason = exc.strerror or str(exc)
    return f"{reason} ({name})" if name else reason


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


#: Entries that alone never create the file (pi's initial entries of a new session): a new
#: session nobody writes to leaves no file, even when its writer is not lazy.
_SETTINGS_ONLY = frozenset({"model_change", "thinking_level_change"})


def _is_assistant_message(entry: dict) -> bool:
    message = entry.get("message")
    return entry.get("type") == "message" and isinstance(message, dict) and message.get("role") == "assistant"


class SessionWriter:
    """Appends entries to one session file; see the module docstring."""

    path: str
    session_id: str
    header: dict
    leaf_id: str | None

    def __init__(self, path: str, header: dict, entries: list[dict], *, fd: int | None) -> None:
        self.path = path
        self.header = header
        self.session_id = header["id"]
        self._index = EntryIndex()
        self._labels: dict[str, str] = {}  # current label of each labelled entry
        self._keep(entries)
        self.leaf_id = entries[-1].get("id") if entries else None
        self._fd = fd  # None until the file exists (or after close)
        self._pending = fd is None  # entries are buffered, the file not yet written
        self._lazy = True  # while pending: wait for an assistant message before writing
        self.in_memory = False  # never write (--no-session)
        self._closed = False
        self._lock: SessionLock | None = None  # held while the file is ours to write
        self.owner_pid: int | None = None  # recorded in the lock (None: this process)
        self.load_warnings: list[str] = []  # what loading the file reported (resume)
        #: The workspace root the header's paths are kept relative to in the file (None: kept
        #: absolute, as pi does); ``header`` itself always holds them absolute (``roots``).
        self.root: str | None = None

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        session_dir: str,
        cwd: str,
        *,
        session_id: str | None = None,
        parent_session: str | None = None,
        lazy: bool = True,
        in_memory: bool = False,
        owner_pid: int | None = None,
        root: str | None = None,
    ) -> SessionWriter:
        """A new session whose file will be ``<session_dir>/<timestamp>_<id>.jsonl``.
        ``root``: a workspace root its header's ``cwd`` and ``parentSession`` are stored
        relative to when inside it (``roots.stored_header``).

        ``lazy`` (pi's rule): nothing touches the disk until the first assistant message is
        appended. With ``lazy=False`` the file is created by the first append of any kind
        but ``model_change``/``thinking_level_change`` (pi's initial entries: a session
        that stays empty leaves no file), so every other entry is durable when
        ``append_*`` returns and those two are written with it. ``in_memory`` (``--no-session``):
        the tree is kept in memory only and nothing is ever written.
        """
        session_id = session_id or new_session_id()
        timestamp = iso_timestamp()
        header: dict = {
            "type": "session",
            "version": CURRENT_VERSION,
            "id": session_id,
            "timestamp": timestamp,
            "cwd": cwd,
        }
        if parent_session is not None:
            header["parentSession"] = parent_session
        path = os.path.join(session_dir, session_file_name(timestamp, session_id))
        writer = cls(path, header, [], fd=None)
        writer._lazy = lazy
        writer.in_memory = in_memory
        writer.owner_pid = owner_pid
        writer.root = root
        return writer

    @classmethod
    def resume(cls, path: str, *, owner_pid: int | None = None, cwd: str | None = None, root: str | None = None) -> SessionWriter:
        """Continue appending to an existing session file (repairing a torn last line).

        An empty file (zero bytes) becomes a new session in that file, as in pi: a fresh
        header (working directory ``cwd``, default the current one) is written and synced at
        once, so reopening it finds the same session id. A file that holds anything else
        than a session is refused and left untouched (pi would overwrite it). ``root``: the
        workspace root of now: header paths stored relative are resolved under it (and a
        header written here keeps them relative to it, as :meth:`create`).

        Raises :class:`~.lock.SessionLocked` if another writer has it open,
        :class:`SessionLoadError` if it is not a session file (or its header's relative
        paths leave ``root``) and :class:`SessionWriteError` if it cannot be locked,
        repaired or opened for appending.
        """
        lock = _lock(path, owner_pid)
        try:
            if os.path.getsize(path) == 0:
                writer = cls._start_in_empty_file(path, cwd or os.getcwd(), root)
            else:
                writer = cls._resume_locked(path)
                try:
                    writer.header = resolved_header(writer.header, root)
                except ValueError as exc:
                    writer.close()
                    raise SessionLoadError(f"{path}: session header: {exc}") from None
        except BaseException:
            lock.release()
            raise
        writer._lock = lock
        writer.owner_pid = owner_pid
        writer.root = root
        return writer

    @classmethod
    def _start_in_empty_file(cls, path: str, cwd: str, root: str | None) -> SessionWriter:
        header: dict = {"type": "session", "version": CURRENT_VERSION, "id": new_session_id(),
                        "timestamp": iso_timestamp(), "cwd": cwd}
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except OSError as exc:
            raise SessionWriteError(f"Cannot open session file {path} for appending: {_describe(exc)}") from None
        try:
            if os.fstat(fd).st_size != 0:  # filled since we looked: never write over it
                raise SessionLoadError(f"Not a pi session file (it changed while being opened): {path}")
            _write_all(fd, encode_line(stored_header(header, root)))
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            raise SessionWriteError(f"Cannot write the header of session file {path}: {_describe(exc)}") from None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, header, [], fd=fd)

    @classmethod
    def _resume_locked(cls, path: str) -> SessionWriter:
        loaded = load_session(path)
        try:
            if loaded.migrated_from is not None:
                _rewrite(loaded)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except OSError as exc:
            raise SessionWriteError(f"Cannot open session file {path} for appending: {_describe(exc)}") from None
        try:
            if loaded.migrated_from is None:
                size = os.fstat(fd).st_size
                if loaded.torn_tail_bytes:
                    os.ftruncate(fd, size - loaded.torn_tail_bytes)
                    os.fsync(fd)
                elif not loaded.ends_with_newline:
                    _write_all(fd, b"\n")
                    os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            raise SessionWriteError(f"Cannot repair the end of session file {path}: {_describe(exc)}") from None
        # The file exists, so from now on every append is written at once (pi would buffer
        # again until an assistant message and then write a second header).
        writer = cls(path, loaded.header, loaded.entries, fd=fd)
        writer.load_warnings = list(loaded.warnings)
        return writer

    # -- reading --------------------------------------------------------------------------

    def _keep(self, entries: list[dict]) -> None:
        """Index and keep ``entries`` (already accepted) as their lines; replaces what was kept."""
        self._index, self._labels = EntryIndex(), {}
        for entry in entries:
            self._remember(entry, encode_line(entry))

    def _remember(self, entry: dict, line: bytes | int) -> None:
        entry_id = entry.get("id")
        parent = entry.get("parentId")
        self._index.add(entry_id if isinstance(entry_id, str) else None, parent if isinstance(parent, str) else None, line)
        if entry.get("type") == "label" and isinstance(entry.get("targetId"), str):
            if entry.get("label"):
                self._labels[entry["targetId"]] = entry["label"]
            else:
                self._labels.pop(entry["targetId"], None)

    def _spill(self, first_offset: int) -> None:
        """The file now holds every kept line, back to back from ``first_offset``: keep
        their places instead of the lines."""
        self._index.spill(first_offset)

    def _read(self, positions: range | list[int]) -> list[bytes]:
        """The lines of the entries at ``positions`` (kept ones as they are, written ones read
        from the file)."""
        index = self._index
        places = [index.place(p) for p in positions]
        if all(isinstance(item, bytes) for item in places):
            return places  # type: ignore[return-value]
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                return [item if isinstance(item, bytes) else os.pread(fd, item & 0xFFFFFFFF, item >> 32) for item in places]
            finally:
                os.close(fd)
        except OSError as exc:
            raise SessionLoadError(f"Cannot read session file {self.path}: {_describe(exc)}") from None

    @property
    def entries(self) -> list[dict]:
        """All entries in append order, read and decoded afresh (a new list of new dicts on
        every read: O(entries), for whole-tree operations only)."""
        return [json.loads(line) for line in self._read(range(len(self._index)))]

    @property
    def entry_count(self) -> int:
        return len(self._index)

    @property
    def is_persisted(self) -> bool:
        """True once the file exists and holds every entry."""
        return not self._pending

    # -- appending ------------------------------------------------------------------------

    def append_message(self, message: dict) -> dict:
        """Append ``{"type": "message", id, parentId, timestamp, message}`` after the leaf."""
        return self.append_entry({"type": "message", "message": message})

    def append_entry(self, entry: dict) -> dict:
        """Append any entry; ``id``, ``parentId`` (the leaf) and ``timestamp`` are filled in
        when absent. Returns the stored entry."""
        stored, line = self._stage(entry, self.leaf_id, ())

        if self._pending:
            eager = not self._lazy and stored["type"] not in _SETTINGS_ONLY
            if not self.in_memory and (eager or _is_assistant_message(stored)):
                header = encode_line(stored_header(self.header, self.root))
                self._create_file([header, *self._read(range(len(self._index))), line])
                self._remember(stored, line)
                self._spill(len(header))
            else:
                self._remember(stored, line)
        else:
            offset = self._append_line(line)
            self._remember(stored, (offset << 32) | len(line) if len(line) < 2**32 else line)
        self.leaf_id = stored["id"]
        return stored

    def append_entries(self, entries: list[dict]) -> list[dict]:
        """Append ``entries`` in order, each a child of the one before (as many
        :meth:`append_entry` calls), with one write and one ``fsync`` once the file exists:
        a group commit. All or nothing: a failure raises before any of them is kept (a partly
        written tail is cut off again). Before the file exists they are appended one by one
        (the first that creates the file writes the ones before it)."""
        if self._pending or len(entries) < 2:
            return [self.append_entry(entry) for entry in entries]
        staged: list[tuple[dict, bytes]] = []
        leaf: str | None = self.leaf_id
        taken: set[str] = set()
        for entry in entries:
            stored, line = self._stage(entry, leaf, taken)
            staged.append((stored, line))
            leaf = stored["id"]
            taken.add(leaf)
        offset = self._append_line(b"".join(line for _, line in staged))
        for stored, line in staged:
            self._remember(stored, (offset << 32) | len(line) if len(line) < 2**32 else line)
            offset += len(line)
        self.leaf_id = leaf
        return [stored for stored, _ in staged]

    def _stage(self, entry: dict, leaf: str | None, taken: Container[str]) -> tuple[dict, bytes]:
        """``entry`` as it will be stored after ``leaf`` and its line; nothing changes yet.
        ``taken``: ids staged but not kept yet. Raises SessionWriteError (closed) or
        ValueError (not an entry, a header, a duplicate id, not JSON)."""
        if self._closed:
            raise SessionWriteError(f"Session writer for {self.path} is closed")
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise ValueError("A session entry must be a dict with a string 'type'")
        if entry["type"] == "session":
            raise ValueError("A session header cannot be appended as an entry")
        entry_id = entry.get("id")
        if entry_id is None:
            entry_id = new_entry_id(self._index)
            while entry_id in taken:
                entry_id = new_entry_id(self._index)
        elif entry_id in self._index or entry_id in taken:
            raise ValueError(f"Duplicate entry id {entry_id!r}")
        stored = {
            "type": entry["type"],
            "id": entry_id,
            "parentId": entry["parentId"] if "parentId" in entry else leaf,
            "timestamp": entry.get("timestamp") or iso_timestamp(),
        }
        for key, value in entry.items():
            if key not in stored:
                stored[key] = value
        return stored, encode_line(stored)  # ValueError before anything changes

    # -- the tree ---------------------------------------------------------------------------

    def get_entry(self, entry_id: str) -> dict | None:
        """The entry ``entry_id`` (decoded afresh), or None."""
        position = self._index.position(entry_id)
        if position is None:
            return None
        entry: dict = json.loads(self._read([position])[0])
        return entry

    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry; the next append becomes its child. Nothing is
        written. Raises KeyError ``Entry <id> not found``."""
        if entry_id not in self._index:
            raise KeyError(f"Entry {entry_id} not found")
        self.leaf_id = entry_id

    def reset_leaf(self) -> None:
        """The next append becomes a new root (``parentId: null``)."""
        self.leaf_id = None

    def path_to(self, entry_id: str | None) -> list[dict]:
        """Entries from the root down to ``entry_id`` (inclusive); [] for None. Walks the
        index up from ``entry_id`` and decodes only the entries on the path."""
        positions = self._index.path_to(entry_id)
        return [json.loads(line) for line in self._read(positions)]

    def append_label(self, target_id: str, label: str | None) -> dict:
        """Label an entry (None or "" clears its label). Raises KeyError for an unknown target."""
        if target_id not in self._index:
            raise KeyError(f"Entry {target_id} not found")
        entry: dict = {"type": "label", "targetId": target_id}
        if label:
            entry["label"] = label
        return self.append_entry(entry)

    def labels(self) -> dict[str, str]:
        """Current label of each labelled entry (the latest label entry for a target wins)."""
        return dict(self._labels)

    def create_branched_session(self, leaf_id: str, session_dir: str) -> SessionWriter:
        """A new session file holding the path root→``leaf_id`` (label entries left out, then
        fresh labels for labelled entries on the path), ``parentSession`` = this file.

        Written at once when the path holds an assistant message, else on the first one (the
        lazy rule). Raises KeyError for an unknown id.
        """
        if leaf_id not in self._index:
            raise KeyError(f"Entry {leaf_id} not found")
        path = [e for e in self.path_to(leaf_id) if e.get("type") != "label"]
        branched = SessionWriter.create(
            session_dir, self.header.get("cwd") or "", parent_session=self.path, owner_pid=self.owner_pid, root=self.root
        )
        on_path = {e["id"] for e in path}
        labels = {t: label for t, label in self.labels().items() if t in on_path}
        records = [dict(e) for e in path]
        parent = records[-1]["id"] if records else None
        for target, label in labels.items():
            new_id = new_entry_id({r["id"] for r in records})
            records.append({"type": "label", "id": new_id, "parentId": parent, "timestamp": iso_timestamp(), "targetId": target, "label": label})
            parent = new_id
        branched._keep(records)
        branched.leaf_id = parent
        if any(_is_assistant_message(r) for r in records):
            header = encode_line(stored_header(branched.header, branched.root))
            branched._create_file([header, *branched._read(range(len(branched._index)))])
            branched._spill(len(header))
        return branched

    @classmethod
    def fork_from(
        cls, source_path: str, session_dir: str, cwd: str, *, owner_pid: int | None = None, root: str | None = None
    ) -> SessionWriter:
        """A new session in ``session_dir`` copying every entry (all branches) of
        ``source_path``, with ``cwd`` and ``parentSession`` = the source; written at once.
        The source is only read (it may be open in another writer); its damaged lines are
        not copied (the warnings in :attr:`load_warnings` say which).

        Raises SessionLoadError (``Cannot fork: source session file is empty or invalid``)
        or SessionWriteError.
        """
        try:
            loaded = load_session(source_path)
        except SessionLoadError:
            raise SessionLoadError(f"Cannot fork: source session file is empty or invalid: {source_path}") from None
        forked = cls.create(session_dir, cwd, parent_session=os.path.abspath(source_path), owner_pid=owner_pid, root=root)
        forked.load_warnings = list(loaded.warnings)
        records = [dict(e) for e in loaded.entries]
        forked._keep(records)
        forked.leaf_id = loaded.leaf_id
        header = encode_line(stored_header(forked.header, forked.root))
        forked._create_file([header, *forked._read(range(len(forked._index)))])
        forked._spill(len(header))
        return forked

    def close(self) -> None:
        """Release the file and its lock; entries still buffered (no assistant message yet)
        are not written."""
        self._closed = True
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        if self._lock is not None:
            lock, self._lock = self._lock, None
            lock.release()

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- disk -----------------------------------------------------------------------------

    def _create_file(self, lines: list[bytes]) -> None:
        directory = os.path.dirname(self.path) or "."
        created = False
        fd: int | None = None
        lock = self._lock
        try:
            make_private_dirs(directory)
            if lock is None:  # a new file (a fresh id): nobody else can be holding it
                lock = SessionLock.acquire(self.path, owner_pid=self.owner_pid, session_id=self.session_id)
            fd = os.open(
                self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600
            )
            created = True
            _write_all(fd, b"".join(lines))
            os.fsync(fd)
            _fsync_dir(directory)
        except OSError as exc:
            if fd is not None:
                os.close(fd)
            if created:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
            if lock is not None and lock is not self._lock:
                lock.release()
            raise SessionWriteError(f"Cannot create session file {self.path}: {_describe(exc)}") from None
        self._fd = fd
        self._lock = lock
        self._pending = False

    def _append_line(self, line: bytes) -> int:
        """Write and fsync ``line`` at the end of the file; returns its offset."""
        assert self._fd is not None
        try:
            size = os.fstat(self._fd).st_size
        except OSError as exc:
            raise SessionWriteError(f"Cannot append to session file {self.path}: {_describe(exc)}") from None
        try:
            _write_all(self._fd, line)
            os.fsync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, size)
            except OSError:
                pass
            raise SessionWriteError(f"Cannot append to session file {self.path}: {_describe(exc)}") from None
        return size


def _lock(path: str, owner_pid: int | None) -> SessionLock:
    try:
        return SessionLock.acquire(path, owner_pid=owner_pid)
    except FileNotFoundError:
        raise SessionLoadError(f"Cannot read session file {path}: No such file or directory") from None
    except OSError as exc:
        raise SessionWriteError(f"Cannot lock session file {path}: {_describe(exc)}") from None


def _rewrite(loaded: LoadedSession) -> None:
    """Replace ``loaded.path`` with its migrated content, atomically and durably. Damaged
    lines stay, byte for byte, between the records they were between; entries re-attached
    around them keep the ``parentId`` they have in the file."""
    directory = os.path.dirname(loaded.path) or "."
    temporary = f"{loaded.path}.{uuid.uuid4().hex[:8]}.tmp"
    records = [loaded.header]
    for index, entry in enumerate(loaded.entries):
        if index in loaded.reattached:
            entry = {**entry, "parentId": loaded.reattached[index]}
        records.append(entry)
    lines = sorted(
        [(number, encode_line(record)) for number, record in zip(loaded.record_lines, records, strict=False)]
        + [(d.number, d.raw + b"\n") for d in loaded.damaged]
    )
    data = b"".join(line for _, line in lines)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temporary)
        raise
    os.close(fd)
    os.replace(temporary, loaded.path)
    _fsync_dir(directory)
