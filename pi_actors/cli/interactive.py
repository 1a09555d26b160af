"""Plain interactive mode: a line prompt, streaming answers, tool calls as they happen.

The full TUI (editor, markdown, footer, queues) is a later piece of work; this loop is the
same UI actor role over the same runtime: each line is a ``prompt`` call to the coordinator.
``/quit`` or end of input exits.
"""

from __future__ import annotations

import sys
from typing import Any

import trio

from ..runtime import RemoteError
from ._client import send_prompt
from ._render import LiveRenderer
from ._supervisor import open_local_runtime

__all__ = ["run_interactive"]


async def run_interactive(config: dict[str, Any], initial: list[str]) -> int:
    renderer = LiveRenderer()
    model = config["coordinator"]["model"]
    print(f"pi-actors — {model['provider']}/{model['id']} in {config['coordinator']['cwd']}  (/quit to exit)")
    pending = list(initial)
    async with open_local_runtime(config) as coordinator:
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
            text = text.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                return 0
            try:
                await send_prompt(coordinator, text, renderer)
            except RemoteError as exc:
                print(f"Error: {exc.message}", file=sys.stderr)
