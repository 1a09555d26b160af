"""``pi-actors serve``: host sessions for remote clients and tool hosts.

Usage::

    pi-actors serve --listen 127.0.0.1:8765 [--web] [--unix PATH] [--state-dir DIR] [--root DIR]
                    [--token-file FILE] [--max-sessions N] [--tls-cert FILE --tls-key FILE]
                    [--model provider/id] [--tools read,bash] [--sandbox MODE] [--cwd DIR]
                    [--placement local|ray [--ray-address ADDR] [--ray-resources JSON]
                                           [--ray-tool-hosts JSON] [--node-workspace-root DIR]]
    pi-actors serve token add NAME --role client|tool-host|admin [--tool-host NAME] [--out FILE]
    pi-actors serve token list | token remove NAME          [--state-dir DIR]

State (``--state-dir``, default ``$PI_ACTORS_DIR/server``, 0700): ``credentials.json`` (0600:
every identity's name, role and token hash), ``admin.token`` (created with an admin token on
the first start; ``serve`` prints where it is, never the token) and ``sessions/`` (one 0700
directory per session: its file and its owner; sessions outlive the server and reopen on
``attach``). ``serve token add`` mints a token for a client or a tool host and writes it to
a new 0600 file (default ``<state dir>/tokens/NAME.token``), printing only the file's path.

``--listen`` serves WebSocket (binary messages carrying our frames); the bearer token is
checked on the upgrade against the credentials (``--token-file`` adds one admin token).
``--web`` also serves the browser client on that address: the page at ``/``, sign-in with a
token at ``POST /login`` (an HttpOnly session cookie), WebSocket upgrades authenticated by
that cookie from the page's own origin (docs/web.md); the line printed is then
``listening: ws://HOST:PORT/ (web: http://HOST:PORT/)``.
``--unix`` serves a 0600 socket in a 0700 directory (the local owner: admin; peers of another
uid or in another namespace — a sandbox — are refused). Sessions work
inside ``--root`` (default: the directory serve starts in; never ``/``); ``--cwd`` is the
default working directory of new sessions (default: the root). At start the server prints
``admin token file: PATH`` and one ``listening: ADDRESS`` line per listener (port 0 picks a
free port) and flushes, so a supervisor can read them.

``--placement ray`` runs each session's runtime (coordinator, provider, tool pool) on a node
of the Ray cluster at ``--ray-address`` (default ``auto``); its session store stays here and
clients still connect here (``placement._serve``). Default ``local``: on this machine.
``--ray-tool-hosts '{"tool_host": 1}'`` runs each session's tools in a tool host of its own, a
Ray actor on a node with those custom resources, which dials this server's ``--listen``
address with a tool-host credential made for the session (removed with it).

Transport limits (``runtime._accept``): a connection must finish TCP accept, TLS and the
upgrade within ``--handshake-timeout`` seconds and its hello within as many again; at most
``--max-pending`` connections may be unauthenticated at once (a new one evicts the oldest)
and at most ``--max-connections`` open in all (past it new ones are closed at once). With
``--tls-cert``/``--tls-key`` the port speaks TLS (``wss://``); listening on a non-loopback
address without them prints a warning, since the token would cross the network in clear.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial
from typing import Any

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    from ..choices import SANDBOX_MODES, THINKING_LEVELS
    from ._usage import CliParser

    p = CliParser(prog="pi-actors serve", description="Host sessions for remote clients.")
    p.add_argument("--listen", metavar="HOST:PORT", help="serve WebSocket on HOST:PORT (port 0: any free port)")
    p.add_argument("--web", action="store_true",
                   help="also serve the browser client at / on the --listen address (sign in with a token)")
    p.add_argument("--unix", metavar="PATH", help="serve on a unix socket (0600, in a 0700 directory)")
    p.add_argument("--token-file", help="also accept the token in this file, as an admin token")
    p.add_argument("--state-dir", help="credentials and sessions (default: $PI_ACTORS_DIR/server)")
    p.add_argument("--root", help="sessions must work inside this directory (default: here)")
    p.add_argument("--max-sessions", type=int, default=16, help="live sessions per client identity (default 16)")
    p.add_argument("--tls-cert", metavar="FILE", help="serve wss:// with this certificate chain (PEM); needs --tls-key")
    p.add_argument("--tls-key", metavar="FILE", help="private key (PEM) of --tls-cert")
    p.add_argument("--handshake-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="time a new connection has for TCP/TLS/upgrade, and again for its hello (default 5)")
    p.add_argument("--max-pending", type=int, default=64, metavar="N",
                   help="connections allowed to be unauthenticated at once; a new one evicts the oldest (default 64)")
    p.add_argument("--max-connections", type=int, default=512, metavar="N",
                   help="connections open in all; past it new ones are closed at once (default 512)")
    p.add_argument("--placement", choices=["local", "ray"], default="local",
                   help="where sessions run: this machine (default) or the nodes of a Ray cluster")
    p.add_argument("--ray-address", metavar="ADDR", help="the Ray cluster of --placement ray (default: auto, the running one)")
    p.add_argument("--ray-resources", metavar="JSON",
                   help='custom Ray resources each session asks for, e.g. \'{"pi_worker": 1}\' (--placement ray)')
    p.add_argument("--ray-tool-hosts", metavar="JSON", type=_resources_flag,
                   help='run each session\'s tools in a tool host of its own, a Ray actor on a node with these custom'
                        ' resources, e.g. \'{"tool_host": 1}\' (--placement ray; needs --listen)')
    p.add_argument("--node-workspace-root", metavar="DIR",
                   help="where the nodes keep --root's directory, when not at the same path: every path of a"
                        " session's runtime inside --root is moved under DIR on its node (--placement ray)")
    p.add_argument("--provider")
    p.add_argument("--model", help="model of new sessions (provider/id)")
    p.add_argument("--thinking", choices=THINKING_LEVELS)
    p.add_argument("--tools", help="comma-separated tools of new sessions (default: read,bash,edit,write)")
    p.add_argument("--sandbox", choices=SANDBOX_MODES)
    p.add_argument("--no-session", action="store_true", help="do not save sessions to files")
    p.add_argument("--cwd", help="default working directory of new sessions (default: the root)")
    p.add_argument("--send-queue", type=int, default=1024, help="per-client send queue bound (items)")
    p.add_argument("-e", "--extension", action="append", default=[], metavar="PATH",
                   help="load an extension in every session (a .py file or a package directory); repeatable")  # fmt: skip
    p.add_argument("--no-extensions", action="store_true",
                   help="do not load extensions from ~/.pi-actors/extensions and <session cwd>/.pi-actors/extensions")  # fmt: skip
    return p


def _state_dir(value: str | None) -> str:
    from ._config import agent_dir

    path = os.path.abspath(value or os.path.join(agent_dir(), "server"))
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _extra_token(args: argparse.Namespace) -> tuple[str, ...]:
    from ._config import ConfigError

    if not args.token_file:
        return ()
    try:
        token = open(args.token_file, encoding="utf-8").read().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read --token-file: {exc}") from None
    if not token:
        raise ConfigError(f"--token-file {args.token_file} is empty")
    return (token,)


def _credentials(state: str, extra: tuple[str, ...]) -> tuple[Any, str]:
    """The server's credentials; on the first start, an admin identity whose token is
    written to ``<state>/admin.token``. Returns (credentials, admin token file)."""
    from ..server._auth import Credentials, CredentialsError, write_token_file
    from ._config import ConfigError

    admin_file = os.path.join(state, "admin.token")
    try:
        creds = Credentials(os.path.join(state, "credentials.json"), extra_admin_tokens=extra)
        if not any(i.name == "admin" for i in creds.identities()):
            if os.path.exists(admin_file):
                os.unlink(admin_file)  # a token of a credentials file that is gone
            token = creds.add("admin", "admin")
            write_token_file(admin_file, token)
    except (CredentialsError, OSError) as exc:
        raise ConfigError(f"server credentials: {exc}") from None
    return creds, admin_file


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


def _resources_flag(value: str) -> dict[str, float]:
    """``--ray-tool-hosts``: a JSON object of custom resource -> amount (> 0); else an
    argparse error (one line, exit 2)."""
    try:
        resources = json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}); want an object like '{{\"tool_host\": 1}}'") from None
    if not isinstance(resources, dict) or not resources:
        raise argparse.ArgumentTypeError("want a JSON object of resource amounts, like '{\"tool_host\": 1}'")
    for name, amount in resources.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not amount > 0:
            raise argparse.ArgumentTypeError(f"the amount of {name!r} must be a number above 0, not {json.dumps(amount)}")
    return {name: float(amount) for name, amount in resources.items()}


def _placement(args: argparse.Namespace) -> Any:
    """The placement of ``--placement`` (None: the server's default, this machine)."""
    from ..placement import PlacementError, make_session_host
    from ._config import ConfigError

    if (args.ray_address or args.ray_resources) and args.placement != "ray":
        raise ConfigError("--ray-address and --ray-resources go with --placement ray")
    if args.ray_tool_hosts and args.placement != "ray":
        raise ConfigError("--ray-tool-hosts goes with --placement ray")
    if args.ray_tool_hosts and not args.listen:
        raise ConfigError("--ray-tool-hosts needs --listen HOST:PORT (the tool hosts dial the server there)")
    if args.node_workspace_root and args.placement != "ray":
        raise ConfigError("--node-workspace-root goes with --placement ray")
    if args.node_workspace_root and not os.path.isabs(args.node_workspace_root):
        raise ConfigError(f"--node-workspace-root must be an absolute path (a directory on the nodes), not {args.node_workspace_root!r}")
    if args.placement == "local":
        return None
    workspace = None
    if args.node_workspace_root:
        workspace = (os.path.abspath(args.root or os.getcwd()), os.path.normpath(args.node_workspace_root))
    resources = None
    if args.ray_resources:
        try:
            resources = json.loads(args.ray_resources)
            if not (isinstance(resources, dict) and all(isinstance(v, (int, float)) for v in resources.values())):
                raise ValueError("not an object of numbers")
        except ValueError as exc:
            raise ConfigError(f"--ray-resources wants a JSON object of amounts, like '{{\"tool_host\": 1}}': {exc}") from None
    try:
        return make_session_host("ray", address=args.ray_address, resources=resources, tool_hosts=args.ray_tool_hosts,
                                 workspace=workspace)
    except PlacementError as exc:
        raise ConfigError(str(exc)) from None


def make_config_factory(args: argparse.Namespace) -> Any:
    """``cwd -> actor configuration`` for new sessions, from the flags (as the CLI does)."""
    from ..coding.system_prompt import build_system_prompt
    from ..coding.tools import DEFAULT_TOOLS, TOOL_SPECS
    from ..protocol.config import RuntimeConfig
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

    def make(cwd: str) -> RuntimeConfig:
        if not os.path.isdir(cwd):
            raise ValueError(f"{cwd} is not a directory")
        settings, _warnings = load_settings(adir, cwd)
        from ._resources import session_resources

        resources = session_resources(None, cwd=cwd, agent_dir=adir, settings=settings, quiet=True)
        config = runtime_config(
            model=choice.model,
            thinking=thinking,
            tools=tools,
            cwd=cwd,
            system_prompt=build_system_prompt(cwd=cwd, tools=tools, custom=None, append=None, agent_dir=adir, skills=resources.skills),
            agent_dir=adir,
            no_session=args.no_session,
            settings=settings,
            runtime_keys={},
            key_sources=reg.key_sources,
            models=reg.available(keep=(choice.model,)),  # what a client's /model may switch to
            sandbox=args.sandbox,
            resources=resources,
        )
        return _with_extensions(config, args, cwd, adir)

    return make


def _with_extensions(config: Any, args: argparse.Namespace, cwd: str, adir: str) -> Any:
    """A served session's extensions: ``-e`` given to serve (relative to the server's own
    directory), then — unless ``--no-extensions`` — the agent dir's and the session cwd's
    extension directories and installed packages', as the CLI finds them. Their ``ctx.ui``
    requests go to the attached clients (``hasUi``; with none attached they get the default
    answer). Extension flags and providers are not read for served sessions."""
    import msgspec

    from ..protocol.extension_host import ExtensionHostConfig
    from ._extensions import discover_session_extensions, hook_timeout

    explicit = [os.path.abspath(os.path.expanduser(path)) for path in args.extension]
    specs, sys_path = discover_session_extensions(explicit, args.no_extensions, cwd, adir)
    if not specs:
        return config
    host = ExtensionHostConfig(specs=specs, cwd=cwd, has_ui=True, sys_path=sys_path, hook_timeout=hook_timeout())
    return msgspec.structs.replace(config, extensions=host)


async def serve(args: argparse.Namespace) -> int:
    import trio

    from ..runtime._listen import ListenError
    from ..server import CwdRefused, Server
    from ._config import ConfigError, agent_dir

    if not args.listen and not args.unix:
        from .main import UsageError

        raise UsageError("serve needs --listen HOST:PORT and/or --unix PATH")
    if args.web and not args.listen:
        from .main import UsageError

        raise UsageError("--web needs --listen HOST:PORT (the page is served on that address)")
    state = _state_dir(args.state_dir)
    creds, admin_file = _credentials(state, _extra_token(args))
    limits = _limits(args)
    _fit_descriptor_limit(limits.max_connections)
    tls = _tls_context(args)
    make = make_config_factory(args)
    from ._extensions import FlagError, hook_timeout

    try:
        hook_timeout()
    except FlagError as exc:
        raise ConfigError(str(exc)) from None
    root = os.path.abspath(args.root or os.getcwd())
    hidden = [state, *([os.path.abspath(args.token_file)] if args.token_file else [])]
    try:
        server = Server(
            make, default_cwd=os.path.abspath(args.cwd) if args.cwd else None, root=root, send_queue=args.send_queue,
            credentials=creds, state_dir=None if args.no_session else state, agent_dir=agent_dir(), hidden=hidden,
            max_sessions=args.max_sessions, limits=limits, placement=_placement(args),
        )
    except CwdRefused as exc:
        raise ConfigError(str(exc)) from None
    print(f"admin token file: {admin_file}", flush=True)
    if server.placement.name != "local":
        print(f"placement: {server.placement.name}", flush=True)
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
                    ws = await nursery.start(partial(server.serve_websocket, host, int(port), None, ssl_context=tls, web=args.web))
                except OSError as exc:
                    raise ConfigError(f"cannot listen on {args.listen}: {exc.strerror or exc}") from None
                if args.ray_tool_hosts:
                    # Where the sessions' tool hosts on the cluster dial us: this address, or
                    # the one the nodes reach when listening on every interface.
                    near = getattr(server.placement, "link_host", host) if host.strip("[]") in ("0.0.0.0", "::", "") else host
                    server.tool_host_url = f"{'wss' if tls else 'ws'}://{near}:{ws.port}/"
                web = f" (web: {'https' if tls else 'http'}://{host}:{ws.port}/)" if args.web else ""
                print(f"listening: {'wss' if tls else 'ws'}://{host}:{ws.port}/{web}", flush=True)
            if args.unix:
                try:
                    path = await nursery.start(server.serve_unix, os.path.abspath(args.unix))
                except (OSError, ListenError) as exc:
                    raise ConfigError(f"cannot listen on {args.unix}: {exc}") from None
                print(f"listening: unix:{path}", flush=True)
    return 0


def build_token_parser() -> argparse.ArgumentParser:
    from ._usage import CliParser

    p = CliParser(prog="pi-actors serve token", description="Manage the server's credentials.")
    p.add_argument("--state-dir", help="the server's state directory (default: $PI_ACTORS_DIR/server)")
    sub = p.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="mint a token for a new identity; prints the path of the 0600 file holding it")
    add.add_argument("name")
    add.add_argument("--role", choices=["client", "tool-host", "admin"], default="client")
    add.add_argument("--tool-host", help="the tool host name a tool-host token may register (default: NAME)")
    add.add_argument("--out", help="file to write the token to (created, 0600; default: STATE/tokens/NAME.token)")
    add.add_argument("--state-dir", dest="state_dir_sub", help=argparse.SUPPRESS)
    rm = sub.add_parser("remove", help="revoke an identity's token")
    rm.add_argument("name")
    rm.add_argument("--state-dir", dest="state_dir_sub", help=argparse.SUPPRESS)
    ls = sub.add_parser("list", help="the identities (names and roles; never tokens)")
    ls.add_argument("--state-dir", dest="state_dir_sub", help=argparse.SUPPRESS)
    return p


