"""The browser client of ``pi-actors serve --web``: the page's files (``static/``, package
data), sign-in and cookie sessions, cookie-authenticated WebSocket upgrades (``_front``).
The contract the page builds on is docs/web.md."""

from ._front import COOKIE, CSP, SECURITY_HEADERS, STATIC_DIR, UpgradeRefused, WebFront, load_static
from ._sessions import SESSION_LIFETIME, SignIn, WebSessions

__all__ = [
    "COOKIE", "CSP", "SECURITY_HEADERS", "SESSION_LIFETIME", "STATIC_DIR", "SignIn", "UpgradeRefused", "WebFront",
    "WebSessions", "load_static",
]
