"""Browser sign-ins: random session ids, each mapped to the identity that signed in.

A sign-in (``open``) mints a fresh id (``secrets.token_urlsafe(32)``, 256 bits) — the value
of the browser's cookie — and keeps, in the server's memory only, the identity and the
SHA-256 of the token it signed in with (never the token). ``lookup`` gives that back while
the sign-in is younger than ``lifetime`` seconds; an expired id is forgotten. ``close`` ends
one (sign-out). At most ``max_sessions`` sign-ins are kept: one more forgets the oldest.
Sign-ins end with the server process (a restarted server asks the browser to sign in again).

The clock is a parameter (``now``) so that expiry is tested without waiting.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from .._auth import Identity

__all__ = ["SignIn", "WebSessions", "SESSION_LIFETIME"]

#: Seconds a sign-in lasts (the cookie's Max-Age too): 12 hours.
SESSION_LIFETIME = 12 * 3600


@dataclass(frozen=True)
class SignIn:
    identity: Identity
    digest: str  #: SHA-256 (hex) of the token signed in with
    expires: float


class WebSessions:
    def __init__(self, lifetime: float = SESSION_LIFETIME, *, max_sessions: int = 10000, now: Callable[[], float] = time.monotonic) -> None:
        self.lifetime = lifetime
        self.max_sessions = max_sessions
        self._now = now
        self._by_id: OrderedDict[str, SignIn] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_id)

    def open(self, identity: Identity, digest: str) -> str:
        """A new sign-in of ``identity``; returns its session id (the cookie value)."""
        while len(self._by_id) >= self.max_sessions:
            self._by_id.popitem(last=False)
        session_id = secrets.token_urlsafe(32)
        self._by_id[session_id] = SignIn(identity, digest, self._now() + self.lifetime)
        return session_id

    def lookup(self, session_id: str | None) -> SignIn | None:
        """The live sign-in of ``session_id``, or None (unknown, expired: then forgotten)."""
        if not session_id:
            return None
        found = self._by_id.get(session_id)
        if found is None:
            return None
        if self._now() >= found.expires:
            del self._by_id[session_id]
            return None
        return found

    def close(self, session_id: str | None) -> None:
        """Forget ``session_id`` (sign-out); unknown ids are ignored."""
        if session_id:
            self._by_id.pop(session_id, None)
