"""The provider streamer's contract (``PROVIDER``): one LLM stream per call.

The coordinator is the only caller. API keys never cross this link: the provider actor owns
them (``apiKey`` in the options is ignored). Provider trouble — an HTTP error, a refused
connection, a missing key, an abort — is never a failed call: it arrives as the terminal
``error`` event and a final message with ``stopReason`` ``error``/``aborted``.

Chunks are :data:`~pi_actors.ai.types.AssistantMessageEvent` values in their wire form:
delta events (``text_delta``, ``thinking_delta``, ``toolcall_delta``) travel without
``partial`` — the receiver applies them to its own copy — and deltas of one block that queue
up while the link is busy are merged into one (see ``CoalescingSender``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..ai.options import CacheRetention
from ..ai.types import AssistantMessage, AssistantMessageEvent, Context, Model, ThinkingLevel
from ..runtime import Interface, Method, WireStruct

__all__ = ["WireStreamOptions", "StreamArgs", "STREAM", "PROVIDER"]


class WireStreamOptions(WireStruct):
    """A ``StreamOptions`` as it crosses the link: no key, no abort signal (a ``cancel`` of
    the call aborts the stream). ``extra``: provider-native options."""

    max_tokens: int | None = None
    temperature: float | None = None
    headers: dict[str, str] | None = None
    session_id: str | None = None
    reasoning: ThinkingLevel | None = None
    thinking_budgets: dict[str, int] | None = None
    cache_retention: CacheRetention | None = None
    extra: dict[str, Any] = {}


class StreamArgs(WireStruct):
    """``model``: a Model, or a catalog reference ``"provider/id"`` (one missing from the
    catalog gives an ``error`` event saying so). ``simple`` (default true) selects
    ``stream_simple`` over ``stream``; ``requestId`` is for logs."""

    model: Model | str
    context: Context
    options: WireStreamOptions = msgspec.field(default_factory=WireStreamOptions)
    simple: bool = True
    request_id: str | None = None


STREAM: Method[StreamArgs, AssistantMessageEvent, AssistantMessage] = Method(
    "stream",
    args=StreamArgs,
    result=AssistantMessage,
    chunk=AssistantMessageEvent,
    cooperative=True,
    doc="Stream the model's reply to the context: every event is a chunk, the result is the "
    "final message. A cancel aborts the stream; the partial content still comes back.",
)

PROVIDER = Interface("provider", [STREAM], doc="The provider streamer: owns API keys and SDK clients.")
