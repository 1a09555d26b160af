"""``auth.json``: the credentials of logins and stored keys, in pi's shape, shared by every
pi-actors process of a user.

Shape (pi 0.73.1): a JSON object, provider id -> ``{"type": "oauth", "access", "refresh",
"expires" (epoch ms), ...extras}`` or ``{"type": "api_key", "key"}`` (``key`` may be ``!cmd``
or a variable name, resolved as models.json's ``apiKey``).

Contract of ``AuthStore(path)``:
- ``read()`` -> the whole mapping ({} when the file is missing); raises ``AuthFileError``
  (one line naming the file) when it is not that shape.
- ``set(provider, entry)`` / ``remove(provider)`` rewrite the file atomically (a temporary file
  renamed over it), mode 0600, holding the lock.
- ``api_key(provider)`` -> the key auth.json gives ``provider`` or None. An OAuth entry past
  its ``expires`` is refreshed first, under an exclusive ``flock`` on ``auth.json.lock``: the
  file is read again once the lock is held, so when two processes race, the second finds the
  first's fresh token and does not refresh (a refresh token may be single-use). A refresh that
  fails raises ``LoginExpiredError`` telling the user to ``/login`` again; the stored entry is
  kept (a later ``/login`` replaces it).
- ``refresh_login(provider)`` is that locked refresh on its own.
- ``needs_refresh(provider)`` tells a caller on an event loop whether ``api_key`` may block on
  the network (then run it in a thread).
- ``key_of(provider, entry)`` -> the key of an entry already read (``get``), without a refresh:
  a caller that read the file once (a request) gets the key from that one read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from ._http import OAuthError

__all__ = ["AuthStore", "AuthFileError", "LoginExpiredError", "default_auth_path"]


class AuthFileError(Exception):
    """auth.json is not pi's shape: the message is one line naming the file."""


class LoginExpiredError(Exception):
    """A login whose access token expired and could not be refreshed (one line)."""


def default_auth_path() -> str:
    """``auth.json`` in the agent directory (``$PI_ACTORS_DIR``, else ``~/.pi-actors``)."""
    return os.path.join(os.path.expanduser(os.environ.get("PI_ACTORS_DIR") or "~/.pi-actors"), "auth.json")


def _check(path: str, data: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(data, dict):
        raise AuthFileError(f"{path}: expected a JSON object of provider -> credentials")
    for provider, entry in data.items():
        # The name as written when printable, else its repr: the message stays one line.
        where = f"{path}: {provider if provider.isprintable() else repr(provider)}"
        if not isinstance(entry, dict):
            raise AuthFileError(f"{where}: expected an object with a type")
        kind = entry.get("type")
        if kind == "api_key":
            if not isinstance(entry.get("key"), str):
                raise AuthFileError(f"{where}: an api_key entry needs a string key")
        elif kind == "oauth":
            if not isinstance(entry.get("access"), str) or not isinstance(entry.get("refresh"), str):
                raise AuthFileError(f"{where}: an oauth entry needs string access and refresh tokens")
            expires = entry.get("expires")
            if isinstance(expires, bool) or not isinstance(expires, int | float):
                raise AuthFileError(f"{where}: an oauth entry needs a numeric expires (epoch milliseconds)")
        else:
            raise AuthFileError(f'{where}: unknown type {kind!r} (expected "oauth" or "api_key")')
    return data


class AuthStore:
    def __init__(self, path: str | None = None) -> None:
        self.path = path or default_auth_path()

    def read(self) -> dict[str, dict[str, Any]]:
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise AuthFileError(f"{self.path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise AuthFileError(f"{self.path}: not UTF-8 text") from None
        if not text.strip():
            return {}
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise AuthFileError(f"{self.path}: malformed JSON: {exc}") from None
        return _check(self.path, data)

    def get(self, provider: str) -> dict[str, Any] | None:
        return self.read().get(provider)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the exclusive lock every writer and refresher takes (blocks until free)."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def _write(self, data: dict[str, dict[str, Any]]) -> None:
        directory = os.path.dirname(self.path) or "."
        fd, tmp = tempfile.mkstemp(prefix=".auth-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                os.fchmod(f.fileno(), 0o600)
                json.dump(data, f, indent=2)
                f.write("\n")
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def set(self, provider: str, entry: dict[str, Any]) -> None:
        with self.locked():
            data = self.read()
            data[provider] = entry
            self._write(data)

    def remove(self, provider: str) -> bool:
        """Forget ``provider``'s credentials; False when there were none."""
        with self.locked():
            data = self.read()
            if provider not in data:
                return False
            del data[provider]
            self._write(data)
            return True

    def needs_refresh(self, provider: str) -> bool:
        return is_expired_login(self.get(provider))

    def api_key(self, provider: str) -> str | None:
        entry = self.get(provider)
        if is_expired_login(entry):
            return self.refresh_login(provider)
        return self.key_of(provider, entry)

    def key_of(self, provider: str, entry: dict[str, Any] | None) -> str | None:
        """The key ``entry`` (``provider``'s entry as :meth:`get` gave it, or None) stands for,
        from that entry alone: an api_key entry's key resolved (``!command``, env var name), an
        unexpired login's key. Raises LoginExpiredError for an expired login: refreshing is
        :meth:`api_key`'s (it may block on the network)."""
        if entry is None:
            return None
        if entry["type"] == "api_key":
            from ..models_json import resolve_config_value

            return resolve_config_value(entry["key"])
        if _expired(entry):
            raise LoginExpiredError(f"The {provider} login has expired: it must be refreshed first")
        return _key_of(provider, entry)

    def refresh_login(self, provider: str) -> str:
        """Refresh the OAuth login of ``provider`` unless, once the lock is held, it is no
        longer expired; returns its key (``_key_of``). Raises LoginExpiredError."""
        from ._providers import get_oauth_provider

        with self.locked():
            data = self.read()
            entry = data.get(provider)
            if entry is None or entry["type"] != "oauth":
                raise LoginExpiredError(f"The {provider} login was removed: run /login {provider} again")
            if not _expired(entry):
                return _key_of(provider, entry)  # another process refreshed it while we waited
            try:
                fresh = get_oauth_provider(provider).refresh({k: v for k, v in entry.items() if k != "type"})
            except OAuthError as exc:
                raise LoginExpiredError(
                    f"The {provider} login expired and could not be refreshed ({exc}): run /login {provider} again"
                ) from None
            data[provider] = {"type": "oauth", **fresh}
            self._write(data)
            return _key_of(provider, data[provider])


def _key_of(provider: str, entry: dict[str, Any]) -> str:
    """The request key of an OAuth entry: its flow's ``api_key`` (the access token, or Google's
    ``{"token", "projectId"}``); the access token for a provider with no flow here."""
    from ._providers import OAUTH_PROVIDERS

    flow = OAUTH_PROVIDERS.get(provider)
    return flow.api_key({k: v for k, v in entry.items() if k != "type"}) if flow else str(entry["access"])


def is_expired_login(entry: dict[str, Any] | None) -> bool:
    """Whether ``entry`` (from :meth:`AuthStore.get`) is an OAuth login past its ``expires``:
    its key needs a refresh first, which may block on the network."""
    return bool(entry and entry["type"] == "oauth" and _expired(entry))


def _expired(entry: dict[str, Any]) -> bool:
    return time.time() * 1000 >= float(entry["expires"])
