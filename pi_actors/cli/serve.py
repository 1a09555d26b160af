"""``pi-actors serve``: host sessions for remote clients and tool hosts.

Usage::

    pi-actors serve --listen 127.0.0.1:8765 [--unix PATH] [--token-file FILE]
                    [--tls-cert FILE --tls-key FILE]
                    [--model provider/id] [--tools read,bash] [--sandbox MODE] [--cwd DIR]

``--listen`` serves WebSocket (binary messages carrying our frames); the bearer token (from
``--token-file``, else generated) is checked on the upgrade. A generated token is printed as
``token: …`` at start. ``--unix`` serves a 0600 socket in a 0700 directory (its permissions
are the authentication). At start the server prints one ``listening: ADDRESS`` line per
listener (port 0 picks a free port) and flushes, so a supervisor can read it.

Transport limits (``runtime._accept``): a connection must finish TCP accept, TLS and the
upgrade within ``--handshake-timeout`` seconds and its hello within as many again; at most
``--max-pending`` connections may be unauthenticated at once (a new one evicts the oldest)
and at most ``--max-connections`` open in all (past it new ones are closed at once). With
``--tls-cert``/``--tls-key`` the port speaks TLS (``wss://``); listening on a non-loopback
address without them prints a warning, since the token would cross the network in clear.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from functools import partial
from typing import Any

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pi-actors serve", description="Host sessions for remote clients.")
    p.add_argument("--listen", metavar="HOST:PORT", help="serve WebSocket on HOST:PORT (port 0: any free port)")
    p.add_argument("--unix", metavar="PATH", help="serve on a unix socket (0600, in a 0700 directory)")
    p.add_argument(
        "--token-file", metavar="FILE",
        help="file holding the bearer token (default: generate one and print it); never put a token on a command line",
    )
    p.add_argument("--tls-cert", metavar="FILE", help="serve wss:// with this certificate chain (PEM); needs --tls-key")
    p.add_argument("--tls-key", metavar="FILE", help="private key (PEM) of --tls-cert")
    p.add_argument("--handshake-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="time a new connection has for TCP/TLS/upgrade, and again for its hello (default 5)")
    p.add_argument("--max-pending", type=int, default=64, metavar="N",
                   help="connections allowed to be unauthenticated at once; a new one evicts the oldest (default 64)")
    p.add_argument("--max-connections", type=int, default=512, metavar="N",
                   help="connections open in all; past it new ones are closed at once (default 512)")
    p.add_argument("--provider")
    p.add_argument("--model", help="model of new sessions (provider/id)")
    p.add_argument("--thinking", choices=["off", "minimal", "low", "medium", "high", "xhigh"])
    p.add_argument("--tools", help="comma-separated tools of new sessions (default: read,bash,edit,write)")
    p.add_argument("--sandbox", choices=["off", "read-only", "workspace-write"])
    p.add_argument("--no-session", action="store_true", help="do not save sessions to files")
    p.add_argument("--cwd", help="default working directory of new sessions (default: here)")
    p.add_argument("--send-queue", type=int, default=1024, help="per-client send queue bound (items)")
    return p


def _token(args: argparse.Namespace) -> tuple[str, bool]:
    from ._config import ConfigError

    if args.token_file:
        try:
            token = open(args.token_file, encoding="utf-8").read().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file: {exc}") from None
        if not token:
            raise ConfigError(f"--token-file {args.token_file} is empty")
        return token, False
    return secrets.token_urlsafe(24), True


def _limits(args: argparse.Namespace) -> Any:
    from ..runtime._accept import ConnectionLimits
    from .main import UsageError

    try:
        return ConnectionLimits(
            max_pending=args.max_pending, max_connections=args.max_connections, handshake_timeout=args.handshake_timeout
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


#: Descriptors the server needs besides its connections: sessions' pipes and sockets, logs.
_FD_RESERVE = 256


def _fit_descriptor_limit(max_connections: int) -> None:
    """Raise the soft open-file limit towards ``max_connections`` + a reserve (up to the
    hard limit); one warning if it stays below."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max_connections + _FD_RESERVE
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass  # reported below
    if soft < want:
        print(
            f"Warning: the open-file limit ({soft}) is below --max-connections + {_FD_RESERVE} ({want}); when"
            " descriptors run out, new connections wait in the backlog (raise it with ulimit -n)",
            file=sys.stderr, flush=True,
        )


