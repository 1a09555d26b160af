"""What every login flow shares: ``LoginIO`` (how a flow talks to the user), the
``OAuthProvider`` base (``login``, ``refresh``, ``api_key``), waiting for the browser's
redirect or a pasted code, and the one-line refresh failure."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._http import CallbackServer, HttpError, OAuthError

__all__ = ["Credentials", "LoginIO", "OAuthProvider"]

Credentials = dict[str, Any]


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class LoginIO:
    """How a flow talks to the user. ``show(url, instructions)`` shows where to log in;
    ``ask(question)`` reads one line (empty allowed); ``progress(text)`` reports a step;
    ``paste()``, when given, blocks until the user pastes a code or redirect URL (it runs in a
    daemon thread and races the browser's redirect); ``sleep`` waits between device-code polls."""

    show: Callable[[str, str], None]
    ask: Callable[[str], str] = lambda question: ""
    progress: Callable[[str], None] = lambda text: None
    paste: Callable[[], str] | None = None
    sleep: Callable[[float], None] = field(default=time.sleep)
    timeout: float = 600.0


class OAuthProvider:
    id: str = ""
    name: str = ""

    def login(self, io: LoginIO) -> Credentials:
        raise NotImplementedError

    def refresh(self, credentials: Credentials) -> Credentials:
        raise NotImplementedError

    def api_key(self, credentials: Credentials) -> str:
        """The key a request carries for these credentials (the access token; Google's logins
        give pi's ``{"token", "projectId"}`` JSON)."""
        return str(credentials["access"])


def _await_code(server: CallbackServer, io: LoginIO) -> tuple[str | None, str | None]:
    if io.paste is not None:
        paste = io.paste

        def read_paste() -> None:
            try:
                text = paste()
            except Exception:  # the reader went away: the browser redirect may still come
                return
            if text.strip():  # an empty line or EOF is not a code
                server.offer(text)

        threading.Thread(target=read_paste, daemon=True).start()
    return server.wait(io.timeout)


def _tokens(data: dict[str, Any], what: str) -> tuple[str, str, float]:
    access, refresh, expires_in = data.get("access_token"), data.get("refresh_token"), data.get("expires_in")
    if not isinstance(access, str) or not isinstance(refresh, str) or not isinstance(expires_in, int | float):
        raise OAuthError(f"{what} response is missing access_token, refresh_token or expires_in")
    return access, refresh, float(expires_in)


def _refresh_failed(name: str, exc: OAuthError) -> OAuthError:
    if isinstance(exc, HttpError) and exc.status in (400, 401, 403):
        return OAuthError(f"{name} refused the refresh token ({exc.status})")
    return OAuthError(f"{name} token refresh failed: {exc}")
