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
calls ``run_tool`` on this connection for the sessions created with ``--tool-host NAME``;
each call runs in the pool with ``cwd`` set to the workspace (the session's own cwd is a path
on the server). If the connection drops, it reconnects with backoff and registers again.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ._remote_auth import add_credential_args, resolve_credentials

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    from ..choices import SANDBOX_MODES

    p = argparse.ArgumentParser(prog="pi-actors tool-host", description="Run a pi-actors server's tool calls here.")
    p.add_argument("--connect", required=True, metavar="URL", help="ws://HOST:PORT/, wss://HOST:PORT/ or unix:PATH of the server")
    add_credential_args(p)
    p.add_argument("--name", required=True)
    p.add_argument("--workspace", required=True, help="directory the tools work in")
    p.add_argument("--sandbox", choices=SANDBOX_MODES)
    p.add_argument("--allow-network", action="store_true")
    p.add_argument("--max-workers", type=int, default=16)
    return p


async def run_tool_host(args: argparse.Namespace) -> int:
    import msgspec
    import trio

    from ..coding.sandbox import SandboxPolicy, default_mode
    from ..coding.tools import TOOL_SPECS
    from ..protocol.config import SandboxConfig, ToolPoolConfig
    from ..runtime import ConnectionLost, IncomingCall, RemoteError, child_environment, link_pair, open_peer, start_actor
    from ..server.client import ConnectionRefused, connect
    from ._supervisor import secret_env_names

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
        async with open_peer(stream, side="client", role="tool-host", name="tool-pool") as pool:

            async def handle(call: IncomingCall) -> Any:
                if call.method != "run_tool":
                    raise RemoteError("not_found", f"tool host: unknown method {call.method!r}")
                forward = dict(call.args) if isinstance(call.args, dict) else {}
                forward["cwd"] = workspace
                call.cooperative = True
                try:
                    async with pool.open_call("run_tool", forward) as up:
                        async with up.cancel_when(call.cancel_requested.wait):
                            async for item in up:
                                await call.send_chunk(item)
                        return await up.result()
                except ConnectionLost:
                    raise RemoteError("tool_pool_lost", "the tool host's pool process exited") from None

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
