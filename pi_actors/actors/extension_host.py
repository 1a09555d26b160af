"""The extension-host actor: user extensions run here, never in the coordinator.

``run_extension_host(links, config)`` loads the extensions of its
:class:`~pi_actors.protocol.extension_host.ExtensionHostConfig` (an extension that raises
while loading is skipped and listed in ``describe``'s errors; the others load), then serves
:data:`~pi_actors.protocol.extension_host.EXTENSION_HOST` on its coordinator link until it
closes. Calls run concurrently (each in its own task), so extension tools of one reply run
together; the coordinator keeps their results in call order.

While serving, the extensions' ``ctx.ui`` requests and ``pi.send_message`` /
``pi.append_entry`` become calls the other way on the same link
(:data:`~pi_actors.protocol.extension_host.EXTENSION_CLIENT`), served by the coordinator.

Containment: a handler or tool that raises is an error entry or error result (the process
goes on); one that kills the process or blocks its event loop is the supervisor's to see —
it restarts the host, which loads the extensions again (``pi_actors.actors.local``).
Extensions are trusted code: this process is not sandboxed (README, "Security").
"""

from __future__ import annotations

import os
import sys
from typing import Any

import msgspec
import trio

from ..extensions import Extensions
from ..protocol import extension_host as X
from ..runtime import Empty, Peer, RemoteError, Router, TypedCall, call_method, implements, open_peer
from ..runtime.protocol import SIBLING_HANDSHAKE_TIMEOUT

__all__ = ["ExtensionHost", "run_extension_host"]


class _PeerBridge:
    """``ctx.ui`` and session entries as calls to the coordinator over the host's link."""

    def __init__(self) -> None:
        self.peer: Peer | None = None

    async def ui(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.peer is None:
            return {"cancelled": True}
        answer = await call_method(self.peer, X.UI, msgspec.convert(request, X.UiArgs))
        return {"value": answer.value, "confirmed": answer.confirmed, "cancelled": answer.cancelled}

    async def append(self, entry: dict[str, Any]) -> None:
        if self.peer is None:
            raise RuntimeError("not connected to a session")
        await call_method(self.peer, X.APPEND, msgspec.convert(entry, X.AppendArgs))


class ExtensionHost:
    """Serves :data:`~pi_actors.protocol.extension_host.EXTENSION_HOST` for ``extensions``."""

    def __init__(self, extensions: Extensions) -> None:
        self.extensions = extensions

    @implements(X.DESCRIBE)
    async def describe(self, args: Empty, call: TypedCall[Empty, None]) -> X.Registry:
        reg = self.extensions.registry
        return X.Registry(
            extensions=list(self.extensions.loaded),
            tools=[X.ToolSpec(name=t.name, label=t.label, description=t.description, parameters=t.parameters,
                              extension=t.extension) for t in reg.tools.values()],  # fmt: skip
            commands=[X.CommandSpec(name=c.name, description=c.description, extension=c.extension) for c in reg.commands.values()],
            flags=[X.FlagSpec(name=f.name, description=f.description, type=f.type, default=f.default,  # type: ignore[arg-type]
                              extension=f.extension) for f in reg.flags.values()],  # fmt: skip
            shortcuts=[X.ShortcutSpec(key=s.key, description=s.description, extension=s.extension) for s in reg.shortcuts.values()],
            events=sorted({name for name, _, _ in reg.handlers}),
            renderers=sorted(reg.renderers),
            providers=sorted(reg.providers),
            errors=[X.ExtensionError(extension_path=e.extension, event=e.event, error=e.error) for e in self.extensions.load_errors],
        )

    @implements(X.EMIT)
    async def emit(self, args: X.EmitArgs, call: TypedCall[X.EmitArgs, None]) -> X.EmitResult:
        result, errors = await self.extensions.emit(args.event, args.payload, has_ui=args.has_ui)
        return X.EmitResult(
            result=result,
            errors=[X.ExtensionError(extension_path=e.extension, event=e.event, error=e.error) for e in errors],
        )

    @implements(X.RUN_TOOL)
    async def run_tool(self, args: X.ExtToolArgs, call: TypedCall[X.ExtToolArgs, X.ExtToolUpdate]) -> X.ExtToolResult:
        if args.name not in self.extensions.registry.tools:
            raise RemoteError("not_found", f"no extension tool named {args.name!r}")

        async def on_update(partial: Any) -> None:
            if isinstance(partial, dict):
                await call.incoming.send_chunk(_update(partial))

        result = await self.extensions.run_tool(args.name, args.tool_call_id, args.args, on_update, has_ui=args.has_ui)
        try:
            return msgspec.convert(result, X.ExtToolResult)
        except msgspec.ValidationError as exc:
            text = f"extension tool {args.name} returned a result of the wrong shape: {exc}"
            return X.ExtToolResult(content=[{"type": "text", "text": text}], is_error=True)  # type: ignore[list-item]

    @implements(X.RUN_COMMAND)
    async def run_command(self, args: X.CommandArgs, call: TypedCall[X.CommandArgs, None]) -> X.CommandResult:
        if args.name not in self.extensions.registry.commands:
            raise RemoteError("not_found", f"no extension command named /{args.name}")
        return X.CommandResult(error=await self.extensions.run_command(args.name, args.args, has_ui=args.has_ui))

    @implements(X.RUN_SHORTCUT)
    async def run_shortcut(self, args: X.ShortcutArgs, call: TypedCall[X.ShortcutArgs, None]) -> X.CommandResult:
        if args.key not in self.extensions.registry.shortcuts:
            raise RemoteError("not_found", f"no extension bound the key {args.key!r}")
        return X.CommandResult(error=await self.extensions.run_shortcut(args.key, has_ui=args.has_ui))

    @implements(X.RENDER_MESSAGE)
    async def render_message(self, args: X.RenderArgs, call: TypedCall[X.RenderArgs, None]) -> X.Rendered:
        lines, error = await self.extensions.render_message(args.message, {"expanded": args.expanded, "width": args.width})
        return X.Rendered(lines=lines, error=error)


def _update(partial: dict[str, Any]) -> dict[str, Any]:
    """An ``on_update`` argument in the chunk's shape (text given as a string is a block)."""
    content = partial.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    out: dict[str, Any] = {"content": content if isinstance(content, list) else []}
    if partial.get("details") is not None:
        out["details"] = partial["details"]
    return out


async def run_extension_host(links: dict[str, trio.SocketStream], config: Any) -> None:
    """Actor entry: load the extensions, then serve the coordinator link until it closes."""
    part = msgspec.convert(config or {}, X.ExtensionHostConfig)
    for entry in reversed(part.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    if part.cwd and os.path.isdir(part.cwd):
        os.chdir(part.cwd)  # extensions resolve relative paths against the session's cwd, as in pi
    bridge = _PeerBridge()
    extensions = Extensions(part.cwd or os.getcwd(), bridge)
    extensions.load(part.specs, part.flags)
    host = ExtensionHost(extensions)
    async with open_peer(
        links["coordinator"], side="server", role="extension-host", name="coordinator",
        handler=Router.serving(host, X.EXTENSION_HOST, name="extension-host"), handshake_timeout=SIBLING_HANDSHAKE_TIMEOUT,
    ) as peer:  # fmt: skip
        bridge.peer = peer
        await peer.closed_event.wait()
