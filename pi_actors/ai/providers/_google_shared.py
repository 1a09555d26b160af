"""Gemini's request and response shapes, shared by the APIs that speak them: the
``google-generative-ai`` and ``google-vertex`` SDK providers and the ``google-gemini-cli``
Code Assist provider (which wraps the same request and response JSON; no SDK).

No SDK import here, so the Code Assist provider works without the ``[google]`` extra.

- ``convert_messages(model, context)``: the ``contents`` of a request (pi's conversion: thinking
  and signatures replayed only to the same provider and model, valid base64 signatures only,
  tool results as ``functionResponse``, call ids only where the model needs them), continued
  from the last request's conversion when the history only grew (:class:`_Conversion`), so its
  dicts are shared between requests and never edited;
- ``build_params(model, context, options)``: ``{"model", "contents", "config"}`` as the SDK's
  ``generate_content_stream`` takes it (camelCase keys, as on the wire);
- thinking helpers (``_thinking_off``, ``_thinking_level``, ``_thinking_budget``, the model-family
  tests) that map pi's reasoning levels onto ``thinkingConfig``;
- ``_Mapper(run)``: maps ``GenerateContentResponse`` chunks onto a ``StreamRun``'s blocks. A
  chunk is either the SDK's object (snake_case attributes) or the decoded JSON (a dict with
  camelCase keys): ``field`` reads both.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import time
from typing import Any

from ..options import StreamOptions, extra_option
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
from ._common import StreamRun, note_response

__all__ = ["convert_messages", "build_params", "field"]

_CAMEL: dict[str, str] = {}


def field(obj: Any, name: str) -> Any:
    """``obj.name`` for an SDK object, ``obj[camelCase(name)]`` for decoded JSON."""
    if isinstance(obj, dict):
        camel = _CAMEL.get(name)
        if camel is None:
            head, *rest = name.split("_")
            camel = _CAMEL[name] = head + "".join(w.title() for w in rest)
        return obj.get(camel)
    return getattr(obj, name, None)


_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}
_call_counter = itertools.count(1)


# ---------------------------------------------------------------------------------------------
# Request


def _needs_call_id(model_id: str) -> bool:
    return model_id.startswith(("claude-", "gpt-oss-"))


def _valid_signature(signature: str | None) -> bool:
    return bool(signature) and len(signature or "") % 4 == 0 and bool(_BASE64.match(signature or ""))


def _normalize_id(call_id: str, model: Model, _source: AssistantMessage) -> str:
    return _ID_UNSAFE.sub("_", call_id)[:64] if _needs_call_id(model.id) else call_id


def _gemini_major(model_id: str) -> int | None:
    match = re.match(r"^gemini(?:-live)?-(\d+)", model_id.lower())
    return int(match.group(1)) if match else None


def _image_part(block: ImageContent) -> dict[str, Any]:
    return {"inlineData": {"mimeType": block.mime_type, "data": block.data}}


def _assistant_parts(msg: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    same = msg.provider == model.provider and msg.model == model.id
    parts: list[dict[str, Any]] = []

    def signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
        if same and _valid_signature(signature):
            part["thoughtSignature"] = signature
        return part

    for block in msg.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                parts.append(signed({"text": sanitize_surrogates(block.text)}, block.text_signature))
        elif isinstance(block, ThinkingContent):
            if not block.thinking.strip():
                continue
            if same:
                parts.append(signed({"thought": True, "text": sanitize_surrogates(block.thinking)},
                                    block.thinking_signature))
            else:
                parts.append({"text": sanitize_surrogates(block.thinking)})
        else:
            call: dict[str, Any] = {"name": block.name, "args": block.arguments or {}}
            if _needs_call_id(model.id):
                call["id"] = block.id
            parts.append(signed({"functionCall": call}, block.thought_signature))
    return parts


def _function_response(msg: ToolResultMessage, model: Model) -> tuple[dict[str, Any], list[ImageContent] | None]:
    """A tool result's ``functionResponse`` part, and its images when they go in a user turn
    of their own after it (models before Gemini 3 take no images nested in the response)."""
    text = "\n".join(b.text for b in msg.content if isinstance(b, TextContent))
    images = [b for b in msg.content if isinstance(b, ImageContent)] if "image" in model.input else []
    value = sanitize_surrogates(text) if text else ("(see attached image)" if images else "")
    major = _gemini_major(model.id)
    nested_images = major is None or major >= 3
    response: dict[str, Any] = {"name": msg.tool_name,
                                "response": {"error": value} if msg.is_error else {"output": value}}
    if images and nested_images:
        response["parts"] = [_image_part(b) for b in images]
    if _needs_call_id(model.id):
        response["id"] = msg.tool_call_id
    return {"functionResponse": response}, (images if images and not nested_images else None)


def convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """The ``contents`` of a request: pi's conversion (see the module docstring). A new list
    whose dicts are not to be edited: they may be the ones the last request was built from
    (:class:`_Conversion`)."""
    return _continuation.convert(model, None, context.messages, lambda: _Conversion(model)).result()


class _Conversion(HistoryConversion):
    """The conversion of one history into ``contents``, continued with the messages appended
    to it since (``transform.HistoryConversion``: same model, a history starting with the very
    messages converted so far). The state carried over besides the transform's: the
    ``functionResponse`` parts of the tool results at the end, still open to the results that
    follow (consecutive results are one user turn). They become a content only when something
    else is appended, or in the copy :meth:`result` gives, so no content of an earlier request
    is ever grown. A message that makes no content (an assistant turn of blank text) leaves
    them open, as converting the whole history at once would. Their content, once made for a
    request, is the very dict that closes them (``_genai`` converts a dict it has seen once)."""

    def __init__(self, model: Model) -> None:
        super().__init__(model, None, _normalize_id)
        self.results: list[dict[str, Any]] = []
        self.results_content: dict[str, Any] | None = None  # made of ``results`` as they are

    def _results_content(self) -> dict[str, Any]:
        if self.results_content is None:
            self.results_content = {"role": "user", "parts": list(self.results)}
        return self.results_content

    def _append(self, content: dict[str, Any]) -> None:
        """Close the open tool results, then append ``content``."""
        if self.results:
            self.out.append(self._results_content())
            self.results, self.results_content = [], None
        self.out.append(content)

    def convert(self, messages: list[Message]) -> None:
        model = self.model
        for msg in messages:
            if isinstance(msg, UserMessage):
                if isinstance(msg.content, str):
                    self._append({"role": "user", "parts": [{"text": sanitize_surrogates(msg.content)}]})
                    continue
                parts = [{"text": sanitize_surrogates(b.text)} if isinstance(b, TextContent) else _image_part(b)
                         for b in msg.content]
                if parts:
                    self._append({"role": "user", "parts": parts})
            elif isinstance(msg, AssistantMessage):
                parts = _assistant_parts(msg, model)
                if parts:
                    self._append({"role": "model", "parts": parts})
            else:
                part, images = _function_response(msg, model)
                self.results.append(part)
                self.results_content = None
                if images:
                    self._append({"role": "user", "parts": [{"text": "Tool result image:"},
                                                            *(_image_part(b) for b in images)]})

    def result(self) -> list[dict[str, Any]]:
        """The contents so far, the open tool results as the last user turn of the copy."""
        out = list(self.out)
        if self.results:
            out.append(self._results_content())
        return out


_continuation: Continuation[_Conversion] = Continuation()


def build_params(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """``{"model", "contents", "config"}`` for ``generate_content_stream`` (camelCase keys,
    as on the wire; the SDK takes either spelling)."""
    config: dict[str, Any] = {}
    if options.temperature is not None:
        config["temperature"] = options.temperature
    if options.max_tokens:
        config["maxOutputTokens"] = options.max_tokens
    if context.system_prompt:
        config["systemInstruction"] = sanitize_surrogates(context.system_prompt)
    if context.tools:
        config["tools"] = [{"functionDeclarations": [
            {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}
            for t in context.tools]}]
        choice = extra_option(options, "tool_choice")
        if choice:
            mode = {"auto": "AUTO", "none": "NONE", "any": "ANY"}.get(choice, "AUTO")
            config["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    thinking = extra_option(options, "thinking_enabled")
    if model.reasoning and thinking:
        cfg: dict[str, Any] = {"includeThoughts": True}
        level, budget = extra_option(options, "thinking_level"), extra_option(options, "thinking_budget_tokens")
        if level is not None:
            cfg["thinkingLevel"] = level
        elif budget is not None:
            cfg["thinkingBudget"] = budget
        config["thinkingConfig"] = cfg
    elif model.reasoning and thinking is False:
        config["thinkingConfig"] = _thinking_off(model)
    return {"model": model.id, "contents": convert_messages(model, context), "config": config}


def _is_gemini3_pro(model: Model) -> bool:
    return re.search(r"gemini-3(?:\.\d+)?-pro", model.id.lower()) is not None


def _is_gemini3_flash(model: Model) -> bool:
    return re.search(r"gemini-3(?:\.\d+)?-flash", model.id.lower()) is not None


def _is_gemma4(model: Model) -> bool:
    return re.search(r"gemma-?4", model.id.lower()) is not None


def _thinking_off(model: Model) -> dict[str, Any]:
    """The lowest thinking a model allows (Gemini 3 cannot turn it off; 2.x takes budget 0)."""
    if _is_gemini3_pro(model):
        return {"thinkingLevel": "LOW"}
    if _is_gemini3_flash(model) or _is_gemma4(model):
        return {"thinkingLevel": "MINIMAL"}
    return {"thinkingBudget": 0}


def _thinking_level(effort: str, model: Model) -> str:
    if _is_gemini3_pro(model):
        return "LOW" if effort in ("minimal", "low") else "HIGH"
    if _is_gemma4(model):
        return "MINIMAL" if effort in ("minimal", "low") else "HIGH"
    return effort.upper()


_BUDGETS = (
    ("2.5-pro", {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768}),
    ("2.5-flash-lite", {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576}),
    ("2.5-flash", {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576}),
)


def _thinking_budget(model: Model, effort: str, custom: dict[str, int] | None) -> int:
    if custom and effort in custom:
        return custom[effort]
    for fragment, table in _BUDGETS:
        if fragment in model.id:
            return table[effort]
    return -1  # dynamic: the model decides


# ---------------------------------------------------------------------------------------------
# Response


def _signature_text(raw: Any) -> str | None:
    """A part's thought signature as base64 text (the SDK decodes it to bytes)."""
    if isinstance(raw, bytes | bytearray):
        return base64.b64encode(raw).decode("ascii") if raw else None
    return raw if isinstance(raw, str) and raw else None


