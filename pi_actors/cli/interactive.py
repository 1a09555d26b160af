"""Interactive mode: the TUI (``pi_actors.cli.tui``) on a terminal, else a plain line loop.

The TUI runs when stdin and stdout are terminals and ``TERM`` is not ``dumb`` (or unset);
``PI_ACTORS_PLAIN=1`` forces the plain loop. The plain loop is the same UI actor role over
the same runtime: each line is a ``prompt`` call to the coordinator; ``/quit`` or end of
input exits. prompt_toolkit and rich are imported only on the TUI's path.
"""

from __future__ import annotations

import sys
from typing import Any

import trio

from ..actors import open_local_runtime
from ..protocol.config import RuntimeConfig
from ..runtime import RemoteError
from ._client import send_prompt
from ._render import LiveRenderer

__all__ = ["run_interactive"]


def use_tui() -> bool:
    import os

    term = os.environ.get("TERM", "")
    return sys.stdin.isatty() and sys.stdout.isatty() and term not in ("", "dumb") and os.environ.get("PI_ACTORS_PLAIN") != "1"


async def run_interactive(config: RuntimeConfig, initial: list[str], prestarted: Any = None) -> int:
    """The interactive session: the TUI on a terminal, else the plain line mode.
    ``prestarted``: actor processes started ahead (the tool pool the CLI forked), for
    ``open_local_runtime``."""
    if use_tui():
        from .tui import run_tui

        return await run_tui(config, initial, prestarted)
    return await run_plain(config, initial, prestarted)


async def run_plain(config: RuntimeConfig, initial: list[str], prestarted: Any = None) -> int:
    renderer = LiveRenderer()
    model = config.coordinator.model
    print(f"pi-actors — {model.provider}/{model.id} in {config.coordinator.cwd}  (/quit to exit)")
    pending = list(initial)
    async with open_local_runtime(config, store_with_coordinator=True, restart_coordinator=True, spares=True,
                                  prestarted=prestarted) as coordinator:  # fmt: skip
        from ._sessions import print_session_warnings

        try:
            print_session_warnings(await coordinator.call("session"))
        except RemoteError as exc:  # the session could not be opened (e.g. it is locked)
            print(f"Error: {exc.message}", file=sys.stderr)
            return 1
        while True:
            if pending:
                text = pending.pop(0)
                print(f"> {text}")
            else:
                try:
                    text = await trio.to_thread.run_sync(input, "> ", abandon_on_cancel=True)
                except EOFError:
                    print()
                    return 0
            if not getattr(text, "images", ()):  # (a PromptText keeps its @file images)
                text = text.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                return 0
            try:
                await send_prompt(coordinator, text, renderer)
            except RemoteError as exc:
                print(f"Error: {exc.message}", file=sys.stderr)
                if coordinator.failure is not None:
                    return 1  # the session failed for good (too many restarts)
