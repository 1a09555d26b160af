"""The server actor: hosts sessions that remote clients attach to, and routes tool calls to
remote tool hosts. Its contract (methods, roles, forwarded session methods) is
``pi_actors.protocol.server``; ``_server`` describes the service, ``client`` the client side.

``CwdRefused`` is what ``Server(root=...)`` raises for an unusable root (``/``)."""

from ._auth import Credentials, CredentialsError, Identity, token_digest
from ._confine import CwdRefused
from ._server import Server
from .client import connect, parse_address

__all__ = ["Server", "Credentials", "CredentialsError", "CwdRefused", "Identity", "connect", "parse_address", "token_digest"]
