"""Listening and connecting: the streams a ``Peer`` runs over, beyond a socketpair.

Public surface of the runtime's transports (their implementation modules are private):

- ``serve_unix_admitted(path, serve_stream, admission)`` — a unix-socket listener whose
  file permissions are the authentication (directory 0700, socket 0600, peers checked by
  ``SO_PEERCRED``); ``open_unix_listener(path)`` binds one, raising :class:`ListenError`
  with the reason (a live socket in the way, not a socket, a directory others can enter).
- ``serve_websocket_admitted(...)`` — a WebSocket listener (optionally TLS) with a bearer
  token checked on the upgrade; :class:`WebSocketStream` adapts a ``trio_websocket``
  connection to a ``trio.abc.Stream`` (one protocol frame per message, at most
  ``MAX_WS_MESSAGE`` bytes) for the client side; ``WebSocketStream(ws, text=True)`` is the
  framing of the ``JSON_SUBPROTOCOL`` (one JSON message per text message, browsers).
- :class:`HttpRequest` / :class:`HttpResponse` — the plain HTTP requests a WebSocket
  listener with ``on_http`` hands over, and the answers it writes (``_http``).
- :class:`ConnectionLimits` / :class:`Admission` / :class:`Ticket` — connection caps (in
  all, and not yet past the handshake), the handshake deadline and back-off on EMFILE,
  shared by both listeners.

This module imports ``trio_websocket``; the runtime's package imports it only here.
"""

from __future__ import annotations

from ._accept import Admission, ConnectionLimits, Ticket
from ._http import HttpRequest, HttpResponse
from ._listen import ListenError, open_unix_listener, serve_unix_admitted
from ._websocket import JSON_SUBPROTOCOL, MAX_WS_MESSAGE, WebSocketStream, serve_websocket_admitted

__all__ = [
    "HttpRequest",
    "HttpResponse",
    "JSON_SUBPROTOCOL",
    "MAX_WS_MESSAGE",
    "Admission",
    "ConnectionLimits",
    "ListenError",
    "Ticket",
    "WebSocketStream",
    "open_unix_listener",
    "serve_unix_admitted",
    "serve_websocket_admitted",
]
