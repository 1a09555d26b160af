"""The server actor: hosts sessions that remote clients attach to, and routes tool calls to
remote tool hosts. See ``_server`` for the service surface and ``client`` for the client side."""

from ._auth import Credentials, CredentialsError, Identity
from ._server import Server
from .client import connect, parse_address

__all__ = ["Server", "Credentials", "CredentialsError", "Identity", "connect", "parse_address"]
