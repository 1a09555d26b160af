"""Scripted stream functions, for testing code that drives the agent loop without a provider.

``ScriptedStream(reply, reply, ...)`` is a StreamFn that plays one scripted reply per LLM call
and records every call (model, context, options). A reply is any
``async (model, context, options, emit) -> AssistantMessage``; the builders below emit the same
event sequences a provider does, mutating one live partial message:

* ``reply(Text("hi"), Call("c1", "echo", {"value": "x"}))``: start, the block events
  (``*_start``, one or more ``*_delta``, ``*_end``), then ``done`` (reason ``toolUse`` when it
  holds a tool call, else ``stop``; or the ``stop_reason`` given, ``error``/``aborted`` giving an
  ``error`` event with ``error_message``);
* ``done_only(...)``: only a terminal event, like pi's mock streams;
* ``until_aborted(Text("par"), started=event)``: streams the blocks, sets ``started``, waits
  for ``options.signal`` and ends with ``error``/``aborted``, the partial content kept.

When the script is exhausted a call ends with an ``error`` event (it never raises).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from ..ai.types import (
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    new_assistant_message,
)

__all__ = [
    "Text",
    "Thinking",
    "Call",
    "Reply",
    "ScriptedStream",
    "StreamCall",
    "reply",
    "done_only",
    "until_aborted",
    "fake_model",
]

Reply = Callable[[Model, Context, Any, Callable[[Any], Awaitable[None]]], Awaitable[AssistantMessage]]


@dataclass
class Text:
    text: str


@dataclass
class Thinking:
    thinking: str


@dataclass
class Call:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


Block = Text | Thinking | Call


def fake_model(id: str = "fake-model", provider: str = "fake", api: str = "openai-responses") -> Model:
    return Model(id=id, name=id, api=api, provider=provider)


def _halves(text: str) -> list[str]:
    if len(text) < 2:
        return [text]
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


async def _play_blocks(message: AssistantMessage, blocks: tuple[Block, ...], emit: Any) -> None:
    for block in blocks:
        index = len(message.content)
        if isinstance(block, Text):
            live = TextContent(text="")
            message.content.append(live)
            await emit(TextStartEvent(content_index=index, partial=message))
            for piece in _halves(block.text):
                live.text += piece
                await emit(TextDeltaEvent(content_index=index, delta=piece, partial=message))
            await emit(TextEndEvent(content_index=index, content=live.text, partial=message))
        elif isinstance(block, Thinking):
            live_t = ThinkingContent(thinking="")
            message.content.append(live_t)
            await emit(ThinkingStartEvent(content_index=index, partial=message))
            for piece in _halves(block.thinking):
                live_t.thinking += piece
                await emit(ThinkingDeltaEvent(content_index=index, delta=piece, partial=message))
            await emit(ThinkingEndEvent(content_index=index, content=live_t.thinking, partial=message))
        else:
            call = ToolCall(id=block.id, name=block.name, arguments={})
            message.content.append(call)
            await emit(ToolCallStartEvent(content_index=index, partial=message))
            for piece in _halves(json.dumps(block.arguments)):
                await emit(ToolCallDeltaEvent(content_index=index, delta=piece, partial=message))
            call.arguments = dict(block.arguments)
            await emit(ToolCallEndEvent(content_index=index, tool_call=call, partial=message))


async def _finish(message: AssistantMessage, stop_reason: str, error_message: str | None, emit: Any) -> AssistantMessage:
    message.stop_reason = stop_reason  # type: ignore[assignment]
    if stop_reason in ("error", "aborted"):
        message.error_message = error_message or ("Request was aborted" if stop_reason == "aborted" else "error")
        await emit(ErrorEvent(reason=stop_reason, error=message))  # type: ignore[arg-type]
    else:
        await emit(DoneEvent(reason=stop_reason, message=message))  # type: ignore[arg-type]
    return message


def _default_stop(blocks: tuple[Block, ...]) -> str:
    return "toolUse" if any(isinstance(b, Call) for b in blocks) else "stop"


def reply(*blocks: Block, stop_reason: str | None = None, error_message: str | None = None) -> Reply:
    async def play(model: Model, context: Context, options: Any, emit: Any) -> AssistantMessage:
        message = new_assistant_message(model)
        await emit(StartEvent(partial=message))
        await _play_blocks(message, blocks, emit)
        return await _finish(message, stop_reason or _default_stop(blocks), error_message, emit)

    return play


def done_only(*blocks: Block, stop_reason: str | None = None, error_message: str | None = None) -> Reply:
    async def play(model: Model, context: Context, options: Any, emit: Any) -> AssistantMessage:
        message = new_assistant_message(model)
        for block in blocks:
            if isinstance(block, Text):
                message.content.append(TextContent(text=block.text))
            elif isinstance(block, Thinking):
                message.content.append(ThinkingContent(thinking=block.thinking))
            else:
                message.content.append(ToolCall(id=block.id, name=block.name, arguments=dict(block.arguments)))
        return await _finish(message, stop_reason or _default_stop(blocks), error_message, emit)

    return play


def until_aborted(*blocks: Block, started: trio.Event | None = None) -> Reply:
    async def play(model: Model, context: Context, options: Any, emit: Any) -> AssistantMessage:
        message = new_assistant_message(model)
        await emit(StartEvent(partial=message))
        await _play_blocks(message, blocks, emit)
        if started is not None:
            started.set()
        signal = getattr(options, "signal", None)
        if signal is None:
            return await _finish(message, "error", "until_aborted needs a signal", emit)
        await signal.wait()
        return await _finish(message, "aborted", "Request was aborted", emit)

    return play


@dataclass
class StreamCall:
    model: Model
    context: Context
    options: Any


class ScriptedStream:
    """A StreamFn playing ``replies`` in order, one per call; ``calls`` records each call."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.calls: list[StreamCall] = []

    async def __call__(self, model: Model, context: Context, options: Any, emit: Any) -> AssistantMessage:
        self.calls.append(StreamCall(model, context, options))
        if not self.replies:
            message = new_assistant_message(model)
            return await _finish(message, "error", f"ScriptedStream: no reply scripted for call {len(self.calls)}", emit)
        return await self.replies.pop(0)(model, context, options, emit)
