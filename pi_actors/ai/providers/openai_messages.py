"""The ``messages`` of an ``openai-completions`` request, converted from a context (pi's
packages/ai ``convertMessages``), continued from one request to the next.

Contract: :func:`convert_messages` returns a new list whose dicts must not be edited (they may
be shared with the next request's: see :class:`_Conversion`); the bytes are those of a
conversion of the whole history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..sanitize import sanitize_surrogates
from ..transform import Continuation, HistoryConversion
from ..types import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .openai_compat import OpenAICompletionsCompat

__all__ = ["convert_messages"]

_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def _normalize_tool_call_id(call_id: str, model: Model, _source: AssistantMessage) -> str:
    if "|" in call_id:
        return _ID_UNSAFE.sub("_", call_id.split("|", 1)[0])[:40]
    if model.provider == "openai" and len(call_id) > 40:
        return call_id[:40]
    return call_id


class _IdentityMemo:
    """Strings derived from one object of a context (a tool call's arguments, a tool result's
    text), kept by the object's identity across requests.

    Why: the provider keeps a session's context as the same objects turn after turn (its
    context cache), and re-deriving these for the whole transcript on every request made the
    request's build grow with the session (json.dumps of every earlier call's arguments: at
    300 turns most of ``build_params``' time). Objects of a context are never edited in place
    once sent (the agent replaces messages), which is what makes the identity a valid key. The
    object is held with its value, so its id cannot be reused while the entry lives. Bounded by
    the characters of the values kept (``max_chars``; the objects held are about as large, and
    mostly alive anyway in the provider's context cache): the oldest entries go first."""

    def __init__(self, max_chars: int = 8_000_000) -> None:
        self._items: dict[int, tuple[Any, str]] = {}
        self._chars = 0
        self._max_chars = max_chars

    def get(self, obj: Any, make: Callable[[Any], str]) -> str:
        hit = self._items.get(id(obj))
        if hit is not None:  # the object is held by its entry: no other object has its id
            return hit[1]
        value = make(obj)
        self._items[id(obj)] = (obj, value)
        self._chars += len(value)
        while self._chars > self._max_chars:
            self._chars -= len(self._items.pop(next(iter(self._items)))[1])
        return value


def _arguments_json(call: ToolCall) -> str:
    return json.dumps(call.arguments, ensure_ascii=False)


def _tool_result_text(msg: ToolResultMessage) -> str:
    text = "\n".join(b.text for b in msg.content if isinstance(b, TextContent))
    return sanitize_surrogates(text) if text else "(see attached image)"


_ARGUMENTS = _IdentityMemo()
_RESULT_TEXT = _IdentityMemo()


def _image_part(block: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"}}


def _assistant_message(msg: AssistantMessage, compat: OpenAICompletionsCompat,
                       reasoning_model: bool = False) -> dict[str, Any] | None:
    out: dict[str, Any] = {"role": "assistant", "content": "" if compat.requires_assistant_after_tool_result else None}
    texts = [b.text for b in msg.content if isinstance(b, TextContent) and b.text.strip()]
    thinking = [b for b in msg.content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    text = sanitize_surrogates("".join(texts))
    if thinking and compat.requires_thinking_as_text:
        parts = [{"type": "text", "text": sanitize_surrogates("\n\n".join(b.thinking for b in thinking))}]
        if text:
            parts.append({"type": "text", "text": text})
        out["content"] = parts
    else:
        if text:
            out["content"] = text
        if thinking and thinking[0].thinking_signature:
            out[thinking[0].thinking_signature] = sanitize_surrogates("\n".join(b.thinking for b in thinking))
    calls = [b for b in msg.content if isinstance(b, ToolCall)]
    if calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": _ARGUMENTS.get(c, _arguments_json)}}
            for c in calls
        ]
        details = []
        for c in calls:
            if c.thought_signature:
                try:
                    details.append(json.loads(c.thought_signature))
                except ValueError:
                    pass
        if details:
            out["reasoning_details"] = details
    if compat.requires_reasoning_content_on_assistant_messages and reasoning_model:
        out.setdefault("reasoning_content", "")  # DeepSeek refuses an assistant turn without it
    if not out["content"] and not calls:
        return None
    return out


def convert_messages(model: Model, context: Context, compat: OpenAICompletionsCompat) -> list[dict[str, Any]]:
    """The request's ``messages`` for ``context`` (a new list; its dicts are not to be
    edited: they may be the ones the last request was built from, see :class:`_Conversion`)."""
    key = (context.system_prompt, compat)
    return _continuation.convert(model, key, context.messages,
                                 lambda: _Conversion(model, context.system_prompt, compat)).result()


class _Conversion(HistoryConversion):
    """The conversion of one history, continued (:class:`HistoryConversion`); its key is the
    system prompt and the compat flags. The state carried over besides the transform's: the
    images of tool results waiting for the next message, and whether the last was a tool
    result. Output dicts are shared between requests: :func:`build_params` copies the ones it
    edits (OpenRouter's cache markers)."""

    def __init__(self, model: Model, system_prompt: str | None, compat: OpenAICompletionsCompat) -> None:
        super().__init__(model, (system_prompt, compat), _normalize_tool_call_id)
        self.compat = compat
        if system_prompt:
            role = "developer" if model.reasoning and compat.supports_developer_role else "system"
            self.out.append({"role": role, "content": sanitize_surrogates(system_prompt)})
        self.pending_images: list[dict[str, Any]] = []
        self.after_tool_results = False

    def _flush_images(self, out: list[dict[str, Any]], pending_images: list[dict[str, Any]]) -> None:
        if pending_images:
            if self.compat.requires_assistant_after_tool_result:
                out.append({"role": "assistant", "content": "I have processed the tool results."})
            out.append({"role": "user", "content": [{"type": "text", "text": "Attached image(s) from tool result:"},
                                                    *pending_images]})
            pending_images.clear()

    def convert(self, messages: list[Message]) -> None:
        model, compat, out = self.model, self.compat, self.out
        vision = "image" in model.input
        pending_images = self.pending_images
        after_tool_results = self.after_tool_results
        for msg in messages:
            if not isinstance(msg, ToolResultMessage):
                self._flush_images(out, pending_images)
            if isinstance(msg, UserMessage):
                if after_tool_results and compat.requires_assistant_after_tool_result and out[-1]["role"] != "assistant":
                    out.append({"role": "assistant", "content": "I have processed the tool results."})
                if isinstance(msg.content, str):
                    out.append({"role": "user", "content": sanitize_surrogates(msg.content)})
                else:
                    parts = [{"type": "text", "text": sanitize_surrogates(b.text)} if isinstance(b, TextContent)
                             else _image_part(b) for b in msg.content if isinstance(b, TextContent) or vision]
                    if parts:
                        out.append({"role": "user", "content": parts})
            elif isinstance(msg, AssistantMessage):
                converted = _assistant_message(msg, compat, model.reasoning)
                if converted is not None:
                    out.append(converted)
            else:
                tool_msg = {"role": "tool", "content": _RESULT_TEXT.get(msg, _tool_result_text), "tool_call_id": msg.tool_call_id}
                if compat.requires_tool_result_name:
                    tool_msg["name"] = msg.tool_name
                out.append(tool_msg)
                if vision:
                    pending_images.extend(_image_part(b) for b in msg.content if isinstance(b, ImageContent))
            after_tool_results = isinstance(msg, ToolResultMessage)
        self.after_tool_results = after_tool_results

    def result(self) -> list[dict[str, Any]]:
        """The messages so far, with the waiting images flushed (in the copy only)."""
        out = list(self.out)
        self._flush_images(out, list(self.pending_images))
        return out


_continuation: Continuation[_Conversion] = Continuation()
