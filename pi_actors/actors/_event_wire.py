"""How stream events cross a process boundary without resending the whole message each time.

In-process, every AssistantMessageEvent carries ``partial``: the live message being built.
Sent as is, a reply of N deltas would cost O(N²) bytes. On the wire, therefore:

* delta events (``text_delta``, ``thinking_delta``, ``toolcall_delta``) travel **without**
  ``partial``; the receiver applies the delta to its own copy of the partial message;
* every other event keeps its ``partial`` (they are few per message: start, block
  start/end) and the receiver adopts it, which also resynchronises any state the deltas
  did not carry (signatures, usage).

The same rule serves provider → coordinator (``StreamRebuilder``, giving Structs to the agent
loop) and coordinator → UI (``AgentEventRebuilder``, giving pi's plain JSON shapes).
"""

from __future__ import annotations

import copy
from typing import Any

from ..ai import types as T
from ..ai.partial_json import parse_streaming_json

__all__ = ["DELTA_TYPES", "strip_stream_event", "StreamRebuilder", "strip_agent_event", "AgentEventRebuilder"]

DELTA_TYPES = frozenset({"text_delta", "thinking_delta", "toolcall_delta"})


def strip_stream_event(event: Any) -> dict:
    """An AssistantMessageEvent (Struct) as plain data for the wire, deltas without partial."""
    data = T.to_plain(event)
    if data.get("type") in DELTA_TYPES:
        data.pop("partial", None)
    return data


def _apply_delta_plain(partial: dict, event: dict, json_buffers: dict[int, str]) -> None:
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

    def apply(self, data: dict) -> T.AssistantMessageEvent:
        """Apply one wire event; returns the Struct event with ``partial`` set (non-terminal)."""
        kind = data.get("type")
        if kind in DELTA_TYPES:
            if self.partial is None:
                raise ValueError(f"{kind} event before any message start")
            index = data["contentIndex"]
            block = self.partial.content[index]
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
                self._buffers.pop(event.content_index, None)
        return event


def strip_agent_event(event: Any) -> dict:
    """An AgentEvent (Struct) as plain data for a UI link.

    ``message_update`` drops its ``message`` (the UI rebuilds it) and, for deltas, the
    event's ``partial``.
    """
    data = T.to_plain(event)
    if data.get("type") == "message_update":
        data.pop("message", None)
        ame = data.get("assistantMessageEvent") or {}
        if ame.get("type") in DELTA_TYPES:
            ame.pop("partial", None)
    return data


class AgentEventRebuilder:
    """Restores pi's full shapes for ``message_update`` events received from a coordinator."""

    def __init__(self) -> None:
        self._partial: dict | None = None
        self._buffers: dict[int, str] = {}

    def apply(self, data: dict) -> dict:
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