class _Mapper:
    """Maps the SDK's ``GenerateContentResponse`` chunks onto the run's blocks."""

    def __init__(self, run: StreamRun) -> None:
        self.run = run
        self.open: int | None = None
        self.open_kind: str | None = None  # "thinking" or "text"
        self.finished = False

    async def end_open(self) -> None:
        if self.open is not None:
            i, self.open, self.open_kind = self.open, None, None
            await self.run.end_block(i)

    async def chunk(self, chunk: Any) -> None:
        run = self.run
        response_id = field(chunk, "response_id")
        if isinstance(response_id, str) and response_id and not run.output.response_id:
            note_response(run, response_id, field(chunk, "model_version"))
        candidates = field(chunk, "candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        parts = field(field(candidate, "content"), "parts")
        for part in parts if isinstance(parts, list) else []:
            await self.part(part)
        finish = field(candidate, "finish_reason")
        if finish is not None:
            name = getattr(finish, "value", finish)  # an SDK enum or a JSON string
            reason = _FINISH.get(str(name), "error")
            if any(isinstance(b, ToolCall) for b in run.output.content):
                reason = "toolUse"
            run.output.stop_reason = reason  # type: ignore[assignment]
            if reason == "error":
                run.output.error_message = f"Gemini stopped: {name}"
            self.finished = True
        usage = field(chunk, "usage_metadata")
        if usage is not None:
            self.usage(usage)

    async def part(self, part: Any) -> None:
        run = self.run
        signature = _signature_text(field(part, "thought_signature"))
        text = field(part, "text")
        kind = "thinking" if field(part, "thought") is True else "text"
        if text == "" and not signature and self.open_kind != kind:
            text = None  # an empty part (the last chunk often has one) opens no block
        if isinstance(text, str):
            if self.open is None or self.open_kind != kind:
                await self.end_open()
                self.open = await (run.thinking_start() if kind == "thinking" else run.text_start())
                self.open_kind = kind
            block = run.output.content[self.open]
            if kind == "thinking":
                await run.thinking_delta(self.open, text)
                if signature and isinstance(block, ThinkingContent):
                    block.thinking_signature = signature
            else:
                await run.text_delta(self.open, text)
                if signature and isinstance(block, TextContent):
                    block.text_signature = signature
        call = field(part, "function_call")
        if call is not None:
            await self.end_open()
            name = field(call, "name")
            name = name if isinstance(name, str) else ""
            given = field(call, "id")
            used = {b.id for b in run.output.content if isinstance(b, ToolCall)}
            call_id = given if isinstance(given, str) and given and given not in used else \
                f"{name}_{int(time.time() * 1000)}_{next(_call_counter)}"
            args = field(call, "args")
            arguments = args if isinstance(args, dict) else {}
            i = await run.toolcall_start(call_id, name, arguments)
            block = run.output.content[i]
            if signature and isinstance(block, ToolCall):
                block.thought_signature = signature
            await run.toolcall_delta(i, json.dumps(arguments, ensure_ascii=False))
            await run.toolcall_end(i)

    def usage(self, meta: Any) -> None:
        def count(name: str) -> int:
            value = field(meta, name)
            return value if isinstance(value, int) else 0

        u = self.run.output.usage
        cached = count("cached_content_token_count")
        u.input = count("prompt_token_count") - cached
        u.output = count("candidates_token_count") + count("thoughts_token_count")
        u.cache_read = cached
        u.cache_write = 0
        u.total_tokens = count("total_token_count")
        self.run.update_cost()
