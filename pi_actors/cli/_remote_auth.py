"""Credentials and TLS flags shared by the clients of a server (``attach``, ``tool-host``).

``add_credential_args(parser)`` adds ``--token-file FILE`` (preferred), ``--token T`` (still
accepted, but a command line is visible to every local user in ``ps``) and ``--tls-ca FILE``
(the CA bundle that verifies a ``wss://`` server; default: the system's trust store).
``resolve_credentials(args)`` sets ``args.token`` from ``--token-file``, else ``--token``
(with a one-line warning on stderr), else ``$PI_ACTORS_TOKEN``, else None, and checks that
``--tls-ca`` loads; it raises ConfigError for an unreadable or empty token file, both token
flags at once, or a CA file that does not load.
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_credential_args", "resolve_credentials"]

TOKEN_ENV = "PI_ACTORS_TOKEN"


def add_credential_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--token-file", metavar="FILE", help=f"file holding the bearer token (default: ${TOKEN_ENV})")
    p.add_argument(
        "--token", metavar="T",
        help=f"bearer token; avoid: a command line is visible to other users (ps) — use --token-file or ${TOKEN_ENV}",
    )
    p.add_argument("--tls-ca", metavar="FILE", help="PEM file of CAs that verify a wss:// server (default: the system's)")


def resolve_credentials(args: argparse.Namespace) -> None:
    from ..server.client import tls_context
    from ._config import ConfigError

    if args.tls_ca:
        try:
            tls_context(args.tls_ca)
        except ValueError as exc:
            raise ConfigError(f"--tls-ca: {exc}") from None
    args.token = _token(args)


def _token(args: argparse.Namespace) -> str | None:
    from ._config import ConfigError

    if args.token_file and args.token:
        raise ConfigError("give the token once: --token-file or --token, not both")
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file {args.token_file}: {exc.strerror or exc}") from None
        if not token:
            raise ConfigError(f"--token-file {args.token_file} is empty")
        return token
    if args.token:
        print(
            f"Warning: --token is visible to other users in ps; prefer --token-file or ${TOKEN_ENV}",
            file=sys.stderr, flush=True,
        )
        return args.token
    return os.environ.get(TOKEN_ENV) or None
