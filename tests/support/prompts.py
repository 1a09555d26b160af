"""Running prompts through a coordinator link, as a UI does (public API only)."""

from __future__ import annotations

from typing import Any

from pi_actors.client import AgentEventRebuilder


async def send_prompt(coordinator: Any, text: str, renderer: Any) -> None:
    """Run one prompt to the end, handing every AgentEvent (pi's full shapes, rebuilt from
    the wire form) to ``renderer.event``. Raises RemoteError if the run is refused or fails."""
    rebuild = AgentEventRebuilder()
    async with coordinator.open_call("prompt", {"text": text}) as call:
        async for event in call:
            renderer.event(rebuild.apply(event))
        await call.result()
