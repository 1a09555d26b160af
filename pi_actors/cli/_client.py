"""The UI side of a session: send a prompt to the coordinator, hand each event to a renderer."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from ..protocol.coordinator import PROMPT
from ..protocol.events import AgentEventRebuilder
from ..runtime import OutgoingCall
from ._initial import prompt_images

__all__ = ["send_prompt"]


class CallOpener(Protocol):
    """What ``send_prompt`` needs of the coordinator: a ``Peer`` or a ``CoordinatorLink``."""

    def open_call(self, method: str, args: Any = ..., target: str = ...) -> AbstractAsyncContextManager[OutgoingCall]: ...


async def send_prompt(coordinator: CallOpener, text: str, renderer: Any) -> None:
    """Run one prompt to the end; every AgentEvent (pi's full shapes; only the types named by
    the renderer's ``event_types``, when it has one) goes to
    ``renderer.event``. Raises RemoteError if the coordinator refuses or fails the run.

    The events are read as the plain trees they are on the wire, not decoded to
    ``protocol.events.WireEvent`` Structs (``open_method``): the rebuilder works on the
    trees, and converting each delta to a tagged union and back would cost more than the
    rest of its handling (msgspec.convert does not cache a union's type information)."""
    rebuild = AgentEventRebuilder()
    # A renderer that shows only some events (``-p``: the answer) says which: the others are
    # not sent at all (one frame per event, coordinator to CLI, was most of a turn's relaying).
    types: Any = getattr(renderer, "event_types", None)
    only = {"types": sorted(types)} if types else {}
    async with coordinator.open_call(PROMPT.name, {"text": str(text), **prompt_images(text), **only}) as call:
        async for event in call:
            renderer.event(rebuild.apply(event))
        await call.result()
