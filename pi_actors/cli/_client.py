"""The UI side of a session: send a prompt to the coordinator, hand each event to a renderer."""

from __future__ import annotations

from typing import Any

from ..protocol.coordinator import PROMPT, PromptArgs
from ..protocol.events import AgentEventRebuilder, event_to_plain
from ..runtime import Peer, open_method

__all__ = ["send_prompt"]


async def send_prompt(coordinator: Peer, text: str, renderer: Any) -> None:
    """Run one prompt to the end; every AgentEvent (pi's full shapes) goes to
    ``renderer.event``. Raises RemoteError if the coordinator refuses or fails the run."""
    rebuild = AgentEventRebuilder()
    async with open_method(coordinator, PROMPT, PromptArgs(text=text)) as call:
        async for event in call:
            renderer.event(rebuild.apply(event_to_plain(event)))
        await call.result()