def token_main(argv: list[str]) -> int:
    """``pi-actors serve token add|remove|list``."""
    from ..server._auth import Credentials, CredentialsError, write_token_file

    args = build_token_parser().parse_args(argv)
    state = _state_dir(getattr(args, "state_dir_sub", None) or args.state_dir)
    try:
        creds = Credentials(os.path.join(state, "credentials.json"))
        if args.action == "list":
            for i in creds.identities():
                print(f"{i.name}\t{i.role}" + (f"\t{i.tool_host}" if i.tool_host else ""))
            return 0
        if args.action == "remove":
            creds.remove(args.name)
            print(f"removed {args.name}")
            return 0
        out = os.path.abspath(args.out) if args.out else os.path.join(state, "tokens", f"{args.name}.token")
        if os.path.exists(out):
            raise CredentialsError(f"{out} exists already; choose another --out")
        os.makedirs(os.path.dirname(out), mode=0o700, exist_ok=True)
        token = creds.add(args.name, args.role, tool_host=args.tool_host)
        try:
            write_token_file(out, token)
        except OSError:
            creds.remove(args.name)
            raise
    except (CredentialsError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


def main(argv: list[str]) -> int:
    import trio

    if argv and argv[0] == "token":
        return token_main(argv[1:])
    args = build_parser().parse_args(argv)
    return trio.run(serve, args)
