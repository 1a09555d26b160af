"""``pi-actors attach URL``: a client of a remote session (``pi-actors serve``).

Usage::

    pi-actors attach ws://HOST:PORT/|wss://HOST:PORT/ [--token-file FILE | env PI_ACTORS_TOKEN]
                     [--tls-ca FILE] [--session ID | --new]
                     [--cwd DIR] [--tool-host NAME] [-p] [--mode text|json] [messages...]

The token: ``--token-file`` (a file holding it, e.g. one ``pi-actors serve token add``
wrote), else ``$PI_ACTORS_TOKEN`` (``--token`` also works, but puts it on the command line
where other local users can see it). ``--session ID`` attaches to a session the server
holds, running or on disk (after a server restart it is reopened with its whole history).

``-p`` (or ``--mode json`` with messages): headless — run the messages as prompts on the
session and print the answer (``-p``) or every event as a JSON line; a disconnect fails the
prompt in flight with "outcome unknown" (exit 1) and nothing is replayed.

Without ``-p``, on a terminal: the interactive TUI of the local CLI against the remote
session (``cli.tui.remote``): the transcript from the snapshot, every client's runs live,
slash commands and keys as locally; after a disconnect it reconnects with backoff,
re-attaches and reprints the transcript from the new snapshot.

Without ``-p`` and not on a terminal (or ``--mode json``, or ``PI_ACTORS_PLAIN=1``): a plain
line mode. It renders the session's transcript from the snapshot and
then live updates (from whichever client prompts); each line read on stdin is sent as a
prompt. After a disconnect it reconnects with backoff, re-attaches (a new attachment id) and
re-renders from the snapshot. With ``--mode json`` every line is a JSON object: ``attached``,
``snapshot``, the AgentEvents, and ``status``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ._remote_auth import add_credential_args, resolve_credentials

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    from ._usage import CliParser

    p = CliParser(prog="pi-actors attach", description=(
            "Attach to a session on a pi-actors server: the interactive TUI on a terminal, a line mode "
            "otherwise; -p (or --mode json with messages) runs the messages headless."
        ),
    )
    p.add_argument("url", help="ws://HOST:PORT/, wss://HOST:PORT/ (TLS) or unix:PATH")
    p.add_argument("messages", nargs="*")
    add_credential_args(p)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--session", help="the session id to attach to")
    group.add_argument("--new", action="store_true", help="create a new session (the default without --session)")
    p.add_argument("--cwd", help="working directory of a new session (on the server)")
    p.add_argument("--tool-host", help="run a new session's tool calls on this tool host")
    p.add_argument("-p", "--print", dest="print_mode", action="store_true")
    p.add_argument("--mode", choices=["text", "json"], default="text")
    return p


def _create_args(args: argparse.Namespace) -> dict:
    out: dict[str, Any] = {}
    if args.cwd:
        out["cwd"] = args.cwd
    if args.tool_host:
        out["toolHost"] = args.tool_host
    return out


async def _headless(args: argparse.Namespace) -> int:
    from ..protocol.events import AgentEventRebuilder
    from ..runtime import RemoteError
    from ..server.client import RemoteSession, connect
    from ._render import JsonRenderer, PrintRenderer

    renderer = JsonRenderer() if args.mode == "json" else PrintRenderer()
    try:
        async with connect(args.url, token=args.token, role="ui", name="attach", tls_ca=args.tls_ca) as peer:
            sid = args.session or (await peer.call("create", _create_args(args)))["sessionId"]
            session = await RemoteSession.attach(peer, sid)
            renderer.header({"type": "attached", "sessionId": sid, "attachmentId": session.attachment_id})
            for text in args.messages:
                rebuild = AgentEventRebuilder()
                async with session.open_call("prompt", {"text": text}) as call:
                    async for event in call:
                        renderer.event(rebuild.apply(event))
                    await call.result()
    except (RemoteError, BaseExceptionGroup) as exc:
        _report(exc)
        return 1
    return renderer.finish()


def _report(exc: BaseException) -> None:
    """Print a refusal or a lost connection (possibly inside exception groups) as one line
    on stderr; re-raise anything else (a bug deserves its traceback)."""
    from ..runtime import ConnectionLost, RemoteError, leaf_exceptions

    leaves = leaf_exceptions(exc)
    if not all(isinstance(leaf, RemoteError) for leaf in leaves):
        raise exc
    first = leaves[0]
    assert isinstance(first, RemoteError)
    print(f"Error: {first.message}" if isinstance(first, ConnectionLost) else f"Error: {first.message} ({first.code})", file=sys.stderr)


class _LineView:
    def __init__(self, json_mode: bool) -> None:
        from ._render import LiveRenderer

        self.json = json_mode
        self.live = LiveRenderer()

    def _line(self, obj: Any) -> None:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def attached(self, session_id: str, attachment_id: str) -> None:
        if self.json:
            self._line({"type": "attached", "sessionId": session_id, "attachmentId": attachment_id})
        else:
            print(f"[attached to session {session_id}]", file=sys.stderr, flush=True)

    def snapshot(self, snap: dict) -> None:
        if self.json:
            self._line({"type": "snapshot", **snap})
            return
        for msg in snap.get("messages") or []:
            content = msg.get("content")
            text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
            print(f"{msg.get('role')}: {text}", flush=True)
        partial = snap.get("streamMessage")
        if partial:
            sys.stdout.write("".join(b.get("text", "") for b in partial.get("content") or [] if isinstance(b, dict)))
            sys.stdout.flush()

    def event(self, event: dict) -> None:
        if self.json:
            self._line(event)
        else:
            self.live.event(event)

    def status(self, text: str) -> None:
        if self.json:
            self._line({"type": "status", "message": text})
        print(text, file=sys.stderr, flush=True)


async def _line_mode(args: argparse.Namespace) -> int:
    import trio

    from ..runtime import RemoteError
    from ..server.remote_ui import follow_session

    send, receive = trio.open_memory_channel[str](16)
    view = _LineView(args.mode == "json")

    async def read_stdin() -> None:
        stream = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        buf = b""
        async with send, stream:
            for text in args.messages:
                await send.send(text)
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        await send.send(line.decode(errors="replace"))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_stdin)
            await follow_session(
                args.url, token=args.token, session_id=args.session, create=_create_args(args), view=view, prompts=receive,
                tls_ca=args.tls_ca,
            )
            nursery.cancel_scope.cancel()
    except (RemoteError, BaseExceptionGroup) as exc:
        _report(exc)
        return 1
    return 0


async def _tui(args: argparse.Namespace) -> int:
    from ..runtime import RemoteError
    from .tui.remote import run_remote_tui

    try:
        return await run_remote_tui(
            args.url, token=args.token, session_id=args.session, create=_create_args(args), initial=list(args.messages),
            tls_ca=args.tls_ca,
        )
    except RemoteError as exc:
        print(f"Error: {exc.message} ({exc.code})", file=sys.stderr)
        return 1


def main(argv: list[str]) -> int:
    import trio

    from .interactive import use_tui

    args = build_parser().parse_intermixed_args(argv)
    resolve_credentials(args)
    if args.print_mode or (args.mode == "json" and args.messages):
        if not args.messages:
            print("Error: -p needs a prompt", file=sys.stderr)
            return 1
        return trio.run(_headless, args)
    if args.mode == "text" and use_tui():
        return trio.run(_tui, args)
    return trio.run(_line_mode, args)
