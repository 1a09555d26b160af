"""``pi-actors tool-host``: run a server's tool calls on this machine, in a sandbox.

Usage::

    pi-actors tool-host --connect ws://HOST:PORT/ --token-file FILE --name NAME --workspace DIR
                        [--sandbox off|read-only|workspace-write] [--allow-network] [--tls-ca FILE]

The token (``--token-file``, else ``$PI_ACTORS_TOKEN``; ``--token`` works but shows it to
every local user in ``ps``) is a tool-host credential minted
for NAME (``pi-actors serve token add NAME --role tool-host``): it lets this host register
as NAME and nothing else, and no other connection can take NAME over while it is connected.
The token file and ``$PI_ACTORS_DIR`` are hidden from the tools' sandbox. A ``wss://``
server is verified against ``--tls-ca`` (default: the system's CAs).

It starts a local tool pool (the ordinary pool and worker processes, with the sandbox policy
rooted at ``--workspace``), connects to the server with hello role ``tool-host`` and name
NAME, and registers the tools it offers (``register_tool_host {tools}``). The server then
calls ``run_tool`` on this connection for the sessions created with ``--tool-host NAME``
(it serves :data:`pi_actors.protocol.pool.TOOL_HOST`: the pool's ``run_tool``, same
arguments and result); each call runs in the pool with ``cwd`` set to the workspace (the
session's own cwd is a path on the server), and the pool's answer is checked against the
declaration before it is passed on. If the connection drops, it reconnects with backoff and
registers again.
"""

from __future__ import annotations

import argparse
import os
import sys

import msgspec

from ..protocol.pool import RUN_TOOL, TOOL_HOST, RunToolArgs, ToolResult, ToolUpdate
from ..runtime import ConnectionLost, Peer, RemoteError, Router, TypedCall, implements, open_method
from ._remote_auth import add_credential_args, resolve_credentials

__all__ = ["main", "build_parser", "ToolHost"]


def build_parser() -> argparse.ArgumentParser:
    from ..choices import SANDBOX_MODES
    from ._usage import CliParser

    p = CliParser(prog="pi-actors tool-host", description="Run a pi-actors server's tool calls here.")
    p.add_argument("--connect", required=True, metavar="URL", help="ws://HOST:PORT/, wss://HOST:PORT/ or unix:PATH of the server")
    add_credential_args(p)
    p.add_argument("--name", required=True)
    p.add_argument("--workspace", required=True, help="directory the tools work in")
    p.add_argument("--sandbox", choices=SANDBOX_MODES)
    p.add_argument("--allow-network", action="store_true")
    p.add_argument("--max-workers", type=int, default=16)
    return p


class ToolHost:
    """What the server calls on a tool host (``TOOL_HOST``): ``run_tool``, forwarded to the
    host's own pool in ``workspace``. Serve it with ``Router.serving(host, TOOL_HOST)``."""

    def __init__(self, pool: Peer, workspace: str) -> None:
        self.pool = pool
        self.workspace = workspace

    @implements(RUN_TOOL)
    async def run_tool(self, args: RunToolArgs, call: TypedCall[RunToolArgs, ToolUpdate]) -> ToolResult:
        """Run the call in the host's pool, in the workspace; chunks are relayed, a cancel is
        passed on. Raises RemoteError ``tool_pool_lost`` when the pool process is gone, and
        ``invalid_response`` when the pool answers something ``run_tool`` does not declare."""
        forward = msgspec.structs.replace(args, cwd=self.workspace)
        try:
            async with open_method(self.pool, RUN_TOOL, forward) as up:
                async with up.raw.cancel_when(call.cancel_requested):
                    async for item in up:
                        await call.send(item)
                return await up.result()
        except ConnectionLost:
            raise RemoteError("tool_pool_lost", "the tool host's pool process exited") from None


async def run_tool_host(args: argparse.Namespace) -> int:
    import msgspec
    import trio

    from ..actors import secret_env_names
    from ..coding.sandbox import SandboxPolicy, default_mode
    from ..coding.tools import TOOL_SPECS
    from ..protocol.config import SandboxConfig, ToolPoolConfig
    from ..runtime import ConnectionLost, RemoteError, child_environment, link_pair, open_peer, start_actor
    from ..runtime.protocol import SIBLING_HANDSHAKE_TIMEOUT
    from ..server.client import ConnectionRefused, connect

    workspace = os.path.abspath(args.workspace)
    if not os.path.isdir(workspace):
        print(f"Error: --workspace {workspace} is not a directory", file=sys.stderr)
        return 1
    from ._config import agent_dir

    # The agent directory (configuration, sessions) and the token file are hidden from the tools.
    hidden = tuple(os.path.abspath(p) for p in (args.token_file, agent_dir()) if p)
    policy = SandboxPolicy(mode=args.sandbox or default_mode(), workspace=workspace, allow_network=args.allow_network, hidden=hidden)
    config = msgspec.to_builtins(
        ToolPoolConfig(max_workers=args.max_workers, warm=1, sandbox=msgspec.convert(policy.to_config(), SandboxConfig))
    )
    async with trio.open_nursery() as nursery:
        ours, theirs = link_pair()
        await start_actor(
            nursery, name="tool-pool", entry="pi_actors.actors.tool_pool:run_tool_pool", links={"coordinator": theirs},
            config=config, env=child_environment(scrub=secret_env_names()),
        )
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        async with open_peer(stream, side="client", role="tool-host", name="tool-pool", handshake_timeout=SIBLING_HANDSHAKE_TIMEOUT) as pool:

            handle = Router.serving(ToolHost(pool, workspace), TOOL_HOST)
            delay = 0.2
            while not pool.closed_event.is_set():
                try:
                    async with connect(
                        args.connect, token=args.token, role="tool-host", name=args.name, handler=handle, tls_ca=args.tls_ca
                    ) as server:
                        await server.call("register_tool_host", {"tools": sorted(TOOL_SPECS)})
                        print(f"registered as {args.name} (workspace {workspace}, sandbox {policy.mode})", flush=True)
                        delay = 0.2
                        await server.closed_event.wait()
                        print("disconnected from the server; reconnecting", file=sys.stderr, flush=True)
                except ConnectionRefused as exc:
                    if exc.status == 401:
                        print("Error: the server refused the token", file=sys.stderr)
                        nursery.cancel_scope.cancel()
                        return 1
                    print(f"cannot connect: {exc.message}; retrying in {delay:g} s", file=sys.stderr, flush=True)
                except ConnectionLost as exc:
                    print(f"connection lost: {exc.message}; retrying in {delay:g} s", file=sys.stderr, flush=True)
                except RemoteError as exc:
                    if exc.code in ("forbidden", "method_not_allowed", "invalid_request"):
                        print(f"Error: the server refused to register {args.name}: {exc.message} ({exc.code})", file=sys.stderr)
                        nursery.cancel_scope.cancel()
                        return 1
                    print(f"registration failed: {exc.message}; retrying in {delay:g} s", file=sys.stderr, flush=True)
                await trio.sleep(delay)
                delay = min(delay * 2, 5.0)
        nursery.cancel_scope.cancel()
    print("Error: the tool host's pool process exited", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    import trio

    args = build_parser().parse_args(argv)
    resolve_credentials(args)
    return trio.run(run_tool_host, args)
