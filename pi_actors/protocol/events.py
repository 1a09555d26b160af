"""The event wire format: what a chunk of ``prompt``/``continue`` and a subscription update
carry, and how a receiver rebuilds pi's full event shapes from them (public API for clients).

Events are pi's, as plain JSON-like trees with camelCase keys: the AgentEvents
(``agent_start``, ``agent_end``, ``turn_start``, ``turn_end``, ``message_start``,
``message_update``, ``message_end``, ``tool_execution_start``, ``tool_execution_update``,
``tool_execution_end``) and the session events of the coordinator's upkeep
(``auto_retry_start``, ``auto_retry_end``, ``compaction_start``, ``compaction_end`` — pi
0.73's names, with ``reason`` ``manual``/``threshold``/``overflow`` —, ``queue_update``,
``session_info_changed``), each with its ``type``. :data:`WireEvent` declares them as a tagged union of Structs (the
``chunk`` of ``prompt``/``continue``, the ``event`` of a subscription update), byte for byte
the trees that are sent: the event's own fields are typed, the messages and tool results
inside stay plain trees (``dict``; the transcript also holds custom messages such as
``bashExecution``). The coordinator builds and sends the plain trees (:data:`AgentEventData`);
a typed caller (``open_method``) receives the Structs and turns one back into the plain tree
the rebuilder takes with :func:`event_to_plain`. A UI on the hot path (every delta) reads the
plain trees instead: msgspec converts to a union ~20 times slower than to one Struct.

In-process, every AssistantMessageEvent carries ``partial``: the live message being built.
Sent as is, a reply of N deltas would cost O(N²) bytes. On the wire, therefore:

* delta events (``text_delta``, ``thinking_delta``, ``toolcall_delta``) travel **without**
  ``partial``; the receiver applies the delta to its own copy of the partial message;
* every other event keeps its ``partial`` (they are few per message: start, block
  start/end) and the receiver adopts it, which also resynchronises any state the deltas
  did not carry (signatures, usage);
* an AgentEvent ``message_update`` travels without its ``message`` (the receiver's
  :class:`AgentEventRebuilder` restores it; seed it with a subscription snapshot's
  ``streamMessage`` when joining mid-reply).

The same rule serves provider → coordinator (:class:`StreamRebuilder`, giving Structs to the
agent loop) and coordinator → UI (:class:`AgentEventRebuilder`, giving pi's plain JSON shapes).

Coalescing (:class:`CoalescingSender`, provider side). Events are handed to a sender task
instead of being sent inline, and wait in a queue while earlier ones are being sent. While the
queue is short (fewer than ``max_queued`` = 8 items) every event is queued as itself, so a
consumer that keeps up sees every original delta. Once the queue is that long (the consumer or
the link is slower than the model), a new delta is **joined to the last queued item when that
item is a delta of the same kind and block**: one delta whose text is the concatenation of
theirs, in order. Nothing else changes: non-delta events are never merged or reordered, deltas
are never merged across a block, a kind or any other event, the rebuilt message is identical,
and a merged delta is an ordinary delta event (pi-shaped JSON stays valid).
With ``send_many`` (the provider passes ``IncomingCall.send_chunks``) the items waiting when
the sender wakes go out in one write: the events parsed from one network read reach the
consumer in one wake-up instead of one each.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio

from .. import _ready
from ..ai import types as T
from ..ai.partial_json import parse_streaming_json
from ..runtime import WireStruct

__all__ = [
    "AgentEventData",
    "WireEvent",
    "event_to_plain",
    "AgentStart",
    "AgentEnd",
    "TurnStart",
    "TurnEnd",
    "MessageStart",
    "MessageUpdate",
    "MessageEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolExecutionEnd",
    "AutoRetryStart",
    "AutoRetryEnd",
    "AutoCompactionStart",
    "AutoCompactionEnd",
    "CompactionStart",
    "CompactionEnd",
    "QueueUpdate",
    "SessionInfoChanged",
    "DELTA_TYPES",
    "strip_stream_event",
    "StreamRebuilder",
    "CoalescingSender",
    "strip_agent_event",
    "AgentEventRebuilder",
]

#: One event on the wire (see the module docstring): ``{"type": ..., ...}`` in pi's shapes.
AgentEventData = dict[str, Any]

#: A message (or tool result) inside an event, in pi's JSON shape.
_Tree = dict[str, Any]


class _Event(WireStruct, tag_field="type"):
    """An event: ``type`` first, then its fields in pi's order; no field is left out unless
    it is declared with a default."""


class AgentStart(_Event, tag="agent_start"):
    """A run starts."""


class AgentEnd(_Event, tag="agent_end"):
    """A run ended; ``messages`` are the ones it added."""

    messages: list[_Tree]


class TurnStart(_Event, tag="turn_start"):
    """A turn (one LLM call and its tool calls) starts."""


class TurnEnd(_Event, tag="turn_end"):
    message: _Tree
    tool_results: list[_Tree]


class MessageStart(_Event, tag="message_start"):
    message: _Tree


class MessageUpdate(_Event, tag="message_update"):
    """A streamed change of the assistant message. On the wire without ``message`` (and,
    for a delta, the inner event's ``partial``): :class:`AgentEventRebuilder` restores them."""

    assistant_message_event: _Tree
    message: _Tree | None = None


class MessageEnd(_Event, tag="message_end"):
    """A finished message; it is in the session file before this is sent."""

    message: _Tree


class ToolExecutionStart(_Event, tag="tool_execution_start"):
    tool_call_id: str
    tool_name: str
    args: Any


class ToolExecutionUpdate(_Event, tag="tool_execution_update"):
    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: Any


class ToolExecutionEnd(_Event, tag="tool_execution_end"):
    tool_call_id: str
    tool_name: str
    result: _Tree
    is_error: bool


class AutoRetryStart(_Event, tag="auto_retry_start"):
    """A retryable provider error: the run is retried after ``delayMs``."""

    attempt: int
    max_attempts: int
    delay_ms: int | float
    error_message: str | None


class AutoRetryEnd(_Event, tag="auto_retry_end"):
    success: bool
    attempt: int
    final_error: str | None = None


class CompactionStart(_Event, tag="compaction_start"):
    """pi 0.73's compaction events: a manual ``/compact`` or an automatic compaction starts."""

    #: ``manual``, ``threshold`` or ``overflow``.
    reason: str


class CompactionEnd(_Event, tag="compaction_end", kw_only=True):
    reason: str
    #: The compaction's ``{summary, firstKeptEntryId, tokensBefore, details}``, if one was made.
    result: _Tree | None = None
    aborted: bool
    will_retry: bool
    error_message: str | None = None


class QueueUpdate(_Event, tag="queue_update"):
    """The texts of the queued steering and follow-up messages, after every change."""

    steering: list[str]
    follow_up: list[str]


class SessionInfoChanged(_Event, tag="session_info_changed"):
    """The session was named (``set_session_name``)."""

    name: str | None = None


class AutoCompactionStart(_Event, tag="auto_compaction_start"):
    """Before pi 0.73 (no longer sent; kept so that older peers' events still decode)."""

    #: ``threshold`` or ``overflow``.
    reason: str


class AutoCompactionEnd(_Event, tag="auto_compaction_end", kw_only=True):
    #: The compaction's ``{summary, firstKeptEntryId, tokensBefore, details}``, if one was made.
    result: _Tree | None = None
    aborted: bool
    will_retry: bool
    error_message: str | None = None


#: Every event a run streams (tagged by ``type``).
WireEvent = (
    AgentStart | AgentEnd | TurnStart | TurnEnd | MessageStart | MessageUpdate | MessageEnd
    | ToolExecutionStart | ToolExecutionUpdate | ToolExecutionEnd
    | AutoRetryStart | AutoRetryEnd | AutoCompactionStart | AutoCompactionEnd
    | CompactionStart | CompactionEnd | QueueUpdate | SessionInfoChanged
)  # fmt: skip


def event_to_plain(event: WireEvent) -> AgentEventData:
    """A typed event as the plain tree it was on the wire (what the rebuilder takes)."""
    data: AgentEventData = msgspec.to_builtins(event)
    return data


DELTA_TYPES = frozenset({"text_delta", "thinking_delta", "toolcall_delta"})


def strip_stream_event(event: Any) -> AgentEventData:
    """An AssistantMessageEvent (Struct) as plain data for the wire, deltas without partial."""
    kind = event.type
    if kind in DELTA_TYPES:  # built directly: never walks the (possibly large) partial message
        return {"type": kind, "contentIndex": event.content_index, "delta": event.delta}
    data: AgentEventData = T.to_plain(event)
    return data


class CoalescingSender:
    """Sends stream events through ``send(data)`` from its own task, merging deltas that pile up.

    Use: ``nursery.start_soon(sender.run)``; ``await sender.push(event)`` per event (it never
    waits for the link); ``await sender.drain()`` once the stream is over (every queued event
    sent; re-raises a send failure), or ``await sender.finish()`` to take the events not yet
    sent (to send them with the call's result). A failed send stops the sender and makes the next
    ``push`` raise that failure, so the producer stops too.
    """

    def __init__(self, send: Callable[[AgentEventData], Awaitable[None]], max_queued: int = 8,
                 send_many: Callable[[list[AgentEventData]], Awaitable[None]] | None = None) -> None:
        self._send = send
        #: With ``send_many``, every item waiting when the sender wakes goes in one call
        #: (``IncomingCall.send_chunks``: one write for the run), else one ``send`` each.
        self._send_many = send_many
        self.max_queued = max_queued
        # Each queued item: [plain event] or, for deltas, [type, contentIndex, [pieces]].
        self._queue: deque[list[Any]] = deque()
        self._wake = trio.Event()
        self._idle = trio.Event()
        self._idle.set()
        self._sending = False  # the sender task is inside a send
        self._failure: BaseException | None = None
        #: How many chunks were sent, and how many deltas went into them (for measurements).
        self.chunks_sent = 0
        self.deltas_in = 0

    async def push(self, event: Any) -> None:
        if self._failure is not None:
            raise self._failure
        kind = event.type
        queue = self._queue
        if kind in DELTA_TYPES:
            self.deltas_in += 1
            if len(queue) >= self.max_queued:
                last = queue[-1]
                if len(last) == 3 and last[0] == kind and last[1] == event.content_index:
                    last[2].append(event.delta)
                    return
            queue.append([kind, event.content_index, [event.delta]])
        else:
            queue.append([strip_stream_event(event)])
        if not self._wake.is_set():
            self._idle = trio.Event()
            self._wake.set()

    async def run(self) -> None:
        queue = self._queue
        while True:
            await self._wake.wait()
            self._sending = True
            try:
                while queue:
                    if self._send_many is not None:
                        batch = [_wire_item(queue.popleft()) for _ in range(len(queue))]
                        await self._send_many(batch)
                        self.chunks_sent += len(batch)
                        continue
                    await self._send(_wire_item(queue.popleft()))
                    self.chunks_sent += 1
            except Exception as exc:
                self._failure = exc
                queue.clear()
                self._idle.set()
                return
            finally:
                self._sending = False
            self._wake = trio.Event()
            self._idle.set()

    async def drain(self) -> None:
        await _ready.wait(self._idle)
        if self._failure is not None:
            raise self._failure

    async def finish(self) -> list[AgentEventData]:
        """The stream is over: returns, in order, the events pushed that the sender has not
        started to send, and takes them off its queue (for the caller to send with its
        result: ``IncomingCall.send_with_result``); waits first if the sender is in the
        middle of a send, which then sends what is queued. Re-raises a send failure.

        Why: waking the sender for the last events, then the caller for the result, is two
        trips through the scheduler and two writes that each wake the receiver; the last
        events and the result fit in one."""
        if self._sending:
            await self._idle.wait()
        if self._failure is not None:
            raise self._failure
        rest = [_wire_item(item) for item in self._queue]
        self.chunks_sent += len(rest)
        self._queue.clear()
        return rest


def _wire_item(item: list[Any]) -> AgentEventData:
    """A queued item of :class:`CoalescingSender` as the event it sends."""
    if len(item) == 3:
        return {"type": item[0], "contentIndex": item[1], "delta": "".join(item[2])}
    data: AgentEventData = item[0]
    return data


def _apply_delta_plain(partial: dict[str, Any], event: AgentEventData, json_buffers: dict[int, str]) -> None:
    kind = event["type"]
    index = event["contentIndex"]
    block = partial["content"][index]
    if kind == "text_delta":
        block["text"] += event["delta"]
    elif kind == "thinking_delta":
        block["thinking"] += event["delta"]
    else:
        buf = json_buffers.get(index, "") + event["delta"]
        json_buffers[index] = buf
        block["arguments"] = parse_streaming_json(buf)


class StreamRebuilder:
    """Turns wire events back into Structs whose ``partial`` is one live message."""

    def __init__(self) -> None:
        self.partial: T.AssistantMessage | None = None
        self._buffers: dict[int, str] = {}

    def apply(self, data: AgentEventData) -> T.AssistantMessageEvent:
        """Apply one wire event; returns the Struct event with ``partial`` set (non-terminal)."""
        kind = data.get("type")
        if kind in DELTA_TYPES:
            if self.partial is None:
                raise ValueError(f"{kind} event before any message start")
            index = data["contentIndex"]
            block: Any = self.partial.content[index]  # the kind of block the delta names
            if kind == "text_delta":
                block.text += data["delta"]
                return T.TextDeltaEvent(content_index=index, delta=data["delta"], partial=self.partial)
            if kind == "thinking_delta":
                block.thinking += data["delta"]
                return T.ThinkingDeltaEvent(content_index=index, delta=data["delta"], partial=self.partial)
            buf = self._buffers.get(index, "") + data["delta"]
            self._buffers[index] = buf
            parsed = parse_streaming_json(buf)
            block.arguments = parsed if isinstance(parsed, dict) else {}
            return T.ToolCallDeltaEvent(content_index=index, delta=data["delta"], partial=self.partial)
        event = T.event_from_plain(data)
        partial = getattr(event, "partial", None)
        if partial is not None:
            self.partial = partial
            if kind == "toolcall_start":
                self._buffers.pop(data["contentIndex"], None)
        return event


def strip_agent_event(event: Any) -> AgentEventData:
    """An AgentEvent (Struct) as plain data for a UI link.

    ``message_update`` drops its ``message`` (the UI rebuilds it) and, for deltas, the
    event's ``partial``.
    """
    data: AgentEventData = T.to_plain(event)
    if data.get("type") == "message_update":
        data.pop("message", None)
        ame = data.get("assistantMessageEvent") or {}
        if ame.get("type") in DELTA_TYPES:
            ame.pop("partial", None)
    return data


class AgentEventRebuilder:
    """Restores pi's full shapes for ``message_update`` events received from a coordinator."""

    def __init__(self) -> None:
        self._partial: dict[str, Any] | None = None
        self._buffers: dict[int, str] = {}

    def seed(self, partial: dict[str, Any] | None) -> None:
        """Start from a snapshot's ``streamMessage`` (a subscriber joining mid-reply)."""
        self._partial = copy.deepcopy(partial) if partial is not None else None
        self._buffers = {}

    def apply(self, data: AgentEventData) -> AgentEventData:
        kind = data.get("type")
        if kind == "message_start":
            message = data.get("message") or {}
            if message.get("role") == "assistant":
                self._partial = copy.deepcopy(message)
                self._buffers = {}
            return data
        if kind != "message_update":
            return data
        ame = data["assistantMessageEvent"]
        if "partial" in ame:
            self._partial = ame["partial"]
            if ame.get("type") == "toolcall_start":
                self._buffers.pop(ame.get("contentIndex"), None)
        elif self._partial is not None:
            _apply_delta_plain(self._partial, ame, self._buffers)
            ame = {**ame, "partial": self._partial}
        message = copy.copy(self._partial)
        if message is not None:
            message["content"] = [dict(b) for b in message["content"]]
        return {"type": "message_update", "message": message, "assistantMessageEvent": ame}
