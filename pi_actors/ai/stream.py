"""The entry points of the LLM layer: ``stream`` and ``stream_simple`` (pi's packages/ai, docs/architecture.md §7).

Push style: the function runs the call to completion, awaiting ``emit(event)`` for each of the
12 events in order, and returns the final AssistantMessage.

Contract (stronger than pi, which raises for some of these):
- never raises at its caller, except a cancellation from an outer cancel scope;
- exactly one terminal event (``done`` or ``error``) reaches ``emit``; nothing after it. This
  holds for any registered provider: events a provider emits after its terminal event are
  dropped, a provider that raises gets an ``error`` event (keeping its partial content), and
  one that returns without a terminal event gets one;
- an unknown api gives one ``error`` event ``No API provider registered for api: <api>``;
- ``model`` may also be a catalog reference ``"provider/id"``; one missing from the catalog
  gives one ``error`` event saying whether the provider or the model id is unknown;
- the return value is the message carried by the terminal event.
"""

from __future__ import annotations

import msgspec

from .catalog import find_model, unknown_model_message
from .options import Emit, StreamOptions
from .registry import error_message, get_api_provider
from .types import AssistantMessage, AssistantMessageEvent, Context, DoneEvent, ErrorEvent, Model

__all__ = ["stream", "stream_simple", "complete", "complete_simple"]


class _Guard:
    """Passes events on until the terminal one; remembers the live partial and the final message."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self.final: AssistantMessage | None = None
        self.partial: AssistantMessage | None = None

    async def emit(self, event: AssistantMessageEvent) -> None:
        if self.final is not None:
            return
        if isinstance(event, DoneEvent):
            self.final = event.message
        elif isinstance(event, ErrorEvent):
            self.final = event.error
        else:
            self.partial = event.partial
        await self._emit(event)

    async def fail(self, model: Model, text: str) -> AssistantMessage:
        if self.partial is not None:
            msg = msgspec.structs.replace(self.partial, content=list(self.partial.content),
                                          stop_reason="error", error_message=text)
        else:
            msg = error_message(model, text)
        try:
            await self.emit(ErrorEvent(reason="error", error=msg))
        except Exception:
            self.final = msg
        return msg


async def _dispatch(model: Model | str, context: Context, options: StreamOptions | None, emit: Emit,
                    simple: bool) -> AssistantMessage:
    guard = _Guard(emit)
    if isinstance(model, str):
        found = find_model(model)
        if found is None:
            provider, _, model_id = model.partition("/") if "/" in model else ("", "", model)
            placeholder = Model(id=model_id, api="unknown", provider=provider or "unknown")
            return await guard.fail(placeholder, unknown_model_message(model))
        model = found
    api_provider = get_api_provider(model.api)
    if api_provider is None:
        return await guard.fail(model, f"No API provider registered for api: {model.api}")
    fn = api_provider.stream_simple if simple else api_provider.stream
    try:
        result = await fn(model, context, options, guard.emit)
    except Exception as exc:
        if guard.final is not None:
            return guard.final
        return await guard.fail(model, str(exc) or type(exc).__name__)
    if guard.final is None:
        return await guard.fail(model, f"Provider for api {model.api} ended without a terminal event")
    return guard.final if guard.final is not None else result


async def stream(model: Model | str, context: Context, options: StreamOptions | None, emit: Emit) -> AssistantMessage:
    """Call ``model`` with provider-native options (``options.extra``)."""
    return await _dispatch(model, context, options, emit, simple=False)


async def stream_simple(model: Model | str, context: Context, options: StreamOptions | None,
                        emit: Emit) -> AssistantMessage:
    """Call ``model`` with the unified options (``reasoning``, ``thinking_budgets``)."""
    return await _dispatch(model, context, options, emit, simple=True)


async def _discard(_event: AssistantMessageEvent) -> None:
    pass


async def complete(model: Model | str, context: Context, options: StreamOptions | None = None) -> AssistantMessage:
    """``stream`` without listening to the events."""
    return await stream(model, context, options, _discard)


async def complete_simple(model: Model | str, context: Context, options: StreamOptions | None = None) -> AssistantMessage:
    """``stream_simple`` without listening to the events."""
    return await stream_simple(model, context, options, _discard)
