"""Who is calling: identities, roles, and the server's credentials file.

An :class:`Identity` is what a connection is, once authenticated: a ``name`` (sessions are
owned by it), a ``role`` — ``admin`` (every session, every method the server offers),
``client`` (creates and uses its own sessions) or ``tool-host`` (may only register as the
one tool host named in its credential, ``tool_host``).

:class:`Credentials` is the credentials file, JSON, mode 0600, in the server's state
directory::

    {"version": 1, "tokens": [{"name": "alice", "role": "client", "toolHost": null,
                               "sha256": "<hex of the token's SHA-256>"}]}

Only the tokens' SHA-256 is stored, so reading the file gives no usable token; a token is
handed out once, in a 0600 file of its own (:func:`write_token_file`). ``authenticate``
hashes the presented token and compares it with every entry in constant time
(``hmac.compare_digest``), so the time taken says nothing about which entry came close.
The file is re-read when its modification time changes, so ``pi-actors serve token add``
takes effect on a running server; a file that became unreadable or malformed (or readable by
others) fails closed: no stored token is accepted until it is fixed (logged). Names are unique; a name is 1–64 characters of
``[A-Za-z0-9._-]``.

A unix-socket connection is the local owner of the server (the socket is 0600 in a 0700
directory, and is hidden from every sandbox): :data:`LOCAL_ADMIN`.

Errors: :class:`CredentialsError` with a one-line message naming the file and the problem.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from dataclasses import dataclass
from typing import Any

from ..protocol.server import ROLES as METHODS_BY_ROLE
from ._files import write_json_private

__all__ = [
    "Identity", "Credentials", "CredentialsError", "LOCAL_ADMIN", "ROLES", "bearer_token", "write_token_file",
    "new_token", "token_digest",
]

log = logging.getLogger("pi_actors.server")

ROLES = tuple(METHODS_BY_ROLE)  # ("admin", "client", "tool-host"), declared in protocol.server
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class CredentialsError(Exception):
    """The credentials file (or a token file) is missing, unreadable or malformed."""


@dataclass(frozen=True)
class Identity:
    name: str
    role: str
    tool_host: str | None = None

    @property
    def admin(self) -> bool:
        return self.role == "admin"


#: A connection on the server's unix socket.
LOCAL_ADMIN = Identity("local", "admin")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_digest(token: str) -> str:
    """The hex SHA-256 of ``token``: what the server keeps of a token (the credentials
    file; a browser sign-in's session, so that revoking the token ends it)."""
    return _digest(token)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def bearer_token(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                try:
                    return token.strip().decode("ascii")
                except UnicodeDecodeError:
                    return None
    return None


def write_token_file(path: str, token: str) -> None:
    """Write ``token`` to a new file ``path`` (0600, created exclusively: an existing file
    is never overwritten)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")


class Credentials:
    """The token → identity map of one server (see the module docstring).

    ``path`` None: an in-memory map (tests, embedding); ``add`` then keeps entries in memory.
    ``extra_admin_tokens``: tokens accepted as admin without being stored (``--token-file``).
    """

    def __init__(self, path: str | None = None, *, extra_admin_tokens: tuple[str, ...] = ()) -> None:
        self.path = path
        self._entries: list[dict[str, Any]] = []
        self._mtime: int | None = None
        self._extra = [_digest(t) for t in extra_admin_tokens]
        if path is not None and os.path.exists(path):
            self._load()

    # -- file --------------------------------------------------------------------------------

    def _load(self) -> None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
            if st.st_mode & 0o077:
                raise CredentialsError(f"{self.path} is readable by other users (mode {st.st_mode & 0o777:o}); chmod 600 it")
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as exc:
            raise CredentialsError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise CredentialsError(f"{self.path} is not valid JSON: {exc}") from None
        entries = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise CredentialsError(f"{self.path}: expected {{\"tokens\": [...]}}")
        checked = []
        for i, e in enumerate(entries):
            if not (
                isinstance(e, dict) and isinstance(e.get("name"), str) and _NAME.match(e["name"]) and e.get("role") in ROLES
                and isinstance(e.get("sha256"), str) and len(e["sha256"]) == 64
                and (e["role"] != "tool-host" or (isinstance(e.get("toolHost"), str) and _NAME.match(e["toolHost"])))
            ):
                raise CredentialsError(f"{self.path}: token entry {i} is malformed (needs name, role, sha256; toolHost for a tool host)")
            checked.append(e)
        self._entries = checked
        self._mtime = st.st_mtime_ns

    def _refresh(self) -> None:
        if self.path is None:
            return
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            self._entries, self._mtime = [], None
            return
        if mtime != self._mtime:
            self._load()

    def _save(self) -> None:
        if self.path is None:
            return
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, mode=0o700, exist_ok=True)
        write_json_private(self.path, {"version": 1, "tokens": self._entries}, indent=1)
        self._mtime = os.stat(self.path).st_mtime_ns

    # -- use ---------------------------------------------------------------------------------

    def add(self, name: str, role: str, *, tool_host: str | None = None, token: str | None = None) -> str:
        """Register a new identity; returns its token (generated unless given)."""
        if not _NAME.match(name or ""):
            raise CredentialsError(f"bad name {name!r}: use 1-64 of A-Z a-z 0-9 . _ -")
        if role not in ROLES:
            raise CredentialsError(f"bad role {role!r}: expected one of {', '.join(ROLES)}")
        if role == "tool-host":
            tool_host = tool_host or name
            if not _NAME.match(tool_host):
                raise CredentialsError(f"bad tool host name {tool_host!r}")
        else:
            tool_host = None
        self._refresh()
        if any(e["name"] == name for e in self._entries):
            raise CredentialsError(f"an identity named {name!r} exists already (remove it first)")
        token = token or new_token()
        self._entries.append({"name": name, "role": role, "toolHost": tool_host, "sha256": _digest(token)})
        self._save()
        return token

    def remove(self, name: str) -> None:
        self._refresh()
        kept = [e for e in self._entries if e["name"] != name]
        if len(kept) == len(self._entries):
            raise CredentialsError(f"no identity named {name!r}")
        self._entries = kept
        self._save()

    def identities(self) -> list[Identity]:
        self._refresh()
        return [Identity(e["name"], e["role"], e.get("toolHost")) for e in self._entries]

    def authenticate(self, token: str | None) -> Identity | None:
        """The identity holding ``token``, or None. Compares against every entry."""
        if not token:
            return None
        return self.authenticate_digest(_digest(token))

    def authenticate_digest(self, presented: str) -> Identity | None:
        """The identity whose token has the SHA-256 ``presented`` (hex), or None; compares
        against every entry, as ``authenticate`` does."""
        try:
            self._refresh()
        except CredentialsError as exc:
            # Fail closed: a credentials file that went bad (a hand edit, a chmod) accepts
            # no stored token until it is fixed, and says why in the server's log.
            log.error("server: refusing stored tokens: %s", exc)
            self._entries, self._mtime = [], None
        found: Identity | None = None
        for digest in self._extra:
            if hmac.compare_digest(presented, digest) and found is None:
                found = Identity("admin", "admin")
        for e in self._entries:
            if hmac.compare_digest(presented, e["sha256"]) and found is None:
                found = Identity(e["name"], e["role"], e.get("toolHost"))
        return found