def _tls_context(args: argparse.Namespace) -> Any:
    """The server's SSL context from --tls-cert/--tls-key, or None without them."""
    import ssl

    from ._config import ConfigError

    if not args.tls_cert and not args.tls_key:
        return None
    if not (args.tls_cert and args.tls_key):
        raise ConfigError("--tls-cert and --tls-key go together")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load --tls-cert {args.tls_cert} / --tls-key {args.tls_key}: {exc}") from None
    return context


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def make_config_factory(args: argparse.Namespace) -> Any:
    """``cwd -> actor configuration`` for new sessions, from the flags (as the CLI does)."""
    from ..coding.system_prompt import build_system_prompt
    from ..coding.tools import DEFAULT_TOOLS, TOOL_SPECS
    from ._config import agent_dir, choose_model, load_model_registry
    from ._settings import load_settings
    from .main import runtime_config

    reg = load_model_registry()
    for err in reg.errors:
        print(f"Warning: {err}", file=sys.stderr)
    adir = agent_dir()
    choice = choose_model(reg, provider=args.provider, model=args.model, api_key=None)
    thinking = args.thinking or choice.thinking or "off"
    if not choice.model.reasoning:
        thinking = "off"
    tools = [t.strip() for t in args.tools.split(",") if t.strip() in TOOL_SPECS] if args.tools else [t for t in DEFAULT_TOOLS if t in TOOL_SPECS]

    def make(cwd: str) -> dict[str, Any]:
        if not os.path.isdir(cwd):
            raise ValueError(f"{cwd} is not a directory")
        settings, _warnings = load_settings(adir, cwd)
        return runtime_config(
            model=choice.model,
            thinking=thinking,
            tools=tools,
            cwd=cwd,
            system_prompt=build_system_prompt(cwd=cwd, tools=tools, custom=None, append=None, agent_dir=adir),
            agent_dir=adir,
            no_session=args.no_session,
            settings=settings,
            runtime_keys={},
            key_sources=reg.key_sources,
            sandbox=args.sandbox,
        )

    return make


async def serve(args: argparse.Namespace) -> int:
    import trio

    from ..runtime._listen import ListenError
    from ..server import Server
    from ._config import ConfigError

    if not args.listen and not args.unix:
        from .main import UsageError

        raise UsageError("serve needs --listen HOST:PORT and/or --unix PATH")
    token, generated = _token(args)
    limits = _limits(args)
    _fit_descriptor_limit(limits.max_connections)
    tls = _tls_context(args)
    make = make_config_factory(args)
    server = Server(make, default_cwd=os.path.abspath(args.cwd or os.getcwd()), send_queue=args.send_queue, limits=limits)
    async with server.running():
        async with trio.open_nursery() as nursery:
            if args.listen:
                host, _, port = args.listen.rpartition(":")
                if not host or not port.isdigit():
                    from .main import UsageError

                    raise UsageError(f"--listen wants HOST:PORT, not {args.listen!r}")
                if tls is None and not _is_loopback(host):
                    print(
                        f"Warning: listening on {host} without TLS: the token and every message cross the network"
                        " in clear; use --tls-cert/--tls-key", file=sys.stderr, flush=True,
                    )
                try:
                    ws = await nursery.start(partial(server.serve_websocket, host, int(port), token, ssl_context=tls))
                except OSError as exc:
                    raise ConfigError(f"cannot listen on {args.listen}: {exc.strerror or exc}") from None
                if generated:
                    print(f"token: {token}", flush=True)
                print(f"listening: {'wss' if tls else 'ws'}://{host}:{ws.port}/", flush=True)
            if args.unix:
                try:
                    path = await nursery.start(server.serve_unix, os.path.abspath(args.unix))
                except (OSError, ListenError) as exc:
                    raise ConfigError(f"cannot listen on {args.unix}: {exc}") from None
                print(f"listening: unix:{path}", flush=True)
    return 0


def main(argv: list[str]) -> int:
    import trio

    args = build_parser().parse_args(argv)
    return trio.run(serve, args)
