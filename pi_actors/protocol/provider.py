"""The provider streamer's contract (``PROVIDER``): one LLM stream per call.

The coordinator is the only caller. API keys never cross this link: the provider actor owns
them (``apiKey`` in the options is ignored). Provider trouble — an HTTP error, a refused
connection, a missing key, an abort — is never a failed call: it arrives as the terminal
``error`` event and a final message with ``stopReason`` ``error``/``aborted``.

Chunks are :data:`~pi_actors.ai.types.AssistantMessageEvent` values in their wire form:
delta events (``text_delta``, ``thinking_delta``, ``toolcall_delta``) travel without
``partial`` — the receiver applies them to its own copy — and deltas of one block that queue
up while the link is busy are merged into one (see ``CoalescingSender``).

Context caching (``cached``): the provider keeps the last context of each key it is sent, so
a request may carry only the messages appended since (see :class:`CachedContext`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..ai.options import CacheRetention
from ..ai.types import AssistantMessage, AssistantMessageEvent, Context, Model, ThinkingLevel
from ..runtime import Interface, Method, WireStruct

__all__ = ["WireStreamOptions", "CachedContext", "StreamArgs", "STREAM", "PROVIDER"]


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


class CachedContext(WireStruct):
    """How a request's context relates to the one the provider keeps for ``key``.

    ``key``: chosen by the caller (the coordinator: session id and a nonce random per
    coordinator instance). ``version``: this request's context is kept as that version of
    ``key``. Without ``baseVersion`` the request carries the whole context; with it,
    ``context.messages`` holds only the messages appended to the kept version
    ``baseVersion``, which must hold exactly ``baseCount`` messages — otherwise the call is
    refused with ``stale_context`` before anything streams, and the caller resends the whole
    context. The system prompt and tools travel whole, unless ``keepFrame`` (only with
    ``baseVersion``): then the request's context carries neither, and they are those of the
    kept base version (unchanged since; a caller whose system prompt or tools changed sends
    them). A request without ``cached`` always carries them."""

    key: str
    version: int
    base_version: int | None = None
    base_count: int = 0
    keep_frame: bool = False


class StreamArgs(WireStruct):
    """``model``: a Model, or a catalog reference ``"provider/id"`` (one missing from the
    catalog gives an ``error`` event saying so). ``simple`` (default true) selects
    ``stream_simple`` over ``stream``; ``requestId`` is for logs. ``cached`` (optional): the
    context is kept for later requests, and may be a delta onto a kept one (see
    :class:`CachedContext`); without it the context is whole and nothing is kept."""

    model: Model | str
    context: Context
    options: WireStreamOptions = msgspec.field(default_factory=WireStreamOptions)
    simple: bool = True
    request_id: str | None = None
    cached: CachedContext | None = None


STREAM: Method[StreamArgs, AssistantMessageEvent, AssistantMessage] = Method(
    "stream",
    args=StreamArgs,
    result=AssistantMessage,
    chunk=AssistantMessageEvent,
    cooperative=True,
    errors={
        "stale_context": "`cached` names a base version the provider does not hold (it restarted, "
        "or evicted the key, or the caller lost track): resend the whole context"
    },
    doc="Stream the model's reply to the context: every event is a chunk, the result is the "
    "final message. A cancel aborts the stream; the partial content still comes back.",
)

PROVIDER = Interface("provider", [STREAM], doc="The provider streamer: owns API keys and SDK clients.")
