"""The UI side of a session: send a prompt to the coordinator, hand each event to a renderer."""

from __future__ import annotations

from typing import Any

from ..actors import CoordinatorLink
from ..protocol.coordinator import PROMPT
from ..protocol.events import AgentEventRebuilder
from ..runtime import Peer

__all__ = ["send_prompt"]


async def send_prompt(coordinator: Peer | CoordinatorLink, text: str, renderer: Any) -> None:
    """Run one prompt to the end; every AgentEvent (pi's full shapes) goes to
    ``renderer.event``. Raises RemoteError if the coordinator refuses or fails the run.

    The events are read as the plain trees they are on the wire, not decoded to
    ``protocol.events.WireEvent`` Structs (``open_method``): the rebuilder works on the
    trees, and converting each delta to a tagged union and back would cost more than the
    rest of its handling (msgspec.convert does not cache a union's type information)."""
    rebuild = AgentEventRebuilder()
    async with coordinator.open_call(PROMPT.name, {"text": text}) as call:
        async for event in call:
            renderer.event(rebuild.apply(event))
        await call.result()
