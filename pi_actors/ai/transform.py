"""Prepare a history for replay to a model, possibly another one (pi's packages/ai, docs/architecture.md §7).

Contract: ``transform_messages(messages, model, normalize_id=None)`` returns a new list and
never mutates its input.

Pass 0: for a model whose ``input`` lacks ``"image"``, every run of images in a user message
becomes one text part ``(image omitted: model does not support images)`` and in a tool result
``(tool image omitted: model does not support images)`` (pi's placeholders), so a history with
images can be sent to a text-only model instead of failing.

Pass 1, per message: assistant messages from a different (provider, api, model id) lose
redacted thinking, blank thinking, text signatures and tool-call thought signatures; their
non-blank thinking becomes plain text; with ``normalize_id`` their tool-call ids are rewritten,
and later tool results follow the rewrite. Same-model thinking with a signature is kept even
when blank; other blank thinking is dropped.

Pass 2: a tool call of a kept assistant message that has no result before the next assistant or
user message gets a synthetic error result ``"No result provided"`` right before that message
(calls still pending at the end are left alone); assistant messages that ended in ``error`` or
``aborted`` are dropped.

Continued: ``MessageTransform`` gives the same passes fed a growing history piece by piece, and
``HistoryConversion`` / ``Continuation`` keep an API's conversion of the last request's history to
continue it with the messages appended since (every API subclasses ``HistoryConversion`` with its
own ``convert`` step), so that a request's build does not grow with the session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from .types import (
    AssistantContent,
    AssistantMessage,
    ImageContent,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    now_ms,
)

__all__ = ["NON_VISION_TOOL_IMAGE_PLACEHOLDER", "NON_VISION_USER_IMAGE_PLACEHOLDER", "Continuation", "HistoryConversion",
           "MessageTransform", "transform_messages"]

NON_VISION_USER_IMAGE_PLACEHOLDER = "(image omitted: model does not support images)"
NON_VISION_TOOL_IMAGE_PLACEHOLDER = "(tool image omitted: model does not support images)"

NormalizeId = Callable[[str, Model, AssistantMessage], str]


def _convert_assistant(msg: AssistantMessage, model: Model, normalize_id: NormalizeId | None,
                       id_map: dict[str, str]) -> AssistantMessage:
    same = msg.provider == model.provider and msg.api == model.api and msg.model == model.id
    blocks: list[AssistantContent] = []
    for block in msg.content:
        if isinstance(block, ThinkingContent):
            if block.redacted:
                if same:
                    blocks.append(block)
                continue
            if same and block.thinking_signature:
                blocks.append(block)
            elif not block.thinking.strip():
                continue
            elif same:
                blocks.append(block)
            else:
                blocks.append(TextContent(text=block.thinking))
        elif isinstance(block, TextContent):
            blocks.append(block if same else TextContent(text=block.text))
        elif isinstance(block, ToolCall):
            if same:
                blocks.append(block)
                continue
            new_id = block.id
            if normalize_id is not None:
                new_id = normalize_id(block.id, model, msg)
                if new_id != block.id:
                    id_map[block.id] = new_id
            blocks.append(ToolCall(id=new_id, name=block.name, arguments=block.arguments))
        else:
            blocks.append(block)
    return msgspec.structs.replace(msg, content=blocks)


def _without_images(content: list, placeholder: str) -> list:
    """``content`` with each run of images (and a placeholder right before one) replaced by
    one ``placeholder`` text part."""
    out: list = []
    previous_was_placeholder = False
    for block in content:
        if isinstance(block, ImageContent):
            if not previous_was_placeholder:
                out.append(TextContent(text=placeholder))
            previous_was_placeholder = True
            continue
        out.append(block)
        previous_was_placeholder = isinstance(block, TextContent) and block.text == placeholder
    return out


def _downgrade_images(messages: list[Message], model: Model) -> list[Message]:
    if "image" in model.input:
        return messages
    out: list[Message] = []
    for msg in messages:
        if isinstance(msg, UserMessage) and isinstance(msg.content, list) and any(
            isinstance(b, ImageContent) for b in msg.content
        ):
            msg = msgspec.structs.replace(msg, content=_without_images(msg.content, NON_VISION_USER_IMAGE_PLACEHOLDER))
        elif isinstance(msg, ToolResultMessage) and any(isinstance(b, ImageContent) for b in msg.content):
            msg = msgspec.structs.replace(msg, content=_without_images(msg.content, NON_VISION_TOOL_IMAGE_PLACEHOLDER))
        out.append(msg)
    return out


def transform_messages(messages: list[Message], model: Model,
                       normalize_id: NormalizeId | None = None) -> list[Message]:
    return MessageTransform(model, normalize_id).feed(messages)


class MessageTransform:
    """``transform_messages`` that can be continued: :meth:`feed` the history, then the
    messages appended to it since, and the outputs put end to end are what
    ``transform_messages`` of the whole history gives. Every pass depends only on the messages
    before, and a synthetic result goes right before the message that follows its call — which
    is always in the same feed — so the state carried over is the id rewrites, the calls still
    waiting for a result and the results seen. Why: a provider builds a session's request every
    turn from a history that only grew (openai-completions keeps the conversion)."""

    def __init__(self, model: Model, normalize_id: NormalizeId | None = None) -> None:
        self.model = model
        self.normalize_id = normalize_id
        self._id_map: dict[str, str] = {}
        self._pending: list[ToolCall] = []
        self._answered: set[str] = set()

    def feed(self, messages: list[Message]) -> list[Message]:
        """The transformed messages of ``messages``, the continuation of earlier feeds."""
        id_map, pending, answered = self._id_map, self._pending, self._answered
        out: list[Message] = []

        def flush() -> None:
            for call in pending:
                if call.id not in answered:
                    out.append(ToolResultMessage(tool_call_id=call.id, tool_name=call.name,
                                                 content=[TextContent(text="No result provided")],
                                                 is_error=True, timestamp=now_ms()))
            pending.clear()
            answered.clear()

        for msg in _downgrade_images(messages, self.model):
            if isinstance(msg, AssistantMessage):
                msg = _convert_assistant(msg, self.model, self.normalize_id, id_map)
                flush()
                if msg.stop_reason in ("error", "aborted"):
                    continue
                pending.extend(b for b in msg.content if isinstance(b, ToolCall))
                out.append(msg)
            elif isinstance(msg, ToolResultMessage):
                if msg.tool_call_id in id_map:
                    msg = msgspec.structs.replace(msg, tool_call_id=id_map[msg.tool_call_id])
                answered.add(msg.tool_call_id)
                out.append(msg)
            else:
                flush()
                out.append(msg)
        return out


class HistoryConversion:
    """The conversion of one history into an API's request messages, continued with the
    messages appended to it since.

    Why: a session's request is built every turn from a history that only grew; converting
    only the new messages keeps the build from growing with the session (at 300 turns of ~1 kB
    tool output, converting the whole history cost a provider more per request than anything
    but the SDK). :class:`Continuation` keeps one per API between requests.

    An API subclasses it: its ``__init__`` calls this one with the ``key`` (whatever else the
    conversion depends on besides the model and the messages: a system prompt, compat flags,
    the OAuth mode), sets up any state carried from one message to the next and may put a
    first item in ``out``; :meth:`convert` appends the transformed messages' items to ``out``
    (it may grow the last item it made, never one of an earlier conversion); :meth:`result`
    may add what is only true at the end (results waiting to be merged). The items in ``out``
    are shared between requests: a request that marks one (a cache marker) copies it first."""

    def __init__(self, model: Model, key: Any, normalize_id: NormalizeId | None = None) -> None:
        self.model, self.key = model, key
        self.source: list[Message] = []
        self.transform = MessageTransform(model, normalize_id)
        self.out: list[dict[str, Any]] = []

    def continues(self, model: Model, key: Any, messages: list[Message]) -> bool:
        """Whether ``messages`` continues this conversion: exact — the same model and key,
        and a history that starts with the very messages converted so far (list equality:
        identity first, then value). Anything else (a branch switch, compaction, another
        session or model) starts afresh."""
        n = len(self.source)
        return (model == self.model and key == self.key and len(messages) >= n
                and messages[:n] == self.source)

    def feed(self, new: list[Message]) -> None:
        """Convert ``new``, the messages appended to the history converted so far."""
        self.convert(self.transform.feed(new))
        self.source.extend(new)

    def convert(self, messages: list[Message]) -> None:
        """Append the items of ``messages`` (already through :class:`MessageTransform`)."""
        raise NotImplementedError

    def result(self) -> list[dict[str, Any]]:
        """The request's messages so far: a new list, its items not to be edited."""
        return list(self.out)


C = TypeVar("C", bound=HistoryConversion)


class Continuation(Generic[C]):
    """The last request's conversion an API keeps, to continue with the next request's
    history (one per API module: a provider process serves one session at a time, and a
    history from elsewhere just starts afresh)."""

    def __init__(self) -> None:
        self._last: C | None = None

    def convert(self, model: Model, key: Any, messages: list[Message], start: Callable[[], C]) -> C:
        """The conversion of ``messages``: the kept one continued when it
        :meth:`~HistoryConversion.continues`, else ``start()`` fed the whole history.

        Raises what the conversion raises (a message the API cannot carry); the conversion
        that failed halfway is then dropped, so the next request starts afresh, not from a
        half-fed state."""
        conversion = self._last
        if conversion is None or not conversion.continues(model, key, messages):
            conversion = start()
        self._last = None
        conversion.feed(messages[len(conversion.source):])
        self._last = conversion
        return conversion
